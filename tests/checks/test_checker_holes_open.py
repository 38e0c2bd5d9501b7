"""Wrong answers that two checkers accept (found by a student-style review of the pages
03_ntm_at_work and 10_benchmarks_beyond_copying). Each test fails while the hole is open, so
each is marked as an expected failure, strictly: when a checker is fixed, its test passes, the
strict mark turns that into a failure, and the mark must go (the holes are in files of the
package that were frozen while full-profile verifications ran).

* ``checks.ntm.allocation`` computes its reference from ``u`` *after* calling the answer and
  never checks that ``u`` is unchanged, so an answer that writes into the caller's ``u`` is
  compared with the allocation of the tensor it left behind.
* ``checks.arena.arena_entry`` (ex-ltm-window) accepts a model whose outputs do not depend on
  its inputs at all: the causality test only asks that early outputs do *not* move.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rnnbook.arena import zoo
from rnnbook.checks import CheckFailed, ntm
from rnnbook.checks import arena as arena_checks

pytestmark = pytest.mark.xfail(strict=True, reason="an open hole in the checker (see above)")


def _exclusive_cumprod(s):
    ones = torch.ones_like(s[:, :1])
    return torch.cumprod(torch.cat([ones, s[:, :-1]], dim=-1), dim=-1)


def allocation_sorted_in_place(u):
    """Wrong: returns the weights in free-list order (never scattered back to the rows), and
    overwrites the caller's u with the sorted usages."""
    s, _ = torch.sort(u, dim=-1)
    u.copy_(s)
    return (1 - s) * _exclusive_cumprod(s)


def allocation_squashed_in_place(u):
    """Wrong: the reference implementation's squashing, which the exercise excludes (the
    checker rejects it when done on a copy), done in place on the caller's u."""
    u.mul_(1 - 1e-6).add_(1e-6)
    s, phi = torch.sort(u, dim=-1)
    return torch.zeros_like(u).scatter(-1, phi, (1 - s) * _exclusive_cumprod(s))


@pytest.mark.parametrize(
    "answer", [allocation_sorted_in_place, allocation_squashed_in_place], ids=["sorted", "squashed"]
)
def test_allocation_rejects_answers_that_change_u_in_place(answer):
    with pytest.raises(CheckFailed):
        ntm.allocation(answer)


class _IgnoresInput(nn.Module):
    """Wrong for ex-ltm-window: the window is never fed in, so every output is the same."""

    def __init__(self, task, w=21):
        super().__init__()
        self.w = w
        self.mlp = nn.Sequential(
            nn.Linear(task.d_in * w, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
            nn.Linear(64, task.d_out),
        )  # fmt: skip

    def forward(self, x):
        window = x.new_zeros(*x.shape[:2], x.shape[-1] * self.w)  # forgot to fill it from x
        return self.mlp(window)


def test_arena_entry_rejects_a_model_that_ignores_its_inputs():
    with pytest.raises(CheckFailed):
        arena_checks.arena_entry(zoo.Entry("window of 21", "a window", _IgnoresInput))
