"""Chapter 3: the Neural Turing Machine's controller, heads, memory and addressing."""

from __future__ import annotations

import math

from .canvas import INK, PINK, SMALL, Canvas, Diagram

HEAD_X, HEAD_W, HEAD_H = 390, 128, 44  # the read and write heads
Y_READ, Y_WRITE = 86, 178
MEM_X, MEM_Y, ROWS, COLS = 584, 44, 8, 6  # the memory: its corner, N rows, M columns
CELL_W, CELL_H = 30, 20

TITLE = "The Neural Turing Machine: controller, heads, memory and addressing"
DESCRIPTION = (
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
    c = Canvas("ntm-heads", 820, 470)
    _controller(c)
    _heads(c)
    _memory(c)
    _addressing(c)
    c.text(
        24,
        456,
        "bars: one weighting over the N = 8 rows, after each step",
        size=SMALL,
        anchor="start",
        italic=True,
    )
    return c.finish(TITLE, DESCRIPTION)


def _controller(c: Canvas) -> None:
    """The controller (an LSTM), with its input x_t and output y_t."""
    c.box(110, 130, 150, 140, "", colour=INK, tint=0.0)
    c.text(110, 120, "controller")
    c.text(110, 144, "(LSTM)", size=SMALL)
    c.arrow([(6, 175), (35, 175)])
    c.text(8, 160, "x_t", anchor="start")
    c.arrow([(110, 60), (110, 24)])
    c.text(122, 30, "y_t", anchor="start")


def _heads(c: Canvas) -> None:
    """The read and write heads, and what the controller sends them."""
    c.box(HEAD_X, Y_READ, HEAD_W, HEAD_H, "read head", colour=PINK)
    c.box(HEAD_X, Y_WRITE, HEAD_W, HEAD_H, "write head", colour=PINK)
    left, right = 185, HEAD_X - HEAD_W / 2
    c.arrow([(left, Y_READ - 10), (right, Y_READ - 10)])
    c.text((left + right) / 2, Y_READ - 24, "k, β, g, s, γ", size=SMALL)
    c.arrow([(right, Y_READ + 10), (left, Y_READ + 10)])
    c.text((left + right) / 2, Y_READ + 26, "r_t (read at t+1)", size=SMALL)
    c.arrow([(left, Y_WRITE), (right, Y_WRITE)])
    c.text((left + right) / 2, Y_WRITE - 14, "k, β, g, s, γ, e, a", size=SMALL)


def _memory(c: Canvas) -> None:
    """N rows of M numbers, shaded by the example's read weighting, and the heads' traffic."""
    weights = _ntm_weightings()[-1][1]
    for i in range(ROWS):
        c.rect(
            MEM_X,
            MEM_Y + i * CELL_H,
            COLS * CELL_W,
            CELL_H,
            colour="none",
            fill=PINK,
            opacity=round(0.08 + 0.5 * weights[i], 2),
            radius=0,
        )
    right, bottom = MEM_X + COLS * CELL_W, MEM_Y + ROWS * CELL_H
    for i in range(ROWS + 1):
        c.line([(MEM_X, MEM_Y + i * CELL_H), (right, MEM_Y + i * CELL_H)], width=1)
    for j in range(COLS + 1):
        c.line([(MEM_X + j * CELL_W, MEM_Y), (MEM_X + j * CELL_W, bottom)], width=1)
    middle = MEM_X + COLS * CELL_W / 2
    c.text(middle, MEM_Y - 16, "memory M_t", anchor="middle")
    c.text(right + 10, MEM_Y + ROWS * CELL_H / 2, "N", anchor="start")
    c.text(middle, bottom + 16, "M", anchor="middle")
    c.text(right + 10, MEM_Y + ROWS * CELL_H / 2 + 20, "rows", size=SMALL, anchor="start")
    hr = HEAD_X + HEAD_W / 2
    c.arrow([(hr, Y_READ - 10), (MEM_X, Y_READ - 10)])
    c.text((hr + MEM_X) / 2, Y_READ - 24, "w_t^r", size=SMALL)
    c.arrow([(MEM_X, Y_READ + 10), (hr, Y_READ + 10)])
    c.text((hr + MEM_X) / 2, Y_READ + 26, "r_t = M_t^⊤ w_t^r", size=SMALL)
    c.arrow([(hr, Y_WRITE), (MEM_X, Y_WRITE)])
    c.text((hr + MEM_X) / 2, Y_WRITE - 14, "w_t^w, e_t, a_t", size=SMALL)


def _addressing(c: Canvas) -> None:
    """The four addressing steps in a row, each with the example's weighting as bars."""
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
        _bars(c, x, w)
        c.text(x, 420 + 16, label, size=SMALL)
        if k < 3:
            c.arrow([(x + width / 2, y_box), (xs[k + 1] - width / 2, y_box)])
            c.text((x + xs[k + 1]) / 2, y_box - 16, label, size=SMALL)


def _bars(c: Canvas, x: float, w: list[float]) -> None:
    """One weighting over the N rows as bars centred on ``x``, standing on a base line."""
    bw, base = 12, 420
    x0 = x - ROWS * bw / 2
    for i, v in enumerate(w):
        h = max(1.0, 58 * v)
        c.rect(x0 + i * bw + 1.5, base - h, bw - 3, h, colour="none", fill=PINK, radius=1)
    c.line([(x0, base), (x0 + ROWS * bw, base)], width=1)
