"""Wrong answers that two checkers once accepted (found by a student-style review of the pages
03_ntm_at_work and 10_benchmarks_beyond_copying), and the book's own function passed as an
answer.

* ``checks.ntm.allocation`` computed its reference from ``u`` *after* calling the answer and
  never checked that ``u`` was unchanged, so an answer that wrote into the caller's ``u`` was
  compared with the allocation of the tensor it left behind.
* ``checks.arena.arena_entry`` (ex-ltm-window) accepted a model whose outputs do not depend on
  its inputs at all: the causality test only asked that early outputs do *not* move.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rnnbook.arena import zoo
from rnnbook.checks import CheckFailed, ntm
from rnnbook.checks import arena as arena_checks


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


def test_allocation_refuses_the_books_own_function_and_names_the_squashing():
    from rnnbook.models import dnc

    with pytest.raises(CheckFailed, match="reference implementation"):
        ntm.allocation(lambda u: dnc.allocation_weighting(u, eps=0.0))

    def squashed_on_a_copy(u):
        v = 1e-6 + (1 - 1e-6) * u
        s, phi = torch.sort(v, dim=-1)
        return torch.zeros_like(u).scatter(-1, phi, (1 - s) * _exclusive_cumprod(s))

    with pytest.raises(CheckFailed, match="squashes u"):
        ntm.allocation(squashed_on_a_copy)
