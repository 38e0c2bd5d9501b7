"""Build the student edition of the book: the same pages, every exercise solution removed.

The instructor edition is the normal build (``make book``): solutions in collapsed
dropdowns, plus the page with the checkers' code. The student edition is made from it:

1. copy the book's sources into ``_build/student-src/``, taking each chapter from the
   *executed* copy that the instructor build left in ``_build/jupyter_execute/`` (so no
   chapter trains twice);
2. remove every ``{solution}`` block from the chapters' markdown, and drop the pages listed
   in ``INSTRUCTOR_ONLY`` from the table of contents;
3. build it with execution off and sphinx-exercise's ``hide_solutions: true``, into
   ``_build/student/html``.

The notebooks a student downloads from that site carry no solutions either. Launch buttons
point at ``--repository`` (a repository holding ``_build/student-src``); without one they are
left out, because the book's own repository holds the solutions.

Usage: ``python scripts/student_book.py [--repository URL]`` after ``make html``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = ROOT / "_build" / "jupyter_execute"
SOURCES = ROOT / "_build" / "student-src"
OUTPUT = ROOT / "_build" / "student"
INSTRUCTOR_ONLY = ["book/instructors", "book/checkers"]  # pages the student edition omits

# A solution is a fenced {solution} directive; its outer fence is longer than the fences of
# the code blocks inside it, so the closing fence is the same run of backticks.
SOLUTION = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{solution\}[^\n]*\n.*?^(?P=fence)[ \t]*$\n?", re.S | re.M
)


def strip_solutions(text: str) -> tuple[str, int]:
    """Remove every {solution} block from a markdown text; returns (text, blocks removed)."""
    return SOLUTION.subn("", text)


def student_notebook(notebook: dict) -> tuple[dict, int]:
    """A copy of ``notebook`` whose markdown cells hold no solution; returns it and a count."""
    notebook = json.loads(json.dumps(notebook))
    removed = 0
    for cell in notebook["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        source, n = strip_solutions(source)
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


def make_sources(repository: str | None) -> dict[str, int]:
    """Write the student sources; returns the number of solutions removed per chapter."""
    chapters = sorted((ROOT / "chapters").glob("*.ipynb"))
    missing = [c.name for c in chapters if not (EXECUTED / "chapters" / c.name).exists()]
    if missing:
        raise SystemExit(f"run `make html` first: no executed copy of {', '.join(missing)}")
    if SOURCES.exists():
        shutil.rmtree(SOURCES)
    shutil.copytree(ROOT / "book", SOURCES / "book")
    (SOURCES / "chapters").mkdir(parents=True)
    removed = {}
    for chapter in chapters:
        executed = json.loads((EXECUTED / "chapters" / chapter.name).read_text())
        notebook, removed[chapter.stem] = student_notebook(executed)
        (SOURCES / "chapters" / chapter.name).write_text(json.dumps(notebook, indent=1))
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    (SOURCES / "_config.yml").write_text(yaml.safe_dump(student_config(config, repository)))
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    (SOURCES / "_toc.yml").write_text(yaml.safe_dump(without_pages(toc, INSTRUCTOR_ONLY)))
    return removed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", help="repository of the student sources (launch buttons)")
    parser.add_argument("--sources-only", action="store_true", help="write the sources, no build")
    args = parser.parse_args()
    removed = make_sources(args.repository)
    for chapter, n in removed.items():
        print(f"{chapter}: {n} solution(s) removed")
    if args.sources_only:
        return
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    command = [str(jupyter_book), "build", str(SOURCES), "--path-output", str(OUTPUT)]
    subprocess.run([*command, "-W", "-n", "--keep-going"], check=True)
    print(f"The student edition is in {OUTPUT / '_build' / 'html' / 'index.html'}")


if __name__ == "__main__":
    main()
