"""scripts/execute_chapters.py: the chapters it finds, and a run the HTML build will reuse."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_cache import get_cache

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # an importable module: the workers import it
import execute_chapters  # noqa: E402

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import executed_copies  # noqa: E402


def test_it_finds_every_chapter_notebook_in_the_order_of_the_toc():
    found = execute_chapters.book_chapters(ROOT)
    assert sorted(found) == sorted((ROOT / "chapters").glob("*.ipynb"))
    assert found[0].name == "01_rnn_bptt.ipynb"
    assert found.index(ROOT / "chapters/03_ntm.ipynb") < found.index(ROOT / "chapters/04_lmu.ipynb")


def test_it_uses_the_cell_timeout_and_allow_errors_of_the_config():
    settings = execute_chapters.execution_settings(ROOT)
    assert settings == {"timeout": 600, "allow_errors": False}


@pytest.fixture(scope="module")
def cached_page(tmp_path_factory):
    """A one-cell page run by the script into a cache of its own: (page, cache folder)."""
    folder = tmp_path_factory.mktemp("cached")
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# A page"), nbformat.v4.new_code_cell("print(6 * 7)")]
    )
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    path = folder / "page.ipynb"
    nbformat.write(notebook, path)
    cache_dir = folder / "cache"
    code = execute_chapters.main([str(path), "--jobs", "2", "--cache", str(cache_dir)])
    assert code == 0
    return path, cache_dir


def test_a_run_it_caches_is_the_one_the_build_finds(cached_page):
    path, cache_dir = cached_page
    cache = get_cache(str(cache_dir))
    as_myst_nb_reads_it = nbformat.read(path, as_version=4)
    record = cache.match_cache_notebook(as_myst_nb_reads_it)
    _, merged = cache.merge_match_into_notebook(as_myst_nb_reads_it)
    assert record is not None
    assert merged.cells[1].outputs[0]["text"] == "42\n"


def test_the_build_writes_the_cached_run_as_the_executed_copy(cached_page, tmp_path):
    """book/_ext/executed_copies.py: what the claims page, the status page and the student
    edition read from _build/jupyter_execute is the run, outputs and all."""
    path, cache_dir = cached_page
    executed = executed_copies.executed_copy(path, str(cache_dir))
    assert executed.cells[1].outputs[0]["text"] == "42\n"
    assert executed.cells[0].source == "# A page"
    changed = nbformat.read(path, as_version=4)
    changed.cells[1].source = "print(6 * 9)"
    nbformat.write(changed, tmp_path / "page.ipynb")
    assert executed_copies.executed_copy(tmp_path / "page.ipynb", str(cache_dir)) is None


def test_the_student_edition_takes_the_run_from_the_cache_before_the_build(cached_page, tmp_path):
    """scripts/student_book.py builds the student edition beside the book's build (`make
    test`): it reads each chapter's run from the cache, as the build merges it, and falls
    back to the build's executed copy; with neither, there is no chapter to give."""
    import student_book

    path, cache_dir = cached_page
    nowhere = tmp_path / "jupyter_execute"
    from_cache = student_book.executed_chapter(path, executed=nowhere, cache=cache_dir)
    assert from_cache == json.loads(
        nbformat.writes(executed_copies.executed_copy(path, str(cache_dir)))
    )
    assert "".join(from_cache["cells"][1]["outputs"][0]["text"]) == "42\n"
    copy = nowhere / "chapters" / path.name
    copy.parent.mkdir(parents=True)
    copy.write_text(nbformat.writes(nbformat.v4.new_notebook(cells=[])), encoding="utf-8")
    no_cache = tmp_path / "no-cache"
    assert student_book.executed_chapter(path, executed=nowhere, cache=no_cache)["cells"] == []
    copy.unlink()
    assert student_book.executed_chapter(path, executed=nowhere, cache=no_cache) is None


def test_a_failing_chapter_fails_the_run_and_is_not_cached(tmp_path, capsys):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("assert 1 == 2, 'no'")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    path = tmp_path / "broken.ipynb"
    nbformat.write(notebook, path)
    cache_dir = tmp_path / "cache"
    assert execute_chapters.main([str(path), "--jobs", "1", "--cache", str(cache_dir)]) == 1
    assert "AssertionError" in capsys.readouterr().err
    with pytest.raises(KeyError):  # no record of it: the build would execute it (and fail)
        get_cache(str(cache_dir)).match_cache_notebook(nbformat.read(path, 4))


def test_it_refuses_a_number_of_jobs_below_one():
    with pytest.raises(SystemExit):
        execute_chapters.main(["--jobs", "0"])
