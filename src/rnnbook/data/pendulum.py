"""A driven double pendulum sampled irregularly: the book's stand-in for Walker2d kinematics.

Lechner & Hasani (2020, ODE-LSTM) benchmark on Walker2d kinematics: MuJoCo traces under a
policy, 1% of the actions replaced by random ones, 10% of the time steps dropped, an extra
input channel holding the time since the previous kept step, windows of 64 steps cut with
stride 16, a 75/10/15 split, and the next kept state as the target (MSE). MuJoCo is not
available offline, so this module builds a SURROGATE with the same structure from a damped,
driven planar double pendulum. Numbers measured on it are not Walker2d numbers.

The observation of a state ``(θ1, θ2, ω1, ω2)`` is ``(sin θ1, cos θ1, sin θ2, cos θ2, ω1, ω2)``.
The raw angles grow without bound once a link swings over the top, and wrapping them into
(-π, π] makes a jump of 2π out of a tiny motion, which an MSE target punishes as if it were
a huge error. Sine and cosine are smooth, bounded and together still determine the angle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from rnnbook._validate import check_positive_int

OBS_NAMES = ("sin θ1", "cos θ1", "sin θ2", "cos θ2", "ω1", "ω2")
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class PendulumParams:
    """Point masses ``m1``, ``m2`` on massless rods ``l1``, ``l2``; gravity ``g``; viscous
    damping ``b1`` (shoulder) and ``b2`` (elbow), in SI units."""

    m1: float = 1.0
    m2: float = 1.0
    l1: float = 1.0
    l2: float = 1.0
    g: float = 9.81
    b1: float = 0.1
    b2: float = 0.1

    def __post_init__(self):
        for name in ("m1", "m2", "l1", "l2"):
            _check_number(getattr(self, name), name, low=0.0, strict=True)
        for name in ("g", "b1", "b2"):
            _check_number(getattr(self, name), name, low=0.0)


def _check_number(value, name: str, *, low: float, high: float = math.inf, strict=False):
    """``value`` must be a finite real in [low, high] (or (low, high] when ``strict``)."""
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if ok:
        ok = (value > low if strict else value >= low) and value <= high
    if not ok:
        bracket = "(" if strict else "["
        upper = "inf)" if high == math.inf else f"{high}]"
        raise ValueError(
            f"{name} must be a finite number in {bracket}{low}, {upper}, got {value!r}"
        )
    return float(value)


def _check_state(state, name: str = "state") -> np.ndarray:
    state = np.asarray(state, dtype=np.float64)
    if state.ndim < 1 or state.shape[-1] != 4:
        raise ValueError(
            f"{name} must have shape (..., 4) = (θ1, θ2, ω1, ω2), got {tuple(state.shape)}"
        )
    return state


def _mass_matrix(q2, p: PendulumParams):
    c2 = np.cos(q2)
    m11 = (p.m1 + p.m2) * p.l1**2 + p.m2 * p.l2**2 + 2 * p.m2 * p.l1 * p.l2 * c2
    m12 = p.m2 * p.l2**2 + p.m2 * p.l1 * p.l2 * c2
    m22 = p.m2 * p.l2**2
    return m11, m12, m22


def double_pendulum_derivative(state, torque=None, params: PendulumParams | None = None):
    r"""Time derivative of ``state = (θ1, θ2, ω1, ω2)``, shape (..., 4), float64.

    Joint coordinates: θ1 is the shoulder angle of link 1 from the downward vertical, θ2 the
    elbow angle of link 2 relative to link 1 (the robotics convention, as in Walker2d's
    joints), ω = dθ/dt. With ``τ = (τ1, τ2)`` the joint torques (shape (..., 2), broadcast;
    ``None`` means zero) and ``b1``, ``b2`` the joint damping, the equations of motion
    (ltm-pendulum) are

    .. math::

        M(θ_2)\,\dot ω + c(θ_2, ω) + G(θ) = τ - \operatorname{diag}(b_1, b_2)\,ω,

        M_{11} = (m_1 + m_2) l_1^2 + m_2 l_2^2 + 2 m_2 l_1 l_2 \cos θ_2,\quad
        M_{12} = M_{21} = m_2 l_2^2 + m_2 l_1 l_2 \cos θ_2,\quad M_{22} = m_2 l_2^2,

        c_1 = -m_2 l_1 l_2 \sin θ_2\,(2 ω_1 ω_2 + ω_2^2),\quad
        c_2 = m_2 l_1 l_2 \sin θ_2\,ω_1^2,

        G_1 = (m_1 + m_2) g l_1 \sin θ_1 + m_2 g l_2 \sin(θ_1 + θ_2),\quad
        G_2 = m_2 g l_2 \sin(θ_1 + θ_2).

    ``det M = m1 m2 l1² l2² + m2² l1² l2² sin² θ2 > 0``, so the 2x2 system is solved in closed
    form. The energy (:func:`pendulum_energy`) obeys ``dE/dt = ω·τ - b1 ω1² - b2 ω2²``.
    """
    p = PendulumParams() if params is None else params
    state = _check_state(state)
    q1, q2, w1, w2 = np.moveaxis(state, -1, 0)
    if torque is None:
        t1 = t2 = 0.0
    else:
        torque = np.asarray(torque, dtype=np.float64)
        if torque.ndim < 1 or torque.shape[-1] != 2:
            raise ValueError(f"torque must have shape (..., 2) = (τ1, τ2), got {torque.shape}")
        t1, t2 = np.moveaxis(torque, -1, 0)
    m11, m12, m22 = _mass_matrix(q2, p)
    h = p.m2 * p.l1 * p.l2 * np.sin(q2)
    s12 = np.sin(q1 + q2)
    r1 = t1 - p.b1 * w1 + h * (2 * w1 * w2 + w2 * w2) - (p.m1 + p.m2) * p.g * p.l1 * np.sin(q1)
    r1 = r1 - p.m2 * p.g * p.l2 * s12
    r2 = t2 - p.b2 * w2 - h * w1 * w1 - p.m2 * p.g * p.l2 * s12
    det = m11 * m22 - m12 * m12
    a1 = (m22 * r1 - m12 * r2) / det
    a2 = (m11 * r2 - m12 * r1) / det
    return np.stack(np.broadcast_arrays(w1, w2, a1, a2), axis=-1)


def pendulum_energy(state, params: PendulumParams | None = None) -> np.ndarray:
    """Kinetic plus potential energy of ``state`` (..., 4); the pivot is the zero of height."""
    p = PendulumParams() if params is None else params
    q1, q2, w1, w2 = np.moveaxis(_check_state(state), -1, 0)
    m11, m12, m22 = _mass_matrix(q2, p)
    kinetic = 0.5 * (m11 * w1 * w1 + 2 * m12 * w1 * w2 + m22 * w2 * w2)
    potential = -(p.m1 + p.m2) * p.g * p.l1 * np.cos(q1) - p.m2 * p.g * p.l2 * np.cos(q1 + q2)
    return kinetic + potential


def rk4_step(state, torque, h: float, params: PendulumParams | None = None) -> np.ndarray:
    """One classical Runge-Kutta step of length ``h`` with the torque held constant."""
    f = double_pendulum_derivative
    k1 = f(state, torque, params)
    k2 = f(state + 0.5 * h * k1, torque, params)
    k3 = f(state + 0.5 * h * k2, torque, params)
    k4 = f(state + h * k3, torque, params)
    return state + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def _fast_rk4(params: PendulumParams, h: float):
    """The same RK4 step as :func:`rk4_step`, without checks, on a state stored (4, n) and a
    torque (2, n): the simulation loop calls it tens of thousands of times."""
    p = params
    a = (p.m1 + p.m2) * p.l1**2 + p.m2 * p.l2**2
    c = p.m2 * p.l1 * p.l2
    m22 = p.m2 * p.l2**2
    g1 = (p.m1 + p.m2) * p.g * p.l1
    g2 = p.m2 * p.g * p.l2
    b1, b2 = p.b1, p.b2

    def deriv(s, t1, t2):
        q1, q2, w1, w2 = s
        c2 = c * np.cos(q2)
        hs = c * np.sin(q2)
        m11 = a + 2 * c2
        m12 = m22 + c2
        s12 = g2 * np.sin(q1 + q2)
        r1 = t1 - b1 * w1 + hs * (2 * w1 + w2) * w2 - g1 * np.sin(q1) - s12
        r2 = t2 - b2 * w2 - hs * w1 * w1 - s12
        det = m11 * m22 - m12 * m12
        return np.stack([w1, w2, (m22 * r1 - m12 * r2) / det, (m11 * r2 - m12 * r1) / det])

    def step(s, t1, t2):
        k1 = deriv(s, t1, t2)
        k2 = deriv(s + (0.5 * h) * k1, t1, t2)
        k3 = deriv(s + (0.5 * h) * k2, t1, t2)
        k4 = deriv(s + h * k3, t1, t2)
        return s + (h / 6) * (k1 + 2 * (k2 + k3) + k4)

    return step


def simulate(
    n_trajectories: int,
    steps: int,
    dt: float = 0.02,
    seed: int = 0,
    random_action_rate: float = 0.01,
    params: PendulumParams | None = None,
    *,
    max_torque: float = 8.0,
    substeps: int = 4,
    n_sines: int = 3,
    initial_states=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Simulate ``n_trajectories`` driven double pendulums for ``steps`` recorded steps.

    Returns ``states`` (n, steps+1, 4) and ``actions`` (n, steps, 2), float64, where action
    ``t`` is the torque held constant from recorded step t to t+1 (a zero-order hold, as a
    MuJoCo policy acts for a frame). Each recorded step is integrated with ``substeps`` RK4
    steps of length ``dt / substeps``.

    The controller is open loop: per trajectory and joint a sum of ``n_sines`` sinusoids
    with frequencies uniform in [0.1, 1] Hz, random phases and random positive amplitudes
    scaled to sum to ``max_torque``, so ``|τ| <= max_torque``; it is sampled at t = step·dt.
    At each recorded step, independently with probability ``random_action_rate``, the action
    is replaced by one drawn uniformly from [-max_torque, max_torque]² (held for that step).
    The controller and the replacements come from separate streams, so the same seed with
    another rate gives the same controller. Initial angles are uniform in [-π, π), initial
    velocities uniform in [-2, 2] rad/s, unless ``initial_states`` (n, 4) is given.
    """
    check_positive_int(n_trajectories, "n_trajectories")
    check_positive_int(steps, "steps")
    check_positive_int(substeps, "substeps")
    check_positive_int(n_sines, "n_sines")
    dt = _check_number(dt, "dt", low=0.0, strict=True)
    _check_number(random_action_rate, "random_action_rate", low=0.0, high=1.0)
    max_torque = _check_number(max_torque, "max_torque", low=0.0)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if params is not None and not isinstance(params, PendulumParams):
        raise TypeError(f"params must be a PendulumParams, got {type(params).__name__}")
    n = n_trajectories
    init_rng, ctrl_rng, rand_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(3)
    )

    if initial_states is None:
        angles = init_rng.uniform(-math.pi, math.pi, (n, 2))
        state = np.concatenate([angles, init_rng.uniform(-2.0, 2.0, (n, 2))], axis=1)
    else:
        state = _check_state(initial_states, "initial_states").copy()
        if state.shape != (n, 4):
            raise ValueError(
                f"initial_states must have shape (n_trajectories, 4) = {(n, 4)}, got {state.shape}"
            )

    freq = ctrl_rng.uniform(0.1, 1.0, (n, 2, n_sines))
    phase = ctrl_rng.uniform(0.0, 2 * math.pi, (n, 2, n_sines))
    amp = ctrl_rng.uniform(0.2, 1.0, (n, 2, n_sines))
    amp *= max_torque / amp.sum(-1, keepdims=True)
    t = np.arange(steps) * dt
    actions = np.einsum(
        "njk,njkt->ntj", amp, np.sin(2 * math.pi * freq[..., None] * t + phase[..., None])
    )
    replace = rand_rng.random((n, steps)) < random_action_rate
    random_torque = rand_rng.uniform(-max_torque, max_torque, (n, steps, 2))
    actions = np.where(replace[..., None], random_torque, actions)

    states = np.empty((steps + 1, 4, n))
    states[0] = state.T
    step = _fast_rk4(PendulumParams() if params is None else params, dt / substeps)
    s = states[0].copy()
    torques = np.ascontiguousarray(actions.transpose(1, 2, 0))  # (steps, 2, n)
    for k in range(steps):
        t1, t2 = torques[k]
        for _ in range(substeps):
            s = step(s, t1, t2)
        states[k + 1] = s
    states = np.ascontiguousarray(states.transpose(2, 0, 1))
    return states, actions


def observe(states) -> np.ndarray:
    """``(θ1, θ2, ω1, ω2)`` (..., 4) to ``(sin θ1, cos θ1, sin θ2, cos θ2, ω1, ω2)`` (..., 6)."""
    q1, q2, w1, w2 = np.moveaxis(_check_state(states, "states"), -1, 0)
    return np.stack([np.sin(q1), np.cos(q1), np.sin(q2), np.cos(q2), w1, w2], axis=-1)


def drop_steps(steps: int, drop_rate: float, rng: np.random.Generator):
    """Irregular sampling of recorded steps 0..steps: each step but the first is dropped
    independently with probability ``drop_rate``.

    Returns the kept step indices ``kept`` (int64, ascending, ``kept[0] = 0``) and the
    intervals ``delta`` (float64): ``delta[i] = kept[i] - kept[i-1]`` = 1 + the number of
    steps dropped just before kept step i, with ``delta[0] = 1``; so ``cumsum(delta) - 1 =
    kept``.
    """
    check_positive_int(steps, "steps")
    _check_number(drop_rate, "drop_rate", low=0.0, high=1.0)
    if drop_rate >= 1:
        raise ValueError(f"drop_rate must be below 1, got {drop_rate!r}")
    keep = np.ones(steps + 1, dtype=bool)
    keep[1:] = rng.random(steps) >= drop_rate
    kept = np.flatnonzero(keep)
    delta = np.diff(kept, prepend=-1).astype(np.float64)
    return kept, delta


def irregular_windows(obs, actions, kept, delta, window: int, stride: int):
    """Cut one irregularly sampled trajectory into windows.

    ``obs`` (steps+1, d_obs), ``actions`` (steps, 2), ``kept``/``delta`` from
    :func:`drop_steps`. Kept position i (of L) has the input row ``[obs[kept[i]], ā_i,
    delta[i]]``, where ``ā_i`` is the MEAN of the actions applied from ``kept[i]`` until
    ``kept[i+1]`` (all the torque that acts before the target, averaged; at a regular step it
    is just the action), and the target ``obs[kept[i+1]]``. Windows start at positions 0,
    stride, 2·stride, ... and cover ``window`` positions whose targets all exist, i.e. end
    by L-2. Returns ``x`` (n, window, d_obs+3), ``y`` (n, window, d_obs) and the recorded
    step index of every input row (n, window); n may be 0.
    """
    check_positive_int(window, "window")
    check_positive_int(stride, "stride")
    summed = np.concatenate([np.zeros((1, actions.shape[1])), np.cumsum(actions, axis=0)])
    now, nxt = kept[:-1], kept[1:]
    mean_action = (summed[nxt] - summed[now]) / (nxt - now)[:, None]
    rows = np.concatenate([obs[now], mean_action, delta[:-1, None]], axis=1)
    targets = obs[nxt]
    starts = np.arange(0, len(now) - window + 1, stride)
    index = starts[:, None] + np.arange(window)
    return rows[index], targets[index], now[index]


@dataclass(frozen=True, eq=False)
class PendulumData:
    """Windows of the irregularly sampled pendulum, split by trajectory.

    ``train``, ``val``, ``test`` are ``(x, y)`` float32 tensors: ``x`` (n, window, d_in) with
    channels ``[normalised observation (6), action / max_torque (2), Δt]`` and ``y``
    (n, window, d_out) the normalised next KEPT observation. ``Δt`` (channel
    ``time_channel``, the last) is in recording steps and not normalised: 1 + the number of
    steps dropped just before this one. It looks backwards, so the gap to the target (1, or
    more if the next step was dropped) is not in ``x_t``; it shows up as ``Δt`` of ``x_{t+1}``.
    ``obs_mean``/``obs_std`` (6,) are the train-split statistics used for normalising,
    ``trajectories[split]`` the trajectory of each window and ``step_index[split]`` (n,
    window) the recorded step of each input row.
    """

    train: tuple[torch.Tensor, torch.Tensor]
    val: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]
    obs_mean: torch.Tensor
    obs_std: torch.Tensor
    action_scale: float
    dt: float
    trajectories: dict = field(repr=False)
    step_index: dict = field(repr=False)
    d_obs: int = 6
    d_action: int = 2

    @property
    def d_in(self) -> int:
        return self.d_obs + self.d_action + 1

    @property
    def d_out(self) -> int:
        return self.d_obs

    @property
    def time_channel(self) -> int:
        return self.d_in - 1

    def split(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        if name not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {name!r}")
        return getattr(self, name)

    def persistence_mse(self, name: str = "test") -> float:
        """MSE of the no-change baseline ``y_t = observation_t`` (normalised units)."""
        x, y = self.split(name)
        return float(((x[..., : self.d_obs] - y) ** 2).mean())

    def mean_mse(self, name: str = "test") -> float:
        """MSE of predicting the train mean (0 after normalising; about 1)."""
        _, y = self.split(name)
        return float((y**2).mean())

    def denormalise(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalised observations back to ``(sin θ1, cos θ1, sin θ2, cos θ2, ω1, ω2)``."""
        return obs * self.obs_std + self.obs_mean


def make_dataset(
    n_trajectories: int = 600,
    steps: int = 650,
    seed: int = 0,
    drop_rate: float = 0.10,
    window: int = 64,
    stride: int = 16,
    split: tuple[float, float, float] = (0.75, 0.10, 0.15),
    *,
    dt: float = 0.02,
    random_action_rate: float = 0.01,
    max_torque: float = 8.0,
    params: PendulumParams | None = None,
) -> PendulumData:
    """The surrogate Walker2d task: simulate, drop steps, cut windows, split, normalise.

    Trajectories (not windows) are split ``split`` = (train, val, test) fractions, so no
    test window shares a trajectory with a training one; the counts are rounded, with at
    least one trajectory per split. The defaults (600 trajectories of 650 steps of 0.02 s,
    13 s each) give about 15k training windows, 2k validation and 3k test windows, in about
    2 s on one CPU core. Deterministic given ``seed``.
    """
    check_positive_int(n_trajectories, "n_trajectories")
    check_positive_int(steps, "steps")
    check_positive_int(window, "window")
    check_positive_int(stride, "stride")
    if not (isinstance(split, tuple | list) and len(split) == 3):
        raise ValueError(f"split must be three fractions (train, val, test), got {split!r}")
    for value, name in zip(split, SPLITS):
        _check_number(value, f"the {name} fraction", low=0.0, high=1.0, strict=True)
    if abs(sum(split) - 1) > 1e-6:
        raise ValueError(f"the split fractions must sum to 1, got {split!r} (sum {sum(split)})")
    if n_trajectories < 3:
        raise ValueError(f"need n_trajectories >= 3 to fill three splits, got {n_trajectories}")
    _check_number(drop_rate, "drop_rate", low=0.0, high=1.0)
    if drop_rate >= 1:
        raise ValueError(f"drop_rate must be below 1, got {drop_rate!r}")
    if window + 1 > (steps + 1) * (1 - drop_rate):
        raise ValueError(
            f"window + 1 = {window + 1} kept steps are needed, but {steps + 1} steps with "
            f"drop_rate {drop_rate} keep about {(steps + 1) * (1 - drop_rate):.0f}"
        )

    states, actions = simulate(
        n_trajectories, steps, dt, seed, random_action_rate, params, max_torque=max_torque
    )
    obs = observe(states)
    drop_rng = np.random.default_rng([int(seed), 1])
    order = np.random.default_rng([int(seed), 2]).permutation(n_trajectories)
    n_val = max(1, round(split[1] * n_trajectories))
    n_test = max(1, round(split[2] * n_trajectories))
    n_train = n_trajectories - n_val - n_test
    if n_train < 1:
        raise ValueError(f"split {split!r} leaves no training trajectory of {n_trajectories}")
    members = {
        "train": np.sort(order[:n_train]),
        "val": np.sort(order[n_train : n_train + n_val]),
        "test": np.sort(order[n_train + n_val :]),
    }

    per_traj = []
    for i in range(n_trajectories):
        kept, delta = drop_steps(steps, drop_rate, drop_rng)
        per_traj.append((kept, irregular_windows(obs[i], actions[i], kept, delta, window, stride)))

    train_obs = np.concatenate([obs[i, per_traj[i][0]] for i in members["train"]])
    mean, std = train_obs.mean(axis=0), train_obs.std(axis=0)
    scale = max_torque if max_torque > 0 else 1.0

    out, trajectories, step_index = {}, {}, {}
    for name, ids in members.items():
        xs = [per_traj[i][1][0] for i in ids]
        x = np.concatenate(xs)
        y = np.concatenate([per_traj[i][1][1] for i in ids])
        if len(x) == 0:
            raise ValueError(f"the {name} split has no window of {window} steps")
        x[..., :6] = (x[..., :6] - mean) / std
        x[..., 6:8] /= scale
        y = (y - mean) / std
        out[name] = (torch.from_numpy(x).float(), torch.from_numpy(y).float())
        trajectories[name] = torch.from_numpy(np.repeat(ids, [len(a) for a in xs]))
        step_index[name] = torch.from_numpy(np.concatenate([per_traj[i][1][2] for i in ids]))
    return PendulumData(
        **out,
        obs_mean=torch.from_numpy(mean).float(),
        obs_std=torch.from_numpy(std).float(),
        action_scale=float(scale),
        dt=float(dt),
        trajectories=trajectories,
        step_index=step_index,
    )
