"""rnnbook.runs.penalty_sweep: Chapter 7's update penalties trained on Chapter 6's SBA models."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from types import SimpleNamespace

import pytest
import torch

from rnnbook import longrun
from rnnbook.runs import penalty_sweep as ps
from rnnbook.runs import wordlm
from rnnbook.train import token_cross_entropy


@pytest.fixture
def tiny_slice(monkeypatch):
    """Random words of the slice's size and vocabulary in place of PTB (no dataset needed)."""
    generator = torch.Generator().manual_seed(0)
    train = torch.randint(wordlm.VOCAB, (wordlm.N_TRAIN,), generator=generator)
    valid = torch.randint(wordlm.VOCAB, (1_120,), generator=generator)  # 32 streams of 35
    monkeypatch.setattr(wordlm, "slice_data", lambda: SimpleNamespace(train=train, valid=valid))
    ps.slice_windows.cache_clear()
    ps.valid_streams.cache_clear()
    yield train, valid
    ps.slice_windows.cache_clear()
    ps.valid_streams.cache_clear()


def short(run: longrun.LongRun, steps: int = 4, per_pass: int = 2) -> longrun.LongRun:
    """``run`` with passes of ``per_pass`` windows: a row, and a fresh tally, every pass."""
    penalty = run.config["penalty"]
    warm = run.config.get("theta_from_pass")
    theta_from = None if warm is None else (run.config["theta"], warm * per_pass)
    loss = ps.PenalisedLoss(
        penalty["name"],
        penalty["lambda"],
        penalty["u_target"],
        per_pass,
        penalty.get("tau"),
        theta_from,
    )
    return dataclasses.replace(run, steps=steps, eval_every=per_pass, loss_fn=loss)


def test_run_names_say_model_penalty_target_lambda_and_seed():
    assert ps.run_name("sba-ic", "cb", 1e-4) == "ptb-slice-sba-ic-cb-lam0.0001"
    assert ps.run_name("sba-c2", "msure", 10.0, 0.5) == "ptb-slice-sba-c2-msure-ut0.5-lam10"
    assert ps.run_name("sba-ic", "ns", 0.05, seed=2) == "ptb-slice-sba-ic-ns-lam0.05-seed2"
    runs = ps.grid()
    names = [ps.run_name(**kw) for kw in runs]
    assert len(names) == len(set(names)) == 2 * (4 + 6 + 2 * 4)  # CB, NS, MSURE at 2 targets


@pytest.mark.parametrize("kwargs", ps.grid(("sba-ic", "sba-c2", "sba-fc")))
def test_every_run_has_chapter_6s_recipe_and_a_json_config(kwargs):
    run = ps.penalty_run(**kwargs)
    assert run.name == ps.run_name(**kwargs)
    assert run.steps == 25 * 90 and run.eval_every == 90
    config = json.loads(json.dumps(run.checkpoint_config(run.steps)))
    reference = wordlm.wordlm_run(model="sba-ic").config
    for key in ("task", "hidden", "data", "eval", "passes", "optimizer", "lr", "grad_clip_norm"):
        assert config[key] == reference[key], key
    assert config["cell"] == kwargs["model"]
    assert config["penalty"]["name"] == kwargs["penalty"]
    assert config["penalty"]["lambda"] == kwargs["lam"]
    assert config["penalty"]["u_target"] == kwargs["u_target"]


@pytest.mark.parametrize("model", ["sba-ic", "sba-c2"])
def test_the_initial_weights_are_those_of_chapter_6s_run(model):
    ours = ps.penalty_run(model=model, penalty="cb", lam=1e-3).build_model().state_dict()
    theirs = wordlm.BOOK_RUNS[f"ptb-slice-{model}"]().build_model().state_dict()
    assert set(ours) == set(theirs) | {"penalty_tally"}
    for key, value in theirs.items():
        assert torch.equal(ours[key], value), key  # the same draws repeated
    assert torch.equal(ours["penalty_tally"], torch.zeros(len(ps.TALLY), dtype=torch.float64))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(model="sba-h", penalty="cb", lam=0.1), "model must be one of"),
        (dict(model="sba-ic", penalty="l1", lam=0.1), "penalty must be one of"),
        (dict(model="sba-ic", penalty="cb", lam=-1.0), "lam must be a finite number >= 0"),
        (dict(model="sba-ic", penalty="cb", lam=float("nan")), "lam must be a finite number"),
        (dict(model="sba-ic", penalty="cb", lam=True), "lam must be a finite number"),
        (dict(model="sba-ic", penalty="msure", lam=1.0), "msure needs u_target"),
        (dict(model="sba-ic", penalty="msure", lam=1.0, u_target=1.5), "msure needs u_target"),
        (dict(model="sba-ic", penalty="ns", lam=1.0, u_target=0.5), "belongs to msure only"),
    ],
)
def test_bad_settings_are_refused_with_what_came(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ps.penalty_run(**kwargs)


@pytest.mark.parametrize(
    "bad",
    [
        ["--penalty", "cb", "--lam", "-1"],
        ["--penalty", "msure", "--lam", "1"],
        ["--penalty", "cb", "--lam", "1", "--u-target", "0.5"],
        ["--penalty", "cb", "--lam", "1", "--passes", "0"],
        ["--penalty", "cb", "--lam", "1", "--model", "lstm"],
    ],
)
def test_bad_arguments_are_refused(bad, tmp_path):
    with pytest.raises(SystemExit):
        ps.parse_args(["--out-dir", str(tmp_path), *bad])


@pytest.mark.parametrize(
    "penalty, lam, u_target",
    [("cb", 0.1, None), ("msure", 100.0, 0.2), ("ns", 10.0, None)],
)
def test_each_window_adds_its_ce_penalty_influence_and_rate_to_the_tally(
    penalty, lam, u_target, tiny_slice
):
    run = short(ps.penalty_run(model="sba-ic", penalty=penalty, lam=lam, u_target=u_target))
    lm = run.build_model()
    lm.train()
    before = lm.penalty_tally.clone()
    for step in (0, 1):
        total = run.loss_fn(lm, run.batch(step))
        ce, r, ratio, u, raw = (lm.penalty_tally - before)[1:].tolist()
        before = lm.penalty_tally.clone()
        assert math.isclose(float(total.detach()), ce + r, rel_tol=1e-6)
        assert r > 0 and math.isclose(ratio, r / (ce + r), rel_tol=1e-12)  # (pen-ri), N = 1
        assert math.isclose(raw, r / lam, rel_tol=1e-12)
        assert 0.3 < u < 0.7  # S_ic at the start: about half the units update
    assert lm.penalty_tally[0] == 2  # two windows counted
    run.loss_fn(lm, run.batch(2))  # a new pass: the tally starts again
    assert lm.penalty_tally[0] == 1


def test_the_budget_penalty_counts_the_decisions_the_cell_takes(tiny_slice):
    """R_CB / lambda is the sum over the window's steps of the share of modules that updated,
    counted from the recorded margins: the cell's own update rate times T."""
    run = short(ps.penalty_run(model="sba-ic", penalty="cb", lam=1.0))
    lm = run.build_model()
    lm.train()
    _, (_, x, _) = run.batch(0)
    run.loss_fn(lm, run.batch(0))
    _, _, r, _, u, _ = lm.penalty_tally.tolist()
    assert abs(r - u * x.shape[1]) < 0.01 * x.shape[1]  # a tie m = 0 may count otherwise


@pytest.mark.parametrize("penalty, u_target", [("cb", None), ("msure", 0.2), ("ns", None)])
def test_each_penalty_reaches_the_weights(penalty, u_target, tiny_slice):
    """The gradient with the penalty differs from the cross-entropy's alone: the
    straight-through surrogate gives R_CB and R_MSURE a gradient, R_NS has one."""
    grads = {}
    for lam in (0.0, 100.0):
        run = short(ps.penalty_run(model="sba-ic", penalty=penalty, lam=lam, u_target=u_target))
        lm = run.build_model()
        lm.train()
        run.loss_fn(lm, run.batch(0)).backward()
        grads[lam] = lm.cell.weight_hh.grad.clone()
    assert (grads[100.0] - grads[0.0]).abs().max() > 1e-4


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(penalty="msure", lam=0.0, u_target=0.2),  # a penalty with lambda = 0
        dict(penalty="none", lam=0.0, theta=1e-4),  # no penalty at the cell's own threshold
    ],
)
def test_a_zero_penalty_trains_chapter_6s_run_exactly(kwargs, tiny_slice, tmp_path):
    """With lambda = 0 (or no penalty) the loss adds exact zeros to every gradient: the weights
    after three updates are those of wordlm's unpenalised S_ic run, bit for bit."""
    ours = short(ps.penalty_run(model="sba-ic", **kwargs), 3)
    theirs = dataclasses.replace(wordlm.wordlm_run(model="sba-ic"), steps=3, eval_every=2)
    a = longrun.train(ours, tmp_path / "ours", report=None)
    b = longrun.train(theirs, tmp_path / "theirs", report=None)
    for key, value in b.model.state_dict().items():
        assert torch.equal(a.model.state_dict()[key], value), key
    assert [r["valid_ppl"] for r in a.rows] == [r["valid_ppl"] for r in b.rows]


@pytest.mark.parametrize(
    "penalty, lam, u_target", [("cb", 0.1, None), ("msure", 10.0, 0.5), ("ns", 1.0, None)]
)
def test_a_tiny_run_logs_validation_rate_and_influence_every_pass(
    penalty, lam, u_target, tiny_slice, tmp_path
):
    run = short(ps.penalty_run(model="sba-c2", penalty=penalty, lam=lam, u_target=u_target))
    result = longrun.train(run, tmp_path / "run", report=None)
    assert [row["step"] for row in result.rows] == [0, 2, 4]
    assert "ri" not in result.rows[0]  # nothing trained yet
    for row in result.rows[1:]:
        assert {"valid_ppl", "valid_ppl_plain", "valid_u", "train_ce", "ri", "train_u"} <= set(row)
        assert 0 < row["ri"] < 1 and 0 < row["train_u"] <= 0.5  # S_c, M = 2: at most 1 of 2
        ce, r = row["train_ce"], row["train_penalty"]
        assert math.isclose(row["train_loss"], ce + r, rel_tol=1e-5)
    curve = longrun.read_curve(result.curve)
    assert math.isclose(curve[-1]["ri"], result.rows[-1]["ri"], rel_tol=1e-5)


def test_a_resumed_run_gives_the_rows_and_weights_of_an_uninterrupted_one(tiny_slice, tmp_path):
    run = short(ps.penalty_run(model="sba-ic", penalty="ns", lam=1.0), steps=4)
    whole = longrun.train(run, tmp_path / "whole", report=None)
    longrun.train(dataclasses.replace(run, steps=2), tmp_path / "cut", report=None)
    resumed = longrun.train(run, tmp_path / "cut", resume=True, report=None)
    for key, value in whole.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[key], value), key
    skip = {"seconds", "sec_per_step", "eval_seconds"}
    strip = [{k: v for k, v in row.items() if k not in skip} for row in whole.rows]
    assert [{k: v for k, v in row.items() if k not in skip} for row in resumed.rows] == strip


def test_the_checkpoint_reproduces_its_training_columns_too(tiny_slice, tmp_path):
    """The tally travels with the weights: a reloaded model reports the last pass's training
    statistics, so the run can become a book checkpoint (``longrun.reproduce``)."""
    run = short(ps.penalty_run(model="sba-ic", penalty="cb", lam=0.01))
    result = longrun.train(run, tmp_path / "run", report=None)
    record = longrun.publish(run, result)
    assert "ri" in record["summary"]["final_eval"]
    _, _, mismatches = longrun.reproduce(run)
    assert not mismatches


def test_only_the_curve_reaches_the_book_folder(tiny_slice, tmp_path, monkeypatch):
    book = tmp_path / "book"
    monkeypatch.setenv("RNNBOOK_CHECKPOINTS", str(book))
    run = short(ps.penalty_run(model="sba-ic", penalty="ns", lam=0.1), steps=2)
    code = ps.publish_curve_only(run, tmp_path / "run", resume=False, threads=1,
                                 extra=lambda result: {})  # fmt: skip
    assert code == 0
    assert sorted(p.name for p in book.iterdir()) == [f"{run.name}.curve.csv"]
    staged = sorted(p.name for p in (tmp_path / "run" / "checkpoint").iterdir())
    assert staged == [f"{run.name}.curve.csv", f"{run.name}.json", f"{run.name}.pt"]
    assert (tmp_path / "run" / "summary.json").is_file()
    assert str(book) == os.environ["RNNBOOK_CHECKPOINTS"]  # restored


def test_the_window_loss_is_the_models_cross_entropy(tiny_slice):
    """The loss calls the core and the read-out itself (for the states of R_NS): the same
    numbers as the model's forward pass."""
    run = short(ps.penalty_run(model="sba-ic", penalty="ns", lam=0.0))
    lm = run.build_model()
    lm.train()
    _, (_, x, y) = run.batch(0)
    ours = run.loss_fn(lm, run.batch(0))
    logits, _ = lm(x)
    torch.testing.assert_close(ours, token_cross_entropy(logits, y), rtol=0, atol=0)


def test_a_curve_summary_reads_the_best_pass_and_the_mean_influence():
    rows = [
        {"step": 0, "valid_ppl": 2000.0, "valid_ppl_plain": 2000.0, "valid_u": 0.5},
        {"step": 90, "valid_ppl": 90.0, "valid_ppl_plain": 95.0, "valid_u": 0.4, "train_u": 0.41,
         "ri": 0.2},
        {"step": 180, "valid_ppl": 80.0, "valid_ppl_plain": 85.0, "valid_u": 0.3, "train_u": 0.31,
         "ri": 0.4},
        {"step": 270, "valid_ppl": 81.0, "valid_ppl_plain": 70.0, "valid_u": 0.2, "train_u": 0.21,
         "ri": 0.6},
    ]  # fmt: skip
    summary = ps.curve_summary(rows)
    assert summary == pytest.approx(
        {"best_ppl": 80.0, "at": 2, "plain_ppl": 85.0, "valid_u": 0.3, "train_u": 0.31, "ri": 0.4}
    )
    unpenalised = [{k: v for k, v in r.items() if k not in ("ri", "train_u", "valid_ppl_plain")}
                   for r in rows]  # fmt: skip
    summary = ps.curve_summary(unpenalised)
    assert summary["ri"] is None and summary["train_u"] is None and summary["plain_ppl"] == 80.0
    with pytest.raises(ValueError, match="no trained row"):
        ps.curve_summary(rows[:1])


# --- Chapter 7's levers on the rate: the threshold, a tempered surrogate, the margins -----------


def test_lever_runs_have_their_own_names_and_are_all_different():
    assert ps.run_name("sba-ic", "none", 0.0, theta=1.0) == "ptb-slice-sba-ic-theta1"
    assert (
        ps.run_name("sba-c2", "none", 0.0, theta=0.3, seed=1) == "ptb-slice-sba-c2-theta0.3-seed1"
    )
    assert (
        ps.run_name("sba-ic", "msure", 10.0, 0.2, tau=0.3)
        == "ptb-slice-sba-ic-msure-ut0.2-lam10-tau0.3"
    )
    assert ps.run_name("sba-ic", "margin", 1.0) == "ptb-slice-sba-ic-margin-lam1"
    assert ps.run_name("sba-ic", "none", 0.0, theta=0.3, theta_from=12) == (
        "ptb-slice-sba-ic-theta0.3-from12"
    )
    names = [ps.run_name(**kw) for kw in ps.levers()]
    assert len(names) == len(set(names)) == 5 + 2 + 3 + 3
    assert not set(names) & {ps.run_name(**kw) for kw in ps.grid(("sba-ic", "sba-c2"))}


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(model="sba-ic", penalty="none", lam=0.1), "takes lam = 0"),
        (dict(model="sba-ic", penalty="none", lam=0.0, theta=0.0), "theta must be a positive"),
        (dict(model="sba-ic", penalty="none", lam=0.0, theta=float("inf")), "theta must be"),
        (dict(model="sba-ic", penalty="cb", lam=0.1, tau=-1.0), "tau must be a positive"),
        (dict(model="sba-ic", penalty="ns", lam=0.1, tau=0.3), "tau .* belongs to cb and msure"),
        (dict(model="sba-ic", penalty="margin", lam=0.1, tau=0.3), "belongs to cb and msure"),
        (dict(model="sba-ic", penalty="none", lam=0.0, theta_from=3), "theta_from needs theta"),
        (dict(model="sba-ic", penalty="none", lam=0.0, theta=0.3, theta_from=0), "whole number"),
        (dict(model="sba-ic", penalty="none", lam=0.0, theta=0.3, theta_from=2.5), "whole number"),
    ],
)
def test_bad_lever_settings_are_refused_with_what_came(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ps.penalty_run(**kwargs)


def test_a_threshold_run_starts_from_chapter_6s_weights_with_its_own_theta():
    run = ps.penalty_run(model="sba-ic", penalty="none", lam=0.0, theta=1.0)
    lm = run.build_model()
    assert lm.cell.theta == 1.0 and run.config["theta"] == 1.0
    theirs = wordlm.BOOK_RUNS["ptb-slice-sba-ic"]().build_model().state_dict()
    for key, value in theirs.items():
        assert torch.equal(lm.state_dict()[key], value), key


def test_the_tempered_surrogate_decides_exactly_and_tempers_the_gradient():
    m = torch.tensor([-3.0, -0.2, 0.0, 1e-30, 0.3, 5.0], dtype=torch.float64, requires_grad=True)
    for tau in (0.1, 1.0):
        b = ps.tempered_straight_through(m, tau)
        assert b.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]  # [m > 0], no rounding
        (grad,) = torch.autograd.grad(b.sum(), m)
        s = torch.sigmoid(m.detach() / tau)
        torch.testing.assert_close(grad, s * (1 - s) / tau, rtol=1e-15, atol=0)
    assert float(grad[2]) == 0.25  # 1 / (4 tau) at the threshold, tau = 1
    with pytest.raises(TypeError, match="floating-point"):
        ps.tempered_straight_through(torch.tensor([1, 2]), 0.3)
    with pytest.raises(ValueError, match="tau must be a positive number"):
        ps.tempered_straight_through(m, 0)


def test_the_margin_penalty_charges_only_the_updates_by_their_margin():
    m = torch.tensor([[[-1.0, 0.5]], [[2.0, 0.0]]], dtype=torch.float64, requires_grad=True)
    r = ps.margin_penalty(m, 2.0)
    assert float(r.detach()) == 2.0 * (0.5 + 2.0) / 4
    (grad,) = torch.autograd.grad(r, m)
    assert grad.flatten().tolist() == [0.0, 0.5, 0.5, 0.0]  # lambda / n where m > 0
    with pytest.raises(ValueError, match=r"\(T, B, M\) tensor, got \(2, 2\)"):
        ps.margin_penalty(torch.zeros(2, 2), 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(penalty="msure", lam=100.0, u_target=0.2, tau=0.3),
        dict(penalty="margin", lam=100.0),
    ],
)
def test_each_lever_penalty_reaches_the_weights(kwargs, tiny_slice):
    grads = {}
    for lam in (0.0, kwargs["lam"]):
        run = short(ps.penalty_run(model="sba-ic", **{**kwargs, "lam": lam}))
        lm = run.build_model()
        lm.train()
        run.loss_fn(lm, run.batch(0)).backward()
        grads[lam] = lm.cell.weight_hh.grad.clone()
    assert (grads[kwargs["lam"]] - grads[0.0]).abs().max() > 1e-4


def test_a_warm_threshold_starts_with_the_cells_own_and_switches_at_its_pass(tiny_slice):
    run = short(ps.penalty_run(model="sba-ic", penalty="none", lam=0.0, theta=0.3, theta_from=1))
    assert run.name == "ptb-slice-sba-ic-theta0.3-from1" and run.config["theta_from_pass"] == 1
    lm = run.build_model()
    assert lm.cell.theta == wordlm.THETA  # built with the cell's own threshold
    lm.train()
    run.loss_fn(lm, run.batch(0))
    run.loss_fn(lm, run.batch(1))
    assert lm.cell.theta == wordlm.THETA  # the first pass (two windows here)
    run.loss_fn(lm, run.batch(2))
    assert lm.cell.theta == 0.3  # from the second pass on
    assert float(lm.threshold) == 0.3  # and saved with the weights


def test_a_warm_threshold_run_reloads_deciding_as_it_trained(tiny_slice, tmp_path):
    """The published checkpoint is evaluated again after a reload (longrun.publish): with the
    threshold in a buffer the reloaded model decides with the run's last threshold."""
    run = short(ps.penalty_run(model="sba-ic", penalty="none", lam=0.0, theta=0.3, theta_from=1))
    result = longrun.train(run, tmp_path / "run", report=None)
    assert float(result.model.threshold) == 0.3
    reloaded = run.build_model()
    reloaded.load_state_dict(result.model.state_dict())
    assert run.evaluate(reloaded) == run.evaluate(result.model)
    assert result.rows[0]["valid_u"] > 0.3  # the untrained model with the cell's own theta


def test_a_threshold_above_the_untrained_surprisal_changes_stops_every_update(tiny_slice):
    """Why the threshold needs a warm-up: the untrained cell's surprisals change by less than
    0.1 a step, so with theta = 0.3 no module updates at all."""
    run = short(ps.penalty_run(model="sba-ic", penalty="none", lam=0.0, theta=0.3))
    lm = run.build_model()
    lm.train()
    run.loss_fn(lm, run.batch(0))
    assert lm.penalty_tally[4] == 0  # the summed share of updates of the window
