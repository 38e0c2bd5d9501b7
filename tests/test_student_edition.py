"""The student edition holds every exercise and no solution.

The first tests run the stripping on the chapters themselves (fast, always). The last ones
read the built student edition and run only where it exists (``make student-check`` builds
it first; a missing build there is an error, not a skip).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("student_book", ROOT / "scripts" / "student_book.py")
student_book = importlib.util.module_from_spec(spec)
spec.loader.exec_module(student_book)

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
STUDENT_HTML = ROOT / "_build" / "student" / "_build" / "html"


def markdown(notebook: dict) -> str:
    return "\n\n".join(
        "".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"
    )


def solution_code(notebook: dict) -> list[str]:
    """The first code line of every solution, as a fingerprint of solution text."""
    lines = []
    for block in student_book.SOLUTION.finditer(markdown(notebook)):
        code = re.search(r"```python\n(?P<code>.*?)```", block[0], re.S)
        if code:
            lines.append(next(line for line in code["code"].splitlines() if line.strip()))
    return lines


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_stripping_removes_every_solution_and_keeps_every_exercise(chapter):
    original = json.loads(chapter.read_text())
    stripped, removed = student_book.student_notebook(original)
    text = markdown(stripped)
    assert removed == markdown(original).count("{solution}") > 0
    assert "{solution}" not in text
    assert text.count("{exercise}") == markdown(original).count("{exercise}") > 0
    code = [c["source"] for c in original["cells"] if c["cell_type"] == "code"]
    assert code == [c["source"] for c in stripped["cells"] if c["cell_type"] == "code"]


def test_stripping_handles_nested_fences():
    text = (
        "before\n\n````{solution} ex-a\n:class: dropdown\n\n```python\nx = 1\n```\n````\n\nafter\n"
    )
    stripped, n = student_book.strip_solutions(text)
    assert n == 1 and stripped == "before\n\n\nafter\n"


def test_the_student_toc_leaves_out_instructor_pages():
    toc = {"parts": [{"chapters": [{"file": "book/checkers"}, {"file": "chapters/01"}]}]}
    assert student_book.without_pages(toc, ["book/checkers"]) == {
        "parts": [{"chapters": [{"file": "chapters/01"}]}]
    }


def _student_build_is_current() -> bool:
    """A student build exists and is newer than every chapter (else it shows old chapters)."""
    index = STUDENT_HTML / "index.html"
    if not index.exists():
        return False
    return all(c.stat().st_mtime <= index.stat().st_mtime for c in CHAPTERS)


built = pytest.mark.skipif(
    not _student_build_is_current() and not os.environ.get("RNNBOOK_REQUIRE_STUDENT_BUILD"),
    reason="no student edition built since the chapters last changed (make student-book)",
)


@built
def test_the_built_student_edition_has_exercises_and_no_solution_text():
    pages = list(STUDENT_HTML.rglob("*.html"))
    assert pages, f"no pages in {STUDENT_HTML}"
    fingerprints = [line for c in CHAPTERS for line in solution_code(json.loads(c.read_text()))]
    assert fingerprints
    html = {page: page.read_text() for page in pages}
    exercises = sum(text.count('class="exercise') for text in html.values())
    assert exercises == sum(
        markdown(json.loads(c.read_text())).count("{exercise}") for c in CHAPTERS
    )
    for page, text in html.items():
        assert 'class="solution' not in text, page
        for line in fingerprints:
            assert line not in text, (page, line)
    assert not (STUDENT_HTML / "book" / "checkers.html").exists()


@built
def test_the_student_downloads_hold_no_solution():
    notebooks = list((STUDENT_HTML / "_sources").rglob("*.ipynb"))
    assert notebooks, "the student edition offers no notebook downloads"
    for notebook in notebooks:
        assert "{solution}" not in notebook.read_text(), notebook
