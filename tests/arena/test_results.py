"""rnnbook.arena.results: what both pages of Chapter 10 read from the arena's committed runs.

The rows come from the committed checkpoints of delayed recall (the smallest task), re-measured
on a few fresh streams; the curves are the committed learning curves. Nothing is written.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rnnbook.arena import harness
from rnnbook.arena.results import arena_rows, at_step, curve_at, finals, seed_curves
from rnnbook.profiles import resolve_profile
from rnnbook.runs import arena as arena_runs

COMMITTED = Path(__file__).resolve().parents[2] / "checkpoints"


@pytest.fixture(autouse=True)
def committed_checkpoints(monkeypatch):
    monkeypatch.setenv("RNNBOOK_CHECKPOINTS", str(COMMITTED))


def test_curve_at_reads_a_step_and_gives_nan_without_one():
    curve = [{"step": 0.0, "ce": 0.7}, {"step": 250.0, "ce": 0.5}]
    assert curve_at(curve, 250, "ce") == 0.5
    assert math.isnan(curve_at(curve, 500, "ce"))
    assert math.isnan(curve_at([], 0, "ce"))


def test_the_seed_study_has_three_curves_per_model_and_finals_reads_their_last_rows():
    curves = seed_curves("recall")
    assert list(curves) == list(arena_runs.SEED_STUDY["recall"])
    assert all(len(cs) == len(arena_runs.SEEDS) and all(cs) for cs in curves.values())
    last = finals(curves, "accuracy")
    assert last == {m: [c[-1]["accuracy"] for c in cs] for m, cs in curves.items()}
    assert all(0.0 <= v <= 1.0 for values in last.values() for v in values)


def test_rows_of_a_book_task_carry_the_record_the_model_and_the_curve():
    rows = arena_rows("recall", 8, profile=resolve_profile("quick"))
    assert list(rows) == list(arena_runs.BOOK_TASKS["recall"][1])
    for name, r in rows.items():
        assert isinstance(r, harness.Row) and r.model is not None and r.curve
        assert r.steps == arena_runs.BOOK_TASKS["recall"][1][name]
        assert at_step(r, r.steps, "accuracy") == r.curve[-1]["accuracy"]
        assert abs(r.recorded["accuracy"] - r.curve[-1]["accuracy"]) < 1e-6
