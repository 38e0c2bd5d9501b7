"""The skip core of Part II: keep the state, or update it.

Every model of Chapters 5-9 is a recurrent network that sometimes keeps its state instead of
updating it. With the candidate state ``h̃_t`` of its ordinary step and an update decision
``b_t`` in {0, 1} (per layer, per unit, or per module and shared by the module's units),

    h_t = b_t ⊙ h̃_t + (1 − b_t) ⊙ h_{t−1}                                    (skip-update)

Only the decision differs from chapter to chapter; it belongs to one of three families:

* **random**: ``b_t ~ Bernoulli(p)``, drawn afresh at every step (zoneout, Chapter 7):
  :func:`bernoulli_decision`;
* **constrained**: a fixed rule, such as the clock ``b_t = [t mod T = 0]`` of the Clockwork
  RNN (Chapter 5): :func:`clock`;
* **adaptive**: a rule the network learns, such as a threshold on a score (surprisal in
  Chapter 6, attention in Chapter 9), trained through the straight-through estimator:
  :func:`threshold_decision`.

On a skipped step the Jacobian ``∂h_t/∂h_{t−1}`` of the skipped units is the identity, so
gradients cross a run of skips unchanged. The **update rate** (:func:`update_rate`) is the
share of the possible updates that happened,

    u = Σ_{n,t,j} [b_{n,t}^{(j)} = 1] / (N · L · |h|)                           (skip-rate)

over sequences n, steps t and units j; a plain RNN has u = 1, and 1 − u is the skip rate.
Every chapter reports it with :func:`update_rate`, so their tables compare.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from rnnbook._validate import check_positive_int, check_tensor

CONNECTIVITIES = ("uni", "bi")


def skip_update(
    candidate: torch.Tensor, previous: torch.Tensor, update: torch.Tensor
) -> torch.Tensor:
    """(skip-update): ``update * candidate + (1 - update) * previous``.

    ``update`` broadcasts against the states: a scalar or (B, 1) for a decision per layer,
    (B, H) or (H,) per unit. Where it is 0 the previous state comes back exactly.
    """
    if candidate.shape != previous.shape:
        raise ValueError(
            f"candidate and previous state must have one shape, got {tuple(candidate.shape)} "
            f"and {tuple(previous.shape)}"
        )
    try:
        torch.broadcast_shapes(update.shape, candidate.shape)
    except RuntimeError as error:
        raise ValueError(
            f"the update decision of shape {tuple(update.shape)} does not broadcast against "
            f"states of shape {tuple(candidate.shape)}"
        ) from error
    update = update.to(candidate.dtype)
    return update * candidate + (1 - update) * previous


# --- the three families of decisions -------------------------------------------------------


def bernoulli_decision(
    shape, p: float, generator: torch.Generator | None = None, dtype=torch.float32, device=None
) -> torch.Tensor:
    """Random family: independent ``u ~ Bernoulli(p)`` (1 = update) of the given shape."""
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
        raise ValueError(f"the update probability p must be a number in [0, 1], got {p!r}")
    return (torch.rand(shape, generator=generator, device=device) < p).to(dtype)


class _StraightThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, score, threshold):
        return (score > threshold).to(score.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad, -grad  # the step's derivative taken as 1 (straight-through)


def threshold_decision(score: torch.Tensor, threshold) -> torch.Tensor:
    """Adaptive family: ``u = [score > threshold]``, differentiable by the straight-through
    estimator (the backward pass treats the step as the identity in ``score − threshold``)."""
    threshold = torch.as_tensor(threshold, dtype=score.dtype, device=score.device)
    return _StraightThrough.apply(score, threshold)


def check_periods(periods: Sequence[int]) -> tuple[int, ...]:
    """Module periods: positive integers, non-decreasing (fast modules first)."""
    periods = tuple(periods)
    if not periods:
        raise ValueError("periods must name at least one module, got none")
    for T in periods:
        if isinstance(T, bool) or not isinstance(T, int) or T < 1:
            raise ValueError(f"every period must be a positive integer, got {periods!r}")
    if any(a > b for a, b in zip(periods, periods[1:])):
        raise ValueError(f"periods must not decrease (fast modules first), got {periods!r}")
    return periods


def clock(periods: Sequence[int], L: int, t0: int = 0) -> torch.Tensor:
    """Constrained family: the Clockwork schedule, (L, M) booleans ``[(t0 + t) mod T_m = 0]``.

    Step 0 of a window is time ``t0`` of the clock: with ``t0 = 0`` every module ticks at the
    first step. A clock started at ``lcm(periods)`` gives the same schedule as one at 0.
    """
    periods = check_periods(periods)
    check_positive_int(L, "L")
    if isinstance(t0, bool) or not isinstance(t0, int) or t0 < 0:
        raise ValueError(f"the clock offset t0 must be a non-negative integer, got {t0!r}")
    t = torch.arange(t0, t0 + L).unsqueeze(1)
    return t % torch.tensor(periods) == 0


def module_of_unit(H: int, n_modules: int) -> torch.Tensor:
    """The module index 0..M-1 of each of ``H`` units, in ``n_modules`` equal blocks."""
    check_positive_int(H, "H")
    check_positive_int(n_modules, "the number of modules")
    if H % n_modules:
        raise ValueError(
            f"H = {H} units cannot be split into {n_modules} equal modules (H % M != 0)"
        )
    return torch.arange(H) // (H // n_modules)


def connectivity_mask(H: int, n_modules: int, kind: str = "uni") -> torch.Tensor:
    """The Clockwork recurrent mask, (H, H) in torch's layout ``W[destination, source]``.

    ``"uni"``: unit i receives from unit j only when j's module is i's or a later (slower)
    one, ``[mod(j) >= mod(i)]``: block-upper-triangular, slow modules feed fast ones and not
    back (by module index, not by period, so equal periods still connect one way).
    ``"bi"``: dense, every module reads every module. (The spec's row convention ``h W``
    transposes this into a block-lower-triangular matrix: the same model.)
    """
    if kind not in CONNECTIVITIES:
        raise ValueError(f"connectivity must be one of {CONNECTIVITIES}, got {kind!r}")
    module = module_of_unit(H, n_modules)
    if kind == "bi":
        return torch.ones(H, H)
    return (module.unsqueeze(0) >= module.unsqueeze(1)).float()  # [mod(source) >= mod(dest)]


# --- the update rate --------------------------------------------------------------------------


def update_rate(decisions: torch.Tensor, valid: torch.Tensor | None = None) -> float:
    """(skip-rate): the share of possible updates that happened, in [0, 1].

    ``decisions`` holds 1 (update) or 0 (skip) for every unit, step and sequence, e.g.
    (B, L, H); a per-module or per-layer decision should be expanded to its units first,
    since the rate counts unit updates. ``valid`` (broadcastable, e.g. (B, L, 1)) marks the
    steps that exist, for padded batches of unequal lengths.
    """
    check_tensor(decisions, "decisions")
    if decisions.numel() == 0:
        raise ValueError("update_rate needs at least one decision, got an empty tensor")
    d = decisions.double()
    if ((d != 0) & (d != 1)).any():
        raise ValueError("decisions must be 0 (skip) or 1 (update)")
    if valid is None:
        return float(d.mean())
    weight = torch.broadcast_to(valid.double(), d.shape)
    if weight.sum() == 0:
        raise ValueError("valid marks no step at all")
    return float((d * weight).sum() / weight.sum())


def asymptotic_update_rate(periods: Sequence[int]) -> float:
    """``u_∞ = (1/M) Σ_m 1/T_m`` for equal modules: the update rate of a long sequence."""
    periods = check_periods(periods)
    return sum(1 / T for T in periods) / len(periods)


def window_update_rate(periods: Sequence[int], L: int, t0: int = 0) -> float:
    """``u_L``: the update rate of one window of L steps starting at clock time ``t0``."""
    return float(clock(periods, L, t0).double().mean())


def lcm(periods: Sequence[int]) -> int:
    """The clock's cycle: after lcm(periods) steps the schedule repeats."""
    return math.lcm(*check_periods(periods))
