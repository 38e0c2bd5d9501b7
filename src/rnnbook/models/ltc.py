"""The liquid time-constant (LTC) neuron of Chapter 10's related models (Lechner et al. 2020;
Hasani et al. 2021), equation (ltm-ltc):

    C_m dv_i/dt = g_l (v_leak - v_i) + sum_j w_ij sigma(gamma_ij (v_j - mu_ij)) (E_ij - v_i) + I_i.

Every term but the current is a conductance times a distance to a reversal potential
(``v_leak`` for the leak, ``E_ij`` for synapse ``j -> i``), so with ``I = 0`` and
nonnegative conductances each neuron is pulled towards a weighted average of those
potentials: ``v`` stays in the interval ``[min(v_leak, E), max(v_leak, E)]``
(:func:`reversal_interval`). The synaptic conductance ``w_ij sigma(...)`` depends on the
state, which makes the neuron's time constant ``C_m / (g_l + sum_j w_ij sigma(...))``
"liquid".

* :func:`ltc_rhs` is ``dv/dt`` for a layer of neurons.
* :func:`ltc_trace` integrates a fully recurrent LTC network (the presynaptic potentials are
  the network's own ``v``) with explicit Euler or the fused semi-implicit step of Hasani et
  al. (:func:`fused_step`), and returns the potentials over time.

The teaching point: drop the leak (``leak=False``) and drive the neurons with a constant
current ``I > 0``, and ``v`` leaves the interval; once it is past every ``E_ij`` the synaptic
factor ``E_ij - v_i`` has changed sign, each synapse now pulls *down*, and if the synapses close
as ``v`` rises (``gamma < 0`` for a recurrent network) nothing restrains ``v``: it grows like
``I t / C_m``. (If the synapses stay open, ``v`` instead settles at the finite
``(sum_j w sigma E + I) / sum_j w sigma``, still outside the interval for large enough ``I``.)
"""

from __future__ import annotations

import math
import numbers

import torch

from rnnbook._validate import check_choice, check_positive_int, check_tensor

SOLVERS = ("euler", "fused")


def _as_tensor(value, name: str, like: torch.Tensor) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {value.dtype}")
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number or a tensor, got {type(value).__name__}")
    return torch.tensor(float(value), dtype=like.dtype, device=like.device)


def _check_params(v, presynaptic, w, gamma, mu, E, g_leak, v_leak, C_m, current):
    check_tensor(v, "v", ndim=2)
    check_tensor(presynaptic, "presynaptic", ndim=2)
    if not v.is_floating_point():
        raise TypeError(f"v must be a floating-point tensor, got {v.dtype}")
    B, n_post = v.shape
    n_pre = presynaptic.shape[1]
    if presynaptic.shape[0] != B:
        raise ValueError(
            f"presynaptic must have shape (B, n_pre) with B = {B}, got {tuple(presynaptic.shape)}"
        )
    for name, t in (("w", w), ("gamma", gamma), ("mu", mu), ("E", E)):
        t = _as_tensor(t, name, v)
        if t.dim() != 0 and tuple(t.shape) != (n_pre, n_post):
            raise ValueError(
                f"{name} must be a number or have shape (n_pre, n_post) = ({n_pre}, {n_post}), "
                f"got {tuple(t.shape)}"
            )
    for name, t in (("g_leak", g_leak), ("v_leak", v_leak), ("C_m", C_m)):
        t = _as_tensor(t, name, v)
        if t.dim() != 0 and tuple(t.shape) != (n_post,):
            raise ValueError(
                f"{name} must be a number or have shape (n_post,) = ({n_post},), "
                f"got {tuple(t.shape)}"
            )
    if (_as_tensor(w, "w", v) < 0).any():
        raise ValueError("w must be nonnegative: synaptic weights are conductances")
    if (_as_tensor(g_leak, "g_leak", v) < 0).any():
        raise ValueError("g_leak must be nonnegative: it is a conductance")
    if not (_as_tensor(C_m, "C_m", v) > 0).all():
        raise ValueError("C_m must be positive: it is a membrane capacitance")
    cur = _as_tensor(current, "current", v)
    try:
        torch.broadcast_shapes(cur.shape, (B, n_post))
    except RuntimeError:
        raise ValueError(
            f"current must broadcast to (B, n_post) = ({B}, {n_post}), got {tuple(cur.shape)}"
        ) from None


def _synapses(v, presynaptic, w, gamma, mu, E):
    """``(sum_j w sigma, sum_j w sigma E)``, each (B, n_post)."""
    s = w * torch.sigmoid(gamma * (presynaptic.unsqueeze(-1) - mu))  # (B, n_pre, n_post)
    return s.sum(dim=1), (s * E).sum(dim=1)


def ltc_rhs(
    v: torch.Tensor,
    presynaptic: torch.Tensor,
    w,
    gamma,
    mu,
    E,
    g_leak,
    v_leak,
    C_m,
    current=0.0,
    leak: bool = True,
) -> torch.Tensor:
    """``dv/dt`` of a layer of LTC neurons, (ltm-ltc).

    Shapes: ``v`` (B, n_post), the neurons' potentials; ``presynaptic`` (B, n_pre), the
    potentials ``v_j`` of the neurons that synapse onto them (``v`` itself for a recurrent
    layer); ``w`` (nonnegative), ``gamma``, ``mu``, ``E`` (n_pre, n_post) or numbers, entry
    ``[j, i]`` for the synapse ``j -> i``; ``g_leak`` (nonnegative), ``v_leak``, ``C_m``
    (positive) (n_post,) or numbers; ``current`` ``I``, anything that broadcasts to
    (B, n_post). ``leak=False`` drops the term ``g_l (v_leak - v_i)``.
    Returns (B, n_post).
    """
    _check_params(v, presynaptic, w, gamma, mu, E, g_leak, v_leak, C_m, current)
    return _rhs(v, presynaptic, w, gamma, mu, E, g_leak, v_leak, C_m, current, leak)


def _rhs(v, presynaptic, w, gamma, mu, E, g_leak, v_leak, C_m, current, leak):
    g_syn, g_syn_E = _synapses(v, presynaptic, w, gamma, mu, E)
    dv = g_syn_E - g_syn * v + current  # sum_j w sigma (E - v) + I
    if leak:
        dv = dv + g_leak * (v_leak - v)
    return dv / C_m


def fused_step(
    v, presynaptic, dt, w, gamma, mu, E, g_leak, v_leak, C_m, current=0.0, leak=True
) -> torch.Tensor:
    """One step of Hasani et al.'s fused (semi-implicit) solver for (ltm-ltc):

        v <- (C_m v / dt + g_l v_leak + sum_j w sigma E + I) / (C_m / dt + g_l + sum_j w sigma),

    implicit in the ``- v`` of each conductance term, explicit in ``sigma``. With ``I = 0``
    the new ``v`` is a weighted average of ``v``, ``v_leak`` and the ``E``'s with the
    nonnegative weights ``C_m/dt``, ``g_l``, ``w sigma``, so from a start inside
    :func:`reversal_interval` it never leaves it, for any ``dt > 0``.
    ``leak=False`` drops both ``g_l`` terms. Shapes as in :func:`ltc_rhs`.
    """
    _check_params(v, presynaptic, w, gamma, mu, E, g_leak, v_leak, C_m, current)
    return _fused(v, presynaptic, dt, w, gamma, mu, E, g_leak, v_leak, C_m, current, leak)


def _fused(v, presynaptic, dt, w, gamma, mu, E, g_leak, v_leak, C_m, current, leak):
    g_syn, g_syn_E = _synapses(v, presynaptic, w, gamma, mu, E)
    num = C_m * v / dt + g_syn_E + current
    den = C_m / dt + g_syn
    if leak:
        num = num + g_leak * v_leak
        den = den + g_leak
    return num / den


def reversal_interval(E, v_leak, leak: bool = True) -> tuple[float, float]:
    """``(min, max)`` of the reversal potentials: the ``E``'s and, with the leak, ``v_leak``.

    With ``I = 0`` and nonnegative conductances ``v`` stays in this interval (fused solver for
    any ``dt``; Euler when ``dt <= C_m / (g_l + sum_j w_ij)`` for every neuron, which makes each
    Euler step a convex combination too).
    """
    values = [torch.as_tensor(E, dtype=torch.float64).flatten()]
    if leak:
        values.append(torch.as_tensor(v_leak, dtype=torch.float64).flatten())
    allv = torch.cat(values)
    return float(allv.min()), float(allv.max())


def ltc_trace(
    v0: torch.Tensor,
    steps: int,
    dt: float,
    *,
    w,
    gamma,
    mu,
    E,
    g_leak=1.0,
    v_leak=0.0,
    C_m=1.0,
    current=0.0,
    leak: bool = True,
    solver: str = "euler",
) -> torch.Tensor:
    """Integrate a fully recurrent LTC network, (ltm-ltc), for ``steps`` steps of ``dt``.

    ``v0`` (B, n) is the start; the presynaptic potentials are the network's own ``v``, so
    ``w``, ``gamma``, ``mu``, ``E`` are (n, n) or numbers. ``current`` is constant (anything
    that broadcasts to (B, n)) or one per step, a tensor (steps, B, n). ``solver`` is
    ``"euler"`` (``v <- v + dt dv/dt``) or ``"fused"`` (:func:`fused_step`).

    Returns the potentials at every time ``0, dt, ..., steps dt``: (steps + 1, B, n).
    """
    check_tensor(v0, "v0", ndim=2)
    check_positive_int(steps, "steps")
    check_choice(solver, "solver", SOLVERS)
    if isinstance(dt, bool) or not isinstance(dt, numbers.Real) or not dt > 0:
        raise ValueError(f"dt must be a positive number, got {dt!r}")
    if not math.isfinite(dt):
        raise ValueError(f"dt must be finite, got {dt!r}")
    per_step = isinstance(current, torch.Tensor) and current.dim() == 3
    if per_step and current.shape != (steps, *v0.shape):
        raise ValueError(
            f"a per-step current must have shape (steps, B, n) = ({steps}, {v0.shape[0]}, "
            f"{v0.shape[1]}), got {tuple(current.shape)}"
        )
    params = (w, gamma, mu, E, g_leak, v_leak, C_m)
    _check_params(v0, v0, *params, current[0] if per_step else current)
    v, vs = v0, [v0]
    for t in range(steps):
        I_t = current[t] if per_step else current
        if solver == "euler":
            v = v + dt * _rhs(v, v, *params, I_t, leak)
        else:
            v = _fused(v, v, dt, *params, I_t, leak)
        vs.append(v)
    return torch.stack(vs)
