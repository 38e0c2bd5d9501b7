"""The HTML build is the chapters' test: a failing assert must fail it, visibly.

`make test` executes each chapter once, in the HTML build (see the Makefile). That is only a
test if the book's own execution settings turn a failing cell into a failed build whose log
shows the cell and the traceback. This builds a two-page book in ``tmp_path`` with the
execution settings of the book's ``_config.yml``, once with a failing assert and once without.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
JUPYTER_BOOK = Path(sys.executable).parent / "jupyter-book"
ANSI = re.compile(r"\x1b\[[0-9;]*m")

pytestmark = pytest.mark.skipif(
    not JUPYTER_BOOK.is_file() and shutil.which("jupyter-book") is None,
    reason="jupyter-book is not installed",
)


def _book(folder: Path, claim_holds: bool) -> Path:
    """A tiny book with the real execution settings and one chapter that asserts a claim."""
    real = yaml.safe_load((ROOT / "_config.yml").read_text())
    config = {
        "title": "A tiny book",
        "only_build_toc_files": True,
        "execute": real["execute"],
        "sphinx": {
            "config": {
                "nb_execution_raise_on_error": real["sphinx"]["config"][
                    "nb_execution_raise_on_error"
                ]
            }
        },
    }
    (folder / "_config.yml").write_text(yaml.safe_dump(config))
    toc = {"format": "jb-book", "root": "intro", "chapters": [{"file": "chapter"}]}
    (folder / "_toc.yml").write_text(yaml.safe_dump(toc))
    (folder / "intro.md").write_text("# A tiny book\n")
    measured = 0.1 if claim_holds else 0.3
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# A chapter"),
        nbformat.v4.new_code_cell(f"error_rate = {measured}"),
        nbformat.v4.new_code_cell(
            "assert error_rate < 0.2, f'the claimed error rate fails: {error_rate}'"
        ),
        nbformat.v4.new_code_cell("print('the cell after the claim')"),
    ]
    nbformat.write(notebook, folder / "chapter.ipynb")
    return folder


def _build(folder: Path) -> subprocess.CompletedProcess:
    command = str(JUPYTER_BOOK) if JUPYTER_BOOK.is_file() else "jupyter-book"
    return subprocess.run(
        [command, "build", str(folder), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_book_executes_notebooks_and_raises_on_a_failing_cell():
    real = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert real["execute"]["execute_notebooks"] in ("force", "auto", "cache")
    assert real["execute"]["allow_errors"] is False
    assert real["sphinx"]["config"]["nb_execution_raise_on_error"] is True


def test_a_failing_assert_fails_the_build_with_the_cell_and_traceback(tmp_path):
    result = _build(_book(tmp_path, claim_holds=False))
    log = ANSI.sub("", result.stdout + result.stderr)
    assert result.returncode != 0, "a failing assert must fail the build"
    assert "assert error_rate < 0.2" in log, "the log must show the failing cell"
    assert "AssertionError: the claimed error rate fails: 0.3" in log


def test_a_chapter_whose_claims_hold_builds(tmp_path):
    result = _build(_book(tmp_path, claim_holds=True))
    assert result.returncode == 0, ANSI.sub("", result.stdout + result.stderr)[-3000:]
    page = (tmp_path / "_build" / "html" / "chapter.html").read_text()
    assert "the cell after the claim" in page
