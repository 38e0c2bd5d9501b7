"""Copy the book's repository URL from ``_config.yml`` to every place that needs it.

``_config.yml`` (``repository.url``) is the one place the URL is set. Two places cannot read
it at run time and keep a copy: the first code cell of each chapter, which clones the
repository on Colab before ``rnnbook`` is importable (``BOOK_REPOSITORY = "..."``), and the
``git clone`` line of ``book/how_to_use.md``. After changing the URL, run

    python scripts/sync_repository_url.py          # rewrite the copies
    python scripts/sync_repository_url.py --check  # exit 1 if a copy differs (the tests do)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# the chapters' cell, as its line is stored in the notebook's JSON
NOTEBOOK_LINE = re.compile(r'(BOOK_REPOSITORY = \\")([^"\\]+)(\\")')
CLONE_LINE = re.compile(r"(git clone )(\S+)()")


def configured_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def copies(root: Path = ROOT) -> list[tuple[Path, re.Pattern]]:
    """The files under ``root`` (the book, or the student sources) that keep a copy."""
    places = [(path, NOTEBOOK_LINE) for path in sorted((root / "chapters").glob("*.ipynb"))]
    return [*places, (root / "book" / "how_to_use.md", CLONE_LINE)]


def stale_copies(url: str, root: Path = ROOT) -> dict[Path, list[str]]:
    """``{file: [the URLs it holds that differ from url]}``; a file without a copy counts."""
    stale = {}
    for path, pattern in copies(root):
        found = [m.group(2) for m in pattern.finditer(path.read_text(encoding="utf-8"))]
        if not found or any(value != url for value in found):
            stale[path] = found
    return stale


def write_url(url: str, root: Path = ROOT) -> int:
    """Write ``url`` into every copy under ``root``; returns the number of files changed.

    ``scripts/student_book.py --repository`` calls it on the student sources, so that their
    notebooks clone the course's repository and not the book's (which holds the solutions).
    """
    if not re.fullmatch(r"[^\s\"\\]+", url):
        raise ValueError(f"a repository URL has no spaces, quotes or backslashes: {url!r}")
    changed = 0
    for path, pattern in copies(root):
        text = path.read_text(encoding="utf-8")
        fixed = pattern.sub(lambda m: m.group(1) + url + m.group(3), text)
        if fixed != text:
            path.write_text(fixed, encoding="utf-8")
            changed += 1
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report, exit 1 on a stale copy")
    args = parser.parse_args(argv)
    url = configured_url()
    stale = stale_copies(url)
    if args.check:
        for path, found in stale.items():
            print(f"{path.relative_to(ROOT)}: {found or 'no copy of the URL'}, not {url}")
        return 1 if stale else 0
    write_url(url)
    print(f"the repository URL is {url} in {len(copies())} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
