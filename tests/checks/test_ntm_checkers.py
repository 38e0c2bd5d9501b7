"""rnnbook.checks.ntm: each checker passes a right answer and explains typical wrong ones.

The right answers are written from the equations (spec ntm (N2)-(N3), (N7), (N8) and §6.2),
with loops and modular indices, not by calling the book's functions that the checkers use.
"""

from __future__ import annotations

import pytest
import torch

from rnnbook.checks import CheckFailed, ntm

# --- right answers ------------------------------------------------------------------------------


def write_right(memory, w, erase, add):
    """(N2) for every head, the factors multiplied; then (N3), the adds summed."""
    B, H, N = w.shape
    new = memory.clone()
    for h in range(H):
        for i in range(N):
            new[:, i] = new[:, i] * (1 - w[:, h, i, None] * erase[:, h])
    for h in range(H):
        for i in range(N):
            new[:, i] = new[:, i] + w[:, h, i, None] * add[:, h]
    return new


def shift_right(w, s):
    """(N7): w~(i) = sum_j w(j) s(i - j), i - j modulo N, entry k of s the shift k - S."""
    B, N = w.shape
    S = s.shape[1] // 2
    out = torch.zeros_like(w)
    for i in range(N):
        for delta in range(-S, S + 1):
            out[:, i] += w[:, (i - delta) % N] * s[:, delta + S]
    return out


def sharpen_right(w, gamma):
    """(N8) after scaling by the largest entry, with the 1e-12 of spec §4.4."""
    scaled = w / w.max(dim=-1, keepdim=True).values.clamp_min(1e-12)
    powered = (scaled + 1e-12) ** gamma
    return powered / powered.sum(dim=-1, keepdim=True)


def allocation_right(u):
    """a[phi[j]] = (1 - u[phi[j]]) prod_{i<j} u[phi[i]], one example at a time."""
    a = torch.zeros_like(u)
    for b in range(u.shape[0]):
        phi = sorted(range(u.shape[1]), key=lambda i: float(u[b, i]))
        left = torch.ones((), dtype=u.dtype)
        for row in phi:
            a[b, row] = (1 - u[b, row]) * left
            left = left * u[b, row]
    return a


# --- typical wrong answers ----------------------------------------------------------------------


def write_add_then_erase(memory, w, erase, add):
    new = memory + torch.einsum("bhn,bhm->bnm", w, add)
    return new * torch.prod(1 - w.unsqueeze(-1) * erase.unsqueeze(-2), dim=1)


def write_head_by_head(memory, w, erase, add):
    for h in range(w.shape[1]):
        memory = write_right(memory, w[:, h : h + 1], erase[:, h : h + 1], add[:, h : h + 1])
    return memory


def write_erase_everywhere(memory, w, erase, add):
    return memory * torch.prod(1 - erase, dim=1).unsqueeze(1) + torch.einsum("bhn,bhm->bnm", w, add)


def write_summed_erases(memory, w, erase, add):
    erased = torch.einsum("bhn,bhm->bnm", w, erase)
    return memory * (1 - erased) + torch.einsum("bhn,bhm->bnm", w, add)


def shift_conv1d(w, s):
    """A cross-correlation, as torch.nn.functional.conv1d computes: s(+1) moves mass to i - 1."""
    S = s.shape[1] // 2
    padded = torch.cat([w[:, -S:], w, w[:, :S]], dim=1)
    return torch.stack(
        [
            torch.nn.functional.conv1d(p.view(1, 1, -1), k.view(1, 1, -1))[0, 0]
            for p, k in zip(padded, s)
        ]
    )


def shift_no_wrap(w, s):
    S = s.shape[1] // 2
    out = torch.zeros_like(w)
    for delta in range(-S, S + 1):
        rolled = torch.roll(w, delta, dims=-1)
        if delta > 0:
            rolled[:, :delta] = 0
        elif delta < 0:
            rolled[:, delta:] = 0
        out += s[:, delta + S, None] * rolled
    return out


def shift_three_only(w, s):
    return sum(s[:, k, None] * torch.roll(w, k - 1, dims=-1) for k in range(3))


def sharpen_naive(w, gamma):
    powered = w**gamma
    return powered / powered.sum(dim=-1, keepdim=True)


def sharpen_log_domain(w, gamma):
    """Safe from underflow, but log 0 = -inf makes the gradient NaN where w = 0."""
    return torch.softmax(gamma * w.log(), dim=-1)


def allocation_sorted_by(u, reverse=False, inclusive=False, scatter=True):
    a = torch.zeros_like(u)
    for b in range(u.shape[0]):
        phi = sorted(range(u.shape[1]), key=lambda i: float(u[b, i]), reverse=reverse)
        left = torch.ones((), dtype=u.dtype)
        for j, row in enumerate(phi):
            if inclusive:
                left = left * u[b, row]
            a[b, row if scatter else j] = (1 - u[b, row]) * left
            if not inclusive:
                left = left * u[b, row]
    return a


# --- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "checker, answer",
    [
        (ntm.write, write_right),
        (ntm.shift, shift_right),
        (ntm.sharpen, sharpen_right),
        (ntm.allocation, allocation_right),
    ],
)
def test_a_right_answer_passes(checker, answer, capsys):
    message = checker(answer)
    assert message.startswith("✓") and "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "checker, answer, says",
    [
        (ntm.write, write_add_then_erase, "erase first"),
        (ntm.write, write_head_by_head, "every head's erase before any head's add"),
        (ntm.write, write_erase_everywhere, "scaled by that row's weight"),
        (ntm.write, write_summed_erases, "multiply"),
        (ntm.write, lambda m, w, e, a: write_right(m, w, e, a) + 0.1, "differs from"),
        (ntm.write, lambda m, w, e, a: write_right(m, w, e, a)[:, 0], "shape"),
        (ntm.shift, shift_conv1d, "backwards"),
        (ntm.shift, shift_no_wrap, "modulo N"),
        (ntm.shift, shift_three_only, "read S from"),
        (ntm.shift, lambda w, s: w, "differs from"),
        (ntm.shift, lambda w, s: shift_right(w, s).T, "shape"),
        (ntm.sharpen, lambda w, g: torch.softmax(g * w, -1), "softmax"),
        (ntm.sharpen, lambda w, g: torch.softmax(w**g, -1), "softmax"),
        (ntm.sharpen, lambda w, g: w**g, "divide by the sum"),
        (ntm.sharpen, sharpen_naive, "largest entry"),
        (ntm.sharpen, sharpen_log_domain, "epsilon"),
        (ntm.sharpen, lambda w, g: sharpen_right(w, g).detach(), "no gradient"),
        (ntm.allocation, lambda u: allocation_sorted_by(u, reverse=True), "ascending"),
        (ntm.allocation, lambda u: allocation_sorted_by(u, inclusive=True), "before"),
        (ntm.allocation, lambda u: allocation_sorted_by(u, scatter=False), "free-list order"),
        (ntm.allocation, lambda u: 1 - u, "unused row 4"),
        (ntm.allocation, lambda u: (1 - u) * u, "unused row 4"),
        (
            ntm.allocation,
            lambda u: allocation_right(u) * 0.5 + allocation_right(u) ** 2 * 0.5,
            "differs for random",
        ),
        (ntm.allocation, lambda u: allocation_right(u)[0], "shape"),
    ],
)
def test_a_wrong_answer_fails_with_a_hint(checker, answer, says):
    with pytest.raises(CheckFailed, match=says) as caught:
        checker(answer)
    assert "Hint:" in str(caught.value)


@pytest.mark.parametrize("checker", [ntm.write, ntm.shift, ntm.sharpen, ntm.allocation])
def test_an_unfinished_answer_says_so(checker):
    def unfinished(*args):
        raise NotImplementedError

    with pytest.raises(CheckFailed, match="not implemented yet"):
        checker(unfinished)


def test_checking_leaves_the_global_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    ntm.write(write_right)
    ntm.shift(shift_right)
    ntm.sharpen(sharpen_right)
    ntm.allocation(allocation_right)
    assert torch.equal(torch.rand(3), expected)
