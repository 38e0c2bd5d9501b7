"""Build the student edition of the book: the same pages, every exercise solution removed.

The instructor edition is the normal build (``make book``): solutions in collapsed
dropdowns, plus the page with the checkers' code. The student edition is made from it:

1. copy the book's sources into ``_build/student-src/``, taking each chapter as the book
   executed it (so no chapter trains twice): its run in the build's jupyter-cache, which
   ``scripts/execute_chapters.py`` fills before the book renders (so the student edition can
   be built while the book renders), or else the executed copy the instructor build left in
   ``_build/jupyter_execute/``; with what the notebooks need to run on their own, on Binder or
   Colab: the package (``src/``), ``binder/``, ``checkpoints/``, ``pyproject.toml``,
   ``requirements.txt``, ``constraints.txt`` and a README;
2. remove every ``{solution}`` block from the chapters' markdown, and drop the pages listed
   in ``INSTRUCTOR_ONLY`` from the table of contents; keep each ``{only}`` block written
   for the student edition (``student``, ``student and launch_buttons``, ...) and drop those
   written for the book (``not student``), so each edition has its own text;
3. build it with execution off and sphinx-exercise's ``hide_solutions: true``, into
   ``_build/student/_build/html``.

The notebooks a student downloads from that site carry no solutions either. With
``--repository URL`` (a repository holding ``_build/student-src``) the launch buttons, the
clone line of the "How to use" page and the first cell of every chapter (which clones
``BOOK_REPOSITORY`` on Colab) point at that repository; without one the launch buttons are
left out, and the notebooks still name the book's repository, which holds the solutions.

Usage: ``python scripts/student_book.py [--repository URL]`` after ``make html`` (or after
``make chapters``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml
from sphinx.util.tags import Tags

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
import sync_repository_url  # noqa: E402
from execute_chapters import CACHE  # noqa: E402  (the cache the chapters' runs go to)
from executed_copies import executed_copy  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = ROOT / "_build" / "jupyter_execute"
SOURCES = ROOT / "_build" / "student-src"
OUTPUT = ROOT / "_build" / "student"
INSTRUCTOR_ONLY = ["book/instructors", "book/checkers"]  # pages the student edition omits
# What the student sources need besides the pages, to run on Binder and Colab on their own
# (binder/requirements.txt installs "-e ." with "-c ../constraints.txt"; the chapters load
# checkpoints/). data/ is the download cache: only its README goes along.
PACKAGE = ["src", "binder", "checkpoints", "pyproject.toml", "requirements.txt",
           "constraints.txt", ".gitignore", "data/README.md"]  # fmt: skip
LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".ipynb_checkpoints")

# A solution is a fenced {solution} directive; its outer fence is longer than the fences of
# the code blocks inside it, so the closing fence is the same run of backticks.
SOLUTION = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{solution\}[^\n]*\n.*?^(?P=fence)[ \t]*$\n?", re.S | re.M
)


# An {only} block (Sphinx's directive: its content is built only where the expression holds
# for the build's tags). The book's build has no "student" tag; this script decides each
# block for the student edition itself (Jupyter Book's _config.yml has no setting for
# Sphinx's tags), so the student sources hold only the student edition's text.
ONLY = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{only\}[ \t]*(?P<expression>[^\n]*)\n(?P<body>.*?)"
    r"^(?P=fence)[ \t]*$\n?",
    re.S | re.M,
)


def strip_solutions(text: str) -> tuple[str, int]:
    """Remove every {solution} block from a markdown text; returns (text, blocks removed)."""
    return SOLUTION.subn("", text)


def edition_tags(repository: str | None) -> list[str]:
    """The tags the student edition's {only} blocks are decided with."""
    return ["student", *(["launch_buttons"] if repository else [])]


def keep_edition(text: str, tags: list[str]) -> str:
    """``text`` with each {only} block replaced by its content where its expression holds
    for ``tags``, and removed where it does not (nested blocks, with longer outer fences,
    are decided in turn)."""
    tags = Tags(tags)

    def decide(match: re.Match) -> str:
        expression = match["expression"].strip()
        if not expression:
            raise ValueError(f"an {{only}} block without an expression: {match[0][:80]!r}")
        return match["body"] if tags.eval_condition(expression) else ""

    while True:
        text, n = ONLY.subn(decide, text)
        if not n:
            return text


def student_notebook(notebook: dict, tags: list[str] | None = None) -> tuple[dict, int]:
    """A copy of ``notebook`` whose markdown cells hold no solution, and only the student
    edition's {only} blocks (``tags``: see :func:`edition_tags`); returns it and a count."""
    notebook = json.loads(json.dumps(notebook))
    removed = 0
    for cell in notebook["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        source, n = strip_solutions(source)
        source = keep_edition(source, tags or edition_tags(None))
        cell["source"], removed = source, removed + n
    return notebook, removed


def without_pages(toc, pages: list[str]):
    """The table of contents with the given files removed, wherever they sit."""
    if isinstance(toc, dict):
        if toc.get("file") in pages:
            return None
        return {k: without_pages(v, pages) for k, v in toc.items()}
    if isinstance(toc, list):
        return [e for e in (without_pages(x, pages) for x in toc) if e is not None]
    return toc


def student_config(config: dict, repository: str | None) -> dict:
    config = json.loads(json.dumps(config))
    config["title"] = f"{config['title']} (student edition)"
    config["execute"]["execute_notebooks"] = "off"  # the chapters come executed
    config["sphinx"]["config"]["hide_solutions"] = True
    config["exclude_patterns"] = [
        *config["exclude_patterns"],
        *(f"{p}.md" for p in INSTRUCTOR_ONLY),
    ]
    if repository:
        config["repository"]["url"] = repository
    else:
        config.pop("launch_buttons", None)
        config["html"]["use_repository_button"] = False
        config["html"]["use_issues_button"] = False
    return config


def dump_yaml(data) -> str:
    """YAML in the order of ``data``: the order of _config.yml matters (the widget manager's
    scripts in nb_ipywidgets_js load in it: require.js before embed-amd.js), and
    yaml.safe_dump's default sorts the keys."""
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def readme(repository: str | None) -> str:
    where = repository or "this repository"
    return f"""# Recurrent Neural Networks: memory, time and skipping (student edition)

The chapters of the book as notebooks, with their exercises and without the solutions, and
the book's package `rnnbook` (`src/`) that they import.

- **Colab:** open a notebook of `chapters/` from {where}; its first cell clones the
  repository and puts `rnnbook` on the path.
- **Binder:** `binder/` installs a CPU-only PyTorch and the package.
- **Your machine:** `python -m pip install -e .`, then open `chapters/` in Jupyter.

Made by `scripts/student_book.py` from the book's sources; `_config.yml` and `_toc.yml`
build the student edition's HTML with Jupyter Book 1.
"""


def executed_chapter(chapter: Path, executed: Path = EXECUTED, cache: Path = CACHE):
    """The chapter as the book executed it, as a JSON dict: the cache's run of its present
    code merged into it (as the build merges it, book/_ext/executed_copies.py), or else its
    executed copy in ``executed / "chapters"``; None if there is neither."""
    merged = executed_copy(chapter, str(cache)) if cache.is_dir() else None
    if merged is not None:
        return json.loads(nbformat.writes(merged))
    copy = executed / "chapters" / chapter.name
    return json.loads(copy.read_text(encoding="utf-8")) if copy.is_file() else None


def make_sources(
    repository: str | None,
    sources: Path = SOURCES,
    executed: Path = EXECUTED,
    cache: Path = CACHE,
) -> dict[str, int]:
    """Write the student sources into ``sources``, each chapter as executed
    (:func:`executed_chapter`); returns the number of solutions removed per chapter."""
    chapters = sorted((ROOT / "chapters").glob("*.ipynb"))
    notebooks = {c.name: executed_chapter(c, executed, cache) for c in chapters}
    missing = [name for name, notebook in notebooks.items() if notebook is None]
    if missing:
        raise SystemExit(
            f"run `make chapters` or `make html` first: no run of {', '.join(missing)} in "
            f"{cache} and no executed copy in {executed / 'chapters'}"
        )
    if sources.exists():
        shutil.rmtree(sources)
    tags = edition_tags(repository)
    shutil.copytree(ROOT / "book", sources / "book", ignore=LEFT_OUT)
    for page in (sources / "book").rglob("*.md"):
        if "_vendor" not in page.parts:
            text = page.read_text(encoding="utf-8")
            page.write_text(keep_edition(text, tags), encoding="utf-8")
    for name in PACKAGE:
        source, target = ROOT / name, sources / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=LEFT_OUT)
        else:
            shutil.copy2(source, target)
    (sources / "README.md").write_text(readme(repository), encoding="utf-8")
    (sources / "chapters").mkdir(parents=True)
    removed = {}
    for chapter in chapters:
        notebook, removed[chapter.stem] = student_notebook(notebooks[chapter.name], tags)
        (sources / "chapters" / chapter.name).write_text(json.dumps(notebook, indent=1))
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    (sources / "_config.yml").write_text(dump_yaml(student_config(config, repository)))
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    (sources / "_toc.yml").write_text(dump_yaml(without_pages(toc, INSTRUCTOR_ONLY)))
    if repository:
        # the chapters' first cell (BOOK_REPOSITORY, cloned on Colab) and the clone line
        sync_repository_url.write_url(repository, sources)
    return removed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repository",
        help="the repository the student sources are published in: the launch buttons and "
        "the notebooks' first cell (cloned on Colab) point at it",
    )
    parser.add_argument("--sources-only", action="store_true", help="write the sources, no build")
    args = parser.parse_args()
    removed = make_sources(args.repository)
    for chapter, n in removed.items():
        print(f"{chapter}: {n} solution(s) removed")
    if not args.repository:
        book = sync_repository_url.configured_url()
        print(
            f"no --repository: no launch buttons, and the notebooks' first cell still clones "
            f"{book} on Colab, the book's repository, which holds the solutions"
        )
    if args.sources_only:
        return
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    command = [str(jupyter_book), "build", str(SOURCES), "--path-output", str(OUTPUT)]
    subprocess.run([*command, "-W", "-n", "--keep-going"], check=True)
    print(f"The student edition is in {OUTPUT / '_build' / 'html' / 'index.html'}")


if __name__ == "__main__":
    main()
