"""Chapter 5: the Clockwork RNN's hidden layer at one step: which modules tick, which hold."""

from __future__ import annotations

from .canvas import ACCENT, GREY, INK, SKY, SMALL, Canvas, Diagram

MODULE = SKY  # the Clockwork family's colour (rnnbook.plot.FAMILY_COLORS["clockwork"])
STEPS = 16  # the steps 0 … 15 of the schedule panel
# The step: the modules at t − 1 (left) and at t (right), fast ones on top.
X_PERIOD, X_PREV, X_NOW = 20, 170, 460
BOX_W = 112
Y_FIRST, Y_LAST = 112, 340  # the rows of the fastest and the slowest module
X_IN, X_OUT = 554, 630  # the input bus and the read-out bus, right of the modules
Y_INPUT, Y_READOUT = 414, 34
# The two panels below: the recurrent mask and the schedule.
Y_PANEL = 470
MASK_X, MASK_CELL = 118, 30
CLOCK_X, CLOCK_CELL = 452, 20

TITLE = "The Clockwork RNN: modules with periods, slow-to-fast connections, and one step"


def clockwork_architecture(periods=(1, 2, 4, 8), t: int = 6) -> Diagram:
    """The Clockwork RNN's hidden layer at step ``t``: its modules, their clocks and weights.

    The hidden state is split into modules with periods ``T_1 ≤ … ≤ T_M``; module m
    ticks at step t when ``t mod T_m = 0`` (clock offset ``t_0 = 0``) and then updates like
    an SRN from the input and from the modules ``l ≥ m`` of ``h_{t−1}``, itself and the
    slower ones, the "uni" mask; otherwise it holds ``h^{(m)}_{t−1}`` ((cw-rnn), the skip
    update (skip-update)). Top: the modules at t − 1 and at t, the ticking ones highlighted,
    the holding ones greyed with a copy arrow; the input ``x_t`` is wired to every module
    and the read-out ``y_t`` reads every module. Bottom: the recurrent weights' block mask
    and the schedule of the first 16 steps, with step t marked.

    Args:
        periods: the modules' periods, 2 to 5 positive integers up to 16, fast first.
        t: the step drawn, 0 to 15 (a column of the schedule).
    """
    periods = _check_periods(periods)
    if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < STEPS:
        raise ValueError(f"t must be an integer from 0 to {STEPS - 1}, not {t!r}")
    ticks = _ticks(periods, t)
    rows = _rows(len(periods))
    c = Canvas("clockwork-architecture", 820, 696)
    _modules(c, periods, t, ticks, rows)
    _recurrence(c, ticks, rows)
    _input(c, ticks, rows)
    _readout(c, rows)
    _mask_panel(c, ticks)
    _schedule_panel(c, periods, t)
    _legend(c)
    return c.finish(TITLE, _description(periods, t, ticks))


def _check_periods(periods) -> tuple[int, ...]:
    periods = tuple(periods) if isinstance(periods, (list, tuple)) else periods
    if (
        not isinstance(periods, tuple)
        or not 2 <= len(periods) <= 5
        or any(isinstance(T, bool) or not isinstance(T, int) or not 1 <= T <= 16 for T in periods)
        or any(a > b for a, b in zip(periods, periods[1:]))
    ):
        raise ValueError(
            "periods must be 2 to 5 integers from 1 to 16, fast modules first "
            f"(non-decreasing), not {periods!r}"
        )
    return periods


def _ticks(periods: tuple[int, ...], t: int) -> list[bool]:
    """Which modules tick at step t: ``t mod T_m = 0``, the clock started at t_0 = 0."""
    return [t % T == 0 for T in periods]


def _rows(M: int) -> list[float]:
    """The height of each module's row, the fastest on top."""
    pitch = (Y_LAST - Y_FIRST) / (M - 1)
    return [Y_FIRST + m * pitch for m in range(M)]


def _box_h(rows: list[float]) -> float:
    return min(44.0, rows[1] - rows[0] - 14)


def _modules(c: Canvas, periods, t: int, ticks: list[bool], rows: list[float]) -> None:
    """The modules at t − 1 and at t, their periods, and whether each ticks at t."""
    box_h = _box_h(rows)
    for m, (T, tick, y) in enumerate(zip(periods, ticks, rows), start=1):
        c.text(X_PERIOD, y, f"T_{m} = {T}", anchor="start")
        c.rect(X_PREV - BOX_W / 2, y - box_h / 2, BOX_W, box_h, INK, MODULE, 0.25)
        c.text(X_PREV, y, f"h^{{({m})}}_{{t−1}}", size=SMALL)
        if tick:  # highlighted: it computes a new value
            c.rect(X_NOW - BOX_W / 2, y - box_h / 2, BOX_W, box_h, ACCENT, ACCENT, 0.14, 2.4)
            status, colour = f"ticks: {t} mod {T} = 0", ACCENT
        else:  # greyed: it holds h^{(m)}_{t−1}
            c.rect(X_NOW - BOX_W / 2, y - box_h / 2, BOX_W, box_h, "none", GREY, 0.22)
            c.dashed_box(X_NOW, y, BOX_W, box_h, colour=INK)
            status, colour = f"holds: {t} mod {T} = {t % T}", INK
        c.text(X_NOW, y, f"h^{{({m})}}_t", size=SMALL)
        c.text(X_OUT + 16, y, status, colour=colour, size=SMALL, anchor="start")
    c.text(X_PREV, Y_LAST + 50, "step t − 1", size=SMALL, italic=True)
    c.text(X_NOW, Y_LAST + 50, f"step t = {t}", size=SMALL, italic=True)


def _recurrence(c: Canvas, ticks: list[bool], rows: list[float]) -> None:
    """A ticking module m reads modules l ≥ m of h_{t−1}; a holding one copies its own."""
    left, right = X_PREV + BOX_W / 2, X_NOW - BOX_W / 2
    for m, (tick, y) in enumerate(zip(ticks, rows)):
        if not tick:
            c.arrow([(left, y), (right, y)], dash="6 4")
            c.text((left + right) / 2, y - 12, "copy", size=SMALL, italic=True)
            continue
        sources = rows[m:]  # itself and every slower module
        spread = min(16.0, _box_h(rows) / 2 - 6)
        for k, y_source in enumerate(sources):
            offset = 0.0 if len(sources) == 1 else -spread + 2 * spread * k / (len(sources) - 1)
            c.arrow([(left, y_source), (right, y + offset)], colour=ACCENT, width=1.4)
    for y in rows:
        c.dot(left, y)
    c.text((left + right) / 2, Y_FIRST - 44, "W_h^{(m,l)}, l ≥ m", colour=ACCENT, size=SMALL)
    c.text((left + right) / 2, Y_FIRST - 26, "slower to faster", size=SMALL, italic=True)


def _input(c: Canvas, ticks: list[bool], rows: list[float]) -> None:
    """x_t is wired to every module; only the ticking ones read it at this step."""
    right = X_NOW + BOX_W / 2
    c.box(X_IN, Y_INPUT, 46, 30, "x_t", tint=0.0)
    c.line([(X_IN, Y_INPUT - 15), (X_IN, rows[0] + 8)])
    for tick, y in zip(ticks, rows):
        if y != rows[0]:
            c.dot(X_IN, y + 8)
        c.arrow([(X_IN, y + 8), (right, y + 8)], dash=None if tick else "3 3")
    c.text(X_IN - 34, Y_INPUT, "W_x^{(m)}", size=SMALL, anchor="end")


def _readout(c: Canvas, rows: list[float]) -> None:
    """The read-out y_t reads every module of h_t, ticking or not."""
    right = X_NOW + BOX_W / 2
    for y in rows:
        c.line([(right, y - 10), (X_OUT, y - 10)])
        if y != rows[0]:
            c.dot(X_OUT, y - 10)
    c.arrow([(X_OUT, rows[-1] - 10), (X_OUT, Y_READOUT + 15)])
    c.box(X_OUT, Y_READOUT, 46, 30, "y_t", tint=0.0)
    c.text(X_OUT - 32, Y_READOUT, "the read-out reads every module", size=SMALL, anchor="end")


def _mask_panel(c: Canvas, ticks: list[bool]) -> None:
    """The recurrent weights W_h as M × M blocks: block (m, l) is zero unless l ≥ m."""
    M = len(ticks)
    top, cell = Y_PANEL + 40, min(MASK_CELL, 120 / M)
    c.text(MASK_X - 80, Y_PANEL, "recurrent weights W_h: the uni mask", anchor="start")
    for m in range(M):
        for l in range(M):
            x, y = MASK_X + l * cell, top + m * cell
            if l >= m:
                c.rect(x, y, cell, cell, INK, MODULE, 0.45, width=1, radius=0)
            else:
                c.text(x + cell / 2, y + cell / 2, "0", size=SMALL)
    side = M * cell
    c.rect(MASK_X, top, side, side, colour=INK, width=1.2, radius=0)
    for m, tick in enumerate(ticks):
        if tick:  # the rows computed at this step
            c.rect(MASK_X, top + m * cell, side, cell, ACCENT, width=2, radius=2)
        c.text(MASK_X - 8, top + (m + 0.5) * cell, f"{m + 1}", size=SMALL, anchor="end")
        c.text(MASK_X + (m + 0.5) * cell, top - 12, f"{m + 1}", size=SMALL)
    c.text(MASK_X - 30, top + side / 2, "to m", size=SMALL, anchor="end")
    c.text(MASK_X + side + 10, top - 12, "from l", size=SMALL, anchor="start")
    c.text(MASK_X + side + 10, top + side / 2 - 10, "block (m, l)", size=SMALL, anchor="start")
    c.text(MASK_X + side + 10, top + side / 2 + 10, "is 0 for l < m", size=SMALL, anchor="start")


def _schedule_panel(c: Canvas, periods, t: int) -> None:
    """The clock of the first 16 steps: module m ticks where t mod T_m = 0; step t marked."""
    M = len(periods)
    top = Y_PANEL + 40
    c.text(CLOCK_X - 56, Y_PANEL, "the clock: module m ticks when t mod T_m = 0", anchor="start")
    for m, T in enumerate(periods):
        y = top + m * CLOCK_CELL
        c.text(CLOCK_X - 8, y + CLOCK_CELL / 2, f"T_{m + 1} = {T}", size=SMALL, anchor="end")
        for step in range(STEPS):
            if step % T == 0:
                x = CLOCK_X + step * CLOCK_CELL
                c.rect(x + 2, y + 2, CLOCK_CELL - 4, CLOCK_CELL - 4, INK, MODULE, width=1, radius=2)
    width, height = STEPS * CLOCK_CELL, M * CLOCK_CELL
    c.rect(CLOCK_X, top, width, height, colour=INK, width=1.2, radius=0)
    x_t = CLOCK_X + t * CLOCK_CELL
    c.rect(x_t - 1, top - 4, CLOCK_CELL + 2, height + 8, colour=ACCENT, width=2.4, radius=3)
    c.text(x_t + CLOCK_CELL / 2, top - 14, f"t = {t}", colour=ACCENT, size=SMALL)
    for step in range(0, STEPS, 4):
        c.text(CLOCK_X + (step + 0.5) * CLOCK_CELL, top + height + 14, f"{step}", size=SMALL)
    c.text(CLOCK_X + width / 2, top + height + 36, "step t (t_0 = 0)", size=SMALL, italic=True)


def _legend(c: Canvas) -> None:
    y_key = 674
    c.rect(70, y_key - 11, 40, 22, ACCENT, ACCENT, 0.14, 2.4)
    c.text(120, y_key, "ticks: a new state", size=SMALL, anchor="start")
    c.rect(300, y_key - 11, 40, 22, "none", GREY, 0.22)
    c.dashed_box(320, y_key, 40, 22, colour=INK)
    c.text(350, y_key, "holds its state", size=SMALL, anchor="start")
    c.arrow([(520, y_key), (560, y_key)], dash="3 3")
    c.text(570, y_key, "not read at this step", size=SMALL, anchor="start")


def _description(periods, t: int, ticks: list[bool]) -> str:
    M = len(periods)
    names = [f"module {m} (T_{m} = {T})" for m, T in enumerate(periods, start=1)]
    ticking = [name for name, tick in zip(names, ticks) if tick]
    holding = [name for name, tick in zip(names, ticks) if not tick]
    held = (
        f"The other modules, {', '.join(holding)}, are greyed with dashed outlines: t is not "
        "a multiple of their period, so each holds its state, drawn as a dashed copy arrow "
        "from its box at t − 1."
        if holding
        else "Every module ticks at this step."
    )
    dotted = ", dotted where the module does not read it at this step" if holding else ""
    return (
        f"The hidden layer of a Clockwork RNN, split into {M} modules with the periods "
        f"{', '.join(str(T) for T in periods)}, fast modules on top. Top: two columns of "
        f"module boxes, h^(m)_(t−1) on the left and h^(m)_t on the right, at step t = {t}. "
        f"A module ticks when t mod T_m = 0. The ticking ones, {', '.join(ticking)}, are "
        f"highlighted in an accent colour, and accent-coloured arrows bring into each of them "
        f"the modules l ≥ m of h_(t−1), itself and every slower module, never a faster one: "
        f"the recurrent weights W_h^(m,l) connect slow to fast only. {held} The input x_t "
        f"comes up a wire on the right with a branch, through W_x^(m), into every module"
        f"{dotted}, and the read-out y_t at "
        f"the top collects a wire from every module. Bottom left, the recurrent weights W_h "
        f"as a {M}-by-{M} grid of blocks, destination module m down and source module l "
        f"across: the blocks on and above the diagonal are filled, those below it are 0 "
        f"(the uni mask), and the rows of the ticking modules are outlined. Bottom right, "
        f"the clock over the steps 0 to 15: one row per module, a filled cell where t is a "
        f"multiple of its period, with the column of step {t} outlined."
    )
