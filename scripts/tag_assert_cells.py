"""Collapse the chapters' walls of asserts: tag ``hide-input`` every code cell with five or
more checks (``assert`` lines and ``claims.claim(...)`` calls) or three or more claims (each
takes several lines), so the HTML shows its output and a toggle instead of its source.

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
WALL = 5  # checks (assert lines and claims) that make a cell a wall
CLAIM_WALL = 3  # claims that make a cell a wall
TAG = "hide-input"


def assert_lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.lstrip().startswith("assert "))


def claim_calls(source: str) -> int:
    return sum(line.count("claims.claim(") for line in source.splitlines())


def is_wall(source: str) -> bool:
    claimed = claim_calls(source)
    return assert_lines(source) + claimed >= WALL or claimed >= CLAIM_WALL


def walls(notebook: dict) -> list[int]:
    """Indices of the code cells that are walls of checks and have no hide-input tag."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        if is_wall(source) and TAG not in tags and "remove-input" not in tags:
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
            f"{name}: cells {cells} are walls of checks",
            "(untagged)" if args.check else "-> tagged",
        )
    return 1 if (args.check and untagged) else 0


if __name__ == "__main__":
    raise SystemExit(main())
