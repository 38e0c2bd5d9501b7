"""Chapter 1: the simple recurrent network, folded and unrolled over time, with BPTT."""

from __future__ import annotations

import re

from .canvas import ACCENT, INK, SMALL, Canvas, Diagram

# Rows, from the top: the loss, the read-out, the hidden state, the input.
Y_LOSS, Y_OUT, Y_H, Y_X = 42, 118, 228, 338
OUT_W, OUT_H = 104, 40  # the read-out box
H_W, H_H = 66, 46  # the hidden-state box
X_W, X_H = 62, 36  # the input box
FOLDED_X = 86
STEPS = [(330, "t−1"), (500, "t"), (670, "t+1")]  # the unrolled columns: x and step

TITLE = "A simple recurrent network, folded and unrolled over time"


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
    c = Canvas("unrolled-rnn", 820, 440)
    _folded(c, readout)
    _unrolled(c, readout)
    _gradient_of_h_t(c)
    c.text(500, 392, "unrolled over time: the same weights at every step", size=SMALL, italic=True)
    c.legend(
        422,
        [
            ("arrow", "forward pass"),
            ("dashed", "backward pass (BPTT): gradients flow back in time"),
        ],
    )
    return c.finish(TITLE, _description(readout))


def _column(c: Canvas, cx: float, t: str, readout: str) -> None:
    """One step of the network: x_t → h_t → read-out → loss, with the forward weights."""
    c.text(cx - 10, Y_LOSS, f"ℓ_{{{t}}}")
    c.box(cx, Y_OUT, OUT_W, OUT_H, f"{readout}_{{{t}}}, ŷ_{{{t}}}")
    c.box(cx, Y_H, H_W, H_H, f"h_{{{t}}}", colour=INK, tint=0.0)
    c.box(cx, Y_X, X_W, X_H, f"x_{{{t}}}", tint=0.0)
    c.arrow([(cx, Y_X - X_H / 2), (cx, Y_H + H_H / 2)])  # (rnn-R1)
    c.arrow([(cx - 10, Y_H - H_H / 2), (cx - 10, Y_OUT + OUT_H / 2)])  # (rnn-R3)
    c.arrow([(cx - 10, Y_OUT - OUT_H / 2), (cx - 10, Y_LOSS + 12)])
    c.text(cx - 7, (Y_X - X_H / 2 + Y_H + H_H / 2) / 2, "W_{xh}", anchor="end")
    c.text(cx - 17, (Y_H - H_H / 2 + Y_OUT + OUT_H / 2) / 2, "W_{hy}", anchor="end")


def _folded(c: Canvas, readout: str) -> None:
    """Left: one cell whose recurrent weight W_hh is a self-loop, then an equals sign."""
    _column(c, FOLDED_X, "t", readout)
    right = FOLDED_X + H_W / 2
    c.curve_arrow(
        (right, Y_H - 12), (right + 58, Y_H - 50), (right + 58, Y_H + 50), (right, Y_H + 12)
    )
    c.text(right + 30, Y_H - 50, "W_{hh}")
    c.text(FOLDED_X + 20, 392, "folded", size=SMALL, italic=True)
    c.text(212, Y_H, "=", size=28)


def _unrolled(c: Canvas, readout: str) -> None:
    """Right: the steps t−1, t, t+1, chained by W_hh, with the backward pass dashed."""
    for cx, t in STEPS:
        _column(c, cx, t, readout)
        # The gradient from the read-out's loss back into h (first term of (rnn-R5)).
        c.arrow([(cx + 14, Y_LOSS + 14), (cx + 14, Y_OUT - OUT_H / 2)], colour=ACCENT, dash="6 4")
        c.arrow([(cx + 14, Y_OUT + OUT_H / 2), (cx + 14, Y_H - H_H / 2)], colour=ACCENT, dash="6 4")
    y_fwd, y_bwd = Y_H - 9, Y_H + 11
    lefts = [262] + [cx + H_W / 2 for cx, _ in STEPS]
    rights = [cx - H_W / 2 for cx, _ in STEPS] + [760]
    for k, (a, b) in enumerate(zip(lefts, rights)):
        c.arrow([(a, y_fwd), (b, y_fwd)])  # h_{t−1} → h_t
        if 0 < k < len(STEPS):  # not on the stubs from and to the steps not drawn
            c.text((a + b) / 2, y_fwd - 14, "W_{hh}", size=SMALL)
        c.arrow([(b, y_bwd), (a, y_bwd)], colour=ACCENT, dash="6 4")  # δ back in time
    c.text(254, Y_H, "⋯", anchor="end")
    c.text(772, Y_H, "⋯", anchor="start")


def _gradient_of_h_t(c: Canvas) -> None:
    """The two terms of the gradient of h_t, written at step t only."""
    cx = 500
    c.text(cx + 22, (Y_OUT + OUT_H / 2 + Y_H - H_H / 2) / 2, "W_{hy}^⊤ε_t", ACCENT, SMALL, "start")
    c.text(cx + H_W / 2 + 53, Y_H + 11 + 20, "W_{hh}^⊤δ_{t+1}", ACCENT, SMALL)


def _description(readout: str) -> str:
    return (
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
