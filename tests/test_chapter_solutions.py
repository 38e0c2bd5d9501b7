"""Every exercise's reference solution, taken from the chapter itself, passes its checker.

Solutions live in the notebooks as ``{solution}`` blocks; each holds one ``python`` block
that ends by calling its checker. Running them here catches a solution or a checker that
drifted, without copying either into the tests.
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from rnnbook import checks

CHAPTERS = sorted((Path(__file__).parents[1] / "chapters").glob("*.ipynb"))
# The outer fence is longer than the python fence inside it; match the same length to close.
SOLUTION = re.compile(
    r"(?P<fence>`{3,})\{solution\}\s*(?P<label>\S+)(?P<body>.*?)\n(?P=fence)\s*$", re.S | re.M
)
EXERCISE = re.compile(r"`{3,}\{exercise\}.*?\n:label:\s*(?P<label>\S+)", re.S)
PYTHON = re.compile(r"```python\n(?P<code>.*?)```", re.S)


def markdown(notebook: Path) -> str:
    cells = json.loads(notebook.read_text())["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def solutions():
    for notebook in CHAPTERS:
        for match in SOLUTION.finditer(markdown(notebook)):
            for code in PYTHON.findall(match["body"]):
                yield pytest.param(code, id=f"{notebook.stem}:{match['label']}")


def test_chapters_exist():
    assert CHAPTERS, "no chapter notebooks found"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.stem)
def test_every_exercise_has_a_solution(notebook):
    text = markdown(notebook)
    exercises = {m["label"] for m in EXERCISE.finditer(text)}
    solved = {m["label"] for m in SOLUTION.finditer(text)}
    assert exercises, f"{notebook.name} has no exercises"
    assert exercises == solved, f"exercises without solution: {exercises - solved}"


def test_solutions_are_found():
    assert list(solutions()), "no code solutions found in the chapters"


@pytest.mark.parametrize("code", list(solutions()))
def test_reference_solution_passes_its_checker(code, capsys):
    assert "checks." in code, "a code solution must end by calling its checker"
    exec(code, {"torch": torch, "np": np, "checks": checks})
    assert "✓" in capsys.readouterr().out
