"""Every committed checkpoint matches its run, the code of today and its recorded results.

A chapter loads these in the quick profile and would print a warning on the page if the
model's code had changed since the checkpoint was made; this test fails first, in CI, and
says how to fix it. The results are re-measured here, so a record cannot drift from its
weights either.

The second run of ``make unit`` (``--rounding-run``, another CPU's rounding) re-evaluates one
checkpoint of each family, the checkpoints that differ only in numbers (a keep rate, a
threshold): their evaluations run the same code through the same kernels. The first run
re-evaluates every one.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from rnnbook import longrun
from rnnbook.checkpoints import _code_version, split_state, weights_sha256
from rnnbook.runs import book_runs

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "checkpoints"
RECORDS = sorted(COMMITTED.glob("*.json"))
RUNS = book_runs()


@functools.cache
def family(name: str) -> tuple:
    """What checkpoint ``name``'s evaluation computes with, numbers aside: its model's code,
    its evaluation's code and its configuration with every number written ``#``."""
    run = RUNS[name]()
    evaluate = getattr(run.evaluate, "func", run.evaluate)  # a functools.partial or a function
    record = json.loads((COMMITTED / f"{name}.json").read_text())

    def numbers_aside(value):
        if isinstance(value, dict):
            return tuple(sorted((key, numbers_aside(v)) for key, v in value.items()))
        if isinstance(value, (list, tuple)):
            return tuple(numbers_aside(v) for v in value)
        if isinstance(value, bool) or value is None:
            return value
        return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "#", str(value))

    code = (evaluate.__module__, evaluate.__qualname__, evaluate.__code__.co_firstlineno)
    return record["code"]["model_code_sha256"], code, numbers_aside(run.config)


def first_of_its_family(name: str) -> str:
    """The checkpoint that the rounding run re-evaluates for ``name``'s family (by name)."""
    return min(other for other in RUNS if family(other) == family(name))


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
def test_the_checkpoint_reproduces_its_recorded_results(name, request):
    if request.config.getoption("rounding_run") and first_of_its_family(name) != name:
        pytest.skip(
            f"the rounding run re-evaluates one checkpoint of a family that differs only in "
            f"numbers, here {first_of_its_family(name)}; the first run re-evaluates {name}"
        )
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


def test_a_family_of_checkpoints_differs_only_in_numbers():
    """The families the rounding run samples: no two checkpoints of another model, task or
    variant share one (their names then differ in more than numbers), and some are shared."""
    families: dict[tuple, list[str]] = {}
    for name in sorted(RUNS):
        families.setdefault(family(name), []).append(name)
    for names in families.values():
        assert len({re.sub(r"\d+(\.\d+)?", "#", name) for name in names}) == 1, names
    shared = [names for names in families.values() if len(names) > 1]
    assert any(len(names) >= 5 for names in shared), shared  # the ABS readers' keep rates
