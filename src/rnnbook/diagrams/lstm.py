"""Chapter 2: the LSTM cell, with its cell-state path highlighted."""

from __future__ import annotations

from .canvas import ACCENT, INK, SIGMOID, SMALL, TANH, Canvas, Diagram

Y_C, Y_GATE, Y_BUS = 62, 248, 312  # the cell state, the gate layers, the input bus
GATE_X = {"f": 250, "i": 330, "g": 420, "o": 520}
X_TANH = 614  # the column of tanh(c_t) and h_t
BOX_W, BOX_H = 52, 34  # a gate layer
GATE_TOP = Y_GATE - BOX_H / 2

TITLE = "The LSTM cell"
DESCRIPTION = (
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


def lstm_cell() -> Diagram:
    """The LSTM cell, {eq}`lstm-L1` to {eq}`lstm-L6`, with the cell-state path highlighted.

    The cell state runs along the top, from ``c_{t−1}`` through the forget gate's product
    and the input's sum to ``c_t`` (thick, accent-coloured, {eq}`lstm-L4`): on that path
    the state is only scaled and added to, never squashed. Below, ``h_{t−1}`` and ``x_t``
    feed the four layers ``f_t, i_t, o_t`` (σ) and ``g_t`` (tanh).
    """
    c = Canvas("lstm-cell", 820, 444)
    _cell_state(c)
    _gate_layers(c)
    _forget_and_write(c)
    _output(c)
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
    return c.finish(TITLE, DESCRIPTION)


def _cell_state(c: Canvas) -> None:
    """The frame, and c_{t−1} → ⊙ f_t → + i_t ⊙ g_t → c_t along the top.  (lstm-L4)"""
    c.rect(86, 26, 630, 318, colour=INK, width=1.2, radius=14)
    x_prod, x_sum = GATE_X["f"], GATE_X["g"]
    c.line([(24, Y_C), (x_prod - 12, Y_C)], colour=ACCENT, width=4.5)
    c.line([(x_prod + 12, Y_C), (x_sum - 12, Y_C)], colour=ACCENT, width=4.5)
    c.arrow([(x_sum + 12, Y_C), (790, Y_C)], colour=ACCENT, width=4.5)
    c.product(x_prod, Y_C, colour=ACCENT, r=13, width=2.4)
    c.plus(x_sum, Y_C, colour=ACCENT, r=13, width=2.4)
    c.text(30, Y_C - 20, "c_{t−1}", anchor="start")
    c.text(790, Y_C - 20, "c_t", anchor="end")
    c.text(530, Y_C - 20, "cell state", colour=ACCENT, size=SMALL)


def _gate_layers(c: Canvas) -> None:
    """The input bus [h_{t−1}; x_t] and the four layers it feeds."""
    c.line([(24, Y_BUS), (GATE_X["o"], Y_BUS)])
    c.text(30, Y_BUS - 16, "h_{t−1}", anchor="start")
    x_in = 150
    c.line([(x_in, 394), (x_in, Y_BUS)])
    c.dot(x_in, Y_BUS)
    c.text(x_in + 12, 384, "x_t", anchor="start")
    c.text(x_in + 14, Y_BUS + 17, "[h_{t−1}; x_t]", size=SMALL, anchor="start")
    for name, x in GATE_X.items():
        if name != "o":
            c.dot(x, Y_BUS)
        c.arrow([(x, Y_BUS), (x, Y_GATE + BOX_H / 2)])
        if name == "g":
            c.box(x, Y_GATE, BOX_W + 6, BOX_H, "tanh", colour=TANH, size=15)
        else:
            c.box(x, Y_GATE, BOX_W, BOX_H, "σ", colour=SIGMOID, size=18)


def _forget_and_write(c: Canvas) -> None:
    """f_t scales the old cell state; i_t ⊙ g_t is added to it.  (lstm-L1)-(lstm-L3)"""
    c.arrow([(GATE_X["f"], GATE_TOP), (GATE_X["f"], Y_C + 13)])
    c.text(GATE_X["f"] + 9, 172, "f_t", anchor="start")
    y_ig = 150
    c.arrow([(GATE_X["i"], GATE_TOP), (GATE_X["i"], y_ig), (GATE_X["g"] - 12, y_ig)])
    c.text(GATE_X["i"] + 9, 200, "i_t", anchor="start")
    c.arrow([(GATE_X["g"], GATE_TOP), (GATE_X["g"], y_ig + 12)])
    c.text(GATE_X["g"] + 9, 200, "g_t", anchor="start")
    c.product(GATE_X["g"], y_ig)
    c.arrow([(GATE_X["g"], y_ig - 12), (GATE_X["g"], Y_C + 13)])
    c.text(GATE_X["g"] + 9, 106, "i_t ⊙ g_t", size=SMALL, anchor="start")


def _output(c: Canvas) -> None:
    """h_t = o_t ⊙ tanh(c_t), leaving on the bottom right.  (lstm-L5), (lstm-L6)"""
    y_tanh, y_h = 128, 196
    c.dot(X_TANH, Y_C, colour=ACCENT, r=4)
    c.arrow([(X_TANH, Y_C), (X_TANH, y_tanh - 13)])
    c.rect(X_TANH - 28, y_tanh - 13, 56, 26, colour=INK, radius=13)
    c.text(X_TANH, y_tanh, "tanh", size=15)
    c.arrow([(X_TANH, y_tanh + 13), (X_TANH, y_h - 12)])
    c.arrow([(GATE_X["o"], GATE_TOP), (GATE_X["o"], y_h), (X_TANH - 12, y_h)])
    c.text(GATE_X["o"] + 9, 216, "o_t", anchor="start")
    c.product(X_TANH, y_h)
    c.arrow([(X_TANH, y_h + 12), (X_TANH, Y_BUS), (790, Y_BUS)])
    c.text(790, Y_BUS - 16, "h_t", anchor="end")
    c.text(X_TANH + 9, 160, "tanh(c_t)", size=SMALL, anchor="start")
