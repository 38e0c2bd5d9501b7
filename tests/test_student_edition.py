"""The student edition holds every exercise and no solution, and runs on its own.

The first tests run the stripping on the chapters themselves (fast, always), write the
student sources from the chapters into a temporary folder (the repository rewritten, the
package beside them) and run a chapter's first cell there. The last ones read the built
student edition and run only where it exists (``make student-check`` builds it first; a
missing build there is an error, not a skip).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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


# --- the configuration keeps the book's order ----------------------------------------------


def _key_orders(data, path=()):
    """``{path: [keys in order]}`` for every mapping inside ``data``."""
    orders = {}
    if isinstance(data, dict):
        orders[path] = list(data)
        for key, value in data.items():
            orders.update(_key_orders(value, (*path, key)))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            orders.update(_key_orders(value, (*path, i)))
    return orders


@pytest.mark.parametrize("repository", [None, "https://github.com/you/course"])
def test_the_student_config_keeps_the_order_of_the_book_config(repository):
    """The widget manager's scripts load in the order of nb_ipywidgets_js: RequireJS first.
    Sorted keys put embed-amd.js first ("define is not defined": no widget rendered)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    written = student_book.dump_yaml(student_book.student_config(config, repository))
    student = yaml.safe_load(written)
    scripts = list(student["sphinx"]["config"]["nb_ipywidgets_js"])
    assert scripts == list(config["sphinx"]["config"]["nb_ipywidgets_js"])
    assert scripts.index("widgets/require.js") < scripts.index("widgets/embed-amd.js")
    book_orders, student_orders = _key_orders(config), _key_orders(student)
    for path, keys in student_orders.items():
        shared = [k for k in book_orders.get(path, []) if k in keys]
        assert [k for k in keys if k in shared] == shared, path
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    stripped = student_book.without_pages(toc, student_book.INSTRUCTOR_ONLY)
    assert list(yaml.safe_load(student_book.dump_yaml(stripped))) == list(toc)


# --- each edition its own text ---------------------------------------------------------------


def test_keep_edition_decides_each_only_block():
    text = (
        "a\n```{only} not student\nbook\n```\n"
        "```{only} student\nstudent\n```\n"
        ":::{only} student and launch_buttons\nrocket\n:::\n"
        "````{only} student\nouter\n```{only} not launch_buttons\ninner\n```\n````\nz\n"
    )
    assert student_book.keep_edition(text, ["student"]) == "a\nstudent\nouter\ninner\nz\n"
    assert (
        student_book.keep_edition(text, ["student", "launch_buttons"])
        == "a\nstudent\nrocket\nouter\nz\n"
    )
    with pytest.raises(ValueError, match="without an expression"):
        student_book.keep_edition("```{only}\nx\n```\n", ["student"])


BOOK_PAGES = sorted((ROOT / "book").glob("*.md"))


def _edition_text(page: Path, tags: list[str] | None) -> str:
    """The page as an edition shows it: the book's (Sphinx: no "student" tag), or the
    student edition's with ``tags``."""
    text = student_book.keep_edition(page.read_text(encoding="utf-8"), tags or ["html"])
    return re.sub(r"^%.*\n", "", text, flags=re.M)  # MyST's comments are not shown


@pytest.mark.parametrize("repository", [None, "https://github.com/you/course"])
def test_the_student_pages_speak_of_no_solution_toggle_and_no_missing_button(repository):
    tags = student_book.edition_tags(repository)
    for page in BOOK_PAGES:
        if page.stem in {Path(p).name for p in student_book.INSTRUCTOR_ONLY}:
            continue
        text = _edition_text(page, tags)
        assert not re.search(r"^[`:]{3,}\{only\}", text, re.M), page
        assert not re.search(r"toggle|dropdown", text, re.I), page
        if not repository:
            assert "rocket" not in text.lower(), page
    how_to_use = _edition_text(ROOT / "book" / "how_to_use.md", tags)
    assert "student edition" in how_to_use and "no solutions" in how_to_use
    assert ("rocket icon" in how_to_use) == bool(repository)


def test_the_book_pages_keep_their_own_text():
    how_to_use = _edition_text(ROOT / "book" / "how_to_use.md", None)
    assert "rocket icon" in how_to_use and "hidden behind a toggle" in how_to_use
    assert "student edition" not in how_to_use and "make test" in how_to_use
    assert "behind a toggle" in _edition_text(ROOT / "book" / "intro.md", None)


# --- the student sources: their own repository, their own package --------------------------

COURSE = "https://github.com/you/course"
BOOK_URL = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


@pytest.fixture(scope="module")
def student_sources(tmp_path_factory) -> Path:
    """Student sources written from the chapters themselves (as if they were the executed
    ones) for the repository COURSE."""
    sources = tmp_path_factory.mktemp("student") / "src"
    student_book.make_sources(COURSE, sources=sources, executed=ROOT)
    return sources


def test_the_student_sources_name_the_course_repository_only(student_sources):
    assert student_book.sync_repository_url.stale_copies(COURSE, student_sources) == {}
    for chapter in CHAPTERS:
        notebook = json.loads((student_sources / "chapters" / chapter.name).read_text())
        first = "".join(next(c for c in notebook["cells"] if c["cell_type"] == "code")["source"])
        assert f'BOOK_REPOSITORY = "{COURSE}"' in first, chapter.name
    config = yaml.safe_load((student_sources / "_config.yml").read_text())
    assert config["repository"]["url"] == COURSE and config["launch_buttons"]
    leaks = [
        path.relative_to(student_sources)
        for path in student_sources.rglob("*")
        if path.is_file()
        and "_vendor" not in path.parts
        and path.suffix in {".ipynb", ".md", ".yml", ".txt", ".py", ".toml", ".cfg"}
        and BOOK_URL in path.read_text(encoding="utf-8", errors="replace")
    ]
    assert not leaks, f"the book's repository (which holds the solutions) is named in {leaks}"


def test_the_student_sources_hold_what_binder_and_colab_need(student_sources):
    for name in student_book.PACKAGE:
        assert (student_sources / name).exists(), name
    assert (student_sources / "src" / "rnnbook" / "__init__.py").is_file()
    assert (student_sources / "README.md").is_file()  # pyproject.toml's readme
    assert not list(student_sources.rglob("__pycache__"))
    assert not list(student_sources.rglob("*.egg-info"))
    # binder/requirements.txt: "-c ../constraints.txt" from binder/, "-e ." from the root
    binder = (student_sources / "binder" / "requirements.txt").read_text()
    for line in binder.splitlines():
        if line.startswith("-c "):
            assert (student_sources / "binder" / line[3:].strip()).is_file(), line
        if line.startswith("-e "):
            assert (student_sources / line[3:].strip() / "pyproject.toml").is_file(), line
    # every checkpoint a chapter can load is there
    book_checkpoints = {p.name for p in (ROOT / "checkpoints").iterdir() if p.is_file()}
    assert {p.name for p in (student_sources / "checkpoints").iterdir()} >= book_checkpoints


def test_a_student_notebook_imports_the_package_of_its_own_sources(student_sources):
    """The first cell of a student chapter, run in the student sources' chapters/ by a
    Python in which rnnbook is not installed (as on Colab after the clone, or Binder before
    the install), finds the package in those sources."""
    notebook = json.loads((student_sources / "chapters" / CHAPTERS[0].name).read_text())
    first = "".join(next(c for c in notebook["cells"] if c["cell_type"] == "code")["source"])
    # the cell ends by importing rnnbook (and with it torch, seconds): ask where it would
    # come from instead
    assert first.rstrip().endswith("\nimport rnnbook"), first[-200:]
    first = first.rstrip().removesuffix("import rnnbook")
    book_src = str(ROOT / "src")
    code = (
        "import sys\n"
        # hide this checkout's installed (editable) rnnbook
        f"sys.path[:] = [p for p in sys.path if not p.startswith({book_src!r})]\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
        "import importlib.util\n"
        "assert importlib.util.find_spec('rnnbook') is None, 'rnnbook is still importable'\n"
        f"exec(compile({first!r}, 'first cell', 'exec'))\n"
        "print(importlib.util.find_spec('rnnbook').origin)\n"
        "print(BOOK_REPOSITORY)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=student_sources / "chapters",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    module, repository = out.stdout.split()[-2:]
    assert Path(module) == student_sources / "src" / "rnnbook" / "__init__.py"
    assert repository == COURSE


def test_without_a_repository_the_notebooks_keep_the_book_url_and_no_launch_buttons(tmp_path):
    config = student_book.student_config(yaml.safe_load((ROOT / "_config.yml").read_text()), None)
    assert "launch_buttons" not in config and not config["html"]["use_repository_button"]


# --- the built student edition --------------------------------------------------------------


def _student_build_is_current() -> bool:
    """A student build exists and is newer than every chapter (else it shows old chapters)."""
    index = STUDENT_HTML / "index.html"
    if not index.exists():
        return False
    return all(c.stat().st_mtime <= index.stat().st_mtime for c in CHAPTERS)


# `make test` runs the unit tests beside the build that rewrites the student edition
# (RNNBOOK_SKIP_STUDENT_BUILD=1): these tests then wait for `make student-check`, which runs
# them on the new edition, instead of reading one that is being rewritten.
built = pytest.mark.skipif(
    (not _student_build_is_current() or bool(os.environ.get("RNNBOOK_SKIP_STUDENT_BUILD")))
    and not os.environ.get("RNNBOOK_REQUIRE_STUDENT_BUILD"),
    reason="no student edition built since the chapters last changed (make student-book), "
    "or one being rebuilt beside this run (RNNBOOK_SKIP_STUDENT_BUILD)",
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


@built
def test_the_built_student_edition_loads_requirejs_before_the_widget_manager():
    """The browser suite sees the consequence (no widget renders); this names the cause."""
    pages = [p for p in STUDENT_HTML.rglob("*.html") if "widget-view+json" in p.read_text()]
    assert pages, "no page of the student edition shows a widget"
    for page in pages:
        html = page.read_text()
        require = html.find("widgets/require.js")
        embed = html.find("widgets/embed-amd.js")
        assert 0 <= require < embed, f"{page}: embed-amd.js loads before require.js"
