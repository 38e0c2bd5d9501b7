"""Update penalties (Chapter 7): terms added to the loss to push a skipping layer's update
rate down, and how much of the loss they make up.

    L_total = L_CE + R                                                        (pen-total)
    R_CB    = λ Σ_t ū_t,  ū_t the mean decision of step t                      (pen-cb)
    R_MSURE = λ (u_target − u)²,  u the mean decision over the window         (pen-msure)
    R_NS    = λ (1/T) Σ_t (‖h_t‖ − ‖h_{t−1}‖)²,  averaged over the batch       (pen-ns)
    RI      = (1/N) Σ_i R_i / (L_CE,i + R_i)                                   (pen-ri)

A decision is a step function of a margin m (for SBA, ``m = s_t − s_ref − θ``), and a step
function has derivative 0: R_CB and R_MSURE computed from :func:`literal_decision` give the
weights no gradient at all. :func:`straight_through` gives the same 0/1 values with
derivative 1 in the margin,

    b = [m > 0] + m − stopgrad(m)                                                 (pen-ste)

so the penalty's gradient reaches the weights through the margin. R_NS needs no estimator.

Written literally in floating point, ``hard + m - m.detach()`` rounds: ``1 + 0.3 - 0.3`` is
0.99999994 in float32, and for a margin of 3e7 the 1 is lost altogether (``1 + 3e7`` rounds to
3e7). :func:`straight_through` therefore computes the two halves of (pen-ste) separately: the
forward value is the bracket itself, exactly 0 or 1 for every margin, and the backward pass
passes the incoming gradient through unchanged, the derivative 1 of ``m − stopgrad(m)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rnnbook._validate import check_tensor


def _check_lam(lam) -> float:
    if isinstance(lam, bool) or not isinstance(lam, int | float) or not lam >= 0:
        raise ValueError(f"the penalty weight lambda must be a number >= 0, got {lam!r}")
    return float(lam)


def literal_decision(margin: torch.Tensor) -> torch.Tensor:
    """``[m > 0]`` as floats: the decision as the forward pass computes it (no gradient)."""
    check_tensor(margin, "margin")
    return (margin > 0).to(margin.dtype)


class _StraightThrough(torch.autograd.Function):
    """(pen-ste) as two halves: ``[m > 0]`` forward, derivative 1 backward."""

    @staticmethod
    def forward(margin: torch.Tensor) -> torch.Tensor:
        return (margin > 0).to(margin.dtype)  # the bracket [m > 0], exactly 0 or 1

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        pass  # the backward pass needs nothing from the forward one

    @staticmethod
    def backward(ctx, grad_b: torch.Tensor) -> torch.Tensor:
        return grad_b  # d(m - stopgrad(m))/dm = 1: the gradient passes unchanged


def straight_through(margin: torch.Tensor) -> torch.Tensor:
    """(pen-ste): the values of ``[m > 0]``, with derivative 1 with respect to ``m``.

    The forward value is exactly 0 or 1 for every margin (no rounding, see the module's
    docstring); the backward pass is that of ``[m > 0] + m − stopgrad(m)``.
    """
    check_tensor(margin, "margin")
    if not margin.is_floating_point():
        raise TypeError(f"margin must be a floating-point tensor, got {margin.dtype}")
    return _StraightThrough.apply(margin)


def budget_penalty(decisions: torch.Tensor, lam: float) -> torch.Tensor:
    """(pen-cb): ``λ Σ_t ū_t`` for decisions (T, B, ...) of a window of T steps."""
    check_tensor(decisions, "decisions")
    if decisions.dim() < 2:
        raise ValueError(f"decisions must be (T, B, ...), got shape {tuple(decisions.shape)}")
    return _check_lam(lam) * decisions.flatten(1).mean(dim=1).sum()


def msure_penalty(decisions: torch.Tensor, u_target: float, lam: float) -> torch.Tensor:
    """(pen-msure): ``λ (u_target − u)²`` with u the mean of the window's decisions."""
    check_tensor(decisions, "decisions")
    if isinstance(u_target, bool) or not isinstance(u_target, int | float):
        raise ValueError(f"u_target must be a number in [0, 1], got {u_target!r}")
    if not 0 <= u_target <= 1:
        raise ValueError(f"u_target must be a number in [0, 1], got {u_target!r}")
    return _check_lam(lam) * (u_target - decisions.mean()) ** 2


def norm_stabiliser(h: torch.Tensor, h0: torch.Tensor, lam: float) -> torch.Tensor:
    """(pen-ns) for states ``h`` (B, T, H) after the state ``h0`` (B, H) carried in."""
    check_tensor(h, "h", ndim=3)
    check_tensor(h0, "h0", ndim=2)
    if h0.shape != (h.shape[0], h.shape[2]):
        raise ValueError(
            f"h0 must be (B, H) = {(h.shape[0], h.shape[2])} for h of shape {tuple(h.shape)}, "
            f"got {tuple(h0.shape)}"
        )
    norms = torch.cat([h0.norm(dim=-1, keepdim=True), h.norm(dim=-1)], dim=1)  # (B, T + 1)
    return _check_lam(lam) * (norms[:, 1:] - norms[:, :-1]).pow(2).mean()


def regularisation_influence(penalties: Sequence[float], losses: Sequence[float]) -> float:
    """(pen-ri): the mean share of the penalty in the total loss over N iterations, in [0, 1]."""
    penalties, losses = list(map(float, penalties)), list(map(float, losses))
    if len(penalties) != len(losses) or not penalties:
        raise ValueError(
            f"penalties and losses must be two equally long, non-empty sequences, got "
            f"{len(penalties)} and {len(losses)}"
        )
    if min(penalties) < 0 or min(losses) < 0:
        raise ValueError("penalties and losses must be >= 0")
    return sum(r / (ce + r) if ce + r > 0 else 0.0 for r, ce in zip(penalties, losses)) / len(
        penalties
    )
