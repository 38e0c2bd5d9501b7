"""rnnbook.data.pendulum: the physics, the irregular sampling and the dataset's promises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rnnbook.data.pendulum import (
    SPLITS,
    PendulumParams,
    double_pendulum_derivative,
    drop_steps,
    irregular_windows,
    make_dataset,
    observe,
    pendulum_energy,
    simulate,
)

FREE = PendulumParams(b1=0.0, b2=0.0)


@pytest.fixture(scope="module")
def small():
    return make_dataset(60, 300, seed=3)


# --- physics ---------------------------------------------------------------------------------


def test_energy_conserved_without_damping_or_torque():
    start = np.array([[1.0, -0.5, 0.0, 0.0], [2.0, 1.0, 1.0, -1.0], [3.0, 0.5, 2.0, 2.0]])
    states, _ = simulate(
        3, 1000, seed=0, random_action_rate=0.0, params=FREE, max_torque=0.0,
        initial_states=start,
    )  # fmt: skip
    energy = pendulum_energy(states, FREE)
    scale = (FREE.m1 + FREE.m2) * FREE.g * FREE.l1 + FREE.m2 * FREE.g * FREE.l2
    drift = np.abs(energy - energy[:, :1]).max(axis=1) / np.maximum(np.abs(energy[:, 0]), scale)
    assert drift.max() < 1e-4, drift


def test_energy_decreases_with_damping_and_no_torque():
    params = PendulumParams(b1=0.2, b2=0.2)
    states, _ = simulate(8, 500, seed=1, random_action_rate=0.0, params=params, max_torque=0.0)
    energy = pendulum_energy(states, params)
    assert np.diff(energy, axis=1).max() < 1e-6
    assert (energy[:, -1] < energy[:, 0]).all()


def test_energy_rate_matches_power_balance():
    rng = np.random.default_rng(0)
    state, torque = rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    params = PendulumParams(m1=0.7, m2=1.3, l1=0.8, l2=1.1, b1=0.3, b2=0.2)
    h = 1e-6
    d = double_pendulum_derivative(state, torque, params)
    numeric = (pendulum_energy(state + h * d, params) - pendulum_energy(state - h * d, params)) / (
        2 * h
    )
    w = state[:, 2:]
    exact = (w * torque).sum(1) - params.b1 * w[:, 0] ** 2 - params.b2 * w[:, 1] ** 2
    np.testing.assert_allclose(numeric, exact, rtol=1e-6, atol=1e-6)


def test_simulate_shapes_and_torque_bound():
    states, actions = simulate(4, 50, seed=0, max_torque=3.0)
    assert states.shape == (4, 51, 4) and actions.shape == (4, 50, 2)
    assert states.dtype == np.float64 and np.abs(actions).max() <= 3.0


def test_random_action_rate():
    _, base = simulate(500, 100, seed=5, random_action_rate=0.0)
    _, mixed = simulate(500, 100, seed=5, random_action_rate=0.01)
    replaced = (base != mixed).any(-1).mean()
    assert 0.008 < replaced < 0.012


# --- irregular sampling ----------------------------------------------------------------------


def test_drop_fraction_and_intervals():
    kept, delta = drop_steps(200_000, 0.10, np.random.default_rng(0))
    assert kept[0] == 0
    dropped = 1 - (len(kept) - 1) / 200_000
    assert abs(dropped - 0.10) < 0.01
    assert np.array_equal(np.cumsum(delta) - 1, kept)
    assert delta.min() == 1 and delta.max() > 1


def test_windows_targets_are_next_kept_observation():
    states, actions = simulate(1, 200, seed=2)
    obs = observe(states[0])
    kept, delta = drop_steps(200, 0.3, np.random.default_rng(1))
    x, y, index = irregular_windows(obs, actions[0], kept, delta, 16, 4)
    assert x.shape[1:] == (16, 9) and y.shape[1:] == (16, 6)
    np.testing.assert_array_equal(y[:, :-1], x[:, 1:, :6])
    np.testing.assert_array_equal(x[..., :6], obs[index])
    # the action channel is the mean of the actions applied until the next kept step
    w, t = 0, 5
    start, stop = index[w, t], index[w, t + 1]
    np.testing.assert_allclose(x[w, t, 6:8], actions[0, start:stop].mean(0))


def test_dataset_time_channel_and_targets(small):
    for name in SPLITS:
        x, y = small.split(name)
        idx = small.step_index[name]
        dt = x[..., small.time_channel]
        assert torch.equal(dt[:, 1:], (idx[:, 1:] - idx[:, :-1]).float())
        assert torch.equal(idx[:, :1] - dt[:, :1] + dt.cumsum(1), idx.float())
        torch.testing.assert_close(y[:, :-1], x[:, 1:, : small.d_obs], rtol=0, atol=0)


def test_dataset_drop_fraction(small):
    dt = small.train[0][..., small.time_channel]
    assert abs((1 - 1 / dt.mean()) - 0.10) < 0.02  # 1 / mean interval = kept fraction


# --- the dataset -----------------------------------------------------------------------------


def test_dataset_shapes_and_sizes(small):
    assert (small.d_in, small.d_out, small.time_channel) == (9, 6, 8)
    counts = {}
    for name in SPLITS:
        x, y = small.split(name)
        assert x.dtype == y.dtype == torch.float32
        assert x.shape[1:] == (64, 9) and y.shape[1:] == (64, 6)
        counts[name] = len(x)
    total = sum(counts.values())
    for name, share in zip(SPLITS, (0.75, 0.10, 0.15)):
        assert abs(counts[name] / total - share) < 0.03


def test_splits_share_no_trajectory(small):
    ids = {name: set(small.trajectories[name].tolist()) for name in SPLITS}
    assert not ids["train"] & ids["val"] and not ids["train"] & ids["test"]
    assert not ids["val"] & ids["test"]
    assert len(ids["train"] | ids["val"] | ids["test"]) == 60


def test_normalisation_and_baselines(small):
    y = small.train[1]
    assert y.reshape(-1, 6).mean(0).abs().max() < 0.1
    assert abs(small.mean_mse("train") - 1) < 0.1
    assert 0 < small.persistence_mse("test") < 0.2
    torch.testing.assert_close(
        small.denormalise(small.obs_mean * 0), small.obs_mean, rtol=0, atol=0
    )


def test_determinism():
    a, b, c = (
        make_dataset(12, 150, seed=7),
        make_dataset(12, 150, seed=7),
        make_dataset(12, 150, seed=8),
    )
    for name in SPLITS:
        assert torch.equal(a.split(name)[0], b.split(name)[0])
        assert torch.equal(a.split(name)[1], b.split(name)[1])
    assert not torch.equal(a.train[0], c.train[0])


# --- argument checks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_trajectories": 0}, "n_trajectories must be a positive integer"),
        ({"n_trajectories": 2}, "n_trajectories >= 3"),
        ({"drop_rate": 1.0}, "drop_rate must be below 1"),
        ({"drop_rate": -0.1}, "drop_rate must be a finite number"),
        ({"window": 0}, "window must be a positive integer"),
        ({"stride": 1.5}, "stride must be a positive integer"),
        ({"split": (0.8, 0.1)}, "split must be three fractions"),
        ({"split": (0.8, 0.1, 0.2)}, "must sum to 1"),
        ({"split": (0.9, 0.1, 0.0)}, "test fraction"),
        ({"steps": 50}, r"window \+ 1 = 65 kept steps are needed"),
        ({"random_action_rate": 1.5}, "random_action_rate must be"),
        ({"dt": 0.0}, "dt must be a finite number"),
    ],
)
def test_bad_arguments(kwargs, message):
    args = {"n_trajectories": 6, "steps": 100} | kwargs
    with pytest.raises(ValueError, match=message):
        make_dataset(**args)


def test_bad_physics_arguments():
    with pytest.raises(ValueError, match="m1 must be a finite number in \\(0"):
        PendulumParams(m1=0.0)
    with pytest.raises(ValueError, match="b2 must be"):
        PendulumParams(b2=-1.0)
    with pytest.raises(ValueError, match=r"state must have shape \(\.\.\., 4\)"):
        double_pendulum_derivative(np.zeros(3))
    with pytest.raises(ValueError, match=r"initial_states must have shape"):
        simulate(2, 5, initial_states=np.zeros((3, 4)))
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        simulate(2, 5, seed=-1)
