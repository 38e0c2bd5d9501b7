"""The package reference (book/api/) as a reader needs it: equations linked, no torch boilerplate.

Equation labels. The package's docstrings cite the chapters' equations by label, in
parentheses, as the chapters' own text reads: ``(cw-rnn)``, ``(pen-ns)``. In the reference a
plain ``(cw-rnn)`` tells the reader neither the number nor where it is, so every such citation
of a label that a chapter defines (a math block's ``:label:`` or ``$$ (label)``) becomes the
role ``:eq:``, which Sphinx renders as the equation's number, linked to it. Anything in
parentheses that is not a chapter's equation label is left as it is.

Boilerplate. A ``forward`` without a docstring of its own inherits ``torch.nn.Module.forward``'s
("Define the computation performed at every call. Should be overridden by all subclasses.
..."), which says nothing about the model; such a docstring is dropped. Other inherited
docstrings (from the package's own base classes) stay.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

# a math block's label: ":label: rnn-R1" in a {math} directive, or "$$ (pen-ns)" after a
# MyST dollar-math block
LABEL_LINE = re.compile(r"^\s*:label:\s*(\S+)\s*$|\$\$\s*\(([\w.-]+)\)\s*$", re.MULTILINE)
CITATION = re.compile(r"\(([A-Za-z][\w.-]*)\)")


def equation_labels(chapters: Path) -> set[str]:
    """Every equation label the chapters define (``:label:`` lines of their markdown cells)."""
    labels: set[str] = set()
    for notebook in sorted(chapters.glob("*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                source = cell["source"]
                text = source if isinstance(source, str) else "".join(source)
                labels.update(a or b for a, b in LABEL_LINE.findall(text))
    return labels


def link_equations(line: str, labels: set[str]) -> str:
    """``(label)`` -> ``:eq:`label``` for the labels the chapters define; the rest unchanged."""

    def replace(match: re.Match) -> str:
        label = match[1]
        return f":eq:`{label}`" if label in labels else match[0]

    return CITATION.sub(replace, line)


def _torch_forward_doc() -> str | None:
    try:
        from torch import nn
    except ImportError:  # pragma: no cover - the book always has torch
        return None
    return inspect.getdoc(nn.Module.forward)


def process_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    boilerplate = app.env.rnnbook_torch_forward_doc
    if boilerplate and "\n".join(lines).strip() == boilerplate.strip():
        lines[:] = []
        return
    labels = app.env.rnnbook_equation_labels
    in_literal = False
    for i, line in enumerate(lines):
        if line.rstrip().endswith("::"):  # a literal block follows: leave code alone
            in_literal = True
            continue
        if in_literal and line.strip() and not line.startswith((" ", "\t")):
            in_literal = False
        if not in_literal:
            parts = line.split("``")  # the even parts are outside inline literals
            parts[::2] = [link_equations(part, labels) for part in parts[::2]]
            lines[i] = "``".join(parts)


def remember(app) -> None:
    app.env.rnnbook_equation_labels = equation_labels(Path(app.srcdir) / "chapters")
    app.env.rnnbook_torch_forward_doc = _torch_forward_doc()


def setup(app):
    app.connect("builder-inited", remember)
    app.connect("autodoc-process-docstring", process_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
