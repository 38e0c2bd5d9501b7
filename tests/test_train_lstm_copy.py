"""scripts/train_lstm_copy.py: the LSTM baseline of the copy task, on a tiny configuration.

It must write the NTM run's CSV columns, a checkpoint that ``load_checkpoint`` accepts with
``lstm_config``, and give the same weights whether it runs at once or is resumed.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import train_lstm_copy as lstm_run  # noqa: E402
import train_ntm_copy as ntm_run  # noqa: E402

from rnnbook.checkpoints import load_checkpoint  # noqa: E402

TINY = ["--hidden", "16", "--layers", "2", "--max-length", "4", "--eval-every", "5"]


@pytest.fixture
def checkpoints(tmp_path, monkeypatch):
    folder = tmp_path / "checkpoints"
    monkeypatch.setenv("RNNBOOK_CHECKPOINTS", str(folder))
    threads = torch.get_num_threads()
    yield folder
    torch.set_num_threads(threads)
    torch.set_flush_denormal(False)


def test_the_paper_sized_baseline_has_1328136_parameters():
    model = lstm_run.build_model(lstm_run.parse_args([]))
    assert sum(p.numel() for p in model.parameters()) == 1_328_136
    logits, _, internals = model(torch.zeros(2, 7, 9))
    assert logits.shape == (2, 7, 8) and internals is None


def test_a_tiny_run_writes_the_curve_and_a_loadable_checkpoint(checkpoints, tmp_path):
    out = tmp_path / "run"
    assert lstm_run.main([*TINY, "--steps", "10", "--out-dir", str(out)]) == 0
    with (out / "learning_curve.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ntm_run.CSV_COLUMNS
    assert [int(r["step"]) for r in rows] == [0, 5, 10]
    record = json.loads((checkpoints / "lstm-copy.json").read_text())
    args = lstm_run.parse_args([*TINY, "--steps", "10"])
    assert record["config"] == json.loads(json.dumps(lstm_run.lstm_config(args, 10)))
    assert record["summary"]["steps"] == 10
    load_checkpoint(lstm_run.build_model(args), "lstm-copy", lstm_run.lstm_config(args, 10))


def test_resuming_gives_the_weights_of_an_uninterrupted_run(checkpoints, tmp_path):
    assert lstm_run.main([*TINY, "--steps", "10", "--out-dir", str(tmp_path / "a")]) == 0
    straight = json.loads((checkpoints / "lstm-copy.json").read_text())["weights_sha256"]
    resumed_dir = str(tmp_path / "b")
    assert lstm_run.main([*TINY, "--steps", "5", "--out-dir", resumed_dir]) == 0
    assert lstm_run.main([*TINY, "--steps", "10", "--out-dir", resumed_dir, "--resume"]) == 0
    resumed = json.loads((checkpoints / "lstm-copy.json").read_text())["weights_sha256"]
    assert resumed == straight


def test_an_occupied_out_dir_is_refused(checkpoints, tmp_path):
    out = str(tmp_path / "run")
    assert lstm_run.main([*TINY, "--steps", "5", "--out-dir", out]) == 0
    assert lstm_run.main([*TINY, "--steps", "5", "--out-dir", out]) == 1
