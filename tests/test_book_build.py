"""The HTML build is the chapters' test: a failing assert must fail it, visibly.

`make test` executes each chapter once, in the HTML build (see the Makefile). That is only a
test if the book's own execution settings turn a failing cell into a failed build whose log
shows the cell and the traceback. This builds a two-page book in ``tmp_path`` with the
execution settings of the book's ``_config.yml``, once with a failing assert and once without.
"""

from __future__ import annotations

import json
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


def _claims_book(folder: Path, where: str) -> Path:
    """A tiny book with the Claims page and one chapter that states two claims."""
    real = yaml.safe_load((ROOT / "_config.yml").read_text())
    shutil.copy(ROOT / "book" / "_ext" / "claims_page.py", folder / "claims_page.py")
    config = {
        "title": "A tiny book",
        "only_build_toc_files": True,
        "execute": real["execute"],
        "sphinx": {"local_extensions": {"claims_page": "."}},
    }
    (folder / "_config.yml").write_text(yaml.safe_dump(config))
    toc = {
        "format": "jb-book",
        "root": "intro",
        "chapters": [{"file": "chapters/01_tiny"}, {"file": "claims"}],
    }
    (folder / "_toc.yml").write_text(yaml.safe_dump(toc))
    (folder / "intro.md").write_text("# A tiny book\n")
    (folder / "claims.md").write_text("# Claims\n\n```{claims-table}\n```\n")
    (folder / "chapters").mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# A chapter\n\n(tiny-result)=\nThe error rate is low."),
        nbformat.v4.new_code_cell(
            "from rnnbook import claims\n"
            "claims.set_profile('quick')\n"
            f"claims.claim('low-error', 'The error rate is low', value=0.1, op='<', "
            f"threshold=0.2, where={where!r}, source=0.12)\n"
            "claims.claim('three-seeds', 'All three seeds solve it', value=3, op='==', "
            f"threshold=3, where={where!r}, kind='recorded')"
        ),
    ]
    nbformat.write(notebook, folder / "chapters" / "01_tiny.ipynb")
    return folder


def test_the_claims_page_lists_each_claim_linked_to_its_paragraph(tmp_path):
    result = _build(_claims_book(tmp_path, where="tiny-result"))
    assert result.returncode == 0, ANSI.sub("", result.stdout + result.stderr)[-3000:]
    html = tmp_path / "_build" / "html"
    page = (html / "claims.html").read_text()
    assert "This build stated 2 result claims: 1 measured in the run, 1 read from" in page
    assert 'href="chapters/01_tiny.html#tiny-result"' in page
    for shown in ("The error rate is low", "&lt; 0.2", "50.0%", "0.12", "exact", "recorded"):
        assert shown in page, shown
    listed = json.loads((html / "claims.json").read_text())["claims"]
    assert [(c["chapter"], c["id"]) for c in listed] == [
        ("01_tiny", "low-error"),
        ("01_tiny", "three-seeds"),
    ]
    assert listed[0]["margin"] == pytest.approx(0.5) and listed[0]["source"] == 0.12


def test_a_claim_at_an_undefined_label_is_a_build_error(tmp_path):
    result = _build(_claims_book(tmp_path, where="no-such-paragraph"))
    log = ANSI.sub("", result.stdout + result.stderr)
    assert result.returncode != 0
    assert "states a claim at 'no-such-paragraph', which it does not label" in log
