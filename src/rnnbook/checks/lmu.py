"""Checkers for the exercises of the chapter on the Legendre Memory Unit.

Each takes the student's answer, tests it on cases computed with the book's delay network
(itself tested against SciPy and against its four evaluation modes), prints what passed, and
raises :class:`~rnnbook.checks.grading.CheckFailed` with a hint, never the solution.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from rnnbook.checks.dtypes import expect_dtype
from rnnbook.checks.grading import call, close, expect_tensor, fail, own_random_state, passed
from rnnbook.models.lmu import DelayNetwork, dn_matrices, legendre_decoder


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.generic):
        fail(f"{what} should be a number, got {type(value).__name__}.", "return a plain number.")
    return float(value)


@own_random_state
def ema_window(fn) -> str:
    """Exercise: ``fn(theta) -> k``, the fewest recent steps carrying 95% of a d = 1 memory."""
    tests = []
    for theta in (500, 1, 37.5, 2000):
        a_bar = math.exp(-1 / theta)
        want = math.ceil(math.log(0.05) / math.log(a_bar))
        got = _number(call(fn, theta, name="ema_window"), f"ema_window({theta})")
        if got == want:
            continue
        if theta > 1:
            euler = math.ceil(math.log(0.05) / math.log(1 - 1 / theta))
            if got == euler:
                fail(
                    f"ema_window({theta}) = {got:g} is the answer for the Euler step "
                    "A_bar = 1 - 1/theta.",
                    "the chapter's memory is discretised with the zero-order hold: "
                    "A_bar = exp(-1/theta).",
                )
        if abs(got - want) <= 1:
            fail(
                f"ema_window({theta}) = {got:g}, one step off {want}.",
                "the last k steps carry 1 - A_bar**k of the weight: take the smallest whole k.",
            )
        if math.isclose(got, theta):
            fail(
                f"ema_window({theta}) = {got:g}: theta is the time constant, not the reach.",
                "sum the weights B_bar * A_bar**k of the last k steps and solve for 95%.",
            )
        fail(f"ema_window({theta}) = {got:g} is not right.", "weights are B_bar * A_bar**k.")
    tests.append("theta = 500, 1, 37.5 and 2000")
    return passed("ema_window", tests)


@own_random_state
def euler_min_theta(fn) -> str:
    """Exercise: ``fn(d)``, the window above which the Euler-discretised delay network is
    stable, ``max |lambda|^2 / (-2 Re lambda)`` over the eigenvalues of theta * A."""
    tests = []
    for d in (1, 4, 12, 64):
        A, _, _ = dn_matrices(d, theta=1.0)
        lam = np.linalg.eigvals(A)
        want = float(np.max(np.abs(lam) ** 2 / (-2 * lam.real)))
        got = _number(call(fn, d, name="euler_min_theta"), f"euler_min_theta({d})")
        if math.isclose(got, want, rel_tol=1e-6):
            continue
        rho = max(abs(np.linalg.eigvals(np.eye(d) + A / got))) if got > 0 else math.inf
        fail(
            f"euler_min_theta({d}) = {got:g}; at that theta the Euler step has spectral "
            f"radius {rho:.4f}, and the bound is where it crosses 1.",
            "write |1 + lambda/theta|^2 < 1 with lambda = a + ib and solve for theta.",
        )
    tests.append("d = 1, 4, 12 and 64 against the eigenvalues")
    return passed("euler_min_theta", tests)


def _loop_memory(u: torch.Tensor, H: torch.Tensor) -> torch.Tensor:
    """The causal convolution m[b, t] = sum_{k <= t} H[:, k] u[b, t - k], directly."""
    B, n = u.shape
    m = torch.zeros(B, n, H.shape[0], dtype=u.dtype)
    for t in range(n):
        m[:, t] = u[:, : t + 1].flip(1) @ H[:, : t + 1].T
    return m


@own_random_state
def fft_memory(fn) -> str:
    """Exercise: ``fn(u (B, n), H (d, n)) -> m (B, n, d)``, the memories by FFT (lmu-modes)."""
    g = torch.Generator().manual_seed(41)
    tests = []
    for B, n, d in ((3, 50, 6), (1, 17, 4)):
        network = DelayNetwork(d, theta=n / 2)
        H = network.impulse_response(n, dtype=torch.float64)
        u = torch.rand(B, n, generator=g, dtype=torch.float64)
        m = call(fn, u, H, name="fft_memory")
        if isinstance(m, torch.Tensor) and m.dim() == 3 and m.shape[1] > n and m.shape[2] == d:
            fail(
                f"the memories have {m.shape[1]} steps, not n = {n}: the padded convolution "
                "was not cut back.",
                "after irfft, keep the first n steps.",
            )
        m = expect_dtype(expect_tensor(m, (B, n, d), "the memories"), u.dtype, "the memories")
        want = _loop_memory(u, H)
        if close(m, want):
            continue
        circular = torch.fft.irfft(torch.fft.rfft(u, n=n)[:, None] * torch.fft.rfft(H, n=n), n=n)
        if close(m, circular.transpose(1, 2)):
            fail(
                "your convolution wraps around: the first steps see the end of the sequence.",
                "zero-pad both signals to length 2n in rfft(..., n=2 * n), then keep n steps.",
            )
        first_bad = int((m - want).abs().amax(dim=(0, 2)).gt(1e-8).nonzero()[0])
        fail(
            f"the memories differ from the loop from step {first_bad} on (B={B}, n={n}, d={d}).",
            "multiply rfft(u) and rfft(H) for every coefficient, then irfft and keep n steps.",
        )
    tests.append("against the loop for two sizes, one odd")
    return passed("fft_memory", tests)


@own_random_state
def decode(fn) -> str:
    """Exercise: ``fn(m (..., d), r) -> u(t - r theta)``, the shifted-Legendre read-out.

    The read-out is (lmu-decode) with the polynomials of (lmu-legendre).
    """
    g = torch.Generator().manual_seed(42)
    tests = []
    for d, shape in ((6, (5, 6)), (9, (2, 3, 9))):
        m = torch.randn(*shape, generator=g, dtype=torch.float64)
        for r in (0.5, 0.0, 0.3, 1.0):
            got = expect_tensor(call(fn, m, r, name="decode"), shape[:-1], f"decode(m, {r})")
            got = expect_dtype(got, m.dtype, f"decode(m, {r})")
            want = m @ torch.tensor(legendre_decoder(d, r))
            if close(got, want):
                continue
            plain = m @ torch.tensor(
                [np.polynomial.legendre.legval(r, np.eye(d)[i]) for i in range(d)]
            )
            if close(got, plain):
                fail(
                    f"decode(m, {r}) uses the Legendre polynomials on [-1, 1], not the shifted "
                    "ones on the window [0, 1].",
                    "evaluate P_i at 2r - 1.",
                )
            mirrored = m @ torch.tensor(legendre_decoder(d, 1 - r))
            if close(got, mirrored):
                fail(
                    f"decode(m, {r}) reads the window backwards.",
                    "r = 0 is the present and r = 1 the input theta steps ago.",
                )
            fail(
                f"decode(m, {r}) differs from the read-out (d = {d}).",
                "see equations (lmu-legendre) and (lmu-decode).",
            )
    tests.append("r = 0.5, 0, 0.3 and 1 for d = 6 and 9, with batch dimensions")
    d = 48  # high orders: the explicit sum of (lmu-legendre) cancels catastrophically here
    m = torch.randn(4, d, generator=g, dtype=torch.float64) / d
    for r in (0.3, 0.7):
        got = expect_tensor(call(fn, m, r, name="decode"), (4,), f"decode(m, {r}), d = {d}")
        got = expect_dtype(got, m.dtype, f"decode(m, {r}), d = {d}")
        if not close(got, m @ torch.tensor(legendre_decoder(d, r)), atol=1e-9):
            fail(
                f"decode(m, {r}) goes wrong for d = {d} although it is right for d <= 9.",
                "the explicit sum over binomials loses every digit by order 40 (huge terms of "
                "alternating sign); evaluate the polynomials with numpy.polynomial.legendre.",
            )
    tests.append(f"d = {d}, where the explicit binomial sum cancels")
    return passed("decode", tests)
