"""rnnbook.longrun: the resumable long-run trainer, on a tiny regression task.

It must write a learning curve and snapshots, give the weights of an uninterrupted run
when resumed (bitwise: the same computation repeated on one machine), refuse to mix two
runs in one folder, stop on its stop rule, keep the last good snapshot when the loss turns
NaN, and turn a run into a checkpoint that loads (``publish``, ``train_or_load``).
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from rnnbook import longrun
from rnnbook.checkpoints import CheckpointError, weights_sha256
from rnnbook.profiles import Profile
from rnnbook.train import NonFiniteError

TARGET = torch.tensor([[2.0], [-1.0], [0.5]])  # y = x @ TARGET


def tiny_run(steps=12, eval_every=4, lr=0.2, poison_at=None, stop_below=None, **changes):
    """Linear regression on batches drawn from the step's own generator."""

    def build_model():
        torch.manual_seed(0)
        return nn.Linear(3, 1, bias=False)

    def batch(step):
        x = torch.randn(8, 3, generator=torch.Generator().manual_seed(1000 + step))
        return x, x @ TARGET

    def loss_fn(model, batch):
        x, y = batch
        loss = ((model(x) - y) ** 2).mean()
        return loss * float("nan") if poison_at is not None and batch_step(x) == poison_at else loss

    held_out = batch(-1)

    def evaluate(model):
        return {"valid_mse": float(((model(held_out[0]) - held_out[1]) ** 2).mean())}

    steps_by_first = {float(batch(t)[0][0, 0]): t for t in range(steps)}

    def batch_step(x):
        return steps_by_first.get(float(x[0, 0]))

    rule = None
    if stop_below is not None:

        def rule(rows, recent):
            return "converged" if rows[-1]["valid_mse"] < stop_below else None

    return longrun.LongRun(
        **{
            "name": "tiny",
            "config": {"task": "tiny regression", "lr": lr},
            "build_model": build_model,
            "batch": batch,
            "loss_fn": loss_fn,
            "evaluate": evaluate,
            "optimizer": lambda parameters: torch.optim.SGD(parameters, lr=lr),
            "steps": steps,
            "eval_every": eval_every,
            "stop_rule": rule,
            **changes,
        }
    )


def test_a_run_writes_its_curve_and_snapshot(tmp_path):
    result = longrun.train(tiny_run(), tmp_path / "run", report=None)
    rows = longrun.read_curve(result.curve)
    assert [row["step"] for row in rows] == [0, 4, 8, 12]
    assert rows[0]["train"] is None and all(row["train"] > 0 for row in rows[1:])
    assert rows[-1]["valid_mse"] < rows[0]["valid_mse"] / 4  # it learns
    snapshot = torch.load(tmp_path / "run" / "snapshot.pt", weights_only=True)
    assert snapshot["step"] == 12 and len(snapshot["rows"]) == 4
    assert result.steps == 12 and result.stopped is None


def test_resuming_gives_the_weights_of_an_uninterrupted_run(tmp_path):
    straight = longrun.train(tiny_run(steps=12), tmp_path / "a", report=None)
    longrun.train(tiny_run(steps=4), tmp_path / "b", report=None)  # stopped after one chunk
    resumed = longrun.train(tiny_run(steps=12), tmp_path / "b", resume=True, report=None)
    assert weights_sha256(resumed.model.state_dict()) == weights_sha256(straight.model.state_dict())
    assert [r["step"] for r in resumed.rows] == [0, 4, 8, 12]
    assert len(resumed.commands) == 2  # one per session


def test_resuming_continues_the_masks_drawn_from_torchs_generator(tmp_path):
    """A loss that draws a dropout-like mask from the global generator at every step: the
    resumed run must draw the masks the uninterrupted run drew, not the first chunk's again."""

    def masked(model, batch):
        x, y = batch
        keep = (torch.rand(x.shape[0], 1) < 0.5).float()
        return (keep * (model(x) - y) ** 2).mean()

    straight = longrun.train(tiny_run(steps=12, loss_fn=masked), tmp_path / "a", report=None)
    longrun.train(tiny_run(steps=4, loss_fn=masked), tmp_path / "b", report=None)
    torch.manual_seed(12345)  # whatever the generator holds when the next session starts
    resumed = longrun.train(
        tiny_run(steps=12, loss_fn=masked), tmp_path / "b", resume=True, report=None
    )
    assert weights_sha256(resumed.model.state_dict()) == weights_sha256(straight.model.state_dict())


@pytest.mark.parametrize("rel_tol", [0.0, 1.0, 1, -1e-4])
def test_a_reproduction_tolerance_outside_0_1_is_refused(rel_tol):
    with pytest.raises(ValueError, match="rel_tol must be a float in"):
        tiny_run(rel_tol=rel_tol)


def test_resume_without_a_snapshot_starts_afresh(tmp_path):
    result = longrun.train(tiny_run(steps=4), tmp_path / "new", resume=True, report=None)
    assert result.steps == 4


def test_an_occupied_folder_and_another_config_are_refused(tmp_path):
    longrun.train(tiny_run(steps=4), tmp_path / "run", report=None)
    with pytest.raises(longrun.RunError, match="already holds a run"):
        longrun.train(tiny_run(steps=4), tmp_path / "run", report=None)
    with pytest.raises(longrun.RunError, match="was made with config"):
        longrun.train(tiny_run(steps=8, lr=0.1), tmp_path / "run", resume=True, report=None)


def test_the_stop_rule_ends_the_run(tmp_path):
    result = longrun.train(tiny_run(steps=400, stop_below=0.5), tmp_path / "run", report=None)
    assert result.stopped == "converged" and result.steps < 400
    assert result.rows[-1]["valid_mse"] < 0.5 <= result.rows[-2]["valid_mse"]


def test_a_nan_loss_raises_and_keeps_the_last_good_snapshot(tmp_path):
    with pytest.raises(NonFiniteError, match="step 6"):
        longrun.train(tiny_run(poison_at=6), tmp_path / "run", report=None)
    snapshot = torch.load(tmp_path / "run" / "snapshot.pt", weights_only=True)
    assert snapshot["step"] == 4  # the chunk 4..7 never reached the optimizer at step 6
    assert all(torch.isfinite(v).all() for v in snapshot["model"].values())


def test_publish_writes_a_checkpoint_that_loads_and_its_curve(tmp_path, monkeypatch):
    run = tiny_run()
    result = longrun.train(run, tmp_path / "run", report=None)
    record = longrun.publish(run, result, {"note": "a test"})
    folder = tmp_path / "checkpoints"  # the conftest's RNNBOOK_CHECKPOINTS
    assert json.loads((folder / "tiny.json").read_text())["config"] == {**run.config, "steps": 12}
    assert record["summary"]["final_eval"]["valid_mse"] == pytest.approx(
        result.rows[-1]["valid_mse"]
    )
    assert record["summary"]["note"] == "a test"
    assert longrun.read_curve(folder / "tiny.curve.csv") == longrun.read_curve(result.curve)
    model, _, mismatches = longrun.reproduce(run)
    assert not mismatches


def test_train_or_load_loads_in_quick_and_full_and_trains_only_in_paper(tmp_path):
    """A long run takes longer than a chapter may in the quick and the full profile alike, so
    both load its committed checkpoint; the paper profile trains and leaves it alone."""
    run = tiny_run()
    with pytest.raises(CheckpointError, match="no checkpoint"):  # full never trains it
        longrun.train_or_load(run, profile=Profile("full", "test"), report=None)
    result = longrun.train(run, tmp_path / "run", report=None)
    longrun.publish(run, result, {})
    published = (tmp_path / "checkpoints" / "tiny.pt").read_bytes()
    quick = longrun.train_or_load(run, profile=Profile("quick", "test"), report=None)
    full = longrun.train_or_load(run, profile=Profile("full", "test"), report=None)
    paper = longrun.train_or_load(run, profile=Profile("paper", "test"), report=None)
    assert quick.source == full.source == "checkpoint" and paper.source == "trained"
    assert (tmp_path / "checkpoints" / "tiny.pt").read_bytes() == published  # left alone
    for trained in (full, paper):
        assert weights_sha256(trained.model.state_dict()) == weights_sha256(
            quick.model.state_dict()
        )  # one thread, the same machine: the paper profile's run repeats the published one
    with pytest.raises(CheckpointError, match="config"):
        longrun.train_or_load(run, profile=Profile("quick", "test"), steps=8, report=None)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"steps": 0}, "steps"),
        ({"eval_every": -1}, "eval_every"),
        ({"name": "a/b"}, "name"),
        ({"config": {"steps": 3}}, "steps"),
        ({"config": {"f": object()}}, "JSON"),
    ],
)
def test_bad_runs_are_refused(change, message):
    with pytest.raises((ValueError, TypeError), match=message):
        tiny_run(**change)
