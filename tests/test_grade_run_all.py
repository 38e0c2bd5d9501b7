""" "Run all" goes past an untouched exercise stub, and the book's build never runs one.

In Jupyter or Colab a reader who runs a whole chapter reaches the exercise cells with their
stubs untouched. Each checker reports such a stub with a printed "not attempted yet" line
and raises nothing, so the cells after it run; a wrong answer still raises CheckFailed. The
HTML build does not execute exercise cells at all (they are tagged ``skip-execution``), so
``nb_execution_raise_on_error`` never sees them either way.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import matplotlib
import pytest
import torch
import yaml

import rnnbook
from rnnbook import grade
from rnnbook.checks import CheckFailed
from rnnbook.checks.grading import NotAttemptedYet

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_untouched_stub_reports_and_lets_the_notebook_go_on(path):
    """Each stub cell of the chapter, run as a reader's "Run all" runs it after the
    chapter's import cell, prints "not attempted yet" and raises nothing."""
    cells = _cells(path)
    namespace: dict = {"rnnbook": rnnbook}  # what the first cell makes importable
    threads = torch.get_num_threads()  # rnnbook.setup sets them, the seed and the theme
    try:
        with torch.random.fork_rng(devices=[]), matplotlib.rc_context():
            for setup in cells[2:4]:  # the parameters and the import cell
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(_source(setup), namespace)
            exercises = grade.checked_exercises({"cells": cells})
            assert exercises
            for exercise in exercises:
                printed = io.StringIO()
                with contextlib.redirect_stdout(printed):
                    exec(exercise.source, namespace)
                assert "not attempted yet" in printed.getvalue(), exercise.label
    finally:
        torch.set_num_threads(threads)


def test_a_wrong_answer_still_fails_loudly():
    from rnnbook.checks import sba

    def layer_surprisal(v, M, pooling):
        return v.reshape(v.shape[0], M, -1).mean(-1)  # no softmax, no minus

    with pytest.raises(CheckFailed):
        sba.module_surprisal(layer_surprisal)


def test_the_not_attempted_line_is_marked_for_the_grader(capsys):
    from rnnbook.checks import zoneout

    def zoneout_step(*args):
        raise NotImplementedError

    result = zoneout.zoneout_step(zoneout_step)
    assert isinstance(result, NotAttemptedYet)
    assert capsys.readouterr().out.strip() == result
    assert "✓" not in result  # never mistaken for a pass


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_book_build_never_runs_an_exercise_cell(path):
    cells = _cells(path)
    for exercise in grade.checked_exercises({"cells": cells}):
        tags = cells[exercise.cell].get("metadata", {}).get("tags", [])
        assert "skip-execution" in tags and "nbval-skip" in tags, exercise.label


def test_the_build_fails_on_errors_and_skips_tagged_cells():
    """The configuration the test above relies on: a failing cell fails the build, and
    myst-nb honours ``skip-execution`` (it does by default; nothing turns it off)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["config"]["nb_execution_raise_on_error"] is True
    assert config["execute"]["allow_errors"] is False
    assert "skip-execution" not in json.dumps(config)  # no option renames or disables the tag


def test_every_exercise_checker_reports_untouched_stubs():
    """Each checker a chapter calls carries grading.own_random_state, which turns an
    untouched stub into a "not attempted yet" line (a new checker without it would stop
    "Run all" at its stub)."""
    import importlib

    for path in CHAPTERS:
        for exercise in grade.checked_exercises({"cells": _cells(path)}):
            module, _, name = exercise.checker.rpartition(".")
            checker = getattr(importlib.import_module(f"rnnbook.checks.{module}"), name)
            assert hasattr(checker, "__wrapped__"), exercise.checker
