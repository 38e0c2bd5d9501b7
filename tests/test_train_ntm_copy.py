"""scripts/train_ntm_copy.py: the NTM copy-task run, on a tiny configuration.

It must write its learning curve and a checkpoint that ``load_checkpoint`` accepts with
``copy_config``, give the same weights whether it runs at once or is resumed, refuse to
mix two runs in one folder, and stop (without a checkpoint) when the loss turns NaN.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import train_ntm_copy as ntm_run  # noqa: E402

from rnnbook.checkpoints import load_checkpoint  # noqa: E402

TINY = ["--N", "8", "--M", "4", "--controller", "8", "--max-length", "3", "--eval-every", "5"]


@pytest.fixture
def checkpoints(tmp_path, monkeypatch):
    folder = tmp_path / "checkpoints"
    monkeypatch.setenv("RNNBOOK_CHECKPOINTS", str(folder))
    threads = torch.get_num_threads()
    yield folder
    torch.set_num_threads(threads)
    torch.set_flush_denormal(False)


def test_the_book_configuration_has_63136_parameters():
    model = ntm_run.build_model(ntm_run.parse_args([]))
    assert sum(p.numel() for p in model.parameters()) == 63_136
    assert model.cell.N == 128 and model.cell.M == 20 and model.cell.mem_init == "constant"


def test_a_tiny_run_writes_the_curve_and_a_loadable_checkpoint(checkpoints, tmp_path):
    out = tmp_path / "run"
    assert ntm_run.main([*TINY, "--steps", "10", "--out-dir", str(out)]) == 0
    with (out / "learning_curve.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ntm_run.CSV_COLUMNS
    assert [int(r["step"]) for r in rows] == [0, 5, 10]
    assert all(float(r["train_bits"]) > 0 for r in rows[1:])
    record = json.loads((checkpoints / "ntm-copy.json").read_text())
    args = ntm_run.parse_args([*TINY, "--steps", "10"])
    assert record["config"] == json.loads(json.dumps(ntm_run.copy_config(args, 10)))
    assert record["summary"]["steps"] == 10 and not record["summary"]["solved"]
    assert set(record["summary"]["bit_errors_per_sequence"]) == {
        str(L) for L in ntm_run.EVAL_LENGTHS
    }
    load_checkpoint(ntm_run.build_model(args), "ntm-copy", ntm_run.copy_config(args, 10))
    text = (checkpoints / "ntm-copy.json").read_text()
    assert str(tmp_path) not in text and str(Path.home()) not in text  # no machine paths
    assert record["summary"]["learning_curve"] == "<outside the repository>/learning_curve.csv"


def test_resuming_gives_the_weights_of_an_uninterrupted_run(checkpoints, tmp_path):
    assert ntm_run.main([*TINY, "--steps", "10", "--out-dir", str(tmp_path / "a")]) == 0
    straight = json.loads((checkpoints / "ntm-copy.json").read_text())["weights_sha256"]
    resumed_dir = str(tmp_path / "b")
    assert ntm_run.main([*TINY, "--steps", "5", "--out-dir", resumed_dir]) == 0
    assert ntm_run.main([*TINY, "--steps", "10", "--out-dir", resumed_dir, "--resume"]) == 0
    resumed = json.loads((checkpoints / "ntm-copy.json").read_text())["weights_sha256"]
    assert resumed == straight


def test_an_occupied_out_dir_and_a_changed_setting_are_refused(checkpoints, tmp_path):
    out = str(tmp_path / "run")
    assert ntm_run.main([*TINY, "--steps", "5", "--out-dir", out]) == 0
    assert ntm_run.main([*TINY, "--steps", "5", "--out-dir", out]) == 1
    changed = [*TINY, "--steps", "10", "--out-dir", out, "--resume", "--lr", "0.01"]
    assert ntm_run.main(changed) == 1


def test_a_nan_loss_stops_the_run_before_any_checkpoint(checkpoints, tmp_path, monkeypatch):
    def poisoned(model, batch):
        return ntm_run.copy_loss(model(batch[0])[0], batch[1]) * float("nan")

    monkeypatch.setattr(ntm_run, "loss_fn", poisoned)
    out = tmp_path / "run"
    assert ntm_run.main([*TINY, "--steps", "10", "--out-dir", str(out)]) == 2
    assert not (checkpoints / "ntm-copy.pt").exists()
    snapshot = torch.load(out / "snapshot.pt", weights_only=True)
    assert snapshot["step"] == 0  # the last good state, untouched by the bad step
    assert all(torch.isfinite(v).all() for v in snapshot["model"].values())


@pytest.mark.parametrize(
    "bad", [["--steps", "0"], ["--N", "0"], ["--lr", "-1"], ["--threads", "0"]]
)
def test_bad_arguments_are_refused(bad):
    with pytest.raises(SystemExit):
        ntm_run.parse_args(bad)
