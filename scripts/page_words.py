"""How much prose each page of the book asks a reader to read in one sitting.

A page's prose is the text of its markdown cells without what a reader does not read as
words: displayed math (``$$...$$``, ``{math}`` blocks), fenced code, HTML tags, directive
options (``:name: ...``), link targets and labels (``(label)=``); inline math and a code span
count as one word each. What remains is counted in words (runs of letters). The limit is
``LIMIT`` words a page (a reader's sitting); ``tests/test_book_layout.py`` holds every page
of ``chapters/`` to it.

    python scripts/page_words.py          # words per page, longest first
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 6000

_FENCE = re.compile(r"^(`{3,}|:{3,})(.*)$")
_DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
_INLINE_MATH = re.compile(r"(?<!\\)\$[^$\n]+?\$")
_ROLE_MATH = re.compile(r"\{(?:math|eq|ref|numref|doc|cite:p|cite:t|cite)\}`[^`]*`")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_HTML = re.compile(r"<[^>\n]+>")
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
_LABEL = re.compile(r"^\([\w:-]+\)=\s*$", re.M)
_OPTION = re.compile(r"^:[\w-]+:.*$", re.M)
_WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")


def prose(markdown: str) -> str:
    """The words of one markdown cell that a reader reads as prose (see the module docstring)."""
    kept, skipping, directives = [], None, []  # directives: the fences of open directives
    for line in markdown.splitlines():
        fence = _FENCE.match(line.strip())
        if skipping is not None:
            if fence and fence.group(1)[0] == skipping[0] and len(fence.group(1)) >= len(skipping):
                skipping = None
            continue
        if not fence:
            kept.append(line)
            continue
        marks, info = fence.group(1), fence.group(2).strip()
        if not info and directives and marks == directives[-1]:
            directives.pop()  # a directive closes; its body was prose (a note, a caption)
        elif re.match(r"\{(math|code-cell|code|code-block)\}", info) or (
            marks[0] == "`" and not info.startswith("{")
        ):
            skipping = marks  # math or fenced code: not read as words
        elif info.startswith("{"):
            directives.append(marks)  # a directive opens
    text = "\n".join(kept)
    for pattern in (_DISPLAY_MATH, _HTML, _LINK_TARGET):
        text = pattern.sub(" ", text)
    for pattern in (_ROLE_MATH, _INLINE_MATH, _CODE_SPAN):  # read as one word each
        text = pattern.sub(" symbol ", text)
    text = _LABEL.sub(" ", text)
    return _OPTION.sub(" ", text)


def words(notebook: Path) -> int:
    """The number of prose words on a chapter page (a notebook's markdown cells)."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    total = 0
    for cell in cells:
        if cell["cell_type"] == "markdown":
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            total += len(_WORD.findall(prose(source)))
    return total


def pages(root: Path = ROOT) -> dict[str, int]:
    """Prose words of every chapter page, by notebook name."""
    return {p.name: words(p) for p in sorted((root / "chapters").glob("*.ipynb"))}


def main() -> int:
    counts = pages()
    for name, n in sorted(counts.items(), key=lambda item: -item[1]):
        print(f"{n:6,d}  {name}{'  over ' + format(LIMIT, ',') if n > LIMIT else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
