"""Chapter 2: the GRU cell, drawn like the LSTM cell."""

from __future__ import annotations

from .canvas import ACCENT, INK, SIGMOID, SMALL, TANH, Canvas, Diagram

Y_TOP, Y_GATE, Y_BUS, Y_X = 56, 262, 322, 362  # the state, the gate layers, the bus, x_t
X_BRANCH, X_IN = 110, 160  # where h_{t−1} drops to the gates; where x_t comes up
X_R, X_Z, X_CAND = 220, 310, 620  # the reset gate, the update gate, the candidate's tanh
X_KEEP, X_SUM = 440, 620  # the products on the state path
BOX_W, BOX_H = 52, 34
GATE_TOP = Y_GATE - BOX_H / 2

TITLE = "The GRU cell"
DESCRIPTION = (
    "A GRU cell drawn as a box. Along its top runs the hidden state, drawn thick in an "
    "accent colour: h_(t−1) enters on the left, is multiplied element-wise by 1 − z_t, "
    "gets z_t ⊙ ĥ_t added, and leaves on the right as h_t. A branch of h_(t−1) goes down "
    "and, joined by x_t from below, feeds two sigmoid layers: the reset gate r_t and the "
    "update gate z_t. The reset gate multiplies h_(t−1); that product and x_t feed a tanh "
    "layer, whose output is the candidate ĥ_t. The update gate goes up through a node "
    "1 − z_t to the product with h_(t−1), and directly to the product with ĥ_t: z_t = 0 "
    "keeps the old state, z_t = 1 replaces it by the candidate."
)


def gru_cell() -> Diagram:
    """The GRU cell, {eq}`lstm-G1` to {eq}`lstm-G4`, drawn like :func:`lstm_cell`.

    The state runs along the top: ``h_t = (1 − z_t) ⊙ h_{t−1} + z_t ⊙ ĥ_t``
    ({eq}`lstm-G4`), so ``z_t = 0`` keeps the old state and ``z_t = 1`` takes the
    candidate. The reset gate ``r_t`` scales ``h_{t−1}`` before it enters the candidate's
    tanh layer ({eq}`lstm-G3`).
    """
    c = Canvas("gru-cell", 820, 476)
    _state_path(c)
    _gate_layers(c)
    _reset(c)
    _update(c)
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
    return c.finish(TITLE, DESCRIPTION)


def _state_path(c: Canvas) -> None:
    """The frame, and h_{t−1} → ⊙ (1 − z_t) → + z_t ⊙ ĥ_t → h_t.  (lstm-G4)"""
    c.rect(70, 22, 660, 362, colour=INK, width=1.2, radius=14)
    c.line([(20, Y_TOP), (X_KEEP - 13, Y_TOP)], colour=ACCENT, width=4.5)
    c.line([(X_KEEP + 13, Y_TOP), (X_SUM - 13, Y_TOP)], colour=ACCENT, width=4.5)
    c.arrow([(X_SUM + 13, Y_TOP), (796, Y_TOP)], colour=ACCENT, width=4.5)
    c.product(X_KEEP, Y_TOP, colour=ACCENT, r=13, width=2.4)
    c.plus(X_SUM, Y_TOP, colour=ACCENT, r=13, width=2.4)
    c.text(24, Y_TOP - 20, "h_{t−1}", anchor="start")
    c.text(796, Y_TOP - 20, "h_t", anchor="end")
    c.text((X_KEEP + X_SUM) / 2, Y_TOP - 20, "(1 − z_t) ⊙ h_{t−1}", size=SMALL)


def _gate_layers(c: Canvas) -> None:
    """h_{t−1} drops to the gates, x_t joins it, and both feed the σ layers r_t and z_t."""
    c.dot(X_BRANCH, Y_TOP, colour=ACCENT, r=4)
    c.line([(X_BRANCH, Y_TOP), (X_BRANCH, Y_BUS), (X_Z, Y_BUS)])
    c.line([(X_IN, 420), (X_IN, Y_BUS)])
    c.dot(X_IN, Y_BUS)
    c.dot(X_IN, Y_X)
    c.text(X_IN + 12, 408, "x_t", anchor="start")
    c.text(X_IN + 12, Y_BUS + 18, "[h_{t−1}; x_t]", size=SMALL, anchor="start")
    for x in (X_R, X_Z):
        if x != X_Z:
            c.dot(x, Y_BUS)
        c.arrow([(x, Y_BUS), (x, Y_GATE + BOX_H / 2)])
        c.box(x, Y_GATE, BOX_W, BOX_H, "σ", colour=SIGMOID, size=18)


def _reset(c: Canvas) -> None:
    """r_t ⊙ h_{t−1} and x_t enter the candidate's tanh layer.  (lstm-G2), (lstm-G3)"""
    y_reset = 186
    c.dot(X_BRANCH, y_reset)
    c.arrow([(X_BRANCH, y_reset), (X_R - 12, y_reset)])
    c.arrow([(X_R, GATE_TOP), (X_R, y_reset + 12)])
    c.product(X_R, y_reset)
    c.text(X_R + 9, 222, "r_t", anchor="start")
    x_down = X_CAND - 60
    c.arrow([(X_R + 12, y_reset), (x_down, y_reset), (x_down, Y_GATE), (X_CAND - 32, Y_GATE)])
    c.text(X_R + 20, y_reset - 14, "r_t ⊙ h_{t−1}", size=SMALL, anchor="start")
    c.box(X_CAND, Y_GATE, 64, BOX_H, "tanh", colour=TANH, size=15)
    c.line([(X_IN, Y_X), (X_CAND, Y_X)])
    c.arrow([(X_CAND, Y_X), (X_CAND, Y_GATE + BOX_H / 2)])


def _update(c: Canvas) -> None:
    """z_t mixes the old state (through 1 − z_t) and the candidate ĥ_t.  (lstm-G1), (lstm-G4)"""
    y_z, y_mix, y_one = 140, 140, 100
    c.line([(X_Z, GATE_TOP), (X_Z, y_z), (X_KEEP, y_z)])
    c.text(X_Z + 9, 222, "z_t", anchor="start")
    c.dot(X_KEEP, y_z)
    c.arrow([(X_KEEP, y_z), (X_KEEP, y_one + 13)])
    c.circle(X_KEEP, y_one, 13)
    c.text(X_KEEP, y_one, "1−", size=SMALL)
    c.arrow([(X_KEEP, y_one - 13), (X_KEEP, Y_TOP + 13)])
    c.arrow([(X_KEEP, y_z), (X_SUM - 12, y_mix)])
    c.product(X_SUM, y_mix)
    c.arrow([(X_CAND, GATE_TOP), (X_CAND, y_mix + 12)])
    c.text(X_CAND + 9, 206, "ĥ_t", anchor="start")
    c.arrow([(X_SUM, y_mix - 12), (X_SUM, Y_TOP + 13)])
    c.text(X_SUM + 9, 100, "z_t ⊙ ĥ_t", size=SMALL, anchor="start")
