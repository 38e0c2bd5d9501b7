"""python -m rnnbook.runs copy: Chapter 3's NTM and LSTM runs, on tiny configurations.

The command must write the learning curve and a checkpoint that loads with the run's config,
give the same weights whether it runs at once or is resumed, refuse to mix two runs in one
folder, exit 2 without a checkpoint when the loss turns NaN, and refuse bad arguments.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rnnbook import longrun
from rnnbook.checkpoints import load_checkpoint
from rnnbook.runs import copy as copy_runs
from rnnbook.runs.__main__ import main as runs_main

TINY_NTM = ["--model", "ntm", "--N", "8", "--M", "4", "--controller", "8", "--max-length", "3"]
TINY_LSTM = ["--model", "lstm", "--hidden", "16", "--layers", "2", "--max-length", "4"]
EVERY = ["--eval-every", "5"]


@pytest.fixture
def checkpoints(tmp_path) -> Path:
    return tmp_path / "checkpoints"  # the conftest's RNNBOOK_CHECKPOINTS


@pytest.fixture(autouse=True)
def two_evaluation_lengths(monkeypatch):
    """The tiny runs are evaluated at L = 10 and 20 (SOLVED_LENGTH), not at all six lengths of
    the book's runs: the lengths up to 120 took most of these tests' time, and what they test
    (the curve, the checkpoint, resuming, refusals) is the same at any length."""
    monkeypatch.setattr(copy_runs, "EVAL_LENGTHS", (10, copy_runs.SOLVED_LENGTH))


def test_the_book_models_have_the_chapters_parameter_counts():
    ntm = copy_runs.ntm_run().build_model()
    assert sum(p.numel() for p in ntm.parameters()) == 63_136
    assert ntm.cell.N == 128 and ntm.cell.M == 20 and ntm.cell.mem_init == "constant"
    lstm = copy_runs.lstm_run().build_model()  # the paper's 3 x 256
    assert sum(p.numel() for p in lstm.parameters()) == 1_328_136
    assert lstm(torch.zeros(2, 7, 9))[0].shape == (2, 7, 8)


@pytest.mark.parametrize("tiny, name", [(TINY_NTM, "ntm-copy"), (TINY_LSTM, "lstm-copy")])
def test_a_tiny_run_writes_the_curve_and_a_loadable_checkpoint(checkpoints, tmp_path, tiny, name):
    out = tmp_path / "run"
    assert copy_runs.main([*tiny, *EVERY, "--steps", "10", "--out-dir", str(out)]) == 0
    rows = longrun.read_curve(out / "learning_curve.csv")
    assert [row["step"] for row in rows] == [0, 5, 10]
    assert all(row["train_bits"] > 0 for row in rows[1:])
    assert set(rows[0]) >= {f"bit_errors_L{L}" for L in copy_runs.EVAL_LENGTHS}
    record = json.loads((checkpoints / f"{name}.json").read_text())
    run = copy_runs.run_from_args(
        copy_runs.parse_args([*tiny, *EVERY, "--steps", "10", "--out-dir", str(out)])
    )
    assert record["config"] == run.checkpoint_config(10)
    assert record["summary"]["steps"] == 10 and not record["summary"]["solved"]
    load_checkpoint(run.build_model(), name, run.checkpoint_config(10))
    assert longrun.read_curve(checkpoints / f"{name}.curve.csv") == rows
    text = (checkpoints / f"{name}.json").read_text()
    assert str(tmp_path) not in text and str(Path.home()) not in text  # no machine paths
    assert record["summary"]["learning_curve"] == "<outside the repository>/learning_curve.csv"


@pytest.mark.parametrize("tiny, name", [(TINY_NTM, "ntm-copy"), (TINY_LSTM, "lstm-copy")])
def test_resuming_gives_the_weights_of_an_uninterrupted_run(checkpoints, tmp_path, tiny, name):
    assert copy_runs.main([*tiny, *EVERY, "--steps", "10", "--out-dir", str(tmp_path / "a")]) == 0
    straight = json.loads((checkpoints / f"{name}.json").read_text())["weights_sha256"]
    resumed_dir = str(tmp_path / "b")
    assert copy_runs.main([*tiny, *EVERY, "--steps", "5", "--out-dir", resumed_dir]) == 0
    again = [*tiny, *EVERY, "--steps", "10", "--out-dir", resumed_dir, "--resume"]
    assert copy_runs.main(again) == 0
    resumed = json.loads((checkpoints / f"{name}.json").read_text())["weights_sha256"]
    assert resumed == straight


def test_an_occupied_out_dir_and_a_changed_setting_are_refused(checkpoints, tmp_path):
    out = str(tmp_path / "run")
    assert copy_runs.main([*TINY_NTM, *EVERY, "--steps", "5", "--out-dir", out]) == 0
    assert copy_runs.main([*TINY_NTM, *EVERY, "--steps", "5", "--out-dir", out]) == 1
    changed = [*TINY_NTM, *EVERY, "--steps", "10", "--out-dir", out, "--resume", "--lr", "0.01"]
    assert copy_runs.main(changed) == 1


def test_a_nan_loss_exits_2_before_any_checkpoint(checkpoints, tmp_path, monkeypatch):
    def poisoned(model, batch):
        return copy_runs.copy_loss(model(batch[0])[0], batch[1]) * float("nan")

    monkeypatch.setattr(copy_runs, "loss_fn", poisoned)
    out = tmp_path / "run"
    assert copy_runs.main([*TINY_NTM, *EVERY, "--steps", "10", "--out-dir", str(out)]) == 2
    assert not (checkpoints / "ntm-copy.pt").exists()
    snapshot = torch.load(out / "snapshot.pt", weights_only=True)
    assert snapshot["step"] == 0  # the last good state, untouched by the bad step
    assert all(torch.isfinite(v).all() for v in snapshot["model"].values())


def test_the_stop_rule_needs_three_error_free_evaluations_and_a_low_cost():
    rule, description = copy_runs.solved_rule(solved_evals=3, solved_cost=0.1)
    clean = {"bit_errors_L20": 0.0}
    assert "3 evaluations in a row" in description
    assert rule([{"bit_errors_L20": 1.0}, clean, clean], [0.01] * 100) is None
    assert rule([clean, clean, clean], [0.01] * 99) is None  # not 100 steps yet
    assert rule([clean, clean, clean], [0.2] * 100) is None  # the cost is too high
    assert rule([clean, clean, clean], [0.01] * 100).startswith("solved")


@pytest.mark.parametrize(
    "bad",
    [
        ["--steps", "0"],
        ["--N", "0"],
        ["--lr", "-1"],
        ["--threads", "0"],
        ["--seed", "-1"],
        ["--model", "gru"],
    ],
)
def test_bad_arguments_are_refused(bad, tmp_path):
    words = ["--model", "ntm", "--out-dir", str(tmp_path), *bad]
    with pytest.raises(SystemExit):
        copy_runs.parse_args(words)


def test_the_command_line_lists_its_tasks_and_refuses_an_unknown_one(capsys):
    command = [sys.executable, "-m", "rnnbook.runs", "unknown"]
    out = subprocess.run(command, capture_output=True, text=True)
    assert out.returncode == 1 and "copy" in out.stderr
    with pytest.raises(SystemExit) as done:  # the same entry point, without a second process
        runs_main(["copy", "--help"])
    assert done.value.code == 0 and "--model" in capsys.readouterr().out
