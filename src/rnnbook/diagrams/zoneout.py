"""Chapter 7: an LSTM step with zoneout, and where the gate-level variants toss their coin."""

from __future__ import annotations

from .canvas import ACCENT, BLUE, INK, SMALL, TANH, Canvas, Diagram

LSTM = BLUE  # the LSTM family's colour (rnnbook.plot.FAMILY_COLORS["lstm"])
Y_C, Y_H = 64, 312  # the cell state and the hidden state
Y_CAND_C, Y_CAND_H = 140, 236  # the candidates c̃_t and o_t ⊙ tanh(c̃_t)
X_BRANCH, X_TANH = 140, 330  # where the states enter the LSTM step; the tanh of c̃_t
X_KEEP, X_ONE, X_SUM = 470, 556, 640  # d ⊙ old state; 1 − d; the sum
Y_COIN_C, Y_COIN_H = 106, 272
BOX = (100, 104, 170, 168)  # the LSTM step: left, top, width, height
Y_PANEL = 430  # the gate-level family

TITLE = "Zoneout in an LSTM: two coins keep the cell and the hidden state"


def zoneout_cell() -> Diagram:
    """One LSTM step with zoneout, and the gate-level family of Alpay's zoneout.

    Top: the plain LSTM step (lstm-L1)-(lstm-L6) gives the candidate cell
    ``c̃_t = f_t ⊙ c_{t−1} + i_t ⊙ g_t`` and the hidden candidate ``o_t ⊙ tanh(c̃_t)``,
    built from the un-zoned ``c̃_t``; two independent keep masks, coins
    ``d^c_t ~ Bernoulli(z_c)`` and ``d^h_t ~ Bernoulli(z_h)`` (zo-mask), 1 = keep, mix each
    state with its previous value: ``c_t = d^c_t ⊙ c_{t−1} + (1 − d^c_t) ⊙ c̃_t``
    (zo-lstm-c) and ``h_t = d^h_t ⊙ h_{t−1} + (1 − d^h_t) ⊙ (o_t ⊙ tanh(c̃_t))``
    (zo-lstm-h); at test time the masks become their expectations (zo-expect). The kept
    path, along which a zoned-out unit passes its value unchanged, is thick and
    accent-coloured. Bottom: the gate-level variants, one coin ``b_t ~ Bernoulli(p)`` per
    unit with 1 = update, drawn where each acts: Z_f on the forget gate, Z_i on the input
    gate, Z_c on the cell, Z_h on the hidden state, and Z_ch on both states with one draw.
    """
    c = Canvas("zoneout-cell", 820, 660)
    c.rect(70, 28, 650, 316, colour=INK, width=1.2, radius=14)
    _kept_paths(c)
    _lstm_step(c)
    _candidates(c)
    _coin_mix(c, Y_C, Y_CAND_C, Y_COIN_C, "c")
    _coin_mix(c, Y_H, Y_CAND_H, Y_COIN_H, "h")
    _equations(c)
    _gate_level_panel(c)
    _legend(c)
    return c.finish(TITLE, DESCRIPTION)


def _coin(c: Canvas, x: float, y: float, r: float = 11) -> None:
    """A coin: a random 0/1 draw per unit (two rings, accent-coloured)."""
    c.circle(x, y, r, colour=ACCENT, width=2)
    c.circle(x, y, r * 0.62, colour=ACCENT, width=1.2)


def _kept_paths(c: Canvas) -> None:
    """c_{t−1} → d^c ⊙ → + → c_t along the top, h_{t−1} → d^h ⊙ → + → h_t along the bottom."""
    for y, old, new in ((Y_C, "c_{t−1}", "c_t"), (Y_H, "h_{t−1}", "h_t")):
        c.line([(20, y), (X_KEEP - 13, y)], colour=ACCENT, width=4.5)
        c.line([(X_KEEP + 13, y), (X_SUM - 13, y)], colour=ACCENT, width=4.5)
        c.arrow([(X_SUM + 13, y), (790, y)], colour=ACCENT, width=4.5)
        c.product(X_KEEP, y, colour=ACCENT, r=13, width=2.4)
        c.plus(X_SUM, y, colour=ACCENT, r=13, width=2.4)
        c.text(24, y - 20, old, anchor="start")
        c.text(790, y - 20, new, anchor="end")
        c.dot(X_BRANCH, y, colour=ACCENT, r=4)


def _lstm_step(c: Canvas) -> None:
    """The plain LSTM step reads c_{t−1}, h_{t−1} and x_t.  (lstm-L1)-(lstm-L6)"""
    left, top, width, height = BOX
    c.rect(left, top, width, height, LSTM, LSTM, 0.12)
    x = left + width / 2
    c.text(x, top + 26, "plain LSTM step")
    c.text(x, top + 54, "f_t, i_t, g_t, o_t", size=SMALL)
    c.text(x, top + 90, "c̃_t = f_t ⊙ c_{t−1}", size=SMALL)
    c.text(x, top + 112, "+ i_t ⊙ g_t", size=SMALL)
    c.arrow([(X_BRANCH, Y_C), (X_BRANCH, top)])
    c.arrow([(X_BRANCH, Y_H), (X_BRANCH, top + height)])
    c.arrow([(20, top + 148), (left, top + 148)])
    c.text(24, top + 132, "x_t", anchor="start")


def _candidates(c: Canvas) -> None:
    """c̃_t, and o_t ⊙ tanh(c̃_t) built from the un-zoned c̃_t."""
    right = BOX[0] + BOX[2]
    c.arrow([(right, Y_CAND_C), (X_SUM - 12, Y_CAND_C)])
    c.text(390, Y_CAND_C - 14, "c̃_t", size=SMALL)
    c.dot(X_TANH, Y_CAND_C)
    y_tanh = (Y_CAND_C + Y_CAND_H) / 2
    c.arrow([(X_TANH, Y_CAND_C), (X_TANH, y_tanh - 13)])
    c.rect(X_TANH - 28, y_tanh - 13, 56, 26, colour=TANH, fill=TANH, opacity=0.12, radius=13)
    c.text(X_TANH, y_tanh, "tanh", size=SMALL)
    c.arrow([(X_TANH, y_tanh + 13), (X_TANH, Y_CAND_H - 12)])
    c.arrow([(right, Y_CAND_H), (X_TANH - 12, Y_CAND_H)])
    c.text(right + 10, Y_CAND_H - 14, "o_t", size=SMALL, anchor="start")
    c.product(X_TANH, Y_CAND_H)
    c.arrow([(X_TANH + 12, Y_CAND_H), (X_SUM - 12, Y_CAND_H)])
    c.text(X_ONE - 18, Y_CAND_H - 14, "o_t ⊙ tanh(c̃_t)", size=SMALL)


def _coin_mix(c: Canvas, y_state: float, y_cand: float, y_coin: float, state: str) -> None:
    """d ⊙ old state + (1 − d) ⊙ candidate, the coin d drawn for every unit."""
    toward = 1 if y_cand > y_state else -1  # +1: the candidate lies below the state
    c.product(X_SUM, y_cand)
    c.arrow([(X_SUM, y_cand - 12 * toward), (X_SUM, y_state + 13 * toward)])
    _coin(c, X_KEEP, y_coin)
    c.text(X_KEEP - 20, y_coin, f"d^{state}_t ~ Bernoulli(z_{state})", size=SMALL, anchor="end")
    c.arrow([(X_KEEP, y_coin - 11 * toward), (X_KEEP, y_state + 13 * toward)], colour=ACCENT)
    c.line([(X_KEEP + 11, y_coin), (X_ONE - 13, y_coin)], colour=ACCENT)
    c.circle(X_ONE, y_coin, 13)
    c.text(X_ONE, y_coin, "1−", size=SMALL)
    dx, dy = X_SUM - (X_ONE + 13), y_cand - y_coin
    norm = (dx * dx + dy * dy) ** 0.5
    c.arrow([(X_ONE + 13, y_coin), (X_SUM - 12 * dx / norm, y_cand - 12 * dy / norm)])


def _equations(c: Canvas) -> None:
    lines = [
        "c_t = d^c_t ⊙ c_{t−1} + (1 − d^c_t) ⊙ c̃_t",
        "h_t = d^h_t ⊙ h_{t−1} + (1 − d^h_t) ⊙ (o_t ⊙ tanh(c̃_t))",
    ]
    for k, line in enumerate(lines):
        c.text(70, 366 + 24 * k, line, size=SMALL, anchor="start")
    c.text(790, 366, "1 = keep, two independent coins", size=SMALL, anchor="end", italic=True)
    c.text(790, 390, "test time: d^c_t → z_c, d^h_t → z_h", size=SMALL, anchor="end")


def _gate_level_panel(c: Canvas) -> None:
    """Alpay's gate-level zoneout: one coin b_t per unit, 1 = update, and where it acts."""
    top, left, right = Y_PANEL, 20, 800
    c.rect(left, top, right - left, 190, colour=INK, width=1.2, radius=12)
    title = "Gate-level zoneout: one coin b_t ~ Bernoulli(p) per unit, 1 = update (b_t = 1 − d_t)"
    c.text(left + 14, top + 22, title, anchor="start")
    _mini_cell(c, top + 60)
    rows = [
        ("Z_c", "c_t = c_{t−1}, then h_t = o_t ⊙ tanh(c_t)"),
        ("Z_f", "f_t := 1: forget nothing"),
        ("Z_i", "i_t := 0: write nothing"),
        ("Z_{ch}", "c_t = c_{t−1}, h_t = h_{t−1}: one coin"),
        ("Z_h", "h_t = h_{t−1} (the source dropped it)"),
    ]
    x_name, x_rule = 420, 474
    c.text(x_name, top + 54, "in the kept units, b_t = 0:", size=SMALL, anchor="start")
    for k, (name, rule) in enumerate(rows):
        y = top + 80 + 22 * k
        c.text(x_name, y, name, colour=ACCENT, size=SMALL, anchor="start")
        c.text(x_rule, y, rule, size=SMALL, anchor="start")


def _mini_cell(c: Canvas, y_c: float) -> None:
    """A small LSTM cell with a coin on each place the variants keep."""
    x0, x_f, x_sum, x_tanh, x_end = 48, 120, 200, 300, 380
    y_h = y_c + 96
    c.arrow([(x0, y_c), (x_end, y_c)])
    c.text(x0, y_c - 16, "c_{t−1}", size=SMALL, anchor="start")
    c.text(x_end, y_c - 16, "c_t", size=SMALL, anchor="end")
    c.product(x_f, y_c, r=10)
    c.plus(x_sum, y_c, r=10)
    # f_t scales the old cell: Z_f's coin sits on it.
    c.arrow([(x_f, y_c + 60), (x_f, y_c + 10)])
    c.text(x_f - 10, y_c + 54, "f_t", size=SMALL, anchor="end")
    _badge(c, x_f, y_c + 34, "Z_f")
    # i_t ⊙ g_t is written: Z_i's coin sits on i_t.
    y_ig = y_c + 50
    c.product(x_sum, y_ig, r=10)
    c.arrow([(x_sum, y_ig - 10), (x_sum, y_c + 10)])
    c.arrow([(x_sum - 52, y_ig), (x_sum - 10, y_ig)])
    c.text(x_sum - 56, y_ig, "i_t", size=SMALL, anchor="end")
    _badge(c, x_sum - 30, y_ig, "Z_i", above=True)
    c.arrow([(x_sum, y_ig + 36), (x_sum, y_ig + 10)])
    c.text(x_sum + 8, y_ig + 28, "g_t", size=SMALL, anchor="start")
    # The cell itself: Z_c's coin.
    _badge(c, (x_sum + x_tanh) / 2, y_c, "Z_c", above=True)
    # h_t = o_t ⊙ tanh(c_t): Z_h's coin on h.
    c.dot(x_tanh, y_c)
    c.arrow([(x_tanh, y_c), (x_tanh, y_c + 32)])
    c.text(x_tanh, y_c + 44, "tanh", size=SMALL)
    c.arrow([(x_tanh, y_c + 56), (x_tanh, y_h - 10)])
    c.product(x_tanh, y_h, r=10)
    c.arrow([(x_tanh - 46, y_h), (x_tanh - 10, y_h)])
    c.text(x_tanh - 52, y_h, "o_t", size=SMALL, anchor="end")
    c.arrow([(x_tanh + 10, y_h), (x_end, y_h)])
    c.text(x_end, y_h - 16, "h_t", size=SMALL, anchor="end")
    _badge(c, (x_tanh + x_end) / 2, y_h, "Z_h", above=True)


def _badge(c: Canvas, x: float, y: float, name: str, above: bool | None = None) -> None:
    """A small coin on a wire, with the name of the variant that tosses it there."""
    _coin(c, x, y, r=8)
    if above is None:  # on a vertical wire: the name to the right
        c.text(x + 14, y, name, colour=ACCENT, size=SMALL, anchor="start")
    else:
        c.text(x, y - 20 if above else y + 20, name, colour=ACCENT, size=SMALL)


def _legend(c: Canvas) -> None:
    y_key = 644
    _coin(c, 120, y_key, r=9)
    c.text(136, y_key, "a coin per unit", size=SMALL, anchor="start")
    c.product(280, y_key, r=9)
    c.text(296, y_key, "element-wise product ⊙", size=SMALL, anchor="start")
    c.plus(510, y_key, r=9)
    c.text(526, y_key, "sum", size=SMALL, anchor="start")
    c.line([(580, y_key), (616, y_key)], colour=ACCENT, width=4.5)
    c.text(626, y_key, "kept value", size=SMALL, anchor="start")


DESCRIPTION = (
    "Top: an LSTM step with zoneout, drawn as a box. The previous cell state c_(t−1) runs "
    "along the top and the previous hidden state h_(t−1) along the bottom, both thick in an "
    "accent colour: the path along which a zoned-out unit keeps its value. Branches of both, "
    "and the input x_t from the left, enter a box for the plain LSTM step, which computes the "
    "gates f_t, i_t, g_t and o_t and the candidate cell c̃_t = f_t ⊙ c_(t−1) + i_t ⊙ g_t. "
    "c̃_t leaves the box to the right; a branch of it passes through tanh and is multiplied "
    "by o_t, so the hidden candidate o_t ⊙ tanh(c̃_t) is built from the un-zoned cell. Each "
    "state is then mixed by its own coin, a keep mask drawn for every unit: d^c_t ~ "
    "Bernoulli(z_c) for the cell and, independently, d^h_t ~ Bernoulli(z_h) for the hidden "
    "state, 1 = keep. The coin multiplies the old state on the kept path and, through a "
    "node 1 − d, the candidate, and a sum gives c_t = d^c_t ⊙ c_(t−1) + (1 − d^c_t) ⊙ c̃_t "
    "and h_t = d^h_t ⊙ h_(t−1) + (1 − d^h_t) ⊙ (o_t ⊙ tanh(c̃_t)), written below the cell. "
    "At test time the coins are replaced by their expectations z_c and z_h. Bottom: a panel "
    "on the gate-level family, in which one coin b_t ~ Bernoulli(p) per unit, 1 = update, "
    "acts at one place of the cell. A small LSTM cell carries a coin on each place: Z_f on "
    "the forget gate (f_t := 1 in the kept units: forget nothing), Z_i on the input gate "
    "(i_t := 0: write nothing), Z_c on the cell state (c_t = c_(t−1), then h_t = o_t ⊙ "
    "tanh(c_t)) and Z_h on the hidden state (h_t = h_(t−1), dropped by the source); Z_ch "
    "keeps both c and h with one shared coin."
)
