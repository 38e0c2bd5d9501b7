"""Chapter 6: one step of an SBA layer, from the candidate's modules to the kept values."""

from __future__ import annotations

import math

from .canvas import ACCENT, BLUE, GREY, INK, SMALL, Canvas, Diagram

MODULE = GREY  # the SBA family's colour (rnnbook.plot.FAMILY_COLORS["sba"])
SHARE = BLUE  # the shares q_t
XS = [126, 244, 362, 480]  # the centres of the M = 4 modules
CELL_W, CELL_H = 34, 26  # one unit of the candidate
GROUP_W = 3 * CELL_W + 8  # one module of K = 3 units
X_LABEL, X_NOTE = 64, 556  # the row symbols (right-aligned) and the steps' notes
Y_CAND, Y_POOL, Y_BASE = 58, 122, 252  # the candidate, the pooled values, the share bars
Y_S, Y_SREF, Y_B = 294, 322, 368  # the surprisals, the references, the decisions
Y_V, Y_PREV = 432, 510  # the new value v_t, the previous value v_{t−1}
BAR = 260  # the height of a share of 1
THETA = 1e-4  # the chapter's threshold

TITLE = "One step of an SBA layer: pool, share and surprisal, decide, keep or take"


def _sba_example() -> dict[str, list]:
    """The made-up step of :func:`sba_layer`: M = 4 modules of K = 3 units, max pooling.

    ``candidate`` is v̂_t by module; ``p`` its pooled values (sba-pool); ``s`` the surprisals
    (sba-surprisal) and ``q`` the shares; ``s_prev`` and ``q_prev`` those of step t − 1's
    candidate, whose pooled values were ``p_prev``; ``b`` the decisions (sba-decision).
    """
    candidate = [[0.1, 0.7, -0.2], [0.3, -0.5, 0.2], [-0.4, 0.9, 0.5], [0.0, 0.2, -0.1]]
    p = [max(module) for module in candidate]
    p_prev = [0.2, 0.6, 0.4, 0.5]
    s, s_prev = _surprisal(p), _surprisal(p_prev)
    return {
        "candidate": candidate,
        "p": p,
        "p_prev": p_prev,
        "s": s,
        "s_prev": s_prev,
        "q": [math.exp(-x) for x in s],
        "q_prev": [math.exp(-x) for x in s_prev],
        "b": [int(now > before + THETA) for now, before in zip(s, s_prev)],
    }


def _surprisal(p: list[float]) -> list[float]:
    """(sba-surprisal): s^(m) = log Σ_j exp(p^(j)) − p^(m)."""
    log_sum = math.log(sum(math.exp(x) for x in p))
    return [log_sum - x for x in p]


def sba_layer() -> Diagram:
    """One step of a surprisal-based activation (SBA) layer, with a worked example.

    Top to bottom: the candidate ``v̂_t`` split into M = 4 modules of K = 3 units; each
    module pooled to ``p^{(m)}_t`` (sba-pool); the shares ``q_t = softmax(p_t)`` beside
    those of step t − 1, and the surprisals ``s^{(m)}_t = −log q^{(m)}_t`` (sba-surprisal)
    beside the reference ``s^{(m)}_{t−1}``, computed from step t − 1's candidate; the
    decision ``b^{(m)}_t = [s^{(m)}_t > s^{(m)}_{t−1} + θ]`` (sba-decision), 1 where a
    module's share fell (sba-ratio), never for all M modules (sba-bound); and the select
    ``v_t = B_t ⊙ v̂_t + (1 − B_t) ⊙ D(v_{t−1})`` (sba-select): an updated module takes its
    candidate, a kept one its previous value, decayed by D if a decay is set. Bottom: what
    a kept module keeps in each LSTM variant of the chapter. The decision path is in the
    accent colour.
    """
    example = _sba_example()
    c = Canvas("sba-layer", 820, 720)
    _row_symbols(c)
    _candidate(c, example["candidate"])
    _pool(c, example["p"])
    _shares(c, example["q_prev"], example["q"])
    _surprisals(c, example["s"], example["s_prev"])
    _decide_and_select(c, example["b"])
    _notes(c)
    _kept_panel(c)
    _legend(c)
    return c.finish(TITLE, _description(example))


def _group(c: Canvas, x: float, y: float, dashed: bool = False) -> None:
    """The outline of one module, K = 3 units wide, centred on (x, y)."""
    if dashed:
        c.dashed_box(x, y, GROUP_W, CELL_H + 8)
    else:
        c.rect(x - GROUP_W / 2, y - CELL_H / 2 - 4, GROUP_W, CELL_H + 8, INK, MODULE, 0.18)


def _row_symbols(c: Canvas) -> None:
    rows = [
        (Y_CAND, "v̂_t", INK),
        (Y_POOL, "p^{(m)}_t", INK),
        (Y_BASE - 66, "q_{t−1}", INK),
        (Y_BASE - 40, "q_t", SHARE),
        (Y_S, "s^{(m)}_t", INK),
        (Y_SREF, "s^{(m)}_{t−1}", INK),
        (Y_B, "b^{(m)}_t", ACCENT),
        (Y_V, "v_t", INK),
        (Y_PREV, "v_{t−1}", INK),
    ]
    for y, label, colour in rows:
        c.text(X_LABEL, y, label, colour=colour, anchor="end")


def _candidate(c: Canvas, candidate: list[list[float]]) -> None:
    """The candidate v̂_t, its units grouped into modules."""
    for m, (x, values) in enumerate(zip(XS, candidate), start=1):
        c.text(x, Y_CAND - 36, f"module {m}", size=SMALL)
        _group(c, x, Y_CAND)
        for k, value in enumerate(values):
            cx = x + (k - 1) * CELL_W
            c.rect(cx - CELL_W / 2 + 2, Y_CAND - CELL_H / 2, CELL_W - 4, CELL_H, radius=3)
            c.text(cx, Y_CAND, f"{value:.1f}".replace("-", "−"), size=12)


def _pool(c: Canvas, p: list[float]) -> None:
    """Step 1: each module pooled to one number, here its max."""
    for x, value in zip(XS, p):
        c.arrow([(x, Y_CAND + CELL_H / 2 + 4), (x, Y_POOL - 14)])
        c.text(x + 6, (Y_CAND + Y_POOL) / 2 + 2, "max", size=SMALL, anchor="start", italic=True)
        c.box(x, Y_POOL, 56, 28, f"{value:.2f}", size=SMALL, tint=0.0)


def _shares(c: Canvas, q_prev: list[float], q: list[float]) -> None:
    """Step 2: the shares at t − 1 (outlined) and at t (filled), one pair per module."""
    c.line([(XS[0] - 58, Y_BASE), (XS[-1] + 58, Y_BASE)], width=1.2)
    for x, before, now in zip(XS, q_prev, q):
        c.rect(x - 28, Y_BASE - BAR * before, 22, BAR * before, INK, radius=1)
        c.rect(x + 6, Y_BASE - BAR * now, 22, BAR * now, "none", SHARE, radius=1)
        c.text(x, Y_BASE + 14, f"{before:.2f} → {now:.2f}", size=13)


def _surprisals(c: Canvas, s: list[float], s_prev: list[float]) -> None:
    """Step 2: the surprisal now and the reference from step t − 1."""
    for x, now, before in zip(XS, s, s_prev):
        c.text(x, Y_S, f"{now:.2f}", size=SMALL)
        c.text(x, Y_SREF, f"{before:.2f}", size=SMALL)


def _decide_and_select(c: Canvas, b: list[int]) -> None:
    """Steps 3 and 4: a module whose surprisal rose takes v̂_t; the others keep v_{t−1}."""
    for m, (x, update) in enumerate(zip(XS, b), start=1):
        _group(c, x, Y_PREV)
        c.text(x, Y_PREV, f"v^{{({m})}}_{{t−1}}", size=SMALL)
        if update:
            c.circle(x, Y_B, 10, colour=ACCENT, fill=ACCENT)
            c.arrow([(x, Y_B + 11), (x, Y_V - CELL_H / 2 - 5)], colour=ACCENT)
            _group(c, x, Y_V)
            c.text(x, Y_V, f"v̂^{{({m})}}_t", size=SMALL)
        else:
            c.circle(x, Y_B, 10, colour=ACCENT, width=2)
            c.arrow([(x, Y_PREV - CELL_H / 2 - 4), (x, Y_V + CELL_H / 2 + 5)], colour=ACCENT)
            _group(c, x, Y_V, dashed=True)
            c.text(x, Y_V, f"D(v^{{({m})}}_{{t−1}})", size=SMALL)


def _notes(c: Canvas) -> None:
    """The steps' notes on the right, in the chapter's notation."""
    notes = [
        (Y_CAND, None, "H = 12: M = 4 modules, K = 3"),
        (Y_POOL, "1 pool", "p^{(m)}_t = max over module m"),
        (Y_BASE - 62, "2 share and surprisal", "q_t = softmax(p_t), Σ_m q^{(m)}_t = 1"),
        (Y_BASE - 12, None, "s^{(m)}_t = −log q^{(m)}_t"),
        (Y_SREF, None, "from t − 1's candidate"),
        (Y_B, "3 decide", "b^{(m)}_t = [s^{(m)}_t > s^{(m)}_{t−1} + θ]"),
        (Y_B + 36, None, "update where the share fell"),
        (Y_B + 58, None, "at most M − 1 modules update"),
        (Y_V + 30, "4 keep or take", "v_t = B_t ⊙ v̂_t + (1 − B_t) ⊙ D(v_{t−1})"),
        (Y_V + 78, None, "B_t = b_t ⊗ 1_K: one b per unit"),
    ]
    for y, step, note in notes:
        if step:
            c.text(X_NOTE, y - 12, step, anchor="start")
            c.text(X_NOTE, y + 12, note, size=SMALL, anchor="start")
        else:
            c.text(X_NOTE, y, note, size=SMALL, anchor="start")
    c.text(X_NOTE, Y_S, f"θ = {THETA:g}".replace("0.0001", "10^{−4}"), size=SMALL, anchor="start")


def _kept_panel(c: Canvas) -> None:
    """What a kept module keeps, in a plain layer and in each LSTM variant."""
    top, left, right = 560, 20, 800
    c.rect(left, top, right - left, 118, colour=INK, width=1.2, radius=12)
    c.text(left + 14, top + 22, "What a kept module keeps (b^{(m)}_t = 0)", anchor="start")
    lines = [
        (left + 14, "a layer: D(v_{t−1}), v_{t−1} itself without decay"),
        (left + 14, "S_h: h_t = h_{t−1}"),
        (left + 14, "S_c: c_t = c_{t−1}, then h_t = o_t ⊙ tanh(c_t)"),
        (416, "S_{ch}: S_c, then a second decision on h"),
        (416, "S_{ff}, S_{fh}, S_{fc}: f_t := 1, forget nothing"),
        (416, "S_{ic}: i_t := 0, write nothing"),
    ]
    for k, (x, line) in enumerate(lines):
        c.text(x, top + 50 + 24 * (k % 3), line, size=SMALL, anchor="start")


def _legend(c: Canvas) -> None:
    y_key = 700
    c.circle(40, y_key, 8, colour=ACCENT, fill=ACCENT)
    c.text(56, y_key, "update, b = 1", size=SMALL, anchor="start")
    c.circle(186, y_key, 8, colour=ACCENT, width=2)
    c.text(202, y_key, "keep, b = 0", size=SMALL, anchor="start")
    c.dashed_box(332, y_key, 36, 22)
    c.text(358, y_key, "kept value", size=SMALL, anchor="start")
    c.rect(460, y_key - 11, 12, 22, INK, radius=1)
    c.rect(476, y_key - 11, 12, 22, "none", SHARE, radius=1)
    c.text(498, y_key, "share at t − 1 and at t", size=SMALL, anchor="start")


def _description(example: dict[str, list]) -> str:
    def numbers(values):
        return ", ".join(f"{v:.2f}" for v in values)

    updated = [str(m) for m, b in enumerate(example["b"], start=1) if b]
    kept = [str(m) for m, b in enumerate(example["b"], start=1) if not b]
    return (
        "A diagram read from top to bottom, on a made-up step of an SBA layer of H = 12 "
        "units in M = 4 modules of K = 3 neighbouring units. Top: the candidate v̂_t, the "
        "value the plain cell would output, as four groups of three numbers. Step 1, pool: "
        f"each module's max, p_t = {numbers(example['p'])}. Step 2, share and surprisal: "
        "the softmax over the modules gives each module its share q_t, drawn as a filled bar "
        "beside an outlined bar for its share at step t − 1 "
        f"({numbers(example['q_prev'])} then, {numbers(example['q'])} now); the surprisal "
        f"s_t = −log q_t is {numbers(example['s'])}, and the reference s_(t−1), computed from "
        f"step t − 1's candidate, is {numbers(example['s_prev'])}. Step 3, decide: "
        "b_t = [s_t > s_(t−1) + θ] with θ = 10^−4, drawn as circles in an accent colour: "
        f"modules {' and '.join(updated)}, whose shares fell, update (filled circles), and "
        f"modules {' and '.join(kept)}, whose shares rose, keep (hollow circles); never all "
        "M modules update at once. Step 4, keep or take: v_t = B_t ⊙ v̂_t + (1 − B_t) ⊙ "
        "D(v_(t−1)). An updated module takes its candidate v̂_t, with an arrow from its "
        "decision; a kept module, drawn as a dashed box, takes its previous value v_(t−1), "
        "drawn in a row below with an arrow up, through the decay D (none by default). A "
        "panel at the bottom lists what a kept module keeps: in a plain layer D(v_(t−1)); "
        "in the LSTM variants, S_h keeps h_(t−1); S_c keeps c_(t−1) and computes h_t = "
        "o_t ⊙ tanh(c_t) from it; S_ch does S_c and then a second decision on h; S_ff, "
        "S_fh and S_fc set the forget gate f_t to 1; S_ic sets the input gate i_t to 0."
    )
