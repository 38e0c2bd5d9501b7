"""The reading path of the chapters: what the HTML shows a reader between the paragraphs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location(
    "tag_assert_cells", ROOT / "scripts/tag_assert_cells.py"
)
tag_assert_cells = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tag_assert_cells)


def test_no_wall_of_asserts_stands_in_the_reading_path():
    """Every code cell with five or more assert lines is collapsed (hide-input)."""
    untagged = {}
    for path in sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb")):
        found = tag_assert_cells.walls(json.loads(path.read_text(encoding="utf-8")))
        if found:
            untagged[path.name] = found
    assert not untagged, (
        f"cells with {tag_assert_cells.WALL}+ assert lines and no hide-input tag: {untagged}; "
        "run `python scripts/tag_assert_cells.py`"
    )


def test_the_wall_detector_counts_assert_lines_only():
    source = "x = 1\n" + "assert x\n" * 4 + "# assert in a comment\nprint('assert')\n"
    cell = {"cell_type": "code", "source": source, "metadata": {}}
    assert tag_assert_cells.walls({"cells": [cell]}) == []
    cell["source"] += "    assert x > 0\n"
    assert tag_assert_cells.walls({"cells": [cell]}) == [0]
    cell["metadata"]["tags"] = ["hide-input"]
    assert tag_assert_cells.walls({"cells": [cell]}) == []
