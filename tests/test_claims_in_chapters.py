"""The chapters' claims, read from their sources: each names its paragraph, and is a result.

The Claims page resolves every claim's ``where`` label at build time; this finds a missing
label in a second, without building. It also refuses claims that cannot fail because their
value is a constant, and ids that two claims of one chapter share; and it counts them.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from rnnbook.claims import KINDS

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
TARGET = re.compile(r"^\(([\w-]+)\)=\s*$", re.MULTILINE)


def _cells(path: Path, kind: str) -> list[str]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return [
        c["source"] if isinstance(c["source"], str) else "".join(c["source"])
        for c in notebook["cells"]
        if c["cell_type"] == kind
    ]


def claim_calls(path: Path) -> list[ast.Call]:
    """Every ``claims.claim(...)`` call in the chapter's code cells."""
    calls = []
    for source in _cells(path, "code"):
        code = "\n".join(
            "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
        )
        for node in ast.walk(ast.parse(code)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "claim"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "claims"
            ):
                calls.append(node)
    return calls


def _keyword(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_claim_names_a_paragraph_of_its_chapter(path):
    labels = {m for source in _cells(path, "markdown") for m in TARGET.findall(source)}
    missing = []
    for call in claim_calls(path):
        where = _keyword(call, "where")
        if not isinstance(where, ast.Constant) or where.value not in labels:
            missing.append((call.lineno, ast.unparse(where) if where is not None else None))
    assert not missing, (
        f"{path.name}: claims whose where= is not a `(label)=` target of a markdown cell of "
        f"the chapter (line in its cell, where): {missing}"
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_claims_have_distinct_ids_known_kinds_and_values_that_can_move(path):
    ids, problems = [], []
    for call in claim_calls(path):
        first = call.args[0] if call.args else _keyword(call, "id")
        if isinstance(first, ast.Constant):
            ids.append(first.value)
        kind = _keyword(call, "kind")
        if kind is not None and not (isinstance(kind, ast.Constant) and kind.value in KINDS):
            problems.append(f"kind {ast.unparse(kind)} is not one of {KINDS}")
        value = _keyword(call, "value")
        if value is None or isinstance(value, ast.Constant):
            problems.append(f"claim {ast.unparse(first)} has a constant value: it cannot fail")
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    assert not repeated, f"{path.name}: claim ids used twice: {repeated}"
    assert not problems, f"{path.name}: {problems}"


def test_the_lint_finds_a_claim_at_a_missing_label(tmp_path):
    notebook = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": "(ch-x-result)=\nIt works."},
            {
                "cell_type": "code",
                "metadata": {},
                "source": "claims.claim('a', 'It works', value=v, op='<', threshold=1, "
                "where='ch-x-elsewhere')",
            },
        ]
    }
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps(notebook))
    with pytest.raises(AssertionError, match="ch-x-elsewhere"):
        test_every_claim_names_a_paragraph_of_its_chapter(path)
    notebook["cells"][1]["source"] = notebook["cells"][1]["source"].replace("elsewhere", "result")
    path.write_text(json.dumps(notebook))
    test_every_claim_names_a_paragraph_of_its_chapter(path)


def test_every_chapter_states_its_results_as_claims():
    """The book's results are claims (the Claims page), not bare asserts: each chapter has
    some, the book 200 or more."""
    counts = {path.stem: len(claim_calls(path)) for path in CHAPTERS}
    assert all(n >= 10 for n in counts.values()), counts
    assert sum(counts.values()) >= 200, counts


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_claim_in_a_figure_cell(path):
    """myst-nb makes every display output of a cell with figure metadata a figure with the
    cell's name, a claim's line included (a duplicate target, an error of the build)."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    found = [
        index
        for index, cell in enumerate(notebook["cells"])
        if cell["cell_type"] == "code"
        and "figure" in cell.get("metadata", {}).get("mystnb", {})
        and "claims.claim(" in "".join(cell["source"])
    ]
    assert not found, f"{path.name}: cells with figure metadata that state claims: {found}"
