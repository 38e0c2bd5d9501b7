"""The book's architecture diagrams, drawn by code as SVG for its light and dark pages.

Each function returns a :class:`Diagram`, which Jupyter (and the book's HTML, through
myst-nb) shows as an ``image/svg+xml`` output. The drawings follow the figure theme of
:mod:`rnnbook.plot`: a transparent background, text and lines in its mid-grey ``INK``
(legible on white and on the dark theme's near-black) and Okabe-Ito colours for the few
things that stand out, never pure black or white. Labels are plain Unicode text with
subscripts as ``<tspan>`` elements, in the symbols of the chapters' equations.

The SVG carries a ``<title>`` and a ``<desc>`` for readers of the notebook who cannot see
it. In the book the diagram is an ``<img>``, whose text alternative is its figure caption:
the cell that shows a diagram carries ``mystnb: figure: caption:`` metadata like any other
figure cell (``book/_ext/image_alt.py`` fails the build otherwise). A cell that also sets
``mystnb: image: alt:`` must repeat ``classes: dark-light`` there: a cell's ``image``
options replace the book's, and without that class the dark theme dims the drawing.

The SVG has a fixed width and height (its viewBox) and scales down with
``max-width: 100%``. With ``width="100%"`` alone, Chromium would give the ``<img>`` a
natural size of 300 x 150, and the browser suite, which measures a figure's ink at its
natural size, would find the thin grey lines too faint.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from pathlib import Path

from rnnbook.plot import INK, PALETTE

BLUE, VERMILLION, GREEN, PINK, ORANGE, SKY, GREY = PALETTE
ACCENT = VERMILLION  # the path a diagram is about: the cell state, the gradient
SIGMOID = BLUE  # gate layers with a logistic sigmoid
TANH = GREEN  # layers with tanh
FONT = "sans-serif"
SIZE = 17  # label size in SVG units; the diagrams are about 800 units wide
SMALL = 15


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


class _Canvas:
    """Collects SVG elements on a ``width`` x ``height`` viewBox; ``finish`` makes a Diagram."""

    def __init__(self, name: str, width: float, height: float):
        self.name = name
        self.width = width
        self.height = height
        self.items: list[str] = []

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

    def rect(self, x, y, w, h, colour=INK, fill="none", opacity=None, width=1.6, radius=6):
        extra = f' fill-opacity="{_num(opacity)}"' if opacity is not None else ""
        stroke = (
            f' stroke="{_colour(colour)}" stroke-width="{_num(width)}"' if colour != "none" else ""
        )
        self.items.append(
            f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" '
            f'rx="{_num(radius)}" fill="{_colour(fill)}"{extra}{stroke}/>'
        )

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


# --- Chapter 1 ---------------------------------------------------------------------------


def unrolled_rnn(readout: str = "v") -> Diagram:
    """The simple recurrent network, folded and unrolled over three steps, with BPTT.

    Left, the cell with its recurrent weight ``W_hh`` as a self-loop; right, the same cell
    at steps t−1, t and t+1, which share ``W_xh``, ``W_hh`` and ``W_hy`` ({eq}`rnn-R1` to
    {eq}`rnn-R3`). The dashed, accent-coloured arrows are the backward pass: the gradient
    reaches ``h_t`` from its own read-out and from ``h_{t+1}`` ({eq}`rnn-R5`).

    Args:
        readout: the letter of the read-out before the output nonlinearity, the
            ``v`` of ``v_t = W_hy h_t + b_y``, ``ŷ_t = g(v_t)``.
    """
    if not isinstance(readout, str) or not re.fullmatch(r"[^\W\d_]", readout):
        raise ValueError(f"readout must be a single letter, such as 'v', not {readout!r}")
    c = _Canvas("unrolled-rnn", 820, 440)
    y_loss, y_out, y_h, y_x = 42, 118, 228, 338
    out_w, out_h, h_w, h_h, x_w, x_h = 104, 40, 66, 46, 62, 36

    def column(cx, t, forward_labels=True):
        c.text(cx - 10, y_loss, f"ℓ_{{{t}}}")
        c.box(cx, y_out, out_w, out_h, f"{readout}_{{{t}}}, ŷ_{{{t}}}")
        c.box(cx, y_h, h_w, h_h, f"h_{{{t}}}", colour=INK, tint=0.0)
        c.box(cx, y_x, x_w, x_h, f"x_{{{t}}}", tint=0.0)
        c.arrow([(cx, y_x - x_h / 2), (cx, y_h + h_h / 2)])  # (rnn-R1)
        c.arrow([(cx - 10, y_h - h_h / 2), (cx - 10, y_out + out_h / 2)])  # (rnn-R3)
        c.arrow([(cx - 10, y_out - out_h / 2), (cx - 10, y_loss + 12)])
        if forward_labels:
            c.text(cx - 7, (y_x - x_h / 2 + y_h + h_h / 2) / 2, "W_{xh}", anchor="end")
            c.text(cx - 17, (y_h - h_h / 2 + y_out + out_h / 2) / 2, "W_{hy}", anchor="end")

    # Folded: one cell and its self-loop.
    fx = 86
    column(fx, "t")
    right = fx + h_w / 2
    c.curve_arrow(
        (right, y_h - 12), (right + 58, y_h - 50), (right + 58, y_h + 50), (right, y_h + 12)
    )
    c.text(right + 30, y_h - 50, "W_{hh}")
    c.text(fx + 20, 392, "folded", size=SMALL, italic=True)
    c.text(212, y_h, "=", size=28)

    # Unrolled over t−1, t, t+1.
    steps = [(330, "t−1"), (500, "t"), (670, "t+1")]
    for cx, t in steps:
        column(cx, t)
        # The gradient from the read-out's loss back into h (first term of (rnn-R5)).
        c.arrow([(cx + 14, y_loss + 14), (cx + 14, y_out - out_h / 2)], colour=ACCENT, dash="6 4")
        c.arrow([(cx + 14, y_out + out_h / 2), (cx + 14, y_h - h_h / 2)], colour=ACCENT, dash="6 4")
    y_fwd, y_bwd = y_h - 9, y_h + 11
    lefts = [262] + [cx + h_w / 2 for cx, _ in steps]
    rights = [cx - h_w / 2 for cx, _ in steps] + [760]
    for k, (a, b) in enumerate(zip(lefts, rights)):
        c.arrow([(a, y_fwd), (b, y_fwd)])  # h_{t−1} → h_t
        if 0 < k < len(steps):  # not on the stubs from and to the steps not drawn
            c.text((a + b) / 2, y_fwd - 14, "W_{hh}", size=SMALL)
        c.arrow([(b, y_bwd), (a, y_bwd)], colour=ACCENT, dash="6 4")  # δ back in time
    c.text(254, y_h, "⋯", anchor="end")
    c.text(772, y_h, "⋯", anchor="start")
    # The two terms of the gradient of h_t, at step t only.
    cx = 500
    c.text(cx + 22, (y_out + out_h / 2 + y_h - h_h / 2) / 2, "W_{hy}^⊤ε_t", ACCENT, SMALL, "start")
    c.text(cx + h_w / 2 + 53, y_bwd + 20, "W_{hh}^⊤δ_{t+1}", ACCENT, SMALL)
    c.text(500, 392, "unrolled over time: the same weights at every step", size=SMALL, italic=True)
    c.legend(
        422,
        [
            ("arrow", "forward pass"),
            ("dashed", "backward pass (BPTT): gradients flow back in time"),
        ],
    )
    title = "A simple recurrent network, folded and unrolled over time"
    desc = (
        f"Left, the folded network: input x_t enters the hidden state h_t through W_xh, h_t "
        f"feeds back into itself through a self-loop labelled W_hh, and the read-out "
        f"{readout}_t = W_hy h_t + b_y gives the output ŷ_t and the loss ℓ_t. An equals sign "
        f"leads to the same network unrolled over the steps t−1, t and t+1: three copies of "
        f"the cell, each h passing to the next through W_hh, with the same weights W_xh, "
        f"W_hh and W_hy at every step. Dashed arrows in an accent colour run the other way: "
        f"from each loss down to its hidden state, and from h_(t+1) back to h_t, the two "
        f"terms W_hy^T ε_t and W_hh^T δ_(t+1) of the gradient of h_t in backpropagation "
        f"through time."
    )
    return c.finish(title, desc)


# --- Chapter 2 ---------------------------------------------------------------------------


def lstm_cell() -> Diagram:
    """The LSTM cell, {eq}`lstm-L1` to {eq}`lstm-L6`, with the cell-state path highlighted.

    The cell state runs along the top, from ``c_{t−1}`` through the forget gate's product
    and the input's sum to ``c_t`` (thick, accent-coloured, {eq}`lstm-L4`): on that path
    the state is only scaled and added to, never squashed. Below, ``h_{t−1}`` and ``x_t``
    feed the four layers ``f_t, i_t, o_t`` (σ) and ``g_t`` (tanh).
    """
    c = _Canvas("lstm-cell", 820, 444)
    y_c, y_gate, y_bus = 62, 248, 312
    c.rect(86, 26, 630, 318, colour=INK, width=1.2, radius=14)
    gx = {"f": 250, "i": 330, "g": 420, "o": 520}
    # Cell state: c_{t−1} → ⊙ f_t → + i_t ⊙ g_t → c_t.  (lstm-L4)
    x_prod, x_sum, x_tanh = gx["f"], gx["g"], 614
    c.line([(24, y_c), (x_prod - 12, y_c)], colour=ACCENT, width=4.5)
    c.line([(x_prod + 12, y_c), (x_sum - 12, y_c)], colour=ACCENT, width=4.5)
    c.arrow([(x_sum + 12, y_c), (790, y_c)], colour=ACCENT, width=4.5)
    c.product(x_prod, y_c, colour=ACCENT, r=13, width=2.4)
    c.plus(x_sum, y_c, colour=ACCENT, r=13, width=2.4)
    c.text(30, y_c - 20, "c_{t−1}", anchor="start")
    c.text(790, y_c - 20, "c_t", anchor="end")
    c.text(530, y_c - 20, "cell state", colour=ACCENT, size=SMALL)
    # The input bus: [h_{t−1}; x_t] feeds every gate.
    c.line([(24, y_bus), (gx["o"], y_bus)])
    c.text(30, y_bus - 16, "h_{t−1}", anchor="start")
    x_in = 150
    c.line([(x_in, 394), (x_in, y_bus)])
    c.dot(x_in, y_bus)
    c.text(x_in + 12, 384, "x_t", anchor="start")
    c.text(x_in + 14, y_bus + 17, "[h_{t−1}; x_t]", size=SMALL, anchor="start")
    box_w, box_h = 52, 34
    for name, x in gx.items():
        if name != "o":
            c.dot(x, y_bus)
        c.arrow([(x, y_bus), (x, y_gate + box_h / 2)])
        if name == "g":
            c.box(x, y_gate, box_w + 6, box_h, "tanh", colour=TANH, size=15)
        else:
            c.box(x, y_gate, box_w, box_h, "σ", colour=SIGMOID, size=18)
    top = y_gate - box_h / 2
    # f_t scales the old cell state.  (lstm-L1)
    c.arrow([(gx["f"], top), (gx["f"], y_c + 13)])
    c.text(gx["f"] + 9, 172, "f_t", anchor="start")
    # i_t ⊙ g_t is added to it.  (lstm-L2), (lstm-L3)
    y_ig = 150
    c.arrow([(gx["i"], top), (gx["i"], y_ig), (gx["g"] - 12, y_ig)])
    c.text(gx["i"] + 9, 200, "i_t", anchor="start")
    c.arrow([(gx["g"], top), (gx["g"], y_ig + 12)])
    c.text(gx["g"] + 9, 200, "g_t", anchor="start")
    c.product(gx["g"], y_ig)
    c.arrow([(gx["g"], y_ig - 12), (gx["g"], y_c + 13)])
    c.text(gx["g"] + 9, 106, "i_t ⊙ g_t", size=SMALL, anchor="start")
    # h_t = o_t ⊙ tanh(c_t).  (lstm-L5), (lstm-L6)
    y_tanh, y_h = 128, 196
    c.dot(x_tanh, y_c, colour=ACCENT, r=4)
    c.arrow([(x_tanh, y_c), (x_tanh, y_tanh - 13)])
    c.rect(x_tanh - 28, y_tanh - 13, 56, 26, colour=INK, radius=13)
    c.text(x_tanh, y_tanh, "tanh", size=15)
    c.arrow([(x_tanh, y_tanh + 13), (x_tanh, y_h - 12)])
    c.arrow([(gx["o"], top), (gx["o"], y_h), (x_tanh - 12, y_h)])
    c.text(gx["o"] + 9, 216, "o_t", anchor="start")
    c.product(x_tanh, y_h)
    c.arrow([(x_tanh, y_h + 12), (x_tanh, y_bus), (790, y_bus)])
    c.text(790, y_bus - 16, "h_t", anchor="end")
    c.text(x_tanh + 9, 160, "tanh(c_t)", size=SMALL, anchor="start")
    c.legend(
        424,
        [
            ("sigmoid", "σ layer"),
            ("tanh", "tanh layer"),
            ("product", "element-wise product ⊙"),
            ("plus", "sum"),
            ("thick", "cell state"),
        ],
        gap=24,
    )
    title = "The LSTM cell"
    desc = (
        "An LSTM cell drawn as a box. Along its top runs the cell state, drawn thick in an "
        "accent colour: c_(t−1) enters on the left, is multiplied element-wise by the forget "
        "gate f_t, gets i_t ⊙ g_t added, and leaves on the right as c_t. Along the bottom, "
        "h_(t−1) enters and x_t joins it from below; together, [h_(t−1); x_t], they feed "
        "four layers: sigmoid layers for the forget gate f_t, the input gate i_t and the "
        "output gate o_t, and a tanh layer for the candidate g_t. The product of i_t and g_t "
        "goes up into the sum on the cell state. On the right, a branch of c_t passes "
        "through tanh and is multiplied by o_t; the result h_t leaves the cell on the "
        "bottom right."
    )
    return c.finish(title, desc)


def gru_cell() -> Diagram:
    """The GRU cell, {eq}`lstm-G1` to {eq}`lstm-G4`, drawn like :func:`lstm_cell`.

    The state runs along the top: ``h_t = (1 − z_t) ⊙ h_{t−1} + z_t ⊙ ĥ_t``
    ({eq}`lstm-G4`), so ``z_t = 0`` keeps the old state and ``z_t = 1`` takes the
    candidate. The reset gate ``r_t`` scales ``h_{t−1}`` before it enters the candidate's
    tanh layer ({eq}`lstm-G3`).
    """
    c = _Canvas("gru-cell", 820, 476)
    y_top, y_gate, y_bus, y_x = 56, 262, 322, 362
    c.rect(70, 22, 660, 362, colour=INK, width=1.2, radius=14)
    x_branch, x_in = 110, 160
    x_r, x_z, x_cand = 220, 310, 620
    x_keep, x_sum = 440, x_cand
    # The state path: h_{t−1} → ⊙ (1 − z_t) → + z_t ⊙ ĥ_t → h_t.  (lstm-G4)
    c.line([(20, y_top), (x_keep - 13, y_top)], colour=ACCENT, width=4.5)
    c.line([(x_keep + 13, y_top), (x_sum - 13, y_top)], colour=ACCENT, width=4.5)
    c.arrow([(x_sum + 13, y_top), (796, y_top)], colour=ACCENT, width=4.5)
    c.product(x_keep, y_top, colour=ACCENT, r=13, width=2.4)
    c.plus(x_sum, y_top, colour=ACCENT, r=13, width=2.4)
    c.text(24, y_top - 20, "h_{t−1}", anchor="start")
    c.text(796, y_top - 20, "h_t", anchor="end")
    c.text((x_keep + x_sum) / 2, y_top - 20, "(1 − z_t) ⊙ h_{t−1}", size=SMALL)
    # h_{t−1} drops to the gates; x_t joins it.
    c.dot(x_branch, y_top, colour=ACCENT, r=4)
    c.line([(x_branch, y_top), (x_branch, y_bus), (x_z, y_bus)])
    c.line([(x_in, 420), (x_in, y_bus)])
    c.dot(x_in, y_bus)
    c.dot(x_in, y_x)
    c.text(x_in + 12, 408, "x_t", anchor="start")
    c.text(x_in + 12, y_bus + 18, "[h_{t−1}; x_t]", size=SMALL, anchor="start")
    box_w, box_h = 52, 34
    top = y_gate - box_h / 2
    for x in (x_r, x_z):
        if x != x_z:
            c.dot(x, y_bus)
        c.arrow([(x, y_bus), (x, y_gate + box_h / 2)])
        c.box(x, y_gate, box_w, box_h, "σ", colour=SIGMOID, size=18)
    # Reset: r_t ⊙ h_{t−1} enters the candidate.  (lstm-G2), (lstm-G3)
    y_reset = 186
    c.dot(x_branch, y_reset)
    c.arrow([(x_branch, y_reset), (x_r - 12, y_reset)])
    c.arrow([(x_r, top), (x_r, y_reset + 12)])
    c.product(x_r, y_reset)
    c.text(x_r + 9, 222, "r_t", anchor="start")
    x_down = x_cand - 60
    c.arrow([(x_r + 12, y_reset), (x_down, y_reset), (x_down, y_gate), (x_cand - 32, y_gate)])
    c.text(x_r + 20, y_reset - 14, "r_t ⊙ h_{t−1}", size=SMALL, anchor="start")
    c.box(x_cand, y_gate, 64, box_h, "tanh", colour=TANH, size=15)
    c.line([(x_in, y_x), (x_cand, y_x)])
    c.arrow([(x_cand, y_x), (x_cand, y_gate + box_h / 2)])
    # Update: z_t mixes the old state and the candidate.  (lstm-G1), (lstm-G4)
    y_z, y_mix, y_one = 140, 140, 100
    c.line([(x_z, top), (x_z, y_z), (x_keep, y_z)])
    c.text(x_z + 9, 222, "z_t", anchor="start")
    c.dot(x_keep, y_z)
    c.arrow([(x_keep, y_z), (x_keep, y_one + 13)])
    c.circle(x_keep, y_one, 13)
    c.text(x_keep, y_one, "1−", size=SMALL)
    c.arrow([(x_keep, y_one - 13), (x_keep, y_top + 13)])
    c.arrow([(x_keep, y_z), (x_sum - 12, y_mix)])
    c.product(x_sum, y_mix)
    c.arrow([(x_cand, top), (x_cand, y_mix + 12)])
    c.text(x_cand + 9, 206, "ĥ_t", anchor="start")
    c.arrow([(x_sum, y_mix - 12), (x_sum, y_top + 13)])
    c.text(x_sum + 9, 100, "z_t ⊙ ĥ_t", size=SMALL, anchor="start")
    c.legend(
        456,
        [
            ("sigmoid", "σ layer"),
            ("tanh", "tanh layer"),
            ("product", "element-wise product ⊙"),
            ("plus", "sum"),
            ("thick", "state path"),
        ],
        gap=24,
    )
    title = "The GRU cell"
    desc = (
        "A GRU cell drawn as a box. Along its top runs the hidden state, drawn thick in an "
        "accent colour: h_(t−1) enters on the left, is multiplied element-wise by 1 − z_t, "
        "gets z_t ⊙ ĥ_t added, and leaves on the right as h_t. A branch of h_(t−1) goes down "
        "and, joined by x_t from below, feeds two sigmoid layers: the reset gate r_t and the "
        "update gate z_t. The reset gate multiplies h_(t−1); that product and x_t feed a tanh "
        "layer, whose output is the candidate ĥ_t. The update gate goes up through a node "
        "1 − z_t to the product with h_(t−1), and directly to the product with ĥ_t: z_t = 0 "
        "keeps the old state, z_t = 1 replaces it by the candidate."
    )
    return c.finish(title, desc)


# --- Chapter 3 ---------------------------------------------------------------------------


def _ntm_weightings() -> list[tuple[str, list[float]]]:
    """A worked example of the four addressing steps on N = 8 rows, for the bar charts."""
    n = 8
    similarity = [0.1, 0.3, 0.95, 0.4, 0.1, 0.0, 0.2, 0.1]  # K[k_t, M_t(i)]
    beta = 4.0
    e = [math.exp(beta * k) for k in similarity]
    w_c = [v / sum(e) for v in e]  # (ntm-content)
    g = 0.8
    w_prev = [0.0] * n
    w_prev[5] = 1.0
    w_g = [g * a + (1 - g) * b for a, b in zip(w_c, w_prev)]  # (ntm-interpolate)
    s = {-1: 0.1, 0: 0.2, 1: 0.7}  # shift by +1, mostly
    w_s = [sum(w_g[(i - d) % n] * p for d, p in s.items()) for i in range(n)]  # (ntm-shift)
    gamma = 3.0
    powered = [v**gamma for v in w_s]
    w = [v / sum(powered) for v in powered]  # (ntm-sharpen)
    return [("w_t^c", w_c), ("w_t^g", w_g), ("w̃_t", w_s), ("w_t", w)]


def ntm_heads() -> Diagram:
    """The Neural Turing Machine: controller, read and write heads, memory, and addressing.

    Top: the controller emits each head's parameters; the read head returns
    ``r_t = M_tᵀ w_t^r`` ({eq}`ntm-read`), the write head erases and adds with ``e_t`` and
    ``a_t`` ({eq}`ntm-write`). Bottom: the four addressing steps every head runs,
    {eq}`ntm-content` (key ``k_t``, strength ``β_t``), {eq}`ntm-interpolate` (gate ``g_t``),
    {eq}`ntm-shift` (shift ``s_t``) and {eq}`ntm-sharpen` (``γ_t``), with bar charts of a
    worked example over N = 8 rows.
    """
    c = _Canvas("ntm-heads", 820, 470)
    # Controller.
    c.box(110, 130, 150, 140, "", colour=INK, tint=0.0)
    c.text(110, 120, "controller")
    c.text(110, 144, "(LSTM)", size=SMALL)
    c.arrow([(6, 175), (35, 175)])
    c.text(8, 160, "x_t", anchor="start")
    c.arrow([(110, 60), (110, 24)])
    c.text(122, 30, "y_t", anchor="start")
    # Heads.
    hx, hw, hh = 390, 128, 44
    y_read, y_write = 86, 178
    c.box(hx, y_read, hw, hh, "read head", colour=PINK)
    c.box(hx, y_write, hw, hh, "write head", colour=PINK)
    left, right = 185, hx - hw / 2
    c.arrow([(left, y_read - 10), (right, y_read - 10)])
    c.text((left + right) / 2, y_read - 24, "k, β, g, s, γ", size=SMALL)
    c.arrow([(right, y_read + 10), (left, y_read + 10)])
    c.text((left + right) / 2, y_read + 26, "r_t (read at t+1)", size=SMALL)
    c.arrow([(left, y_write), (right, y_write)])
    c.text((left + right) / 2, y_write - 14, "k, β, g, s, γ, e, a", size=SMALL)
    # Memory: N rows of M numbers, shaded by the read weighting of the example.
    mx, my, rows, cols, cw, ch = 584, 44, 8, 6, 30, 20
    weights = _ntm_weightings()[-1][1]
    for i in range(rows):
        c.rect(
            mx,
            my + i * ch,
            cols * cw,
            ch,
            colour="none",
            fill=PINK,
            opacity=round(0.08 + 0.5 * weights[i], 2),
            radius=0,
        )
    for i in range(rows + 1):
        c.line([(mx, my + i * ch), (mx + cols * cw, my + i * ch)], width=1)
    for j in range(cols + 1):
        c.line([(mx + j * cw, my), (mx + j * cw, my + rows * ch)], width=1)
    c.text(mx + cols * cw / 2, my - 16, "memory M_t", anchor="middle")
    c.text(mx + cols * cw + 10, my + rows * ch / 2, "N", anchor="start")
    c.text(mx + cols * cw / 2, my + rows * ch + 16, "M", anchor="middle")
    c.text(mx + cols * cw + 10, my + rows * ch / 2 + 20, "rows", size=SMALL, anchor="start")
    hr = hx + hw / 2
    c.arrow([(hr, y_read - 10), (mx, y_read - 10)])
    c.text((hr + mx) / 2, y_read - 24, "w_t^r", size=SMALL)
    c.arrow([(mx, y_read + 10), (hr, y_read + 10)])
    c.text((hr + mx) / 2, y_read + 26, "r_t = M_t^⊤ w_t^r", size=SMALL)
    c.arrow([(hr, y_write), (mx, y_write)])
    c.text((hr + mx) / 2, y_write - 14, "w_t^w, e_t, a_t", size=SMALL)
    # The addressing pipeline.
    y_sep = 244
    c.line([(20, y_sep), (800, y_sep)], width=1, dash="2 5")
    c.text(
        20, y_sep + 22, "Addressing, run by each head: from M_t and w_{t−1} to w_t", anchor="start"
    )
    stages = [
        ("content", "key k_t, strength β_t"),
        ("interpolation", "gate g_t, with w_{t−1}"),
        ("shift", "shift weights s_t"),
        ("sharpening", "exponent γ_t"),
    ]
    width, height, y_box = 160, 54, 316
    xs = [96, 302, 508, 714]
    outputs = _ntm_weightings()
    for k, ((name, params), x) in enumerate(zip(stages, xs)):
        c.box(x, y_box, width, height, "", colour=PINK)
        c.text(x, y_box - 11, name)
        c.text(x, y_box + 12, params, size=13)
        label, w = outputs[k]
        # Bars: this step's weighting over the N rows.
        bw, base = 12, 420
        x0 = x - rows * bw / 2
        for i, v in enumerate(w):
            h = max(1.0, 58 * v)
            c.rect(x0 + i * bw + 1.5, base - h, bw - 3, h, colour="none", fill=PINK, radius=1)
        c.line([(x0, base), (x0 + rows * bw, base)], width=1)
        c.text(x, base + 16, label, size=SMALL)
        if k < 3:
            c.arrow([(x + width / 2, y_box), (xs[k + 1] - width / 2, y_box)])
            c.text((x + xs[k + 1]) / 2, y_box - 16, label, size=SMALL)
    c.text(
        24,
        456,
        "bars: one weighting over the N = 8 rows, after each step",
        size=SMALL,
        anchor="start",
        italic=True,
    )
    title = "The Neural Turing Machine: controller, heads, memory and addressing"
    desc = (
        "Top: a controller box (an LSTM) takes the input x_t and emits the output y_t. It "
        "sends each head its parameters: key k, strength β, gate g, shift s and sharpening "
        "γ to the read head, and the same plus the erase vector e and the add vector a to "
        "the write head. The heads address a memory matrix M_t of N rows and M columns: "
        "the read head sends a weighting w_t^r and gets back the read vector r_t = M_t^T "
        "w_t^r, which returns to the controller at the next step; the write head sends "
        "w_t^w, e_t and a_t. Bottom: the addressing pipeline that each head runs, four "
        "boxes in a row: content addressing with key k_t and strength β_t gives w_t^c; "
        "interpolation with gate g_t and the previous weighting w_(t−1) gives w_t^g; the "
        "shift with s_t gives w̃_t; sharpening with γ_t gives w_t. Under each box a bar chart "
        "of eight bars shows a worked example: a peak from the content lookup, blended "
        "with the previous weighting, moved by one row and blurred by the shift, then "
        "sharpened into a single clear peak."
    )
    return c.finish(title, desc)


# --- Chapter 4 ---------------------------------------------------------------------------


def lmu_toeplitz(n: int = 6) -> Diagram:
    """The parallel LMU's memory as a lower-triangular Toeplitz matrix times the input.

    Stacking {eq}`lmu-solution`, ``m_t = Σ_{j≤t} Ā^{t−j} B̄ u_j``, for t = 1..n gives a
    block matrix whose entry (t, j) is ``Ā^{t−j} B̄ = H_{:,t−j+1}``: constant along each
    diagonal (Toeplitz) and zero above it (causal). Multiplying by it is a causal
    convolution of ``u`` with the impulse response ``H``, which the FFT evaluates in
    ``O(n log n d)`` ({eq}`lmu-modes`).

    Args:
        n: the number of steps drawn, 3 to 8.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 3 <= n <= 8:
        raise ValueError(f"n must be an integer from 3 to 8 (steps drawn), not {n!r}")
    c = _Canvas("lmu-toeplitz", 860, 440)
    cell_w, cell_h = 312 / n, 270 / n
    top = 70
    colours = [BLUE, VERMILLION, GREEN, PINK, ORANGE, SKY, GREY, BLUE]

    def vector(x, name, label):
        c.rect(x, top, 56, n * cell_h, colour=INK, radius=4)
        for t in range(1, n):
            c.line([(x, top + t * cell_h), (x + 56, top + t * cell_h)], width=1)
        for t in range(1, n + 1):
            c.text(x + 28, top + (t - 0.5) * cell_h, f"{name}_{{{t}}}", size=15)
        c.text(x + 28, top - 22, label, size=SMALL)

    vector(20, "m", "memory")
    c.text(100, top + n * cell_h / 2, "=", size=26)
    x0 = 124
    for t in range(1, n + 1):
        for j in range(1, t + 1):
            k = t - j
            x, y = x0 + (j - 1) * cell_w, top + (t - 1) * cell_h
            c.rect(x, y, cell_w, cell_h, colour="none", fill=colours[k], opacity=0.16, radius=0)
            power = {0: "", 1: "Ā"}.get(k, f"Ā^{{{k}}}")
            c.text(x + cell_w / 2, y + cell_h / 2, f"{power}B̄", size=14)
    c.rect(x0, top, n * cell_w, n * cell_h, colour=INK, radius=2)
    c.text(x0 + n * cell_w * 0.72, top + n * cell_h * 0.3, "0", size=30)
    c.text(x0 + n * cell_w / 2, top - 22, "entry (t, j) = Ā^{t−j} B̄ = H_{:,t−j+1}", size=SMALL)
    # Each diagonal is one column of the impulse response H; name them under the last row.
    for k in range(n):
        j = n - k
        x = x0 + (j - 0.5) * cell_w
        c.text(x, top + n * cell_h + 16, f"H_{{:,{k + 1}}}", size=SMALL)
    c.text(
        x0 + n * cell_w / 2, top + n * cell_h + 46, "diagonal k holds H_{:,k+1} = Ā^k B̄", size=SMALL
    )
    xu = x0 + n * cell_w + 40
    c.text(xu - 20, top + n * cell_h / 2, "×", size=24)
    vector(xu, "u", "input")
    tx = xu + 84
    lines = [
        ("m_t = Σ_{j≤t} Ā^{t−j} B̄ u_j", SIZE, INK),
        ("", SMALL, INK),
        ("the same block along each diagonal:", SMALL, INK),
        ("a Toeplitz matrix", SMALL, INK),
        ("zeros above the diagonal: causal,", SMALL, INK),
        ("m_t sees u_1, …, u_t only", SMALL, INK),
        ("", SMALL, INK),
        ("= a causal convolution of u", 15, ACCENT),
        ("with the impulse response H,", 15, ACCENT),
        ("computed by FFT", 15, ACCENT),
        ("in O(n log n · d), padded to 2n", SMALL, INK),
        ("", SMALL, INK),
        ("the last row alone gives m_n:", SMALL, INK),
        ("H applied to u read backwards", SMALL, INK),
    ]
    y = top + 6
    for text, size, colour in lines:
        if text:
            c.text(tx, y, text, colour=colour, size=size, anchor="start")
        y += size + 7 if text else 10
    c.text(
        20,
        424,
        f"n = {n} steps of one channel shown; each entry B̄, ĀB̄, … is a d-vector",
        size=SMALL,
        anchor="start",
        italic=True,
    )
    title = "The LMU's memory as a causal convolution: a lower-triangular Toeplitz matrix"
    desc = (
        f"The memories m_1 to m_{n}, stacked as a column, equal a {n}-by-{n} lower-triangular "
        f"matrix times the column of inputs u_1 to u_{n}. Entry (t, j) of the matrix is Ā "
        f"to the power t−j times B̄, which is column t−j+1 of the impulse response H: B̄ on "
        f"the main diagonal, ĀB̄ on the first diagonal below it, Ā²B̄ on the second, and so "
        f"on, each diagonal in its own colour and constant along its length, so the matrix "
        f"is Toeplitz. Above the diagonal every entry is zero, so m_t depends only on "
        f"u_1 to u_t: the product is a causal convolution of the input with H, which the "
        f"FFT computes in O(n log n · d) time after zero-padding to length 2n. The last row "
        f"alone gives the final memory m_n: H applied to the input read backwards."
    )
    return c.finish(title, desc)


# --- Chapter 8 ---------------------------------------------------------------------------


def han_reader() -> Diagram:
    """HAN-ptr: the hierarchical attention reader with its pointer read-out.

    Bottom to top: the words ``x_{i,j}`` of each sentence, read by one word biGRU (the same
    weights for every sentence) into ``D^{word}_{i,j}``; word attention with the query
    vector ``q`` ({eq}`han-word-attention`) and the blend ``D^{blend}_i`` ({eq}`han-blend`);
    the sentence biGRU and sentence attention ({eq}`han-sentence`); and the pointer
    ``α^{doc}_{i,j} = α^{sent}_i α^{word}_{i,j}``, summed over each candidate's positions
    into ``P(c_k)`` ({eq}`han-pointer`), which has no parameters. Right: the query biGRU
    whose final states make ``q``. The attention and pointer path is in the accent colour.
    """
    c = _Canvas("han-reader", 820, 670)
    y_ptr, y_sent, y_s, y_blend = 60, 212, 268, 324
    y_word, y_w, y_x = 432, 490, 552
    y_caption = y_x + 34
    rnn = BLUE
    pitch, word_w, word_h = 46, 40, 30
    bar_word, bar_sent = 40, 44  # the height of an attention weight of 1
    x_doc, x_mid, x_right = 138, 335, 560  # the document's columns
    # Row labels on the left, in the chapter's symbols.
    rows = [
        (y_ptr, "pointer", ACCENT),
        (y_sent - 36, "α^{sent}_i", ACCENT),
        (y_sent, "D^{sent}_i", INK),
        (y_blend, "D^{blend}_i", INK),
        (y_word - 30, "α^{word}_{i,j}", ACCENT),
        (y_word, "D^{word}_{i,j}", INK),
        (y_x, "x_{i,j}", INK),
    ]
    for y, label, colour in rows:
        c.text(104, y, label, colour=colour, anchor="end")
    # The document: sentence 1, the sentences between, sentence S; made-up weights.
    sentences = [(205, "1", [0.12, 0.22, 0.46], 0.14), (465, "S", [0.78, 0.08, 0.1], 0.74)]
    y_fan = y_word - 14 - bar_word - 4  # the blend's arrows start above the bars
    for cx, i, weights, weight_sent in sentences:
        slots = [cx + (k - 1.5) * pitch for k in range(4)]  # words 1, 2, …, W
        for x, j, weight in zip([slots[0], slots[1], slots[3]], "12W", weights):
            c.box(x, y_x, word_w, word_h, f"x_{{{i},{j}}}", size=SMALL, tint=0.0)
            c.arrow([(x, y_x - word_h / 2), (x, y_w + 16)])
            c.arrow([(x, y_w - 16), (x, y_word + 12)])
            c.rect(x - 15, y_word - 12, 30, 24, colour=INK, radius=3)
            # α^{word}_{i,j}: a bar on each word's vector.  (han-word-attention)
            h = max(2.0, bar_word * weight)
            c.rect(x - 9, y_word - 14 - h, 18, h, colour="none", fill=ACCENT, radius=1)
            # The blend: the vectors' sum, weighted by the bars.  (han-blend)
            c.arrow([(x, y_fan), (cx, y_blend + 15)], width=1.2)
        for y in (y_x, y_word):
            c.text(slots[2], y, "⋯")
        c.box(cx, y_w, 4 * pitch - 6, 32, "biGRU_w", colour=rnn)
        c.text(cx, y_caption, f"sentence {i}", size=SMALL, italic=True)
        c.box(cx, y_blend, 96, 30, f"D^{{blend}}_{{{i}}}", size=SMALL, tint=0.0)
        c.arrow([(cx, y_blend - 15), (cx, y_s + 17)])
        c.arrow([(cx, y_s - 17), (cx, y_sent + 15)])
        c.box(cx, y_sent, 96, 30, f"D^{{sent}}_{{{i}}}", size=SMALL, tint=0.0)
        # α^{sent}_i: one bar per sentence, and on to the pointer.  (han-sentence)
        h = bar_sent * weight_sent
        c.rect(cx - 14, y_sent - 17 - h, 28, h, colour="none", fill=ACCENT, radius=1)
        c.arrow([(cx, y_sent - 21 - bar_sent), (cx, y_ptr + 43)], colour=ACCENT, width=3)
    for y in (y_x, y_w, y_word, y_blend, y_sent):
        c.text(x_mid, y, "⋯")
    c.box(x_mid, y_s, 2 * (x_mid - x_doc + 6), 34, "biGRU_s", colour=rnn)
    # α^{word}_{i,j} reaches the pointer along the left.
    x_wire = 116
    y_wire = y_word - 24
    c.line(
        [(205 - 1.5 * pitch - 13, y_wire), (x_wire, y_wire), (x_wire, y_ptr)],
        colour=ACCENT,
        width=3,
    )
    c.arrow([(x_wire, y_ptr), (x_doc, y_ptr)], colour=ACCENT, width=3)
    # The pointer: no parameters, a lookup of token identities.  (han-pointer)
    x_box = (x_doc + x_right) / 2
    c.box(x_box, y_ptr, x_right - x_doc, 84, "", colour=ACCENT, tint=0.1)
    c.text(x_box, y_ptr - 24, "α^{doc}_{i,j} = α^{sent}_i α^{word}_{i,j}")
    c.text(x_box, y_ptr + 1, "P(c_k) = Σ α^{doc}_{i,j}")
    c.text(x_box, y_ptr + 25, "over the positions (i, j) where D_{i,j} = c_k", size=SMALL)
    c.arrow([(x_right, y_ptr), (700, y_ptr)], colour=ACCENT, width=3)
    c.text(708, y_ptr, "P(c_k)", anchor="start")
    c.text(630, y_ptr + 22, "no parameters", colour=ACCENT, size=SMALL, italic=True)
    # The query, on the right: its biGRU's final states make q.
    x_q = 700
    for x, word in ((640, "xxxxx"), (700, "rel3"), (760, "obj5")):
        c.box(x, y_x, 56, word_h, word, size=SMALL, tint=0.0)
        c.arrow([(x, y_x - word_h / 2), (x, y_w + 16)])
    c.text(x_q, y_caption, "query", size=SMALL, italic=True)
    c.box(x_q, y_w, 176, 32, "biGRU_q", colour=rnn)
    c.arrow([(x_q, y_w - 16), (x_q, y_word + 14)])
    c.box(x_q, y_word, 44, 28, "q", tint=0.0)
    c.text(x_q + 30, y_word, "final states", size=SMALL, anchor="start")
    # q scores the words and the sentences: q^⊤ D.
    x_last = 465 + 1.5 * pitch + 9  # the right edge of sentence S's last bar
    c.arrow([(x_q - 22, y_word), (618, y_word), (618, y_wire), (x_last + 4, y_wire)], colour=ACCENT)
    c.text(588, y_wire - 16, "q^⊤D^{word}_{i,j}", colour=ACCENT, size=SMALL)
    y_score = y_sent - 17 - bar_sent / 2
    c.arrow([(x_q, y_word - 14), (x_q, y_score), (465 + 18, y_score)], colour=ACCENT)
    c.text(590, y_score - 16, "q^⊤D^{sent}_i", colour=ACCENT, size=SMALL)
    c.text(
        x_mid,
        y_caption + 26,
        "one word biGRU_w: the same weights read every sentence",
        size=SMALL,
        italic=True,
    )
    # The legend.
    y_key = 646
    c.box(150, y_key, 40, 22, "", colour=rnn)
    c.text(178, y_key, "bidirectional GRU", size=SMALL, anchor="start")
    c.rect(370, y_key + 10 - 22, 12, 22, colour="none", fill=ACCENT, radius=1)
    c.text(390, y_key, "attention weight", size=SMALL, anchor="start")
    c.line([(540, y_key), (576, y_key)], colour=ACCENT, width=3)
    c.text(586, y_key, "attention and pointer", size=SMALL, anchor="start")
    title = "HAN-ptr: the hierarchical attention reader with a pointer read-out"
    desc = (
        "A layered diagram read from bottom to top. At the bottom left is the document, "
        "sentences 1 to S, of which sentence 1 and sentence S are drawn and the ones "
        "between are dots; each sentence is a row of word boxes x_(i,1), x_(i,2), …, "
        "x_(i,W). Above each sentence, a word biGRU, biGRU_w, with the same weights for "
        "every sentence, turns the words into vectors D^word_(i,j). On each vector sits a "
        "bar in an accent colour, its word attention α^word_(i,j), a softmax over the "
        "sentence of the scores q^T D^word_(i,j); arrows from the vectors converge on "
        "the blend D^blend_i, their sum weighted by the bars. A sentence biGRU, biGRU_s, "
        "reads the blends of all sentences and gives D^sent_i, on which sits the sentence "
        "attention α^sent_i, a softmax over sentences of q^T D^sent_i. At the bottom right "
        "is the query, xxxxx rel3 obj5, whose blank xxxxx stands for the answer; a query "
        "biGRU, biGRU_q, reads it and its final states make the query vector q, from which "
        "accent-coloured arrows go to the word attention and to the sentence attention. "
        "At the top, thick accent-coloured arrows bring both attentions into the pointer: "
        "α^doc_(i,j) = α^sent_i α^word_(i,j) is one attention over every token of the "
        "document, and P(c_k), the sum of α^doc_(i,j) over the positions where the "
        "candidate c_k occurs, leaves on the right. The pointer has no parameters. In the "
        "example bars, sentence S gets most of the sentence attention and its first word "
        "most of its word attention."
    )
    return c.finish(title, desc)


# --- Chapter 9 ---------------------------------------------------------------------------


def _abs_example() -> dict[str, list]:
    """The made-up sentence of :func:`abs_layer`: its attention, decisions and fill.

    ``alpha`` sums to 1 (abs-decision); ``filled`` follows (abs-fill) from ``b``, with ``"0"``
    before the first kept position; ``alpha_again`` is the attention recomputed on the filled
    outputs (abs-asa), equal on the copies of one state because they have the same score.
    """
    tokens = ["the", "cat", "sat", "on", "the", "mat"]
    alpha = [0.04, 0.38, 0.22, 0.05, 0.03, 0.28]
    b = [0, 1, 0, 0, 0, 1]  # one Bernoulli draw: "sat" (0.22) happened to skip
    filled, last = [], "0"
    for t, keep in enumerate(b, start=1):
        if keep:
            last = f"ĥ_{t}"
        filled.append(last)
    # softmax_t(q^⊤h_t) with scores 0 (the zeros), s (ĥ_2 and its copies) and s + 0.33 (ĥ_6)
    alpha_again = [0.03, 0.18, 0.18, 0.18, 0.18, 0.25]
    return {
        "tokens": tokens,
        "alpha": alpha,
        "b": b,
        "filled": filled,
        "alpha_again": alpha_again,
    }


def abs_layer() -> Diagram:
    """Attention-based skipping (ABS) on one sentence: encode, attend, skip, and the two ways on.

    Top to bottom: a biGRU reads the six tokens into ``ĥ_1 … ĥ_6``; the attention ``α_t``
    (summing to 1) gives each position its probability of updating; the decisions
    ``b_t ~ Bernoulli(α_t)`` ({eq}`abs-decision`) keep some outputs, and the forward fill
    ({eq}`abs-fill`) copies the last kept output into the skipped positions, zeros before
    the first. Below, the two variants: ABS-AS blends the filled outputs with the original
    ``α_t`` and its pointer keeps them ({eq}`abs-as`); ABS-ASA attends again on the filled
    outputs, ``α′_t``, equal on the copies of one state, and uses ``α′_t`` for the blend and
    the pointer ({eq}`abs-asa`). The attention and skip path is in the accent colour.
    """
    example = _abs_example()
    tokens, alpha, b = example["tokens"], example["alpha"], example["b"]
    filled, alpha_again = example["filled"], example["alpha_again"]
    c = _Canvas("abs-layer", 820, 648)
    rnn = BLUE
    pitch, box_w, box_h = 64, 52, 30
    xs = [112 + pitch * k for k in range(len(tokens))]
    x_label, x_note = 66, 492  # the row symbols (right-aligned) and the steps' notes
    y_x, y_rnn, y_hat, y_base, y_b, y_h = 34, 86, 136, 228, 278, 324
    bar = 140  # the height of an attention weight of 1

    def dashed_box(x, y, w, h, colour=ACCENT, radius=6):
        """A rounded box centred on (x, y), outlined with dashes: a copy, not a new output."""
        left, top, r = x - w / 2, y - h / 2, radius
        d = (
            f"M{_num(left + r)} {_num(top)} H{_num(left + w - r)} "
            f"A{_num(r)} {_num(r)} 0 0 1 {_num(left + w)} {_num(top + r)} V{_num(top + h - r)} "
            f"A{_num(r)} {_num(r)} 0 0 1 {_num(left + w - r)} {_num(top + h)} H{_num(left + r)} "
            f"A{_num(r)} {_num(r)} 0 0 1 {_num(left)} {_num(top + h - r)} V{_num(top + r)} "
            f"A{_num(r)} {_num(r)} 0 0 1 {_num(left + r)} {_num(top)} Z"
        )
        c.path(d, colour=colour, width=1.6, dash="5 3")

    def bars(xs_, weights, base, colour=ACCENT, values_below=False, size=SMALL):
        """Attention weights as bars standing on ``base``, each with its value."""
        for x, weight in zip(xs_, weights):
            h = max(2.0, bar * weight)
            c.rect(x - 10, base - h, 20, h, colour="none", fill=colour, radius=1)
            y_value = base + 13 if values_below else base - h - 10
            c.text(x, y_value, f"{weight:.2f}", size=size)

    # Row symbols on the left.
    rows = [
        (y_x, "x_t", INK),
        (y_hat, "ĥ_t", INK),
        (y_base - 24, "α_t", ACCENT),
        (y_b, "b_t", ACCENT),
        (y_h, "h_t", INK),
    ]
    for y, label, colour in rows:
        c.text(x_label, y, label, colour=colour, anchor="end")

    # 1. Encode: the biGRU reads the whole sentence.
    for x, word in zip(xs, tokens):
        c.box(x, y_x, box_w, 28, word, size=SMALL, tint=0.0)
        c.arrow([(x, y_x + 14), (x, y_rnn - 15)])
        c.arrow([(x, y_rnn + 15), (x, y_hat - box_h / 2)])
    span = xs[-1] - xs[0] + box_w
    c.box((xs[0] + xs[-1]) / 2, y_rnn, span, 30, "biGRU", colour=rnn)
    for t, x in enumerate(xs, start=1):
        c.box(x, y_hat, box_w, box_h, f"ĥ_{t}", tint=0.0)
    # 2. Attend: one bar per position, summing to 1.
    c.line([(xs[0] - pitch / 2 + 4, y_base), (xs[-1] + pitch / 2 - 4, y_base)], width=1.2)
    bars(xs, alpha, y_base, values_below=True)
    # 3. Skip: the decisions, and the forward fill of the outputs.
    for t, (x, keep, label) in enumerate(zip(xs, b, filled), start=1):
        if keep:
            c.circle(x, y_b, 9, colour=ACCENT, fill=ACCENT, width=1.6)
            c.arrow([(x, y_b + 10), (x, y_h - box_h / 2)], colour=ACCENT)
            c.box(x, y_h, box_w, box_h, label, tint=0.0)
        else:
            c.circle(x, y_b, 9, colour=ACCENT, width=2)
            dashed_box(x, y_h, box_w, box_h)
            c.text(x, y_h, label)
            if t > 1:  # h_t = h_{t−1}: a copy from the left
                x0 = xs[t - 2]
                c.curve_arrow(
                    (x0 + 12, y_h + box_h / 2 + 1),
                    (x0 + 24, y_h + 34),
                    (x - 24, y_h + 34),
                    (x - 12, y_h + box_h / 2 + 2),
                    colour=ACCENT,
                )
    # The steps' notes on the right.
    notes = [
        (y_x, None, "one sentence, n = 6 tokens"),
        (y_rnn, None, "reads every token, both ways"),
        (y_hat, "1 encode", "the outputs ĥ_1 … ĥ_n"),
        (y_base - 24, "2 attend", "α_t = softmax_t(q^⊤ĥ_t), Σ_t α_t = 1"),
        (y_b, "3 skip", "b_t ~ Bernoulli(α_t), in hindsight"),
        (y_h + 14, None, "h_t = b_t ĥ_t + (1 − b_t) h_{t−1}, h_0 = 0"),
    ]
    for y, step, note in notes:
        if step:
            c.text(x_note, y - 12, step, anchor="start")
            c.text(x_note, y + 12, note, size=SMALL, anchor="start")
        else:
            c.text(x_note, y, note, size=SMALL, anchor="start", italic=y < y_hat)
    c.text(x_note, y_h - 10, "forward fill:", colour=ACCENT, size=SMALL, anchor="start")

    # 4. Two ways on: the branches to the two variants.
    y_split, y_panel, panel_h = 378, 398, 198
    panels = [(20, 404), (416, 800)]
    centres = [(left + right) / 2 for left, right in panels]
    x_mid = (xs[0] + xs[-1]) / 2
    c.line([(x_mid, y_h + 40), (x_mid, y_split)])
    c.dot(x_mid, y_split)
    c.line([(centres[0], y_split), (centres[1], y_split)])
    for x in centres:
        c.arrow([(x, y_split), (x, y_panel - 2)])
    c.text(centres[1] + 16, y_split, "4 blend and point", anchor="start")
    variants = [
        (
            "ABS-AS: attend and skip",
            "word level only",
            "α_t",
            alpha,
            "D^{blend} = Σ_t α_t h_t, the original α_t",
            "the pointer keeps α_t: P(the) = α_1 + α_5 = 0.07",
        ),
        (
            "ABS-ASA: attend, skip, attend",
            "any level",
            "α′_t",
            alpha_again,
            "D^{blend} = Σ_t α′_t h_t, α′_t = softmax_t(q^⊤h_t)",
            "the pointer uses α′_t: P(the) = α′_1 + α′_5 = 0.21",
        ),
    ]
    y_head, y_pbase, y_mini = y_panel + 22, y_panel + 112, y_panel + 126
    mini_pitch, mini_w, mini_h = 52, 42, 26
    for (left, right), centre, variant in zip(panels, centres, variants):
        head, level, symbol, weights, blend, pointer = variant
        c.rect(left, y_panel, right - left, panel_h, colour=INK, width=1.2, radius=12)
        c.text(left + 14, y_head, head, anchor="start")
        c.text(right - 14, y_head, level, size=SMALL, anchor="end", italic=True)
        mini = [centre + 14 + (k - 2.5) * mini_pitch for k in range(len(filled))]
        for x, label, keep in zip(mini, filled, b):
            if keep:
                c.rect(x - mini_w / 2, y_mini - mini_h / 2, mini_w, mini_h)
            else:
                dashed_box(x, y_mini, mini_w, mini_h)
            c.text(x, y_mini, label, size=SMALL)
        bars(mini, weights, y_pbase - 1, size=13)
        c.text(left + 10, y_pbase - 16, symbol, colour=ACCENT, size=SMALL, anchor="start")
        c.text(left + 10, y_mini, "h_t", size=SMALL, anchor="start")
        c.text(left + 14, y_panel + 158, blend, size=SMALL, anchor="start")
        c.text(left + 14, y_panel + 180, pointer, size=SMALL, anchor="start")
    # ABS-ASA: the copies of ĥ_2 have one score, so one weight.
    copies = [x for x, label in zip(mini, filled) if label == "ĥ_2"]
    y_brace = y_pbase - 1 - bar * alpha_again[filled.index("ĥ_2")] - 22  # above the values
    c.line(
        [
            (copies[0] - 16, y_brace + 6),
            (copies[0] - 16, y_brace),
            (copies[-1] + 16, y_brace),
            (copies[-1] + 16, y_brace + 6),
        ],
        colour=ACCENT,
        width=1.2,
    )
    c.text((copies[0] + copies[-1]) / 2, y_brace - 12, "copies of ĥ_2: equal α′_t", size=SMALL)

    # The legend.
    y_key = 626
    c.circle(96, y_key, 8, colour=ACCENT, fill=ACCENT)
    c.text(112, y_key, "update, b_t = 1", size=SMALL, anchor="start")
    c.circle(256, y_key, 8, colour=ACCENT, width=2)
    c.text(272, y_key, "skip, b_t = 0", size=SMALL, anchor="start")
    dashed_box(418, y_key, 40, 22)
    c.text(446, y_key, "copy of the last kept output", size=SMALL, anchor="start")
    c.rect(678, y_key + 10 - 22, 12, 22, colour="none", fill=ACCENT, radius=1)
    c.text(698, y_key, "attention", size=SMALL, anchor="start")
    title = "Attention-based skipping (ABS): encode, attend, skip, and attend again or not"
    desc = (
        "A diagram read from top to bottom, on one sentence of six tokens: the cat sat on "
        "the mat. Step 1, encode: a biGRU reads every token, and its outputs ĥ_1 to ĥ_6 "
        "are a row of boxes. Step 2, attend: below each output stands a bar in an accent "
        "colour, its attention α_t = softmax_t(q^T ĥ_t); the made-up weights 0.04, 0.38, "
        "0.22, 0.05, 0.03 and 0.28 sum to 1. Step 3, skip: each position draws "
        "b_t ~ Bernoulli(α_t), in hindsight, since the biGRU has already read everything; "
        "here cat and mat update (filled circles) and the, sat, on and the second the skip "
        "(hollow circles). The forward fill h_t = b_t ĥ_t + (1 − b_t) h_(t−1), with "
        "h_0 = 0, then gives the row 0, ĥ_2, ĥ_2, ĥ_2, ĥ_2, ĥ_6: a kept position takes its "
        "own output, a skipped one, drawn as a dashed box with an arrow from its left "
        "neighbour, holds a copy of the last kept output, and the position before the "
        "first kept one holds zeros. Step 4 branches into two panels, both of which blend "
        "the filled outputs into D^blend and point. Left, ABS-AS (attend and skip, word "
        "level only): the blend uses the original attention, D^blend = Σ_t α_t h_t, and "
        "the pointer keeps α_t, so the bars are those of step 2 and P(the) = α_1 + α_5 = "
        "0.07. Right, ABS-ASA (attend, skip, attend, at any level): the attention is "
        "computed again on the filled outputs, α′_t = softmax_t(q^T h_t), and used by the "
        "blend and the pointer; the four copies of ĥ_2 get the same score and so equal "
        "weights, 0.18 each, the zeros get 0.03 and ĥ_6 0.25. A skipped token can thus "
        "inherit attention from the state it copies: P(the) = α′_1 + α′_5 = 0.21."
    )
    return c.finish(title, desc)


ALL = {
    "unrolled_rnn": unrolled_rnn,
    "lstm_cell": lstm_cell,
    "gru_cell": gru_cell,
    "ntm_heads": ntm_heads,
    "lmu_toeplitz": lmu_toeplitz,
    "han_reader": han_reader,
    "abs_layer": abs_layer,
}
