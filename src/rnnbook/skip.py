"""The skip core of Part II: keep the state, or update it.

Every model of Chapters 5-9 is a recurrent network that sometimes keeps its state instead of
updating it. A binary **update decision** says which (1 = update, 0 = skip),

    b_t = D(·) ∈ {0, 1}                                                         (skip-decision)

and with the candidate state ``h̃_t`` of the model's ordinary step the new state is

    h_t = b_t ⊙ h̃_t + (1 − b_t) ⊙ h_{t−1}                                    (skip-update)

The decision is a scalar per layer, a vector per unit, or one bit per **module** shared by
the module's units (:func:`expand_modules`). Only the decision differs from chapter to
chapter; it belongs to one of three families:

* **random**: ``b_t ~ Bernoulli(p)``, drawn afresh at every step (zoneout, Chapter 7):
  :func:`bernoulli_decision`                                                  (skip-bernoulli)
* **constrained**: a fixed rule, such as the clock of the Clockwork RNN (Chapter 5),
  ``b_t^(m) = [(t0 + t) mod T_m = 0]``: :func:`clock`, :func:`unit_clock`      (skip-clock)
* **adaptive**: a rule on a score the network computes from its own activity, so the
  decision depends on the data. Either the score is detached and nothing is estimated
  (SBA's surprisal in Chapter 6, :func:`rnnbook.models.sba.sba_decision`), or the network
  learns when to skip, ``b_t = [s_t > θ]`` with the straight-through gradient
  ``∂b_t/∂s_t := 1`` (a gate in the SGRU, attention in Chapter 9):
  :func:`threshold_decision`                                    (skip-threshold), (skip-ste)

On a skipped step the Jacobian ``∂h_t/∂h_{t−1}`` of the skipped units is the identity, so
gradients cross a run of skips unchanged. The **update rate** (:func:`update_rate`) is the
share of the possible updates that happened,

    u = Σ_{n,t,j} [b_{n,t}^(j) = 1] / (N · L · H)                               (skip-rate)

over N sequences n, L steps t and the H units j of the state; a plain RNN has u = 1, and
1 − u is the skip rate. Every chapter reports it with :func:`update_rate`, so their tables
compare. For a clock with
M equal modules it follows from the periods alone: over a long sequence

    u_∞ = (1/M) Σ_m 1/T_m                                                        (skip-u-inf)

and over a window of L steps starting at clock time t0

    u_L = (1/(M L)) Σ_{t<L} Σ_m [(t0 + t) mod T_m = 0]                       (skip-u-window)

(:func:`asymptotic_update_rate`, :func:`window_update_rate`). The Clockwork connectivity
mask (cw-mask) is here too (:func:`connectivity_mask`), since it is defined by the modules.
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

    Args:
        candidate: the ordinary step's new state ``h̃_t``, e.g. (B, H).
        previous: the state ``h_{t−1}``, of the same shape.
        update: the decision ``b_t`` (1 = update, 0 = skip), broadcasting against the
            states: a scalar or (B, 1) for a decision per layer, (B, H) or (H,) per unit; a
            decision per module is first spread over its units with :func:`expand_modules`.

    Returns the new state ``h_t``. Where ``update`` is 0 the previous state comes back
    exactly (a copy, to the last bit), and its gradient passes to ``h_{t−1}`` unchanged.
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
    shape,
    p: float,
    generator: torch.Generator | None = None,
    dtype=torch.float32,
    device=None,
) -> torch.Tensor:
    """Random family (skip-bernoulli): independent ``b ~ Bernoulli(p)``, 1 = update.

    ``shape`` is (B, H) for a decision per unit (zoneout), (B, 1) per layer, (B, M) per
    module. The expected update rate is ``p``. Pass a seeded ``generator`` to replay it.
    """
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
    """Adaptive family (skip-threshold): ``b = [score > threshold]``, 1 = update.

    The step function has derivative 0 almost everywhere, so it is trained through the
    straight-through estimator (skip-ste): the backward pass takes ``∂b/∂score := 1`` and
    ``∂b/∂threshold := −1``. ``score`` is whatever the model computes, e.g. a gate value
    (SGRU) or an attention weight (ABS, Chapter 9); ``threshold`` is a number or a tensor
    broadcasting against ``score``, fixed or learned (its gradient is summed over the
    broadcast dimensions). SBA (Chapter 6) does not use it: its decision is detached and
    needs no estimator (:func:`rnnbook.models.sba.sba_decision`).
    """
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


def check_t0(t0) -> int:
    """The clock offset: a non-negative integer."""
    if isinstance(t0, bool) or not isinstance(t0, int) or t0 < 0:
        raise ValueError(f"the clock offset t0 must be a non-negative integer, got {t0!r}")
    return t0


def clock(periods: Sequence[int], L: int, t0: int = 0) -> torch.Tensor:
    """Constrained family (skip-clock): the schedule, (L, M) booleans ``[(t0 + t) mod T_m = 0]``.

    Step 0 of a window is time ``t0`` of the clock: with ``t0 = 0`` every module ticks at the
    first step. A clock started at ``lcm(periods)`` gives the same schedule as one at 0.
    """
    periods = check_periods(periods)
    check_positive_int(L, "L")
    check_t0(t0)
    t = torch.arange(t0, t0 + L).unsqueeze(1)
    return t % torch.tensor(periods) == 0


def unit_clock(periods: Sequence[int], H: int, L: int, t0: int = 0) -> torch.Tensor:
    """The clock spread over the units, (L, H) floats: 1 where the unit's module ticks.

    ``H`` units form ``len(periods)`` equal modules, fast ones first (:func:`module_of_unit`).
    """
    periods = check_periods(periods)
    module_of_unit(H, len(periods))  # H must split into equal modules
    return expand_modules(clock(periods, L, t0).float(), H // len(periods))


def expand_modules(decision: torch.Tensor, module_size: int) -> torch.Tensor:
    """A decision per module (..., M) spread over the module's units: (..., M · module_size).

    Module m owns units ``m·k .. (m+1)·k − 1`` (k = ``module_size``), as in the Clockwork
    RNN, so the result can go to :func:`skip_update` or :func:`update_rate`.
    """
    check_tensor(decision, "decision")
    check_positive_int(module_size, "module_size")
    if decision.dim() == 0:
        raise ValueError("decision must have a last dimension of modules, got a scalar")
    return decision.repeat_interleave(module_size, dim=-1)


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
    """(cw-mask): the Clockwork recurrent mask, (H, H) in torch's layout ``W[destination, source]``.

    ``"uni"``: unit i receives from unit j only when j's module is i's or a later (slower)
    one, ``[mod(j) >= mod(i)]``: block-upper-triangular, slow modules feed fast ones and not
    back (by module index, not by period, so equal periods still connect one way).
    ``"bi"``: dense, every module reads every module. (The row convention ``h W``
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

    Updates performed over updates possible, counted over units, steps and sequences, as
    the dissertation counts it (updated / all, not updated / skipped).

    Args:
        decisions: 1 (update) or 0 (skip), bool or float, for every unit, step and
            sequence, e.g. (B, L, H). The rate counts unit updates, so a decision per module
            is expanded first (:func:`expand_modules`) and one per layer broadcast to (B, L, H).
        valid: optional, broadcastable to ``decisions`` (e.g. (B, L, 1)): 1 on the steps
            that exist, 0 on padding, for batches of sequences of unequal lengths.

    Returns a Python float.
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


def unchanged_share(states: torch.Tensor) -> float:
    """The share of unit-steps at which a state kept its value exactly, ``v_t == v_{t−1}``.

    An update rate counts decisions; this counts what they did to a state. The two agree
    only where a "keep" copies the state itself (S_h for ``h``, S_c for ``c``, Chapter 6):
    a kept S_ic unit still moves, ``c_t = f_t ⊙ c_{t−1}``.

    Args:
        states: the state before the first step and after every step, (T + 1, B, H), any
            float dtype; compared bitwise (a copy is exact, see ``skip_update``).

    Returns a Python float in [0, 1], over the T steps, B sequences and H units.
    """
    check_tensor(states, "states", ndim=3)
    if states.shape[0] < 2:
        raise ValueError(
            f"states needs the state before the first step and after at least one, (T + 1, B, "
            f"H) with T >= 1, got {tuple(states.shape)}"
        )
    return float((states[1:] == states[:-1]).double().mean())


def explained_share(values: torch.Tensor, groups: torch.Tensor, min_count: int = 20) -> float:
    """η², the share of the variance of ``values`` that their grouping explains.

    ``η² = Σ_g n_g (mean_g − mean)² / Σ_i (v_i − mean)²``, over the groups with at least
    ``min_count`` members (the other values are left out). Chapters 6 and 7 group the share of
    units that updated at each step by the word read at that step: 0 if the word tells
    nothing about the share, 1 if it decides it. With k groups of random values, η² is about
    (k − 1) / (n − 1); compare with the same values shuffled across the groups.

    Args:
        values: one number per observation, any shape.
        groups: integer labels (non-negative), the same shape as ``values``.
        min_count: the fewest members a group needs to be counted, a positive integer.

    Returns a Python float in [0, 1].
    """
    check_tensor(values, "values")
    check_tensor(groups, "groups")
    check_positive_int(min_count, "min_count")
    if values.shape != groups.shape:
        raise ValueError(
            f"values and groups must have one shape, got {tuple(values.shape)} and "
            f"{tuple(groups.shape)}"
        )
    if groups.dtype.is_floating_point or groups.dtype == torch.bool or (groups < 0).any():
        raise ValueError(f"groups must be non-negative integer labels, got {groups.dtype}")
    v, g = values.flatten().double(), groups.flatten()
    counted = torch.bincount(g)[g] >= min_count
    v, g = v[counted], g[counted]
    if v.numel() < 2:
        raise ValueError(f"fewer than two values belong to groups of {min_count} or more")
    _, g = torch.unique(g, return_inverse=True)  # groups numbered 0..k-1
    n = torch.bincount(g).double()
    means = torch.zeros_like(n).index_add_(0, g, v) / n
    total = (v - v.mean()).pow(2).sum()
    if total == 0:
        raise ValueError("the values do not vary: no variance to explain")
    return float((n * (means - v.mean()).pow(2)).sum() / total)


def asymptotic_update_rate(periods: Sequence[int]) -> float:
    """(skip-u-inf): ``u_∞ = (1/M) Σ_m 1/T_m`` for equal modules, the rate of a long sequence."""
    periods = check_periods(periods)
    return sum(1 / T for T in periods) / len(periods)


def window_update_rate(periods: Sequence[int], L: int, t0: int = 0) -> float:
    """(skip-u-window): ``u_L``, the update rate of one window of L steps from clock time t0.

    Slightly above ``u_∞`` for ``t0 = 0``, because every module ticks at the first step.
    """
    return float(clock(periods, L, t0).double().mean())


def lcm(periods: Sequence[int]) -> int:
    """The clock's cycle: after lcm(periods) steps the schedule repeats."""
    return math.lcm(*check_periods(periods))


class UpdateTally:
    """What every skipping cell of Part II keeps: a tally of its unit updates, for the update
    rate (skip-rate), and an optional trace of its decisions.

    A cell calls :meth:`count` with the decisions spread over its units at every step (1 =
    update; a fraction for an expected update), and :meth:`update_rate` reads the rate since
    :meth:`reset_tally`. Setting ``trace`` to a list records every step's decisions into it.
    """

    trace: list | None = None

    def reset_tally(self) -> None:
        """Start counting unit updates afresh (see :meth:`update_rate`)."""
        self.updates, self.possible = 0.0, 0

    def update_rate(self) -> float:
        """(skip-rate) over the steps since :meth:`reset_tally`: unit updates / possible."""
        if getattr(self, "possible", 0) == 0:
            raise ValueError("no step was counted since reset_tally()")
        return self.updates / self.possible

    def count(self, units: torch.Tensor) -> None:
        """Add one step's decisions (B, H), 1 = update, to the tally."""
        self.updates += float(units.sum())
        self.possible += units.numel()


DECAYS = ("none", "const", "prob")


def kept_factor(like: torch.Tensor, decay: str, alpha: float, p_decay: float):
    """The decay D of a kept value, as a factor: 1 (``"none"``), 1 − α (``"const"``), or
    1 − α with probability ``p_decay`` and 1 otherwise, drawn per entry of ``like``
    (``"prob"``), in the dtype of ``like`` (1 − α computed in that dtype, not in float32)."""
    if decay == "none":
        return 1.0
    if decay == "const":
        return 1.0 - alpha
    hit = torch.rand(like.shape, dtype=like.dtype, device=like.device) < p_decay
    decayed = torch.full_like(like, 1.0 - alpha)  # 1 - alpha rounded once, to like's dtype
    return torch.where(hit, decayed, torch.ones_like(like))


# --- how low an update rate may go (Chapter 8) -----------------------------------------------


def effective_update_rate(u: float, u_min: float) -> float:
    """(han-u-effective): the update rate rescaled so that 0 means "at the bound",

        ũ = 100 (u_min − u) / (u_min − 100)

    with ``u`` and ``u_min`` **in percent** (0-100), as the source's tables give them. ``ũ``
    is 100 at u = 100, 0 at u = u_min, negative below the bound, and tends to ``u`` as
    ``u_min → 0``. Rates on the [0, 1] scale, such as :func:`update_rate` returns, are
    multiplied by 100 first.
    """
    for name, value in (("u", u), ("u_min", u_min)):
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise ValueError(f"{name} must be a number (a percentage), got {value!r}")
    if not 0 <= u <= 100:
        raise ValueError(f"u must be a percentage in [0, 100], got {u}")
    if not 0 <= u_min < 100:
        raise ValueError(f"u_min must be a percentage in [0, 100), got {u_min}")
    return 100 * (u_min - u) / (u_min - 100)


def update_rate_lower_bounds(
    S: int, W: int, L_q: int | None = None, *, one_direction: bool = False
) -> dict[str, float]:
    """(han-u-min): the update rates of one update per sequence read, in the source's
    **padded** convention, on the [0, 1] scale.

    An encoder that is to keep what the answer needs must update at least once per sequence
    it reads: the sentence encoder once per document of S sentences, the query encoder once
    per query of ``L_q`` positions (the source takes ``L_q = W``), the word encoder once per
    document of S · W positions:

        u_min^s = 1/S,   u_min^q = 1/L_q,   u_min^w = 1/(S W)

    Args:
        S: sentences per document. W: the padded sentence length. L_q: the padded query
            length (default ``W``).
        one_direction: halve the bounds, for a bidirectional layer whose reported rate is
            the mean of its two directions and one of them may stay silent.

    Returns ``{"s": ..., "q": ..., "w": ...}``. With S = 20, W = 100 they are 5 %, 1 % and
    0.05 %. The book counts rates over real tokens: see
    :func:`real_token_update_rate_lower_bounds`.
    """
    check_positive_int(S, "S")
    check_positive_int(W, "W")
    L_q = W if L_q is None else check_positive_int(L_q, "L_q")
    share = 0.5 if one_direction else 1.0
    return {"s": share / S, "q": share / L_q, "w": share / (S * W)}


def real_token_update_rate_lower_bounds(
    doc: torch.Tensor, query: torch.Tensor, *, one_direction: bool = False
) -> dict[str, float]:
    """(han-u-min) in the **real-token** convention: one update per sequence, as a share of
    the real tokens (sentences) that the book's update rates count, on the [0, 1] scale.

    Over N documents with ``n_w`` real document tokens, ``n_s`` non-empty sentences and
    ``n_q`` real query tokens in all, one update per document or query is

        u_min^s = N / n_s,   u_min^q = N / n_q,   u_min^w = N / n_w

    Args:
        doc: token ids (N, S, W), 0 = PAD. query: token ids (N, L_q), 0 = PAD.
        one_direction: halve the bounds (see :func:`update_rate_lower_bounds`).

    Returns ``{"s": ..., "q": ..., "w": ...}``.
    """
    check_tensor(doc, "doc", ndim=3)
    check_tensor(query, "query", ndim=2)
    if doc.shape[0] != query.shape[0] or doc.shape[0] == 0:
        raise ValueError(
            f"doc (N, S, W) and query (N, L_q) must hold the same N >= 1 samples, got shapes "
            f"{tuple(doc.shape)} and {tuple(query.shape)}"
        )
    N = doc.shape[0]
    real = doc != 0
    counts = {"s": int(real.any(-1).sum()), "q": int((query != 0).sum()), "w": int(real.sum())}
    for key, count in counts.items():
        if count == 0:
            raise ValueError(f"no real token for the {key!r} bound: every entry is PAD")
    share = 0.5 if one_direction else 1.0
    return {key: share * N / count for key, count in counts.items()}
