"""rnnbook.checks.lmu: each checker passes a right answer and explains typical wrong ones.

The right answers are written from the equations ((lmu-legendre), (lmu-zoh), (lmu-modes)), not by calling
the checkers' own references.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rnnbook.checks import CheckFailed, lmu


def ema_window_right(theta):
    return math.ceil(theta * math.log(20) - 1e-12)  # A_bar^k <= 0.05 <=> k >= theta ln 20


def euler_min_theta_right(d):
    i = np.arange(d)[:, None]
    j = np.arange(d)[None, :]
    theta_A = (2 * i + 1) * np.where(i < j, -1.0, (-1.0) ** (i - j + 1))  # (lmu-ABC), theta = 1
    lam = np.linalg.eigvals(theta_A)
    return float(np.max(np.abs(lam) ** 2 / (-2 * lam.real)))


def fft_memory_right(u, H):
    n = u.shape[1]
    m = torch.fft.irfft(torch.fft.rfft(u, n=2 * n)[:, None] * torch.fft.rfft(H, n=2 * n), n=2 * n)
    return m[..., :n].transpose(1, 2)


def _fft_untruncated(u, H):
    """Zero-padded to 2n (right) but never cut back to n steps."""
    n = u.shape[1]
    m = torch.fft.irfft(torch.fft.rfft(u, n=2 * n)[:, None] * torch.fft.rfft(H, n=2 * n), n=2 * n)
    return m.transpose(1, 2)


def fft_memory_circular(u, H):
    n = u.shape[1]
    return torch.fft.irfft(torch.fft.rfft(u, n=n)[:, None] * torch.fft.rfft(H, n=n), n=n).transpose(
        1, 2
    )


def _shifted_legendre(d, r):
    """(lmu-legendre) literally, with exact binomials."""
    return [
        (-1) ** i * sum(math.comb(i, k) * math.comb(i + k, k) * (-r) ** k for k in range(i + 1))
        for i in range(d)
    ]


def decode_binomial(m, r):
    """The explicit sum of (lmu-legendre): right for small d, lost by order 40."""
    return m @ torch.tensor(_shifted_legendre(m.shape[-1], r), dtype=m.dtype)


def decode_right(m, r):
    d = m.shape[-1]
    weights = [np.polynomial.legendre.legval(2 * r - 1, np.eye(d)[i]) for i in range(d)]
    return m @ torch.tensor(weights, dtype=m.dtype)


def decode_unshifted(m, r):
    d = m.shape[-1]
    return m @ torch.tensor([np.polynomial.legendre.legval(r, np.eye(d)[i]) for i in range(d)])


def decode_mirrored(m, r):
    return decode_right(m, 1 - r)


@pytest.mark.parametrize(
    "checker, answer",
    [
        (lmu.ema_window, ema_window_right),
        (lmu.euler_min_theta, euler_min_theta_right),
        (lmu.fft_memory, fft_memory_right),
        (lmu.decode, decode_right),
    ],
)
def test_a_right_answer_passes(checker, answer, capsys):
    message = checker(answer)
    assert message.startswith("✓") and "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "checker, answer, says",
    [
        (lmu.ema_window, lambda theta: ema_window_right(theta) + 1, "one step off"),
        (lmu.ema_window, lambda theta: theta, "time constant"),
        (lmu.ema_window, lambda theta: 3 * theta + 7, "is not right"),
        (lmu.ema_window, lambda theta: "1498", "should be a number"),
        (lmu.euler_min_theta, lambda d: 4 * d, "spectral radius"),
        (lmu.euler_min_theta, lambda d: 0.0, "spectral radius"),
        (lmu.fft_memory, fft_memory_circular, "wraps around"),
        (lmu.fft_memory, lambda u, H: _fft_untruncated(u, H), "not cut back"),
        (
            lmu.ema_window,
            lambda theta: math.ceil(math.log(0.05) / math.log(1 - 1 / theta)) if theta > 1 else 3,
            "Euler step",
        ),
        (lmu.fft_memory, lambda u, H: 2 * fft_memory_right(u, H), "differ from the loop"),
        (lmu.fft_memory, lambda u, H: fft_memory_right(u, H).transpose(1, 2), "shape"),
        (lmu.decode, decode_unshifted, "shifted"),
        (lmu.decode, decode_mirrored, "backwards"),
        (lmu.decode, decode_binomial, "explicit sum over binomials"),  # right for small d only
        (lmu.decode, lambda m, r: -decode_right(m, r), "differs from the read-out"),
        (lmu.decode, lambda m, r: decode_right(m, r).unsqueeze(-1), "shape"),
    ],
)
def test_a_wrong_answer_fails_with_a_hint(checker, answer, says):
    with pytest.raises(CheckFailed, match=says) as caught:
        checker(answer)
    assert "Hint:" in str(caught.value)


@pytest.mark.parametrize(
    "checker", [lmu.ema_window, lmu.euler_min_theta, lmu.fft_memory, lmu.decode]
)
def test_an_unfinished_answer_says_so(checker):
    def unfinished(*args):
        raise NotImplementedError

    from rnnbook.checks.grading import NotAttemptedYet

    message = checker(unfinished)  # reported, not raised: "Run all" goes on
    assert isinstance(message, NotAttemptedYet) and "not attempted yet" in message


def test_checking_leaves_the_global_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    lmu.fft_memory(fft_memory_right)
    lmu.decode(decode_right)
    assert torch.equal(torch.rand(3), expected)
