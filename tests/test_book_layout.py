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


spec_words = importlib.util.spec_from_file_location("page_words", ROOT / "scripts/page_words.py")
page_words = importlib.util.module_from_spec(spec_words)
spec_words.loader.exec_module(page_words)

# Pages over the limit, each with the reason it still is (the test fails when one of them
# comes under the limit, so that the list cannot outlive its reason).
OVER_THE_LIMIT: dict[str, str] = {}


def test_every_page_is_read_in_one_sitting():
    """At most page_words.LIMIT words of prose on a page, except the pages listed above."""
    over = {name: n for name, n in page_words.pages(ROOT).items() if n > page_words.LIMIT}
    unlisted = {name: n for name, n in over.items() if name not in OVER_THE_LIMIT}
    assert not unlisted, (
        f"pages over {page_words.LIMIT:,} words of prose: {unlisted}; split them "
        "(a section on a page of its own) or tighten them"
    )
    done = sorted(set(OVER_THE_LIMIT) - set(over))
    assert not done, f"{done} are within the limit now: take them off OVER_THE_LIMIT"


def test_the_prose_count_leaves_out_math_code_and_markup():
    markdown = (
        "(ch-x)=\n## Two words\n\nThe state $h_t$ is `h`.\n\n$$\na + b\n$$\n\n"
        "```python\nx = 1\n```\n\n```{figure} a.png\n:name: fig-a\n\nA caption.\n```\n"
        '<img src="a.png">[a link](https://example.org)'
    )
    text = page_words.prose(markdown)
    found = page_words._WORD.findall(text)
    assert found == ["Two", "words", "The", "state", "symbol", "is", "symbol", "A", "caption",
                     "a", "link"], found  # fmt: skip
