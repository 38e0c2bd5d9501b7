"""rnnbook.data.synthetic: shapes, determinism and the meaning of each task's target."""

from __future__ import annotations

import pytest
import torch

from rnnbook.data.synthetic import adding_problem, delayed_echo, first_bit, random_bits


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
