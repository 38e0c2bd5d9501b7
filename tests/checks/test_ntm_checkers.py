"""rnnbook.checks.ntm: each checker passes a right answer and explains typical wrong ones.

The right answers are written from the equations ((ntm-write), (ntm-shift), (ntm-sharpen) and
(dnc-allocation)), with loops and modular indices, not by calling the book's functions that the
checkers use.
"""

from __future__ import annotations

import pytest
import torch

from rnnbook.checks import CheckFailed, ntm
from rnnbook.models.ntm import HeadOutputs

# --- right answers ------------------------------------------------------------------------------


def write_right(memory, w, erase, add):
    """(ntm-write) for every head: the erase factors multiplied, then the adds summed."""
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
    """(ntm-shift): w~(i) = sum_j w(j) s(i - j), i - j modulo N, entry k of s the shift k - S."""
    B, N = w.shape
    S = s.shape[1] // 2
    out = torch.zeros_like(w)
    for i in range(N):
        for delta in range(-S, S + 1):
            out[:, i] += w[:, (i - delta) % N] * s[:, delta + S]
    return out


def sharpen_right(w, gamma):
    """(ntm-sharpen) after scaling by the largest entry, with the book's 1e-12."""
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


def hand_copy(
    *,
    jump_step=1,
    marker=True,
    beta=100.0,
    read_shift=+1,
    soft=0.0,
    gamma=1.0,
    after_jump=None,
    steps_back=False,
):
    """A hand-designed copy controller, right with the defaults. The write head walks one row
    per input step (g = 0, shift +1) and writes each vector with a start marker in column 8
    on the first; after the input it writes nothing. The read head jumps to the marker by
    content ``jump_step`` steps after the delimiter (1: on the first answer), then walks on.
    The options make the classic mistakes."""

    def controller(x_t, r_prev, memo):
        B = x_t.shape[0]
        step = memo.setdefault("step", 0)
        memo["step"] = step + 1
        if x_t[:, 8].max() > 0.5:
            memo["delimiter"] = step
        ones, zeros = torch.ones(B, 1), torch.zeros(B, 1)

        def shift(delta):
            s = torch.full((B, 3), soft / 2)
            s[:, delta + 1] = 1 - soft
            return s

        marker_key = torch.zeros(B, 9)
        marker_key[:, 8] = 1.0
        if "delimiter" not in memo:
            add = x_t.clone()
            add[:, 8] = 1.0 if step == 0 and marker else 0.0
            direction = -1 if steps_back else +1
            write = HeadOutputs(
                marker_key, zeros, zeros, shift(direction), gamma * ones, torch.ones(B, 9), add
            )
        else:
            nothing = torch.zeros(B, 9)
            write = HeadOutputs(marker_key, zeros, zeros, shift(0), ones, nothing, nothing)
        if step == memo.get("delimiter", -99) + jump_step:
            read = HeadOutputs(marker_key, beta * ones, ones, shift(0), ones)
        elif after_jump == "content":
            read = HeadOutputs(marker_key, beta * ones, ones, shift(0), ones)
        else:
            read = HeadOutputs(marker_key, zeros, zeros, shift(read_shift), gamma * ones)
        return read, write

    return controller


def hand_copy_out_of_range(x_t, r_prev, memo):
    read, write = hand_copy()(x_t, r_prev, memo)
    return read._replace(g=read.g + 2), write


def hand_copy_wrong_shape(x_t, r_prev, memo):
    read, write = hand_copy()(x_t, r_prev, memo)
    return read._replace(s=read.s[0]), write


# --- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "checker, answer",
    [
        (ntm.write, write_right),
        (ntm.shift, shift_right),
        (ntm.sharpen, sharpen_right),
        (ntm.allocation, allocation_right),
        (ntm.copy_by_hand, hand_copy()),
        (ntm.copy_by_hand, hand_copy(soft=0.02, gamma=20.0)),  # blurred shifts, sharpened
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
        (ntm.copy_by_hand, hand_copy(jump_step=0), "one row ahead"),
        (ntm.copy_by_hand, hand_copy(jump_step=2), "one row behind"),
        (ntm.copy_by_hand, hand_copy(marker=False), "no single row"),
        (ntm.copy_by_hand, hand_copy(beta=5.0), "key strength large enough"),
        (ntm.copy_by_hand, hand_copy(read_shift=-1), "same direction"),
        (ntm.copy_by_hand, hand_copy(steps_back=True), "same direction"),
        (ntm.copy_by_hand, hand_copy(after_jump="content"), "repeats the first vector"),
        (ntm.copy_by_hand, hand_copy(soft=0.02), "no single row"),
        (ntm.copy_by_hand, hand_copy_out_of_range, "0 <= g <= 1"),
        (ntm.copy_by_hand, hand_copy_wrong_shape, "shape"),
        (ntm.copy_by_hand, lambda x_t, r, memo: hand_copy()(x_t, r, memo)[0], "not a pair"),
    ],
)
def test_a_wrong_answer_fails_with_a_hint(checker, answer, says):
    with pytest.raises(CheckFailed, match=says) as caught:
        checker(answer)
    assert "Hint:" in str(caught.value)


@pytest.mark.parametrize(
    "checker", [ntm.write, ntm.shift, ntm.sharpen, ntm.allocation, ntm.copy_by_hand]
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
    ntm.write(write_right)
    ntm.shift(shift_right)
    ntm.sharpen(sharpen_right)
    ntm.allocation(allocation_right)
    assert torch.equal(torch.rand(3), expected)


def test_run_by_hand_rejects_inputs_that_are_not_copy_inputs():
    with pytest.raises(ValueError, match=r"\(B, T, 9\)"):
        ntm.run_by_hand(hand_copy(), torch.zeros(2, 5, 8))
