"""Chapter 9: attention-based skipping (ABS) on one sentence, and its two variants."""

from __future__ import annotations

from .canvas import ACCENT, BLUE, INK, SMALL, Canvas, Diagram

PITCH, BOX_W, BOX_H = 64, 52, 30  # the token columns and the boxes of the outputs
XS = [112 + PITCH * k for k in range(6)]  # one column per token
X_MID = (XS[0] + XS[-1]) / 2
X_LABEL, X_NOTE = 66, 492  # the row symbols (right-aligned) and the steps' notes
Y_X, Y_RNN, Y_HAT, Y_BASE, Y_B, Y_H = 34, 86, 136, 228, 278, 324
BAR = 140  # the height of an attention weight of 1
# Step 4: the two panels, ABS-AS on the left and ABS-ASA on the right.
Y_SPLIT, Y_PANEL, PANEL_H = 378, 398, 198
PANELS = [(20, 404), (416, 800)]
Y_PBASE, Y_MINI = Y_PANEL + 112, Y_PANEL + 126  # the panels' bars and boxes
MINI_PITCH, MINI_W, MINI_H = 52, 42, 26

TITLE = "Attention-based skipping (ABS): encode, attend, skip, and attend again or not"
DESCRIPTION = (
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
    c = Canvas("abs-layer", 820, 648)
    _row_symbols(c)
    _encode(c, example["tokens"])
    _attend(c, example["alpha"])
    _skip(c, example["b"], example["filled"])
    _notes(c)
    _two_ways(c, example)
    _legend(c)
    return c.finish(TITLE, DESCRIPTION)


def _bars(c: Canvas, xs, weights, base, values_below=False, size=SMALL) -> None:
    """Attention weights as accent-coloured bars standing on ``base``, each with its value."""
    for x, weight in zip(xs, weights):
        h = max(2.0, BAR * weight)
        c.rect(x - 10, base - h, 20, h, colour="none", fill=ACCENT, radius=1)
        y_value = base + 13 if values_below else base - h - 10
        c.text(x, y_value, f"{weight:.2f}", size=size)


def _row_symbols(c: Canvas) -> None:
    """The symbols of the rows, on the left."""
    rows = [
        (Y_X, "x_t", INK),
        (Y_HAT, "ĥ_t", INK),
        (Y_BASE - 24, "α_t", ACCENT),
        (Y_B, "b_t", ACCENT),
        (Y_H, "h_t", INK),
    ]
    for y, label, colour in rows:
        c.text(X_LABEL, y, label, colour=colour, anchor="end")


def _encode(c: Canvas, tokens: list[str]) -> None:
    """Step 1: the biGRU reads the whole sentence into ĥ_1 … ĥ_n."""
    for x, word in zip(XS, tokens):
        c.box(x, Y_X, BOX_W, 28, word, size=SMALL, tint=0.0)
        c.arrow([(x, Y_X + 14), (x, Y_RNN - 15)])
        c.arrow([(x, Y_RNN + 15), (x, Y_HAT - BOX_H / 2)])
    span = XS[-1] - XS[0] + BOX_W
    c.box(X_MID, Y_RNN, span, 30, "biGRU", colour=BLUE)
    for t, x in enumerate(XS, start=1):
        c.box(x, Y_HAT, BOX_W, BOX_H, f"ĥ_{t}", tint=0.0)


def _attend(c: Canvas, alpha: list[float]) -> None:
    """Step 2: one attention bar per position, summing to 1."""
    c.line([(XS[0] - PITCH / 2 + 4, Y_BASE), (XS[-1] + PITCH / 2 - 4, Y_BASE)], width=1.2)
    _bars(c, XS, alpha, Y_BASE, values_below=True)


def _skip(c: Canvas, b: list[int], filled: list[str]) -> None:
    """Step 3: the decisions, and the forward fill of the outputs."""
    for t, (x, keep, label) in enumerate(zip(XS, b, filled), start=1):
        if keep:
            c.circle(x, Y_B, 9, colour=ACCENT, fill=ACCENT, width=1.6)
            c.arrow([(x, Y_B + 10), (x, Y_H - BOX_H / 2)], colour=ACCENT)
            c.box(x, Y_H, BOX_W, BOX_H, label, tint=0.0)
        else:
            c.circle(x, Y_B, 9, colour=ACCENT, width=2)
            c.dashed_box(x, Y_H, BOX_W, BOX_H)
            c.text(x, Y_H, label)
            if t > 1:  # h_t = h_{t−1}: a copy from the left
                x0 = XS[t - 2]
                c.curve_arrow(
                    (x0 + 12, Y_H + BOX_H / 2 + 1),
                    (x0 + 24, Y_H + 34),
                    (x - 24, Y_H + 34),
                    (x - 12, Y_H + BOX_H / 2 + 2),
                    colour=ACCENT,
                )


def _notes(c: Canvas) -> None:
    """The steps' notes on the right."""
    notes = [
        (Y_X, None, "one sentence, n = 6 tokens"),
        (Y_RNN, None, "reads every token, both ways"),
        (Y_HAT, "1 encode", "the outputs ĥ_1 … ĥ_n"),
        (Y_BASE - 24, "2 attend", "α_t = softmax_t(q^⊤ĥ_t), Σ_t α_t = 1"),
        (Y_B, "3 skip", "b_t ~ Bernoulli(α_t), in hindsight"),
        (Y_H + 14, None, "h_t = b_t ĥ_t + (1 − b_t) h_{t−1}, h_0 = 0"),
    ]
    for y, step, note in notes:
        if step:
            c.text(X_NOTE, y - 12, step, anchor="start")
            c.text(X_NOTE, y + 12, note, size=SMALL, anchor="start")
        else:
            c.text(X_NOTE, y, note, size=SMALL, anchor="start", italic=y < Y_HAT)
    c.text(X_NOTE, Y_H - 10, "forward fill:", colour=ACCENT, size=SMALL, anchor="start")


def _two_ways(c: Canvas, example: dict[str, list]) -> None:
    """Step 4: the branches to the two variants, their panels, and the copies' one weight."""
    centres = [(left + right) / 2 for left, right in PANELS]
    c.line([(X_MID, Y_H + 40), (X_MID, Y_SPLIT)])
    c.dot(X_MID, Y_SPLIT)
    c.line([(centres[0], Y_SPLIT), (centres[1], Y_SPLIT)])
    for x in centres:
        c.arrow([(x, Y_SPLIT), (x, Y_PANEL - 2)])
    c.text(centres[1] + 16, Y_SPLIT, "4 blend and point", anchor="start")
    variants = [
        (
            "ABS-AS: attend and skip",
            "word level only",
            "α_t",
            example["alpha"],
            "D^{blend} = Σ_t α_t h_t, the original α_t",
            "the pointer keeps α_t: P(the) = α_1 + α_5 = 0.07",
        ),
        (
            "ABS-ASA: attend, skip, attend",
            "any level",
            "α′_t",
            example["alpha_again"],
            "D^{blend} = Σ_t α′_t h_t, α′_t = softmax_t(q^⊤h_t)",
            "the pointer uses α′_t: P(the) = α′_1 + α′_5 = 0.21",
        ),
    ]
    for panel, centre, variant in zip(PANELS, centres, variants):
        _panel(c, panel, _mini_columns(centre), variant, example["filled"], example["b"])
    _copies_brace(c, _mini_columns(centres[1]), example["filled"], example["alpha_again"])


def _mini_columns(centre: float) -> list[float]:
    """The six small columns of a panel centred on ``centre``."""
    return [centre + 14 + (k - 2.5) * MINI_PITCH for k in range(6)]


def _panel(c: Canvas, panel, mini, variant, filled, b) -> None:
    """One variant: the filled outputs, the attention it blends and points with."""
    left, right = panel
    head, level, symbol, weights, blend, pointer = variant
    y_head = Y_PANEL + 22
    c.rect(left, Y_PANEL, right - left, PANEL_H, colour=INK, width=1.2, radius=12)
    c.text(left + 14, y_head, head, anchor="start")
    c.text(right - 14, y_head, level, size=SMALL, anchor="end", italic=True)
    for x, label, keep in zip(mini, filled, b):
        if keep:
            c.rect(x - MINI_W / 2, Y_MINI - MINI_H / 2, MINI_W, MINI_H)
        else:
            c.dashed_box(x, Y_MINI, MINI_W, MINI_H)
        c.text(x, Y_MINI, label, size=SMALL)
    _bars(c, mini, weights, Y_PBASE - 1, size=13)
    c.text(left + 10, Y_PBASE - 16, symbol, colour=ACCENT, size=SMALL, anchor="start")
    c.text(left + 10, Y_MINI, "h_t", size=SMALL, anchor="start")
    c.text(left + 14, Y_PANEL + 158, blend, size=SMALL, anchor="start")
    c.text(left + 14, Y_PANEL + 180, pointer, size=SMALL, anchor="start")


def _copies_brace(c: Canvas, mini, filled, alpha_again) -> None:
    """ABS-ASA: the copies of ĥ_2 have one score, so one weight."""
    copies = [x for x, label in zip(mini, filled) if label == "ĥ_2"]
    y_brace = Y_PBASE - 1 - BAR * alpha_again[filled.index("ĥ_2")] - 22  # above the values
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


def _legend(c: Canvas) -> None:
    y_key = 626
    c.circle(96, y_key, 8, colour=ACCENT, fill=ACCENT)
    c.text(112, y_key, "update, b_t = 1", size=SMALL, anchor="start")
    c.circle(256, y_key, 8, colour=ACCENT, width=2)
    c.text(272, y_key, "skip, b_t = 0", size=SMALL, anchor="start")
    c.dashed_box(418, y_key, 40, 22)
    c.text(446, y_key, "copy of the last kept output", size=SMALL, anchor="start")
    c.rect(678, y_key + 10 - 22, 12, 22, colour="none", fill=ACCENT, radius=1)
    c.text(698, y_key, "attention", size=SMALL, anchor="start")
