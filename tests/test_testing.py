"""rnnbook.testing.assert_close_ulps: a few ulp pass, a real error does not."""

import numpy as np
import pytest
import torch

from rnnbook.testing import assert_close_ulps


def _ulps_away(x: torch.Tensor, n: int) -> torch.Tensor:
    for _ in range(n):
        x = torch.nextafter(x, torch.full_like(x, float("inf")))
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_few_ulp_pass_what_another_cpu_may_round_differently(dtype):
    x = torch.linspace(-3, 3, 101, dtype=dtype)
    assert_close_ulps(_ulps_away(x, 2), x)  # the 1-ulp differences that broke CI elsewhere
    with pytest.raises(AssertionError):
        torch.testing.assert_close(_ulps_away(x, 1), x, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("error", [1e-4, -1e-5])
def test_a_real_error_fails(dtype, error):
    x = torch.linspace(0.5, 3, 11, dtype=dtype)
    with pytest.raises(AssertionError):
        assert_close_ulps(x * (1 + error), x)


def test_near_zero_values_are_judged_against_the_scale_of_the_tensor():
    expected = torch.tensor([1e-20, 2.0], dtype=torch.float64)
    assert_close_ulps(torch.tensor([1e-16, 2.0], dtype=torch.float64), expected)
    with pytest.raises(AssertionError):
        assert_close_ulps(torch.tensor([1e-12, 2.0], dtype=torch.float64), expected)


def test_an_infinity_does_not_loosen_the_other_values():
    expected = torch.tensor([1.0, float("inf")], dtype=torch.float64)
    assert_close_ulps(expected.clone(), expected)
    with pytest.raises(AssertionError):
        assert_close_ulps(torch.tensor([1.5, float("inf")], dtype=torch.float64), expected)


def test_numpy_arrays_are_accepted():
    a = np.linspace(0, 1, 5)
    assert_close_ulps(np.nextafter(a, 2.0), a)


def test_mixed_dtypes_and_integers_are_refused():
    with pytest.raises(TypeError, match="one dtype"):
        assert_close_ulps(torch.ones(2), torch.ones(2, dtype=torch.float64))
    with pytest.raises(TypeError, match="floating-point"):
        assert_close_ulps(torch.ones(2, dtype=torch.long), torch.ones(2, dtype=torch.long))
