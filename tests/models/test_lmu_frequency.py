"""rnnbook.models.lmu.frequency_response: the delay network's transfer function (lmu-lti)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import freqs, ss2tf

from rnnbook.models.lmu import dn_matrices, frequency_response


def test_order_one_is_a_first_order_low_pass():
    theta = 7.0
    omega = np.linspace(0.0, 3.0, 31)
    H = frequency_response(*dn_matrices(1, theta), omega)
    np.testing.assert_allclose(H, 1 / (1 + 1j * omega * theta), rtol=1e-14, atol=0)


@pytest.mark.parametrize("d", [2, 4, 8])
def test_matches_scipy_transfer_function(d):
    A, B, C = dn_matrices(d, theta=3.0)
    num, den = ss2tf(A, B[:, None], C[None, :], np.zeros((1, 1)))
    omega = np.geomspace(1e-2, 30, 50)
    _, want = freqs(num[0], den, worN=omega)
    np.testing.assert_allclose(frequency_response(A, B, C, omega), want, rtol=1e-8)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_pade_order_of_contact(d):
    """An [d-1/d] Pade approximant of e^{-s theta} matches it up to s^{2d-1}: error ~ w^{2d}."""
    theta = 1.0
    omega = np.array([0.05, 0.1])
    error = np.abs(frequency_response(*dn_matrices(d, theta), omega) - np.exp(-1j * omega))
    slope = np.log(error[1] / error[0]) / np.log(2)
    assert abs(slope - 2 * d) < 0.05, slope


def test_shape_and_errors():
    A, B, C = dn_matrices(3, theta=2.0)
    assert frequency_response(A, B, C, np.zeros((2, 5))).shape == (2, 5)
    assert frequency_response(A, B, C, 0.5).shape == ()
    with pytest.raises(ValueError, match="C must have shape"):
        frequency_response(A, B, C[:2], 1.0)
    with pytest.raises(TypeError, match="real frequencies"):
        frequency_response(A, B, C, 1j)
    with pytest.raises(ValueError, match="finite"):
        frequency_response(A, B, C, np.inf)
    with pytest.raises(ValueError, match="square"):
        frequency_response(A[:2], B, C, 1.0)
