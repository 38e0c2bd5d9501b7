"""Collapse the chapters' walls of asserts: tag every code cell with five or more ``assert``
lines ``hide-input``, so the HTML shows its output and a toggle instead of its source.

    python scripts/tag_assert_cells.py           # tag in place
    python scripts/tag_assert_cells.py --check   # exit 1 and name the cells that lack the tag

The sentence before such a cell says what it checks and stays visible; the asserts stay in the
notebook (and run), one click away. ``tests/test_book_layout.py`` runs the check.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WALL = 5  # assert lines that make a cell a wall
TAG = "hide-input"


def assert_lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.lstrip().startswith("assert "))


def walls(notebook: dict) -> list[int]:
    """Indices of the code cells with WALL or more assert lines and no hide-input tag."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        if assert_lines(source) >= WALL and TAG not in tags and "remove-input" not in tags:
            found.append(index)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report, change nothing")
    args = parser.parse_args(argv)
    untagged = {}
    for path in sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb")):
        text = path.read_text(encoding="utf-8")
        notebook = json.loads(text)
        found = walls(notebook)
        if not found:
            continue
        untagged[path.name] = found
        if not args.check:
            import nbformat  # keeps the notebook's own formatting

            nb = nbformat.reads(text, as_version=4)
            for index in found:
                nb.cells[index].metadata.setdefault("tags", []).append(TAG)
            nbformat.write(nb, path)
    for name, cells in untagged.items():
        print(
            f"{name}: cells {cells} have {WALL}+ assert lines",
            "(untagged)" if args.check else "-> tagged",
        )
    return 1 if (args.check and untagged) else 0


if __name__ == "__main__":
    raise SystemExit(main())
