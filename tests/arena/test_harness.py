"""rnnbook.arena.zoo, rnnbook.arena.harness and rnnbook.runs.arena: every model takes a
training step on every task, the batches are seeded by the step, the evaluation averages
over sequences, the activation memory grows with the length, a row and a long run are built
as the chapter describes, the optimiser's groups, the book's run table and the seed study's
curves.

Everything runs on tiny configurations (T = 3 memory, T = 6 adding and recall, batches of 2-8).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from rnnbook import longrun
from rnnbook.arena import baselines, harness, zoo
from rnnbook.arena.tasks import (
    AddingTask,
    MemoryTask,
    PendulumAnglesTask,
    PendulumTask,
    RecallTask,
    memoryless_ce,
)
from rnnbook.longrun import LongRun
from rnnbook.runs import arena as arena_runs
from rnnbook.testing import assert_close_ulps

TASKS = {
    "memory": lambda: MemoryTask(T=3),
    "adding": lambda: AddingTask(T=6),
    "recall": lambda: RecallTask(T=6, D=2),
    "pendulum": lambda: PendulumTask(),  # the dataset is built once per process (~2 s)
    "pendulum-angles": lambda: PendulumAnglesTask(),  # the same, simulated once more
}


# --- every model takes a training step on every task --------------------------------------


@pytest.mark.parametrize("task_name", sorted(TASKS))
@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_every_model_takes_a_training_step(name, task_name):
    task = TASKS[task_name]()
    if zoo.MODELS[name].encoding is not None and not hasattr(task, "encoding"):
        # the scalar LSTM needs category inputs: only the memory task has them
        with pytest.raises(ValueError, match="scalar inputs"):
            zoo.task_for(name, task)
        return
    task = zoo.task_for(name, task)
    model = zoo.build(name, task, seed=0)
    opt = zoo.optimizer(model.parameters(), lr=1e-3)
    B = 2
    x, y = task.batch(B, generator=0)
    assert x.shape == (B, task.length, task.d_in)
    out = model(x)
    assert out.shape == (B, task.length, task.d_out)
    loss = task.loss(out, y)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    with_grad = [(n, p) for n, p in trained if p.grad is not None]
    assert with_grad, f"{name}: no parameter got a gradient"
    for n, p in with_grad:
        assert torch.isfinite(p.grad).all(), f"{name}: non-finite gradient of {n}"
    before = [p.detach().clone() for _, p in trained]
    opt.step()
    assert any(not torch.equal(b, p) for b, (_, p) in zip(before, trained)), "nothing moved"
    assert all(torch.isfinite(p).all() for _, p in trained)
    metrics = task.metrics(model(x).detach(), y)
    assert task.metric in metrics and all(isinstance(v, float) for v in metrics.values())


# --- batch_source -------------------------------------------------------------------------


def test_the_batch_of_a_step_is_fixed_by_seed_and_step():
    task = MemoryTask(T=3)
    a, b = harness.batch_source(task, 4, seed=0), harness.batch_source(task, 4, seed=0)
    x0, y0 = a(5)
    x1, y1 = b(5)
    assert torch.equal(x0, x1) and torch.equal(y0, y1)
    assert x0.shape == (4, 23, 10)
    assert not torch.equal(a(6)[0], x0)  # another step
    other = harness.batch_source(task, 4, seed=1)(5)[0]
    assert not torch.equal(other, x0)  # another seed
    # the recipe of the docstring: seed * 10**9 + step
    assert torch.equal(other, task.batch(4, 10**9 + 5)[0])
    assert harness.batch_source(AddingTask(T=6), 3)(0)[0].shape == (3, 6, 2)
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        harness.batch_source(task, 0)


def test_test_set_sizes_and_seeds():
    task = MemoryTask(T=3)
    batches = harness.test_set(task, n=7, chunk=3)
    assert [x.shape[0] for x, _ in batches] == [3, 3, 1]
    assert torch.equal(batches[1][0], task.batch(3, harness.TEST_SEED + 1)[0])
    again = harness.test_set(task, n=7, chunk=3)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again))


# --- evaluate -----------------------------------------------------------------------------


class _Echo(nn.Module):
    """Returns its input; records the mode it was called in."""

    def __init__(self):
        super().__init__()
        self.modes = []

    def forward(self, x):
        self.modes.append(self.training)
        return x


class _MeanTask:
    """A task whose one metric is the mean of the outputs of a batch."""

    def metrics(self, outputs, y):
        return {"mean": float(outputs.mean()), "count": float(outputs.shape[0])}


@pytest.mark.parametrize("training", [True, False])
def test_evaluate_averages_over_sequences_and_restores_the_mode(training):
    model = _Echo().train(training)
    # three sequences of value 1, then one of value 5: per sequence 2.0; per batch it'd be 3.0
    batches = [(torch.ones(3, 2, 1), None), (torch.full((1, 2, 1), 5.0), None)]
    out = harness.evaluate(model, _MeanTask(), batches)
    assert out["mean"] == pytest.approx((3 * 1.0 + 1 * 5.0) / 4)
    assert out["count"] == pytest.approx((3 * 3 + 1 * 1) / 4)
    assert model.modes == [False, False]  # evaluated in eval mode
    assert model.training is training  # and put back


def test_evaluate_runs_without_gradients():
    task = MemoryTask(T=3)
    model = zoo.build("lstm", task)
    seen = []

    def hook(module, inputs, output):
        seen.append(output.requires_grad)

    model.register_forward_hook(hook)
    metrics = harness.evaluate(model, task, harness.test_set(task, n=5))
    assert seen == [False]
    assert (
        set(metrics) == {"ce", "symbols", "ce_blank", "ce_recall"} and 0 <= metrics["symbols"] <= 10
    )


# --- activation_bytes ---------------------------------------------------------------------


def test_activation_bytes_grow_with_the_length():
    model = zoo.build("lstm", MemoryTask(T=5))
    short = harness.activation_bytes(model, MemoryTask(T=5), batch=8)
    long = harness.activation_bytes(model, MemoryTask(T=50), batch=8)
    assert 0 < short < long
    # 70 steps against 25: the saved states grow with the length
    assert long > 2 * short
    assert all(p.grad is None for p in model.parameters())  # the step leaves no gradients


# --- train --------------------------------------------------------------------------------


def test_train_returns_a_row():
    task = MemoryTask(T=3)
    model, row = harness.train("urnn-frozen", task, steps=3, batch=8)
    assert isinstance(model, nn.Module)
    assert isinstance(row, harness.Row)
    assert row.task == "memory3" and row.model == "urnn-frozen"
    assert row.label == zoo.MODELS["urnn-frozen"].label
    assert row.mechanism == "norm preservation"
    assert row.seed == 0 and row.steps == 3
    assert row.params == 128 * 10 + 128 + 128 * 10 + 10
    assert set(row.metrics) == {"ce", "symbols", "ce_blank", "ce_recall"}
    assert row.baseline == memoryless_ce(3)
    assert row.seconds >= 0 and row.s_per_step >= 0 and row.activation_mb > 0
    flat = row.flat()
    assert flat["ce"] == row.metrics["ce"] and "metrics" not in flat
    json.dumps(flat)


def test_train_is_reproducible():
    task = MemoryTask(T=3)
    a, row_a = harness.train("lstm", task, steps=2, batch=4)
    b, row_b = harness.train("lstm", task, steps=2, batch=4)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    assert row_a.metrics == row_b.metrics


# --- the optimiser ------------------------------------------------------------------------


def test_the_orthogonal_generator_learns_ten_times_slower():
    model = zoo.build("urnn", MemoryTask(T=3))
    opt = zoo.optimizer(model.parameters(), lr=1e-3)
    assert len(opt.param_groups) == 2
    slow_group, fast_group = sorted(opt.param_groups, key=lambda group: group["lr"])
    assert slow_group["lr"] == pytest.approx(1e-4, rel=1e-12) and fast_group["lr"] == 1e-3
    slow, fast = slow_group["params"], fast_group["params"]
    assert len(slow) == 1 and slow[0] is model.model.A
    others = [p for n, p in model.named_parameters() if n != "model.A"]
    assert len(fast) == len(others) and all(any(p is q for q in fast) for p in others)


@pytest.mark.parametrize("name", ["urnn-frozen", "lstm", "dnc", "lstm-chrono", "mlp"])
def test_the_other_models_have_one_group(name):
    model = zoo.build(name, MemoryTask(T=3))
    opt = zoo.optimizer(model.parameters(), lr=3e-3)
    assert len(opt.param_groups) == 1
    assert opt.param_groups[0]["lr"] == 3e-3
    assert len(opt.param_groups[0]["params"]) == len(list(model.parameters()))
    assert isinstance(opt, torch.optim.Adam)


# --- zoo ----------------------------------------------------------------------------------


def test_unknown_model_is_refused_with_the_list():
    with pytest.raises(ValueError, match="unknown model 'lstmm'") as error:
        zoo.build("lstmm", MemoryTask(T=3))
    for name in zoo.MODELS:
        assert repr(name) in str(error.value)
    with pytest.raises(ValueError, match="unknown model"):
        zoo.task_for("nope", MemoryTask(T=3))


def test_the_chrono_initialisation_spreads_the_forget_gates_over_the_lag():
    task = MemoryTask(T=100)
    for name, H in (("lstm-chrono", 36), ("lstm-chrono-64", 64), ("lstm-chrono-128", 128)):
        cell = zoo.build(name, task, seed=0).cell
        assert cell.hidden_size == H
        bias = (cell.bias_ih + cell.bias_hh).detach()  # the cell's b, rows (i, f, g, o)
        b_i, b_f = bias[:H], bias[H : 2 * H]
        # b_f = ln u with u in [1, T + K - 1], and b_i = -b_f (Tallec & Ollivier 2018)
        assert b_f.min() >= 0.0 and b_f.max() <= math.log(task.lag - 1)
        assert torch.equal(b_i, -b_f)
        assert b_f.std() > 0.5  # spread, not one value
    with pytest.raises(ValueError, match="t_max > 2"):
        baselines.chrono_initialise(zoo.LSTMCell(1, 4), 2)


def test_the_controls_join_the_registry_and_leave_the_zoo_alone():
    assert set(baselines.CONTROLS) <= set(zoo.MODELS)
    assert all(zoo.MODELS[name] is entry for name, entry in baselines.CONTROLS.items())
    # a committed model's code hash covers zoo.py, not the controls' module
    model = zoo.build("lstm", MemoryTask(T=3))
    assert not any(type(m).__module__ == baselines.__name__ for m in model.modules())


def test_the_mlp_remembers_nothing():
    task = MemoryTask(T=3)
    model = zoo.build("mlp", task, seed=0)
    x, _ = task.batch(2, 0)
    changed = x.clone()
    changed[:, :4] = 0.0  # other inputs before step 4
    with torch.no_grad():
        assert torch.equal(model(x)[:, 4:], model(changed)[:, 4:])
        assert_close_ulps(model(x)[:, 2], model(x[:, 2:3])[:, 0])  # a step alone
    assert harness.trained_parameters(model) == 10 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10


def test_the_window_mlp_remembers_exactly_one_step():
    task = MemoryTask(T=3)
    model = zoo.build("mlp-2", task, seed=0)
    x, _ = task.batch(2, 0)
    with torch.no_grad():
        out = model(x)
        # step t reads x_t and x_{t-1}: the same network on the two steps side by side
        pairs = torch.cat([x[:, 1:], x[:, :-1]], dim=-1)
        assert_close_ulps(out[:, 1:], model.layers(pairs))
        assert_close_ulps(out[:, 0], model.layers(torch.cat([x[:, 0], x[:, 0]], dim=-1)))
        changed = x.clone()
        changed[:, :3] = 0.0  # other inputs before step 3
        assert torch.equal(model(changed)[:, 4:], out[:, 4:])  # step 4 on: x_3 and later only
        assert not torch.equal(model(changed)[:, 3], out[:, 3])  # step 3 reads x_2


def test_build_is_seeded():
    task = MemoryTask(T=3)
    a, b, c = zoo.build("gru", task, 0), zoo.build("gru", task, 0), zoo.build("gru", task, 1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))


def test_task_for_switches_the_encoding():
    task = MemoryTask(T=3)
    assert zoo.task_for("lstm", task) is task
    scalar = zoo.task_for("lstm-scalar", task)
    assert scalar.encoding == "scalar" and scalar.T == 3 and scalar.d_in == 1
    assert zoo.task_for("lstm-scalar", scalar) is scalar


def test_the_clockwork_rnn_row_leaves_the_masked_weights_out():
    task = MemoryTask(T=3)
    model = zoo.build("cwrnn", task)
    kept = model.model.n_parameters()
    # H = 64 in M = 8 modules: H^2 (M + 1) / (2M) = 2,304 of 4,096 recurrent weights kept
    assert kept == 64 * 10 + 64 * 64 * 9 // 16 + 64 + 64 * 10 + 10
    row = harness.row("cwrnn", task, model, steps=0, seconds=0.0, batches=[task.batch(2, 0)])
    assert row.params == kept


# --- the book's runs ----------------------------------------------------------------------


def test_the_book_runs_are_named_by_run_name():
    expected = {
        harness.run_name(model, task)
        for task, budgets in arena_runs.BOOK_TASKS.values()
        for model in budgets
    }
    assert set(arena_runs.BOOK_RUNS) == expected
    assert len(arena_runs.BOOK_RUNS) == sum(len(b) for _, b in arena_runs.BOOK_TASKS.values())
    assert "arena-memory100-lstm" in arena_runs.BOOK_RUNS
    assert "arena-memory100-lstm-scalar" in arena_runs.BOOK_RUNS
    assert (
        arena_runs.BOOK_RUNS["arena-memory100-lstm-scalar"]().name == "arena-memory100-lstm-scalar"
    )
    assert harness.run_name("lstm", MemoryTask(), seed=2) == "arena-memory100-lstm-seed2"


def test_every_book_run_is_a_long_run_with_a_json_config():
    for name, make in arena_runs.BOOK_RUNS.items():
        run = make()
        assert isinstance(run, LongRun)
        assert run.name == name
        json.loads(json.dumps(run.config))  # plain JSON data
        assert run.config["model"] in zoo.MODELS and "steps" not in run.config
        assert run.clip_at == zoo.MODELS[run.config["model"]].clip
        assert run.eval_every == arena_runs.EVAL_EVERY
    scalar = arena_runs.BOOK_RUNS["arena-memory100-lstm-scalar"]()
    assert scalar.config["task"]["encoding"] == "scalar"


def test_every_model_of_a_task_has_the_same_budget_but_the_external_memories():
    task, budgets = arena_runs.BOOK_TASKS["memory"]
    assert isinstance(task, MemoryTask) and task.T == 100
    assert set(budgets) >= set(arena_runs.MEMORY_MODELS) | {"ntm", "dnc"}
    assert set(budgets) <= set(zoo.MODELS)
    common = {budgets[m] for m in arena_runs.MEMORY_MODELS}
    assert len(common) == 1
    # the NTM and the DNC stop at half the budget, where every curve has an evaluation
    assert budgets["ntm"] == budgets["dnc"] == common.pop() // 2
    assert budgets["ntm"] % arena_runs.EVAL_EVERY == 0
    for name, (_, budgets) in arena_runs.BOOK_TASKS.items():
        if name != "memory" and budgets:  # the other lengths keep curves only (below)
            assert len(set(budgets.values())) == 1


def test_the_other_lengths_of_the_copying_task_keep_the_book_budget():
    """T = 50 and 200 beside the book's 100: the same models' recipe and budget, curves only."""
    budget = arena_runs.BOOK_TASKS["memory"][1]["lstm"]
    assert set(arena_runs.LENGTH_MODELS) <= set(arena_runs.MEMORY_MODELS)
    for T in arena_runs.LENGTHS:
        task, budgets = arena_runs.BOOK_TASKS[f"memory{T}"]
        assert isinstance(task, MemoryTask) and task.T == T and task.key == f"memory{T}"
        assert budgets == {} and arena_runs.SEED_STUDY[f"memory{T}"] == ()
        assert arena_runs.CURVE_ONLY[f"memory{T}"] == dict.fromkeys(
            arena_runs.LENGTH_MODELS, budget
        )
        run = arena_runs.book_run(f"memory{T}", "urnn")
        assert run.name == f"arena-memory{T}-urnn" and run.steps == budget
        assert run.config["task"]["T"] == T


# --- the seed study's committed learning curves --------------------------------------------

COMMITTED = Path(__file__).resolve().parents[2] / "checkpoints"


def test_every_model_and_seed_of_the_study_has_its_curve():
    assert arena_runs.curve_name("memory", "lstm", 1) == "arena-memory100-lstm-seed1"
    assert arena_runs.curve_name("recall", "srn", 0) == "arena-recall100d20-srn"
    assert set(arena_runs.SINGLE_RUNS["memory"]) >= {"ntm", "dnc"}
    for task_name, models in arena_runs.SEED_STUDY.items():
        budgets = arena_runs.BOOK_TASKS[task_name][1]
        assert set(models) == set(budgets) - set(arena_runs.SINGLE_RUNS.get(task_name, ()))
        for model in models:
            for seed in arena_runs.SEEDS:
                name = arena_runs.curve_name(task_name, model, seed)
                rows = longrun.read_curve(COMMITTED / f"{name}.curve.csv")
                steps = list(range(0, budgets[model] + 1, arena_runs.EVAL_EVERY))
                assert [row["step"] for row in rows] == steps, name


@pytest.mark.parametrize(
    ("task_name", "model", "seed"),
    [("memory", "lstm", 1), ("memory", "urnn-frozen", 2), ("memory", "srn", 0),
     ("adding", "gru", 2), ("recall", "srn", 1)],
)  # fmt: skip
def test_a_seed_curves_untrained_row_is_its_runs_untrained_model(task_name, model, seed):
    """The curve's first row evaluates the untrained model: the same initial weights, the same
    held-out sequences as the run describes (a check of the curve's provenance)."""
    run = arena_runs.book_run(task_name, model, seed)
    first = longrun.read_curve(COMMITTED / f"{run.name}.curve.csv")[0]
    with torch.no_grad():
        now = run.evaluate(run.build_model())
    shared = now.keys() & first.keys()  # seed 0's memory curves predate ce_blank, ce_recall
    assert {"ce"} <= shared or {"mse"} <= shared, (first, now)
    for column in shared:
        value = now[column]
        if column in ("symbols", "accuracy"):  # an argmax may flip on another CPU
            assert abs(first[column] - value) <= 0.01 * max(1.0, abs(value)), (column, first, now)
        else:
            assert abs(first[column] - value) <= 1e-4 * abs(value), (column, first, now)


@pytest.mark.parametrize(
    ("task_name", "model"),
    [(t, m) for t, runs in arena_runs.CURVE_ONLY.items() for m in runs],
)
def test_a_curve_only_run_has_its_curve_and_no_checkpoint(task_name, model):
    """Kept as a curve only: on the evaluation grid, no checkpoint, and its first row is the
    run's untrained model on the run's held-out sequences (the curve's provenance)."""
    run = arena_runs.book_run(task_name, model)
    assert run.name not in arena_runs.BOOK_RUNS and not (COMMITTED / f"{run.name}.json").exists()
    assert run.steps == arena_runs.CURVE_ONLY[task_name][model]
    rows = longrun.read_curve(COMMITTED / f"{run.name}.curve.csv")
    steps = [int(row["step"]) for row in rows]
    assert steps == list(range(0, run.steps + 1, arena_runs.EVAL_EVERY))  # every run finished
    with torch.no_grad():
        now = run.evaluate(run.build_model())
    assert abs(rows[0]["ce"] - now["ce"]) <= 1e-4 * now["ce"], (rows[0], now)
    args = arena_runs.parse_args(["--task", task_name, "--models", model, "--out-dir", "x"])
    assert args.models == [model]
    default = arena_runs.parse_args(["--task", task_name, "--out-dir", "x"]).models
    if arena_runs.BOOK_TASKS[task_name][1]:  # the checkpointed runs are the default
        assert model not in default
    else:  # a task of curves only trains them all
        assert default == list(arena_runs.CURVE_ONLY[task_name])


def test_the_seed_draws_other_initial_weights():
    weights = [
        torch.cat([p.detach().flatten() for p in arena_runs.book_run("memory", "lstm", s)
                   .build_model().parameters()])
        for s in arena_runs.SEEDS
    ]  # fmt: skip
    assert all(not torch.equal(a, b) for a, b in zip(weights, weights[1:], strict=False))
    again = arena_runs.book_run("memory", "lstm", 1).build_model()
    assert torch.equal(torch.cat([p.detach().flatten() for p in again.parameters()]), weights[1])


def test_parse_args(tmp_path, capsys):
    out = ["--out-dir", str(tmp_path)]
    args = arena_runs.parse_args(["--task", "memory", *out])
    assert args.models == list(arena_runs.BOOK_TASKS["memory"][1])
    args = arena_runs.parse_args(["--task", "adding", "--models", "lstm", "gru", *out])
    assert args.models == ["lstm", "gru"] and args.seed == 0
    for bad, message in [
        (["--task", "memory", "--models", "lstm", "elman"], "'elman'"),
        (["--task", "adding", "--models", "ntm"], "'ntm'"),  # not one of the adding runs
        (["--task", "memory", "--threads", "0"], "--threads must be at least 1"),
        (["--task", "memory", "--seed", "-1"], "--seed"),
        (["--task", "copy"], "invalid choice"),
    ]:
        with pytest.raises(SystemExit) as error:
            arena_runs.parse_args([*bad, *out])
        assert error.value.code == 2
        assert message in capsys.readouterr().err


def test_a_tiny_long_run_builds_the_same_weights_twice():
    run = harness.long_run("lstm", MemoryTask(T=3), steps=2, batch=4, eval_every=1, test_n=6)
    assert run.name == "arena-memory3-lstm" and run.steps == 2 and run.eval_every == 1
    a, b = run.build_model(), run.build_model()
    assert a.state_dict().keys() == b.state_dict().keys()
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    assert run.config["seed"] == 0 and run.config["task"]["T"] == 3
    assert torch.equal(run.batch(1)[0], harness.batch_source(MemoryTask(T=3), 4)(1)[0])
    assert set(run.evaluate(a)) == {"ce", "symbols", "ce_blank", "ce_recall"}
    assert torch.isfinite(run.loss_fn(a, run.batch(0)))
    seeded = harness.long_run("lstm", MemoryTask(T=3), steps=2, seed=1, test_n=6)
    assert seeded.name == "arena-memory3-lstm-seed1"
    c = seeded.build_model()
    assert not torch.equal(a.readout.weight, c.readout.weight)
