"""rnnbook.data.synthetic: shapes, determinism and the meaning of each task's target."""

from __future__ import annotations

import math

import pytest
import torch

from rnnbook.data.synthetic import (
    adding_problem,
    copy_task,
    delayed_echo,
    first_bit,
    mackey_glass,
    random_bits,
)


def _seeded(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- shapes and dtypes -----------------------------------------------------------------------


def test_random_bits_shape_and_values():
    bits = random_bits(4, 9, 0)
    assert bits.shape == (4, 9) and bits.dtype == torch.float32
    assert set(bits.unique().tolist()) <= {0.0, 1.0}


def test_first_bit_shapes_and_dtypes():
    x, label = first_bit(5, 7, 0)
    assert x.shape == (5, 7, 1) and x.dtype == torch.float32
    assert label.shape == (5,) and label.dtype == torch.long
    assert set(x.unique().tolist()) <= {-1.0, 1.0}


def test_delayed_echo_shapes_and_dtypes():
    x, y, mask = delayed_echo(3, 10, 4, 0)
    assert x.shape == (3, 10, 1) and x.dtype == torch.float32
    assert y.shape == (3, 10) and y.dtype == torch.long
    assert mask.shape == (3, 10) and mask.dtype == torch.bool


def test_adding_problem_shapes_and_dtypes():
    x, y = adding_problem(6, 20, 0)
    assert x.shape == (6, 20, 2) and x.dtype == torch.float32
    assert y.shape == (6,) and y.dtype == torch.float32


@pytest.mark.parametrize("B, T", [(1, 1), (1, 5), (4, 1)])
def test_first_bit_small_sizes(B, T):
    x, label = first_bit(B, T, 0)
    assert x.shape == (B, T, 1) and label.shape == (B,)


# --- determinism -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda g: first_bit(8, 12, g),
        lambda g: delayed_echo(8, 12, 3, g),
        lambda g: adding_problem(8, 12, g),
    ],
    ids=["first_bit", "delayed_echo", "adding_problem"],
)
def test_same_seed_same_data_other_seed_other_data(make):
    a, b, c = make(_seeded(1)), make(1), make(_seeded(2))  # a Generator or an int seed
    for left, right in zip(a, b):
        torch.testing.assert_close(left, right, rtol=0, atol=0)
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize(
    "make",
    [
        lambda: random_bits(2, 3, None),
        lambda: first_bit(2, 3, None),
        lambda: delayed_echo(2, 5, 1, None),
        lambda: adding_problem(2, 4, None),
    ],
    ids=["random_bits", "first_bit", "delayed_echo", "adding_problem"],
)
def test_unseeded_call_is_refused(make):
    with pytest.raises(ValueError, match="synthetic data is always seeded"):
        make()


# --- first_bit -------------------------------------------------------------------------------


def test_first_bit_label_is_the_first_bit():
    x, label = first_bit(64, 10, 3)
    torch.testing.assert_close(label, (x[:, 0, 0] > 0).long(), rtol=0, atol=0)


def test_first_bit_labels_are_balanced():
    _, label = first_bit(2000, 4, 0)
    assert 0.45 < label.float().mean() < 0.55


# --- delayed_echo ----------------------------------------------------------------------------


@pytest.mark.parametrize("D", [1, 3, 9])
def test_delayed_echo_target_is_the_input_D_steps_back(D):
    T = 10
    x, y, mask = delayed_echo(16, T, D, 4)
    assert not mask[:, :D].any()  # the first D steps have no target
    assert mask[:, D:].all()
    torch.testing.assert_close(y[:, D:], x[:, : T - D, 0].long(), rtol=0, atol=0)
    assert (y[:, :D] == 0).all()


@pytest.mark.parametrize("D, T", [(5, 5), (6, 5)])
def test_delayed_echo_delay_must_be_shorter_than_sequence(D, T):
    with pytest.raises(ValueError, match=f"D={D}, T={T}"):
        delayed_echo(2, T, D, 0)


@pytest.mark.parametrize("D", [0, -1])
def test_delayed_echo_delay_must_be_positive(D):
    with pytest.raises(ValueError, match="D must be a positive integer"):
        delayed_echo(2, 5, D, 0)


# --- adding_problem --------------------------------------------------------------------------


@pytest.mark.parametrize("T", [2, 3, 50])
def test_adding_problem_has_one_marker_in_each_half(T):
    x, _ = adding_problem(256, T, 5)
    marker = x[..., 1]
    half = T // 2
    assert set(marker.unique().tolist()) <= {0.0, 1.0}
    assert (marker[:, :half].sum(1) == 1).all()
    assert (marker[:, half:].sum(1) == 1).all()


def test_adding_problem_target_is_the_sum_of_marked_values():
    x, y = adding_problem(128, 30, 6)
    torch.testing.assert_close(y, (x[..., 0] * x[..., 1]).sum(1))


def test_adding_problem_values_are_uniform_in_unit_interval():
    x, _ = adding_problem(64, 40, 7)
    values = x[..., 0]
    assert values.min() >= 0 and values.max() < 1
    assert abs(float(values.mean()) - 0.5) < 0.02


def test_adding_problem_constant_baseline_mse_is_one_sixth():
    _, y = adding_problem(100_000, 10, 8)
    mse = float(((y - 1.0) ** 2).mean())
    assert abs(mse - 1 / 6) < 0.005


@pytest.mark.parametrize("T", [1, 0])
def test_adding_problem_needs_two_steps(T):
    with pytest.raises(ValueError, match="needs T >= 2"):
        adding_problem(2, T, 0)


@pytest.mark.parametrize("B, T", [(0, 3), (2, 0)])
def test_bad_sizes_are_rejected(B, T):
    with pytest.raises(ValueError, match="must be a positive integer"):
        random_bits(B, T, 0)


# --- mackey_glass ----------------------------------------------------------------------------


def _euler_mackey_glass(n: int, tau: float, dt: float = 0.01, history: float = 1.2) -> list:
    """x(1), ..., x(n) by forward Euler on the grid dt, from the constant history."""
    lag, per_sample = round(tau / dt), round(1 / dt)
    x = [history] * (lag + 1)  # x[-1] is the present, x[-1 - lag] the delayed value
    for _ in range(n * per_sample):
        delayed = x[-1 - lag]
        x.append(x[-1] + dt * (0.2 * delayed / (1 + delayed**10) - 0.1 * x[-1]))
    return x[lag + per_sample :: per_sample]


@pytest.fixture(scope="module")
def mackey_glass_series() -> torch.Tensor:
    """500 samples after the default transient of 1,000."""
    return mackey_glass(500)


def test_mackey_glass_length_and_dtype():
    x = mackey_glass(7, discard=3)
    assert x.shape == (7,) and x.dtype == torch.float64


def test_mackey_glass_is_deterministic():
    torch.testing.assert_close(
        mackey_glass(40, discard=20), mackey_glass(40, discard=20), rtol=0, atol=0
    )


def test_mackey_glass_discard_drops_the_first_samples():
    torch.testing.assert_close(
        mackey_glass(10, discard=5), mackey_glass(15, discard=0)[5:], rtol=0, atol=0
    )


def test_mackey_glass_is_bounded_and_not_constant(mackey_glass_series):
    x = mackey_glass_series
    assert 0.2 < float(x.min()) and float(x.max()) < 1.5
    assert float(x.std()) > 0.1


def test_mackey_glass_is_not_periodic(mackey_glass_series):
    """A chaotic series never repeats: no lag up to 200 makes it match itself."""
    x = mackey_glass_series
    for lag in range(1, 201):
        assert float((x[lag:] - x[:-lag]).abs().max()) > 0.05, lag


@pytest.mark.parametrize("tau", [17.0, 10.0])
def test_mackey_glass_agrees_with_an_euler_integration(tau):
    """Before chaos separates them, RK4 at dt = 0.1 and Euler at dt = 0.01 agree."""
    x = mackey_glass(50, tau, discard=0)
    expected = torch.tensor(_euler_mackey_glass(50, tau), dtype=torch.float64)
    torch.testing.assert_close(x, expected, rtol=0, atol=5e-3)


def test_mackey_glass_converges_as_dt_shrinks():
    coarse, fine = mackey_glass(60, discard=0), mackey_glass(60, discard=0, dt=0.01)
    torch.testing.assert_close(coarse, fine, rtol=0, atol=1e-4)


@pytest.mark.parametrize(
    "beta, gamma, power", [(0.2, 0.1, 10), (0.3, 0.1, 10), (0.2, 0.05, 4)], ids=str
)
def test_mackey_glass_rests_at_its_fixed_point(beta, gamma, power):
    """x* with beta / (1 + x*^power) = gamma is an equilibrium: started there, x stays."""
    fixed_point = (beta / gamma - 1) ** (1 / power)
    x = mackey_glass(20, discard=0, beta=beta, gamma=gamma, power=power, history=fixed_point)
    torch.testing.assert_close(
        x, torch.full((20,), fixed_point, dtype=torch.float64), rtol=0, atol=1e-12
    )


def test_mackey_glass_several_series_are_seeded():
    a, b = (
        mackey_glass(30, series=3, generator=1, discard=10),
        mackey_glass(30, series=3, generator=_seeded(1), discard=10),
    )
    assert a.shape == (3, 30) and a.dtype == torch.float64
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(a, mackey_glass(30, series=3, generator=2, discard=10))
    assert not torch.equal(a[0], a[1])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_steps": 0}, "n_steps must be a positive integer, got 0"),
        ({"discard": -1}, "discard must be a non-negative integer, got -1"),
        ({"discard": 2.5}, "discard must be a non-negative integer, got 2.5"),
        ({"discard": True}, "discard must be a non-negative integer, got True"),
        ({"dt": 0.3}, "dt must divide 1 and tau, got dt=0.3, tau=17.0"),
        ({"dt": 0.1, "tau": 17.05}, "dt must divide 1 and tau, got dt=0.1, tau=17.05"),
        ({"dt": 2.0}, "dt must divide 1 and tau, got dt=2.0"),
        ({"dt": 0}, "dt must be a positive finite number, got 0"),
        ({"dt": -0.1}, "dt must be a positive finite number, got -0.1"),
        ({"dt": math.nan}, "dt must be a positive finite number, got nan"),
        ({"tau": math.inf}, "tau must be a positive finite number, got inf"),
        ({"tau": 0.0}, "tau must be a positive finite number, got 0.0"),
        ({"dt": "0.1"}, "dt must be a positive finite number, got '0.1'"),
        ({"tau": True}, "tau must be a positive finite number, got True"),
    ],
    ids=str,
)
def test_mackey_glass_rejects_bad_arguments(kwargs, match):
    args = {"n_steps": 5} | kwargs
    with pytest.raises(ValueError, match=match):
        mackey_glass(**args)


# --- copy_task (spec ntm §5.1, §8.2 test 9) ---------------------------------------------------


@pytest.mark.parametrize("B, L, width", [(4, 1, 8), (3, 7, 8), (2, 20, 8), (5, 3, 2)])
def test_copy_task_shapes_and_dtypes(B, L, width):
    x, y = copy_task(B, L, width, generator=0)
    assert x.shape == (B, 2 * L + 1, width + 1) and x.dtype == torch.float32
    assert y.shape == (B, L, width) and y.dtype == torch.float32
    assert set(x.unique().tolist()) <= {0.0, 1.0} and set(y.unique().tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("L", [1, 5, 20])
def test_copy_task_delimiter_only_at_step_L_and_silence_after(L):
    x, _ = copy_task(16, L, generator=1)
    delimiter = x[..., 8]
    expected = torch.zeros(2 * L + 1)
    expected[L] = 1
    torch.testing.assert_close(delimiter, expected.expand(16, -1), rtol=0, atol=0)
    assert not x[:, L, :8].any()  # the delimiter step carries no data bits
    assert not x[:, L + 1 :].any()  # no input while the network answers


def test_copy_task_target_is_the_input_bits():
    x, y = copy_task(8, 12, generator=2)
    torch.testing.assert_close(y, x[:, :12, :8], rtol=0, atol=0)


def test_copy_task_by_hand_for_one_step():
    """L = 1, width 2: x = [b0 b1 0], [0 0 1], [0 0 0] and y = [b0 b1]."""
    x, y = copy_task(1, 1, 2, generator=3)
    bits = y[0, 0].tolist()
    assert x[0].tolist() == [[*bits, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]


def test_copy_task_bits_are_fair_and_seeded():
    x, y = copy_task(256, 20, generator=4)
    assert abs(float(y.mean()) - 0.5) < 0.02
    again, y_again = copy_task(256, 20, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(x, again, rtol=0, atol=0)
    torch.testing.assert_close(y, y_again, rtol=0, atol=0)
    assert not torch.equal(y, copy_task(256, 20, generator=5)[1])


def test_copy_task_draws_one_length_per_batch_from_a_range():
    lengths = [copy_task(2, (1, 20), generator=seed)[1].shape[1] for seed in range(300)]
    assert min(lengths) == 1 and max(lengths) == 20
    assert len(set(lengths)) == 20  # every length of U{1, ..., 20} appears
    assert abs(sum(lengths) / len(lengths) - 10.5) < 1.0
    x, y = copy_task(6, (4, 4), generator=0)
    assert x.shape == (6, 9, 9) and y.shape == (6, 4, 8)


def test_copy_task_needs_a_seed():
    with pytest.raises(ValueError, match="synthetic data is always seeded"):
        copy_task(2, 3)


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 3), "B must be a positive integer, got 0"),
        ((2, 0), "L must be a positive integer, got 0"),
        ((2, 2.0), "L must be a positive integer, got 2.0"),
        ((2, 3, 0), "width must be a positive integer, got 0"),
        ((2, (5, 2)), r"the range of L must have low <= high, got \(5, 2\)"),
        ((2, (0, 2)), "the lowest length L must be a positive integer, got 0"),
        ((2, (1, 2, 3)), r"L must be a length or a \(low, high\) range, got \(1, 2, 3\)"),
    ],
    ids=str,
)
def test_copy_task_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        copy_task(*args, generator=0)
