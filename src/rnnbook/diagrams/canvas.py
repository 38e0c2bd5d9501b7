"""The drawing layer every diagram shares: theme colours, labels, and the SVG canvas.

One drawing serves the book's light and dark pages alike. It has a transparent background,
text and lines in :mod:`rnnbook.plot`'s mid-grey ``INK`` (legible on white and on the dark
theme's near-black), and Okabe-Ito colours for the few things that stand out, never pure
black or white; so no diagram takes a theme argument.

A diagram function makes a :class:`Canvas` of a fixed size in SVG units (about 800 wide),
draws on it with the primitives below (lines, arrows, boxes, labels, the ⊙ and + nodes of
the cell diagrams, a legend) and calls :meth:`Canvas.finish`, which returns a
:class:`Diagram`. Labels are plain Unicode text in the chapters' symbols, with ``_`` and
``^`` for subscripts and superscripts: ``"h_{t−1}"``, ``"w_t^r"``.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from pathlib import Path

from rnnbook.plot import INK, PALETTE

# --- theme colours -------------------------------------------------------------------------

BLUE, VERMILLION, GREEN, PINK, ORANGE, SKY, GREY = PALETTE
ACCENT = VERMILLION  # the path a diagram is about: the cell state, the gradient
SIGMOID = BLUE  # gate layers with a logistic sigmoid
TANH = GREEN  # layers with tanh
FONT = "sans-serif"
SIZE = 17  # label size in SVG units; the diagrams are about 800 units wide
SMALL = 15
# The smallest text a diagram may use, sub- and superscripts included: 8 pt in SVG units
# (1 unit is one CSS pixel at the diagram's own size, and 1 pt is 4/3 px).
MIN_TEXT = 8 * 4 / 3


@dataclass(frozen=True)
class Diagram:
    """An SVG drawing that Jupyter displays: ``svg`` is its text, ``desc`` says what it shows."""

    svg: str
    title: str
    desc: str

    def _repr_svg_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        return f"<Diagram: {self.title}>"

    def save(self, path) -> Path:
        """Write the SVG to ``path`` (UTF-8) and return the path."""
        path = Path(path)
        path.write_text(self.svg, encoding="utf-8")
        return path


# --- labels with subscripts and superscripts ---------------------------------------------

_SCRIPT = re.compile(r"([_^])(\{[^}]*\}|.)")


def _runs(label: str) -> list[tuple[str, str]]:
    """Split ``"h_{t−1}"`` or ``"w_t^r"`` into ``[("", "h"), ("_", "t−1")]``-style runs."""
    runs: list[tuple[str, str]] = []
    position = 0
    for match in _SCRIPT.finditer(label):
        if match.start() > position:
            runs.append(("", label[position : match.start()]))
        body = match.group(2)
        runs.append((match.group(1), body[1:-1] if body.startswith("{") else body))
        position = match.end()
    if position < len(label):
        runs.append(("", label[position:]))
    return runs


def label_width(label: str, size: float = SIZE) -> float:
    """Rough width of a label in SVG units (sans-serif), for laying out legends."""
    width = 0.0
    for kind, text in _runs(label):
        scale = 0.8 if kind else 1.0
        width += sum(0.35 if ch in " .,;:|()[]ijlt1" else 0.62 for ch in text) * size * scale
    return width


def _tspans(label: str, size: float) -> str:
    """The label's runs as text and ``<tspan>`` elements, shifted with ``dy``.

    ``dy`` (not ``baseline-shift``) because every browser and SVG renderer supports it.
    """
    shift = {"": 0.0, "_": 0.3 * size, "^": -0.42 * size}
    parts = []
    offset = 0.0
    runs = _runs(label)
    for kind, text in runs:
        if len(runs) > 1:  # a space next to a tspan would be dropped: make it non-breaking
            stripped = text.strip(" ")
            start = text.index(stripped) if stripped else 0
            text = "\u00a0" * start + stripped + "\u00a0" * (len(text) - start - len(stripped))
        target = shift[kind]
        dy = target - offset
        offset = target
        attributes = f' dy="{_num(dy)}"' if dy else ""
        if kind:
            attributes += f' font-size="{_num(0.8 * size)}"'
        text = html.escape(text, quote=False)
        parts.append(f"<tspan{attributes}>{text}</tspan>" if attributes else text)
    if offset:  # back to the baseline, so text after the label is not shifted
        parts.append(f'<tspan dy="{_num(-offset)}"></tspan>')
    return "".join(parts)


def _num(value: float) -> str:
    """A coordinate as short, deterministic text."""
    value = round(float(value), 2)
    if value == int(value):
        return str(int(value))
    return f"{value:.2f}".rstrip("0")


def _colour(value: str) -> str:
    if value == "none" or re.fullmatch(r"#[0-9A-Fa-f]{6}", value):
        return value
    raise ValueError(f"colours are '#rrggbb' or 'none', not {value!r}")


# --- the canvas --------------------------------------------------------------------------


class Canvas:
    """Collects SVG elements on a ``width`` x ``height`` viewBox; ``finish`` makes a Diagram.

    ``name`` makes the ids of the title and the description, which must differ between
    diagrams shown in one notebook.
    """

    def __init__(self, name: str, width: float, height: float):
        self.name = name
        self.width = width
        self.height = height
        self.items: list[str] = []

    # Lines and arrows.

    def line(self, points, colour=INK, width=1.6, dash=None):
        path = "M" + " L".join(f"{_num(x)} {_num(y)}" for x, y in points)
        self.path(path, colour=colour, width=width, dash=dash)

    def path(self, d, colour=INK, width=1.6, dash=None, fill="none", opacity=None):
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        if opacity is not None:
            extra += f' fill-opacity="{_num(opacity)}"'
        stroke = (
            f' stroke="{_colour(colour)}" stroke-width="{_num(width)}"' if colour != "none" else ""
        )
        self.items.append(
            f'<path d="{d}" fill="{_colour(fill)}"{stroke}{extra} '
            'stroke-linecap="round" stroke-linejoin="round"/>'
        )

    def arrow(self, points, colour=INK, width=1.6, dash=None, head=None):
        """A polyline through ``points`` with a filled arrowhead at its last point."""
        head = head or 7 + 1.6 * width
        (x0, y0), (x1, y1) = points[-2], points[-1]
        length = math.hypot(x1 - x0, y1 - y0)
        ux, uy = (x1 - x0) / length, (y1 - y0) / length
        # The line stops inside the head, so a thick line does not poke out of its tip.
        stem = (x1 - ux * head * 0.8, y1 - uy * head * 0.8)
        self.line([*points[:-1], stem], colour=colour, width=width, dash=dash)
        half = head * 0.45
        bx, by = x1 - ux * head, y1 - uy * head
        tip = f"M{_num(x1)} {_num(y1)} L{_num(bx - uy * half)} {_num(by + ux * half)} "
        tip += f"L{_num(bx + uy * half)} {_num(by - ux * half)} Z"
        self.path(tip, colour="none", fill=colour)

    def curve_arrow(self, start, c1, c2, end, colour=INK, width=1.6, dash=None):
        """A cubic Bezier from ``start`` to ``end`` with an arrowhead along its last tangent."""
        head = 7 + 1.6 * width
        ux, uy = end[0] - c2[0], end[1] - c2[1]
        norm = math.hypot(ux, uy)
        ux, uy = ux / norm, uy / norm
        stem = (end[0] - ux * head * 0.8, end[1] - uy * head * 0.8)
        d = "M{} {} C{} {}, {} {}, {} {}".format(*map(_num, (*start, *c1, *c2, *stem)))
        self.path(d, colour=colour, width=width, dash=dash)
        self.arrow([(end[0] - ux, end[1] - uy), end], colour=colour, width=width, head=head)

    # Shapes.

    def rect(self, x, y, w, h, colour=INK, fill="none", opacity=None, width=1.6, radius=6):
        extra = f' fill-opacity="{_num(opacity)}"' if opacity is not None else ""
        stroke = (
            f' stroke="{_colour(colour)}" stroke-width="{_num(width)}"' if colour != "none" else ""
        )
        self.items.append(
            f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" '
            f'rx="{_num(radius)}" fill="{_colour(fill)}"{extra}{stroke}/>'
        )

    def dashed_box(self, x, y, w, h, colour=ACCENT, radius=6):
        """A rounded box centred on (x, y), outlined with dashes: a copy, not a new value."""
        left, top, r = x - w / 2, y - h / 2, radius
        d = (
            f"M{_num(left + r)} {_num(top)} H{_num(left + w - r)} "
            f"A{_num(r)} {_num(r)} 0 0 1 {_num(left + w)} {_num(top + r)} V{_num(top + h - r)} "
            f"A{_num(r)} {_num(r)} 0 0 1 {_num(left + w - r)} {_num(top + h)} H{_num(left + r)} "
            f"A{_num(r)} {_num(r)} 0 0 1 {_num(left)} {_num(top + h - r)} V{_num(top + r)} "
            f"A{_num(r)} {_num(r)} 0 0 1 {_num(left + r)} {_num(top)} Z"
        )
        self.path(d, colour=colour, width=1.6, dash="5 3")

    def circle(self, x, y, r, colour=INK, fill="none", width=1.6):
        self.items.append(
            f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{_num(r)}" fill="{_colour(fill)}" '
            f'stroke="{_colour(colour)}" stroke-width="{_num(width)}"/>'
        )

    def dot(self, x, y, colour=INK, r=3.2):
        """A junction: the wire branches here (crossing wires have no dot)."""
        self.items.append(
            f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{_num(r)}" fill="{_colour(colour)}"/>'
        )

    # Text.

    def text(self, x, y, label, colour=INK, size=SIZE, anchor="middle", weight=None, italic=False):
        """``label`` at (x, y): ``y`` is the middle of lower-case letters, not the baseline."""
        extra = f' font-weight="{weight}"' if weight else ""
        extra += ' font-style="italic"' if italic else ""
        baseline = y + 0.35 * size
        self.items.append(
            f'<text x="{_num(x)}" y="{_num(baseline)}" font-size="{_num(size)}" '
            f'text-anchor="{anchor}" fill="{_colour(colour)}"{extra}>{_tspans(label, size)}</text>'
        )

    def box(self, x, y, w, h, label, colour=INK, size=SIZE, tint=0.12, text_colour=INK):
        """A rounded box centred on (x, y) with a label, lightly tinted with its colour."""
        self.rect(x - w / 2, y - h / 2, w, h, colour=colour, fill=colour, opacity=tint)
        self.text(x, y, label, colour=text_colour, size=size)

    # The nodes of the cell diagrams.

    def product(self, x, y, colour=INK, r=12, width=1.6):
        """The element-wise product ⊙, drawn as a circle with a dot."""
        self.circle(x, y, r, colour=colour, width=width)
        self.dot(x, y, colour=colour, r=2.6)

    def plus(self, x, y, colour=INK, r=12, width=1.6):
        """A sum node: a circle with a plus."""
        self.circle(x, y, r, colour=colour, width=width)
        a = r * 0.55
        self.line([(x - a, y), (x + a, y)], colour=colour, width=width)
        self.line([(x, y - a), (x, y + a)], colour=colour, width=width)

    def legend(self, y, entries, x=None, gap=30):
        """One row of ``(kind, label)`` entries centred at height ``y`` (or from ``x``).

        Kinds: ``"arrow"``, ``"dashed"`` (an accent-coloured dashed arrow), ``"thick"`` (an
        accent-coloured thick line), ``"sigmoid"``, ``"tanh"``, ``"product"``, ``"plus"``.
        """
        widths = [36 + 8 + label_width(label, SMALL) for _, label in entries]
        total = sum(widths) + gap * (len(entries) - 1)
        left = (self.width - total) / 2 if x is None else x
        for (kind, label), width in zip(entries, widths):
            cx = left + 18
            if kind == "arrow":
                self.arrow([(left, y), (left + 36, y)])
            elif kind == "dashed":
                self.arrow([(left, y), (left + 36, y)], colour=ACCENT, dash="6 4")
            elif kind == "thick":
                self.line([(left, y), (left + 36, y)], colour=ACCENT, width=4.5)
            elif kind == "sigmoid":
                self.box(cx, y, 34, 22, "σ", colour=SIGMOID, size=SMALL)
            elif kind == "tanh":
                self.box(cx, y, 36, 22, "tanh", colour=TANH, size=11)
            elif kind == "product":
                self.product(cx, y, r=9)
            elif kind == "plus":
                self.plus(cx, y, r=9)
            else:
                raise ValueError(f"unknown legend entry kind {kind!r}")
            self.text(left + 44, y, label, size=SMALL, anchor="start")
            left += width + gap

    # The finished drawing.

    def finish(self, title: str, desc: str) -> Diagram:
        ids = f"rnnbook-{self.name}-title rnnbook-{self.name}-desc"
        head = (
            '<svg xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {_num(self.width)} {_num(self.height)}" '
            f'width="{_num(self.width)}" height="{_num(self.height)}" '
            'style="max-width: 100%; height: auto" '
            f'role="img" aria-labelledby="{ids}" fill="none" '
            f'font-family="{FONT}" font-size="{SIZE}">'
        )
        body = "\n".join(
            [
                head,
                f'<title id="rnnbook-{self.name}-title">{html.escape(title, quote=False)}</title>',
                f'<desc id="rnnbook-{self.name}-desc">{html.escape(desc, quote=False)}</desc>',
                *self.items,
                "</svg>",
            ]
        )
        return Diagram(svg=body + "\n", title=title, desc=desc)
