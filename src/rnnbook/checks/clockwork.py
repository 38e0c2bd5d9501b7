"""Checkers for the exercises of the chapter on the Clockwork RNN.

Each takes the student's answer, tests it against the book's ``rnnbook.skip`` and
``CWRNN`` (themselves tested against the source's numbers and against the SRN and LSTM),
prints what passed, and raises :class:`~rnnbook.checks.grading.CheckFailed` with a hint that
names the mistake it recognised, never the solution.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from rnnbook.checks.grading import call, expect_tensor, fail, own_random_state, passed
from rnnbook.skip import asymptotic_update_rate, connectivity_mask, window_update_rate


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.generic):
        fail(f"{what} should be a number, got {type(value).__name__}.", "return a plain number.")
    return float(value)


def window_rate(fn) -> str:
    """Exercise: ``fn(periods, L, t0) -> u``, the update rate of one window of L steps."""
    cases = [((1, 2, 4, 8), 5, 0), ((1, 2, 4, 8), 5, 3), ((1, 2, 3, 4, 5), 35, 0),
             ((1, 3, 7), 10, 6), ((2, 2, 4), 1, 0), ((2, 2, 4), 1, 1)]  # fmt: skip
    for periods, L, t0 in cases:
        want = window_update_rate(periods, L, t0)
        got = _number(call(fn, periods, L, t0, name="window_rate"), "window_rate(...)")
        if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
            continue
        where = f"window_rate({periods}, L={L}, t0={t0}) = {got:.4f}"
        if math.isclose(got, 1 - want, abs_tol=1e-12):
            fail(f"{where}: that is the skip rate.", "count the updates, not the skips.")
        if math.isclose(got, asymptotic_update_rate(periods), abs_tol=1e-12):
            fail(
                f"{where}: that is the rate of an endless sequence, not of this window.",
                "count the ticks of the window's own steps t0, t0 + 1, ..., t0 + L - 1.",
            )
        if t0 and math.isclose(got, window_update_rate(periods, L, 0), abs_tol=1e-12):
            fail(f"{where}: the offset t0 is ignored.", "a module ticks when (t0 + t) % T == 0.")
        if math.isclose(got, window_update_rate(periods, L, t0 + 1), abs_tol=1e-12):
            fail(
                f"{where}: the window is one step late.",
                "the window's first step is clock time t0 itself (t counts from 0).",
            )
        ticks = sum((t0 + t) % T == 0 for t in range(L) for T in periods)
        if math.isclose(got, ticks / L, abs_tol=1e-12) or math.isclose(got, ticks, abs_tol=1e-9):
            fail(f"{where} is not a share of all module updates.", "divide by M * L.")
        fail(f"{where} is not right (expected a number in [0, 1]).", "count the module ticks.")
    return passed("window_rate", ["six windows, with and without a clock offset"])


def cwrnn_parameters(fn) -> str:
    """Exercise: ``fn(d_x, H, d_y, M, connectivity) -> count`` of a Clockwork RNN."""
    # the first case tells the mistakes apart (d_y != 1, H != d_y); later ones add coverage
    cases = [(7, 15, 7, 5, "uni"), (1, 64, 1, 8, "uni"), (1, 64, 1, 4, "uni"),
             (3, 12, 2, 3, "bi"), (5, 30, 4, 6, "uni"), (2, 8, 3, 1, "uni")]  # fmt: skip
    for d_x, H, d_y, M, connectivity in cases:
        kept = int(connectivity_mask(H, M, connectivity).sum())
        want = d_x * H + kept + H + H * d_y + d_y
        args = (d_x, H, d_y, M, connectivity)
        got = _number(call(fn, *args, name="cwrnn_parameters"), "cwrnn_parameters(...)")
        if got == want:
            continue
        where = f"cwrnn_parameters{args} = {got:g}, not right"
        k = H // M
        if connectivity == "uni" and got == want - kept + H * H:
            fail(f"{where}: the masked weights were counted.", "the mask removes whole blocks.")
        if connectivity == "uni" and got == want - kept + k * k * M * (M - 1) // 2:
            fail(
                f"{where}: a module's connections to itself are missing.",
                "module m reads the modules l >= m, itself included.",
            )
        if got in (want - H, want - d_y, want - H - d_y):
            fail(f"{where}: a bias vector is missing.", "count the hidden and the output bias.")
        if got == want - H * d_y - d_y:
            fail(f"{where}: the read-out is missing.", "count the linear read-out too.")
        fail(f"{where}.", "add up input weights, kept recurrent blocks, biases and read-out.")
    return passed("cwrnn_parameters", ["uni and bi, 1 to 8 modules, the source's 2,497 and 367"])


@own_random_state
def sliced_step(fn) -> str:
    """Exercise: ``fn(h, x_proj, W, periods, t) -> h_new``, computing only ticking modules."""
    tests = []
    g = torch.Generator().manual_seed(5)
    periods, B, M, k = (1, 2, 4, 8), 3, 4, 3
    H = M * k
    W = torch.randn(H, H, generator=g, dtype=torch.float64) * connectivity_mask(H, M, "uni")
    W = W.to(torch.float64) / math.sqrt(H)
    module = torch.arange(H) // k
    for t in (0, 1, 2, 4, 6, 8, 12):
        h = torch.randn(B, H, generator=g, dtype=torch.float64)
        x_proj = torch.randn(B, H, generator=g, dtype=torch.float64)
        ticking = torch.tensor([t % T == 0 for T in periods])[module]
        want = torch.where(ticking, torch.tanh(x_proj + h @ W.T), h)
        got = expect_tensor(
            call(fn, h.clone(), x_proj.clone(), W.clone(), periods, t, name="sliced_step"),
            (B, H),
            f"sliced_step(..., t={t})",
        )
        if torch.allclose(got, want, rtol=1e-12, atol=1e-12):
            if not torch.equal(got[:, ~ticking], h[:, ~ticking]):
                fail(f"at t = {t} an idle module's state changed.", "copy the old units exactly.")
            continue
        if torch.allclose(got, torch.tanh(x_proj + h @ W.T), atol=1e-12):
            fail(f"at t = {t} every module was updated.", "a module ticks only when t % T == 0.")
        if (
            torch.allclose(got[:, ticking], want[:, ticking], atol=1e-12)
            and (got[:, ~ticking] == 0).all()
        ):
            fail(f"at t = {t} the idle modules were set to zero.", "an idle module keeps its h.")
        next_tick = torch.tensor([(t + 1) % T == 0 for T in periods])[module]
        if torch.allclose(got, torch.where(next_tick, torch.tanh(x_proj + h @ W.T), h)):
            fail(f"at t = {t} the modules of step t + 1 ticked.", "step t ticks if t % T == 0.")
        if torch.allclose(got, torch.where(ticking, torch.tanh(x_proj + h @ W), h), atol=1e-12):
            fail(f"at t = {t} W was used transposed.", "torch's layout: h_new = h @ W.T.")
        fail(f"at t = {t} the new state is not right.", "compute (cw-rnn) for ticking rows.")
    tests.append("seven clock times against compute-then-mask")
    # Real skipping: idle modules' rows full of NaN must not matter.
    t = 2  # modules of period 1 and 2 tick, periods 4 and 8 idle
    h = torch.randn(B, H, generator=g, dtype=torch.float64)
    x_proj = torch.randn(B, H, generator=g, dtype=torch.float64)
    poisoned = W.clone()
    poisoned[module >= 2] = float("nan")
    got = call(fn, h.clone(), x_proj.clone(), poisoned, periods, t, name="sliced_step")
    if torch.isnan(got).any():
        fail(
            "the idle modules were computed (their rows of W, set to NaN here, reached the "
            "result, as NaN * 0 is NaN).",
            "multiply only the ticking modules' rows of W.",
        )
    tests.append("idle modules' rows are never used")
    return passed("sliced_step", tests)
