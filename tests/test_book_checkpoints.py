"""Every committed checkpoint matches its run, the code of today and its recorded results.

A chapter loads these in the quick profile and would print a warning on the page if the
model's code had changed since the checkpoint was made; this test fails first, in CI, and
says how to fix it. The results are re-measured here, so a record cannot drift from its
weights either.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rnnbook import longrun
from rnnbook.checkpoints import _code_version, split_state, weights_sha256
from rnnbook.runs import book_runs

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "checkpoints"
RECORDS = sorted(COMMITTED.glob("*.json"))
RUNS = book_runs()


@pytest.fixture(autouse=True)
def committed_checkpoints(monkeypatch, request):
    monkeypatch.setenv("RNNBOOK_CHECKPOINTS", str(COMMITTED))
    if (
        "ptb" in request.node.name or "cbt" in request.node.name
    ):  # Chapter 2's language model is evaluated on PTB valid
        monkeypatch.setenv("RNNBOOK_DATA_MIRROR", str(request.getfixturevalue("mirror")))


def test_every_committed_checkpoint_has_its_run_and_every_run_its_checkpoint():
    assert {path.stem for path in RECORDS} == set(RUNS)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_record_is_the_run_of_today(name):
    run = RUNS[name]()
    record = json.loads((COMMITTED / f"{name}.json").read_text())
    assert record["config"] == run.checkpoint_config(run.steps)
    assert record["code"] == _code_version(run.build_model()), (
        f"the code of {name}'s model changed since its checkpoint was made. If the change "
        f"leaves the arithmetic alone, run `python -m rnnbook.runs refresh {name} WHY` (it "
        "checks that the recorded results still reproduce); otherwise retrain it with the "
        "chapter's full profile"
    )


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_checkpoint_reproduces_its_recorded_results(name):
    model, record, mismatches = longrun.reproduce(RUNS[name]())
    saved, rebuilt = split_state(model)  # the frozen parameters are drawn again, not stored
    assert weights_sha256(saved) == record["weights_sha256"]
    assert set(rebuilt) == set(record.get("rebuilt", {}).get("names", []))
    assert not mismatches, f"{name}: recorded and measured now: {mismatches}"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_no_record_names_a_machine_folder(name):
    text = (COMMITTED / f"{name}.json").read_text()
    for folder in ("/work/", "/home/", "/root/", "/tmp/", str(ROOT)):
        assert folder not in text
