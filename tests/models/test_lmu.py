"""rnnbook.models.lmu: the delay network's matrices and discretisation (spec lmu §1, §6 tests
1-2), the Legendre read-out and the decoding property (test 3), the four evaluation modes
(test 4), causality (test 5), channels (test 6), parameter counts (test 7), the LMU cell and
bad input.

Expected values come from explicit formulas, SciPy or NumPy, never from the function tested.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.linalg
import scipy.signal
import torch
from numpy.polynomial import legendre
from torch import nn

from rnnbook.models.lmu import (
    MODES,
    DelayNetwork,
    LMUCell,
    ParallelLMU,
    discretize,
    dn_matrices,
    impulse_response,
    legendre_decoder,
)
from rnnbook.models.recurrent import Recurrent

# Spec §6 test 4: the modes agree to 1e-10 in float64 and 1e-4 in float32 (not 1e-5).
TOL = {torch.float64: 1e-10, torch.float32: 1e-4}
DTYPES = pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
PARALLEL_MODES = ("matrix", "fft", "final")


def _reference_AB(d: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """(3.8)-(3.9) entry by entry."""
    A = np.empty((d, d))
    for i in range(d):
        for j in range(d):
            A[i, j] = (2 * i + 1) / theta * (-1 if i < j else (-1) ** (i - j + 1))
    B = np.array([(2 * i + 1) * (-1) ** i / theta for i in range(d)])
    return A, B


def _reference_zoh(d: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Zero-order hold with dt = 1 the textbook way: A_bar = e^A, B_bar = A^-1 (e^A - I) B."""
    A, B = _reference_AB(d, theta)
    A_bar = scipy.linalg.expm(A)
    return A_bar, np.linalg.solve(A, (A_bar - np.eye(d)) @ B)


def _reference_memory(u: np.ndarray, d: int, theta: float) -> np.ndarray:
    """The loop (3.19) in NumPy float64 for u (B, n, c): memories (B, n, c*d), channel-major."""
    A_bar, B_bar = _reference_zoh(d, theta)
    batch, n, c = u.shape
    M = np.zeros((batch, c, d))
    out = np.empty((batch, n, c * d))
    for t in range(n):
        M = M @ A_bar.T + u[:, t, :, None] * B_bar
        out[:, t] = M.reshape(batch, c * d)
    return out


def _shifted_legendre_sum(i: int, r: float) -> float:
    """(3.14) with the corrected binomial, in exact rational arithmetic."""
    r = Fraction(r)
    total = sum(math.comb(i, l) * math.comb(i + l, l) * (-r) ** l for l in range(i + 1))
    return float((-1) ** i * total)


def _uniform(shape, dtype=torch.float64, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g, dtype=dtype)


def _close(actual, expected, tol, msg=None):
    torch.testing.assert_close(actual, expected, rtol=0, atol=tol, msg=msg)


def _same(actual, expected, msg=None):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=msg)


def _count(*modules) -> int:
    return sum(p.numel() for m in modules for p in m.parameters() if p.requires_grad)


# --- the continuous matrices (3.8)-(3.11), spec test 1 ---------------------------------------


SPEC_THETA_A_D4 = np.array(
    [[-1, -1, -1, -1], [3, -3, -3, -3], [-5, 5, -5, -5], [7, -7, 7, -7]], dtype=float
)
SPEC_THETA_B_D4 = np.array([1, -3, 5, -7], dtype=float)


@pytest.mark.parametrize("theta", [1, 2.0, 0.5])
def test_d4_example_of_the_spec_exactly(theta):
    A, B, _ = dn_matrices(4, theta)
    assert A.shape == (4, 4) and B.shape == (4,) and A.dtype == np.float64
    np.testing.assert_array_equal(A * theta, SPEC_THETA_A_D4)
    np.testing.assert_array_equal(B * theta, SPEC_THETA_B_D4)


@pytest.mark.parametrize("d, theta", [(4, 784), (7, 3.3), (12, 100)])
def test_A_and_B_follow_the_formulas_entry_by_entry(d, theta):
    A, B, _ = dn_matrices(d, theta)
    A_ref, B_ref = _reference_AB(d, theta)
    np.testing.assert_allclose(A, A_ref, rtol=1e-15, atol=0)
    np.testing.assert_allclose(B, B_ref, rtol=1e-15, atol=0)


@pytest.mark.parametrize("d", [1, 5, 12, 64, 468])
def test_C_is_all_ones(d):
    _, _, C = dn_matrices(d, 10.0)
    assert C.shape == (d,)
    np.testing.assert_array_equal(C, np.ones(d))


def test_corrected_formula_3_10_gives_ones():
    """The sum of (3.10) with binom(i+l, l) is 1 for every i: C = 1 is the formula, not a
    convention."""
    for i in range(20):
        assert _shifted_legendre_sum(i, 1) == 1.0, i


# --- discretisation (spec §1.4, tests 1-2) ----------------------------------------------------


@pytest.mark.parametrize("d, theta", [(1, 5.0), (4, 10.0), (12, 100.0), (64, 784.0)])
def test_zoh_equals_scipy_cont2discrete(d, theta):
    A, B, C = dn_matrices(d, theta)
    A_bar, B_bar = discretize(A, B)
    Ad, Bd, *_ = scipy.signal.cont2discrete(
        (A, B[:, None], C[None, :], np.zeros((1, 1))), dt=1, method="zoh"
    )
    np.testing.assert_allclose(A_bar, Ad, rtol=0, atol=1e-12)
    np.testing.assert_allclose(B_bar, Bd[:, 0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("d, theta", [(2, 3.0), (6, 20.0), (12, 100.0)])
def test_zoh_equals_expm_and_solve(d, theta):
    A_bar_ref, B_bar_ref = _reference_zoh(d, theta)
    A_bar, B_bar = discretize(*_reference_AB(d, theta))
    np.testing.assert_allclose(A_bar, A_bar_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(B_bar, B_bar_ref, rtol=0, atol=1e-12)


def test_zoh_with_another_step_scales_A_and_B():
    A, B = _reference_AB(5, 8.0)
    A_bar, B_bar = discretize(A, B, dt=0.25)
    expected_A = scipy.linalg.expm(0.25 * A)
    np.testing.assert_allclose(A_bar, expected_A, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        B_bar, np.linalg.solve(A, (expected_A - np.eye(5)) @ B), rtol=0, atol=1e-12
    )


@functools.cache
def _zoh_spectral_radius(d: int, theta: float) -> float:
    A_bar, _ = discretize(*dn_matrices(d, theta)[:2])
    return float(np.abs(np.linalg.eigvals(A_bar)).max())


@pytest.mark.parametrize("d", [1, 4, 64, 468])
def test_zoh_is_stable_at_psmnist_theta(d):
    assert _zoh_spectral_radius(d, 784) < 1


def test_spectral_radius_at_psmnist_size_is_the_planned_0_970():
    assert abs(_zoh_spectral_radius(468, 784) - 0.970) < 1e-3


@pytest.mark.parametrize("dt", [1.0, 0.5])
def test_euler_is_identity_plus_A_and_B(dt):
    A, B = _reference_AB(6, 30.0)
    A_bar, B_bar = discretize(A, B, dt=dt, method="euler")
    np.testing.assert_allclose(A_bar, np.eye(6) + dt * A, rtol=0, atol=1e-15)
    np.testing.assert_allclose(B_bar, dt * B, rtol=0, atol=1e-15)


def test_euler_is_unstable_where_zoh_is_not():
    """Spec §1.4: Euler blows up for d = 32 at theta = 4d; ZOH stays stable there."""
    A, B, _ = dn_matrices(32, 128)
    radius = {
        method: np.abs(np.linalg.eigvals(discretize(A, B, method=method)[0])).max()
        for method in ("euler", "zoh")
    }
    assert radius["euler"] > 1 > radius["zoh"]


@pytest.mark.parametrize("theta", [1, 7.5, 500, 784])
def test_d1_is_an_exponential_moving_average(theta):
    A_bar, B_bar = discretize(*dn_matrices(1, theta)[:2])
    assert abs(A_bar[0, 0] - math.exp(-1 / theta)) < 1e-12
    assert abs(B_bar[0] - (-math.expm1(-1 / theta))) < 1e-12


def test_d1_theta_500_numbers_of_the_spec():
    A_bar, B_bar = discretize(*dn_matrices(1, 500)[:2])
    assert round(float(A_bar[0, 0]), 6) == 0.998002
    assert round(float(B_bar[0]), 6) == 0.001998


def test_d1_delay_network_runs_the_moving_average():
    theta = 20.0
    u = _uniform((2, 30, 1))
    a = math.exp(-1 / theta)
    m, expected = torch.zeros(2), []
    for t in range(30):
        m = a * m + (1 - a) * u[:, t, 0]
        expected.append(m)
    _close(DelayNetwork(1, theta)(u)[..., 0], torch.stack(expected, 1), 1e-14)


# --- the Legendre read-out (3.14) -------------------------------------------------------------


R_VALUES = [0.0, 0.1, 0.25, 1 / 3, 0.5, 0.8, 0.99, 1.0]


@pytest.mark.parametrize("d", [1, 2, 5, 12])
def test_decoder_equals_the_explicit_sum_with_exact_binomials(d):
    for r in R_VALUES:
        expected = [_shifted_legendre_sum(i, r) for i in range(d)]
        np.testing.assert_allclose(legendre_decoder(d, r), expected, rtol=0, atol=1e-12)


def test_decoder_equals_numpy_legendre_at_2r_minus_1():
    d = 40
    r = np.linspace(0, 1, 57)
    got = legendre_decoder(d, r)
    for i in range(d):
        np.testing.assert_allclose(got[:, i], legendre.legval(2 * r - 1, np.eye(d)[i]), atol=1e-10)


@pytest.mark.parametrize("d", [1, 6, 468])
def test_decoder_at_the_ends_of_the_window(d):
    signs = (-1.0) ** np.arange(d)
    np.testing.assert_allclose(legendre_decoder(d, 1.0), np.ones(d), rtol=0, atol=1e-12)
    np.testing.assert_allclose(legendre_decoder(d, 0.0), signs, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "r, shape",
    [(0.5, ()), (np.float64(0.5), ()), (np.array(0.5), ()), ([0.2, 0.4, 0.6], (3,))]
    + [(np.full((2, 3), 0.5), (2, 3))],
    ids=["float", "numpy scalar", "0-d array", "list", "2-D"],
)
def test_decoder_shape(r, shape):
    assert legendre_decoder(7, r).shape == (*shape, 7)


def test_decoder_of_an_array_is_the_decoder_of_each_entry():
    r = np.array([[0.0, 0.3], [0.7, 1.0]])
    got = legendre_decoder(9, r)
    for index in np.ndindex(r.shape):
        np.testing.assert_array_equal(got[index], legendre_decoder(9, float(r[index])))


def test_decoder_stays_bounded_for_large_d():
    P = legendre_decoder(468, np.linspace(0, 1, 2001))
    assert np.isfinite(P).all()
    assert np.abs(P).max() <= 1 + 1e-12


# --- the decoding property, spec test 3 -------------------------------------------------------


def _three_sinusoids(t: np.ndarray) -> np.ndarray:
    return (
        np.sin(2 * np.pi * t / 90 + 0.3)
        + 0.8 * np.sin(2 * np.pi * t / 170 + 1.1)
        + 0.6 * np.sin(2 * np.pi * t / 340 + 2.0)
    )


@pytest.fixture(scope="module")
def decoding_memory():
    """d = 12, theta = 100, 2,000 steps of three sinusoids (periods 90-340), float64."""
    t = np.arange(2000)
    u = torch.tensor(_three_sinusoids(t)).view(1, -1, 1)
    return t, DelayNetwork(12, 100)(u)[0].numpy()


@pytest.mark.parametrize("r", [0.0, 0.25, 0.5, 1.0])
def test_memory_decodes_the_delayed_input(decoding_memory, r):
    t, m = decoding_memory
    estimate = m[500:] @ legendre_decoder(12, r)
    target = _three_sinusoids(t[500:] - r * 100)
    nrmse = np.sqrt(np.mean((estimate - target) ** 2)) / target.std()
    assert nrmse < 0.05, f"r = {r}: NRMSE {nrmse:.4f}"


# --- the impulse response (3.22) ---------------------------------------------------------------


def test_impulse_response_columns_are_powers_of_A_bar():
    A_bar, B_bar = _reference_zoh(6, 15.0)
    H = impulse_response(A_bar, B_bar, 25)
    assert H.shape == (6, 25) and H.dtype == np.float64
    for k in range(25):
        np.testing.assert_allclose(
            H[:, k], np.linalg.matrix_power(A_bar, k) @ B_bar, rtol=0, atol=1e-14, err_msg=f"{k}"
        )


def test_impulse_response_of_one_step_is_B_bar():
    A_bar, B_bar = _reference_zoh(3, 5.0)
    np.testing.assert_array_equal(impulse_response(A_bar, B_bar, 1), B_bar[:, None])


@DTYPES
def test_layer_impulse_response_is_the_memory_after_a_unit_impulse(dtype):
    dn = DelayNetwork(5, 12.0)
    impulse = torch.zeros(1, 20, 1, dtype=torch.float64)
    impulse[0, 0, 0] = 1
    expected = torch.tensor(_reference_memory(impulse.numpy(), 5, 12.0)[0].T, dtype=dtype)
    H = dn.impulse_response(20, dtype=dtype)
    assert H.shape == (5, 20) and H.dtype == dtype
    _close(H, expected, 1e-14 if dtype == torch.float64 else 1e-7)


def test_layer_matrices_are_the_zoh_matrices():
    A_bar, B_bar = DelayNetwork(7, 40.0).matrices(torch.float64)
    expected_A, expected_B = _reference_zoh(7, 40.0)
    _close(A_bar, torch.tensor(expected_A), 1e-12)
    _close(B_bar, torch.tensor(expected_B), 1e-12)


# --- the four evaluation modes, spec test 4 --------------------------------------------------


def test_loop_equals_a_numpy_loop():
    u = _uniform((3, 40, 2))
    expected = torch.tensor(_reference_memory(u.numpy(), 8, 30.0))
    _close(DelayNetwork(8, 30.0)(u), expected, 1e-12)


@DTYPES
def test_parallel_modes_equal_the_loop_at_the_spec_size(dtype):
    """Random u in [0, 1] of shape (4, 784, 2), d = 64, theta = 784."""
    u = _uniform((4, 784, 2), dtype)
    dn = DelayNetwork(64, 784)
    loop = dn(u, mode="recurrent")
    assert loop.shape == (4, 784, 128) and loop.dtype == dtype
    for mode in ("matrix", "fft"):
        out = dn(u, mode=mode)
        assert out.shape == loop.shape and out.dtype == dtype, mode
        assert (out - loop).abs().max() < TOL[dtype], mode
    final = dn(u, mode="final")
    assert final.shape == (4, 128) and final.dtype == dtype
    assert (final - loop[:, -1]).abs().max() < TOL[dtype]


@pytest.mark.parametrize("n", [1, 2, 7, 33])
def test_parallel_modes_equal_the_loop_at_small_and_odd_lengths(n):
    u = _uniform((2, n, 3), seed=n)
    dn = DelayNetwork(5, 10.0)
    loop = dn(u)
    for mode in ("matrix", "fft"):
        _close(dn(u, mode=mode), loop, 1e-12, msg=mode)
    _close(dn(u, mode="final"), loop[:, -1], 1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_constructor_mode_is_the_default_of_forward(mode):
    u = _uniform((2, 9, 2))
    _same(DelayNetwork(4, 6.0, mode=mode)(u), DelayNetwork(4, 6.0)(u, mode=mode))


def test_one_length_after_another_uses_the_right_impulse_response():
    """H is cached per length: a longer sequence after a shorter one is still right."""
    dn = DelayNetwork(4, 10.0, mode="fft")
    for n in (5, 11, 5):
        u = _uniform((1, n, 1), seed=n)
        _close(dn(u), torch.tensor(_reference_memory(u.numpy(), 4, 10.0)), 1e-12, msg=f"{n}")


def test_step_iterated_equals_forward():
    u = _uniform((2, 12, 3))
    dn = DelayNetwork(6, 9.0)
    m = dn.initial_state(2, 3, dtype=torch.float64)
    assert m.shape == (2, 18) and not m.any()
    steps = []
    for t in range(12):
        m = dn.step(u[:, t], m)
        steps.append(m)
    _close(torch.stack(steps, 1), torch.tensor(_reference_memory(u.numpy(), 6, 9.0)), 1e-12)


def test_float64_matrices_are_not_float32_ones_upcast():
    """The float64 loop keeps float64 accuracy even after the layer met float32 input."""
    dn = DelayNetwork(16, 50.0)
    dn(_uniform((1, 5, 1), torch.float32))
    u = _uniform((1, 60, 1))
    _close(dn(u), torch.tensor(_reference_memory(u.numpy(), 16, 50.0)), 1e-12)


@pytest.fixture
def parallel_lmu():
    """Build a ParallelLMU with fixed random weights (float64)."""

    def make(mode="auto", return_sequences=False, f1="identity", f2="relu"):
        torch.manual_seed(0)
        model = ParallelLMU(2, 3, 8, 20.0, 5, f1, f2, return_sequences, mode)
        return model.double()

    return make


@pytest.mark.parametrize("f1, f2", [("identity", "relu"), ("tanh", "tanh"), ("relu", "identity")])
def test_parallel_lmu_fft_sequences_equal_stepping(parallel_lmu, f1, f2):
    """Train parallel, infer recurrent: the same weights give the same outputs."""
    model = parallel_lmu("fft", return_sequences=True, f1=f1, f2=f2)
    x = torch.randn(3, 30, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = model(x)
        m, steps = None, []
        for t in range(30):
            o, m = model.step(x[:, t], m)
            steps.append(o)
    assert out.shape == (3, 30, 5) and m.shape == (3, 24)
    assert (out - torch.stack(steps, 1)).abs().max() < 1e-10


def test_parallel_lmu_final_equals_the_last_step(parallel_lmu):
    model = parallel_lmu("final")
    x = torch.randn(3, 30, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out = model(x)
        m = model.initial_state(3, dtype=torch.float64)
        for t in range(30):
            o, m = model.step(x[:, t], m)
    assert out.shape == (3, 5)
    assert (out - o).abs().max() < 1e-10


@pytest.mark.parametrize("return_sequences", [False, True], ids=["last", "sequences"])
def test_parallel_lmu_modes_agree(parallel_lmu, return_sequences):
    x = torch.randn(2, 25, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    modes = ["auto", *MODES] if not return_sequences else ["auto", "recurrent", "matrix", "fft"]
    with torch.no_grad():
        outputs = {mode: parallel_lmu(mode, return_sequences)(x) for mode in modes}
    expected_shape = (2, 25, 5) if return_sequences else (2, 5)
    for mode, out in outputs.items():
        assert out.shape == expected_shape, mode
        _close(out, outputs["recurrent"], 1e-12, msg=mode)


@pytest.mark.parametrize(
    "return_sequences, mode", [(False, "final"), (True, "fft")], ids=["last", "sequences"]
)
def test_parallel_lmu_auto_mode(return_sequences, mode):
    assert ParallelLMU(1, 1, 4, 8.0, 3, return_sequences=return_sequences).memory.mode == mode


def test_parallel_lmu_equals_equations_3_18_to_3_20():
    torch.manual_seed(4)
    model = ParallelLMU(2, 2, 3, 7.0, 4, f1="tanh", f2="relu", return_sequences=True).double()
    x = torch.randn(2, 10, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        u = torch.tanh(x @ model.encoder.weight.T + model.encoder.bias)  # (3.18)
        m = torch.tensor(_reference_memory(u.numpy(), 3, 7.0))  # (3.19), channel-major
        W_m, b_o = model.memory_to_output.weight, model.memory_to_output.bias
        expected = torch.relu(m @ W_m.T + x @ model.input_to_output.weight.T + b_o)  # (3.20)
        _close(model(x), expected, 1e-12)


# --- causality, spec test 5 --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["recurrent", "matrix", "fft"])
def test_perturbing_one_step_changes_nothing_before_it(mode):
    t0 = 17
    u = _uniform((2, 40, 2))
    v = u.clone()
    v[:, t0] += 1.0
    dn = DelayNetwork(6, 20.0, mode=mode)
    before, after = dn(u), dn(v)
    if mode == "fft":
        # The FFT mixes every step: its earlier outputs move by round-off (~1e-16), not 0.
        _close(after[:, :t0], before[:, :t0], 1e-13)
    else:
        _same(after[:, :t0], before[:, :t0])
    assert ((after[:, t0] - before[:, t0]).abs() > 1e-3).all()


def test_final_state_depends_on_every_step():
    u = _uniform((2, 40, 2))
    dn = DelayNetwork(6, 20.0, mode="final")
    for t0 in (0, 17, 39):
        v = u.clone()
        v[:, t0] += 1.0
        assert ((dn(v) - dn(u)).abs() > 1e-6).all(), t0


def test_final_state_of_a_prefix_ignores_later_steps():
    u = _uniform((2, 40, 2))
    v = u.clone()
    v[:, 17:] += 1.0
    dn = DelayNetwork(6, 20.0, mode="final")
    for n in (1, 10, 17):
        _same(dn(v[:, :n]), dn(u[:, :n]))
    _close(dn(u[:, :17]), dn(u, mode="recurrent")[:, 16], 1e-12)


@pytest.mark.parametrize("mode", ["recurrent", "matrix", "fft"])
def test_parallel_lmu_sequences_are_causal(parallel_lmu, mode):
    t0 = 11
    model = parallel_lmu(mode, return_sequences=True, f1="tanh", f2="tanh")
    x = torch.randn(2, 20, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    y = x.clone()
    y[:, t0] += 1.0
    with torch.no_grad():
        before, after = model(x), model(y)
    _close(after[:, :t0], before[:, :t0], 0 if mode != "fft" else 1e-13)
    assert not torch.allclose(after[:, t0], before[:, t0])


# --- several channels, spec test 6 --------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_three_channels_are_three_single_channel_memories_channel_major(mode):
    d = 5
    u = _uniform((2, 15, 3))
    dn = DelayNetwork(d, 12.0, mode=mode)
    together = dn(u)
    alone = [dn(u[..., k : k + 1]) for k in range(3)]
    _close(together, torch.cat(alone, dim=-1), 1e-14)
    for k in range(3):
        for i in range(d):
            _same(together[..., k * d + i], together[..., k * d : (k + 1) * d][..., i])
            _close(together[..., k * d + i], alone[k][..., i], 1e-14)


def test_step_with_three_channels_is_channel_major():
    d = 4
    dn = DelayNetwork(d, 8.0)
    u_t = _uniform((2, 3))
    m = _uniform((2, 3 * d), seed=1)
    A_bar, B_bar = (torch.tensor(a) for a in _reference_zoh(d, 8.0))
    new = dn.step(u_t, m)
    for k in range(3):
        expected = A_bar @ m[:, k * d : (k + 1) * d].T + B_bar[:, None] * u_t[:, k]
        _close(new[:, k * d : (k + 1) * d], expected.T, 1e-14, msg=f"channel {k}")


# --- parameter counts, spec test 7 and §2.1 ---------------------------------------------------


def test_psmnist_reconstruction_has_166092_parameters():
    lmu = ParallelLMU(1, 1, 468, 784, 346)
    assert _count(lmu) == 162_622
    assert _count(lmu, nn.Linear(346, 10)) == 166_092


def test_mackey_glass_reconstruction_has_17243_parameters():
    lmu = ParallelLMU(1, 1, 40, 50, 140, return_sequences=True)
    assert _count(lmu, nn.Linear(140, 80), nn.Linear(80, 1)) == 17_243


def test_original_lmu_for_psmnist_has_102027_parameters():
    assert _count(LMUCell(1, 212, 256, 784), nn.Linear(212, 10)) == 102_027


def test_dn_only_imdb_model_has_301_parameters():
    dn = DelayNetwork(1, 500)
    assert list(dn.parameters()) == [] and list(dn.buffers()) == []
    assert _count(dn, nn.Linear(300, 1)) == 301


# --- the LMU cell (3.15)-(3.17) ----------------------------------------------------------------


def _cell(d_x=3, d_h=4, d=5, theta=10.0, seed=0):
    torch.manual_seed(seed)
    return LMUCell(d_x, d_h, d, theta, init="uniform").double()


def test_cell_step_equals_equations_3_15_to_3_17():
    cell = _cell()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, generator=g, dtype=torch.float64)
    h0 = torch.randn(2, 4, generator=g, dtype=torch.float64)
    m0 = torch.randn(2, 5, generator=g, dtype=torch.float64)
    A_bar, B_bar = (torch.tensor(a) for a in _reference_zoh(5, 10.0))
    with torch.no_grad():
        u = x @ cell.e_x + h0 @ cell.e_h + m0 @ cell.e_m  # (3.15), one scalar per example
        m = m0 @ A_bar.T + u[:, None] * B_bar  # (3.16)
        h = torch.tanh(x @ cell.W_x.T + h0 @ cell.W_h.T + m @ cell.W_m.T)  # (3.17)
        h_got, m_got = cell(x, (h0, m0))
    _close(m_got, m, 1e-12)
    _close(h_got, h, 1e-12)


def test_cell_default_state_is_zero():
    cell = _cell()
    x = _uniform((2, 3))
    zeros = (torch.zeros(2, 4, dtype=torch.float64), torch.zeros(2, 5, dtype=torch.float64))
    h, m = cell(x)
    _same(h, cell(x, zeros)[0])
    _same(m, cell(x, zeros)[1])


def test_psmnist_init():
    torch.manual_seed(0)
    cell = LMUCell(1, 212, 256, 784)  # the default init is "psmnist"
    _same(cell.e_x.detach(), torch.ones(1))
    for name in ("e_h", "e_m", "W_x", "W_h"):
        assert not getattr(cell, name).detach().any(), name
    W_m = cell.W_m.detach()
    assert W_m.shape == (212, 256)
    glorot_std = math.sqrt(2 / (212 + 256))
    assert abs(float(W_m.std()) / glorot_std - 1) < 0.03
    assert abs(float(W_m.mean())) < 0.05 * glorot_std
    # normal, not uniform: about 4.6% of the weights lie beyond two standard deviations
    beyond = float((W_m.abs() > 2 * glorot_std).float().mean())
    assert 0.035 < beyond < 0.057


def test_uniform_init_is_bounded_and_nonzero():
    torch.manual_seed(0)
    cell = LMUCell(3, 16, 6, 10.0, init="uniform")
    for name, p in cell.named_parameters():
        p = p.detach()
        assert float(p.abs().max()) <= 16**-0.5, name
        assert (p != 0).all(), name


def test_cell_under_recurrent_equals_stepping():
    cell = _cell()
    x = torch.randn(2, 9, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out, (h_n, m_n) = Recurrent(cell)(x)
        state, steps = None, []
        for t in range(9):
            state = cell(x[:, t], state)
            steps.append(state[0])
    assert out.shape == (2, 9, 4) and h_n.shape == (1, 2, 4) and m_n.shape == (1, 2, 5)
    _close(out, torch.stack(steps, 1), 1e-12)
    _close(h_n[0], state[0], 1e-12)
    _close(m_n[0], state[1], 1e-12)


def test_gradients_reach_every_parameter():
    cell = _cell()
    x = torch.randn(2, 6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    (Recurrent(cell)(x)[0] ** 2).sum().backward()
    for name, p in cell.named_parameters():
        assert p.grad is not None and p.grad.abs().max() > 0, name
    assert list(cell.memory.parameters()) == []  # A_bar, B_bar stay frozen


def test_gradcheck_of_a_tiny_cell():
    cell = _cell(d_x=2, d_h=2, d=3, theta=4.0)
    names = [name for name, _ in cell.named_parameters()]
    x = torch.randn(1, 4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4))

    def run(x, *params):
        weights = {f"cell.{name}": p for name, p in zip(names, params)}
        return torch.func.functional_call(Recurrent(cell), weights, (x,))[0]

    params = [p.detach().clone().requires_grad_(True) for p in cell.parameters()]
    assert torch.autograd.gradcheck(run, (x.requires_grad_(True), *params))


def test_reprs_name_the_configuration():
    assert repr(DelayNetwork(4, 10.0, "fft")) == "DelayNetwork(d=4, theta=10, mode='fft')"
    assert "d_x=3, d_h=4, d=5, theta=10, init='psmnist'" in repr(LMUCell(3, 4, 5, 10.0))
    text = repr(ParallelLMU(2, 1, 4, 8.0, 3, return_sequences=True))
    assert "f1='identity', f2='relu', return_sequences=True" in text and "mode='fft'" in text


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: dn_matrices(0, 10), "d must be a positive integer, got 0"),
        (lambda: dn_matrices(4.0, 10), "d must be a positive integer, got 4.0"),
        (lambda: dn_matrices(True, 10), "d must be a positive integer, got True"),
        (lambda: dn_matrices(4, 0), "theta must be a positive number of time steps, got 0"),
        (lambda: dn_matrices(4, -2.5), "theta must be a positive number .* got -2.5"),
        (lambda: dn_matrices(4, True), "theta must be a positive number .* got True"),
        (lambda: dn_matrices(4, "10"), "theta must be a positive number .* got '10'"),
        (lambda: dn_matrices(4, math.nan), "theta must be a positive number .* got nan"),
        (lambda: dn_matrices(4, math.inf), "theta must be finite, got inf"),
        (lambda: legendre_decoder(0, 0.5), "d must be a positive integer, got 0"),
        (lambda: legendre_decoder(3, 1.5), r"r must lie in \[0, 1\].*1\.5"),
        (lambda: legendre_decoder(3, -0.01), r"r must lie in \[0, 1\].*-0\.01"),
        (lambda: legendre_decoder(3, math.nan), r"r must lie in \[0, 1\].*nan"),
        (lambda: legendre_decoder(3, [0.2, math.inf]), r"r must lie in \[0, 1\].*inf"),
    ],
    ids=[
        "d=0",
        "d float",
        "d bool",
        "theta=0",
        "theta<0",
        "theta bool",
        "theta str",
        "theta nan",
        "theta inf",
        "decoder d=0",
        "r>1",
        "r<0",
        "r nan",
        "r inf in array",
    ],
)
def test_matrices_and_decoder_reject_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


A4, B4 = _reference_AB(4, 10.0)


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: discretize(A4, B4, method="bilinear"),
            r"method must be one of \('zoh', 'euler'\), got 'bilinear'",
        ),
        (
            lambda: discretize(np.ones((3, 4)), np.ones(3)),
            r"A must be a square \(d, d\) matrix, got shape \(3, 4\)",
        ),
        (lambda: discretize(B4, B4), r"A must be a square \(d, d\) matrix, got shape \(4,\)"),
        (lambda: discretize(A4, np.ones(3)), r"B must have shape \(d,\) = \(4,\), got \(3,\)"),
        (lambda: discretize(A4, B4[:, None]), r"B must have shape \(d,\) = \(4,\), got \(4, 1\)"),
        (lambda: discretize(A4, B4, dt=0), "dt must be a positive number .* got 0"),
        (lambda: discretize(A4, B4, dt=-1.0), "dt must be a positive number .* got -1.0"),
        (lambda: discretize(A4, B4, dt=math.inf), "dt must be finite, got inf"),
        (lambda: impulse_response(A4, B4, 0), "n must be a positive integer, got 0"),
        (lambda: impulse_response(A4, B4, 2.0), "n must be a positive integer, got 2.0"),
        (
            lambda: impulse_response(np.ones((3, 4)), np.ones(4), 5),
            r"A_bar must be a square \(d, d\) matrix, got shape \(3, 4\)",
        ),
        (
            lambda: impulse_response(A4, np.ones(3), 5),
            r"B_bar must have shape \(d,\) = \(4,\), got \(3,\)",
        ),
    ],
    ids=[
        "method",
        "A not square",
        "A 1-D",
        "B length",
        "B 2-D",
        "dt=0",
        "dt<0",
        "dt inf",
        "n=0",
        "n float",
        "A_bar not square",
        "B_bar length",
    ],
)
def test_discretize_and_impulse_response_reject_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 10.0), "d must be a positive integer, got 0"),
        ((4, 0), "theta must be a positive number of time steps, got 0"),
        ((4, math.inf), "theta must be finite, got inf"),
        ((4, False), "theta must be a positive number .* got False"),
        (
            (4, 10.0, "scan"),
            r"mode must be one of \('recurrent', 'matrix', 'fft', 'final'\), got 'scan'",
        ),
        ((4, 10.0, "auto"), r"mode must be one of .* got 'auto'"),
    ],
    ids=["d=0", "theta=0", "theta inf", "theta bool", "mode", "auto is ParallelLMU's"],
)
def test_delay_network_constructor_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        DelayNetwork(*args)


@pytest.mark.parametrize(
    "shape, mode, match",
    [
        ((5, 1), None, r"u must have 3 dimensions, got shape \(5, 1\)"),
        ((2, 5, 1, 1), None, r"u must have 3 dimensions, got shape \(2, 5, 1, 1\)"),
        ((2, 0, 1), None, r"at least one step and one channel, got \(2, 0, 1\)"),
        ((2, 5, 0), "fft", r"at least one step and one channel, got \(2, 5, 0\)"),
        ((2, 5, 1), "loop", r"mode must be one of .* got 'loop'"),
    ],
    ids=["2-D", "4-D", "n=0", "c=0", "mode"],
)
def test_delay_network_forward_rejects_bad_input(shape, mode, match):
    with pytest.raises(ValueError, match=match):
        DelayNetwork(4, 10.0)(torch.zeros(shape), mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_delay_network_rejects_integer_input(mode):
    """An integer u would cast A_bar, B_bar and H to integers (zeros) and answer zeros."""
    with pytest.raises(TypeError, match="u must be a floating-point tensor, got dtype torch.int64"):
        DelayNetwork(4, 10.0)(torch.ones(1, 5, 1, dtype=torch.long), mode=mode)


def test_delay_network_step_rejects_integer_input():
    with pytest.raises(
        TypeError, match="u_t must be a floating-point tensor, got dtype torch.int64"
    ):
        DelayNetwork(4, 10.0).step(torch.ones(2, 1, dtype=torch.long), torch.zeros(2, 4))


def test_delay_network_rejects_a_non_tensor():
    with pytest.raises(TypeError, match="u must be a torch.Tensor, got ndarray"):
        DelayNetwork(4, 10.0)(np.zeros((1, 5, 1)))


@pytest.mark.parametrize(
    "u_shape, m_shape, match",
    [
        (
            (2, 1),
            (2, 5),
            r"m must have shape \(B, c\*d\) = \(2, 4\) for u_t of shape \(2, 1\), got \(2, 5\)",
        ),
        ((2, 3), (2, 4), r"m must have shape \(B, c\*d\) = \(2, 12\) .* got \(2, 4\)"),
        ((2, 1), (3, 4), r"m must have shape \(B, c\*d\) = \(2, 4\) .* got \(3, 4\)"),
        ((2,), (2, 4), r"u_t must have 2 dimensions, got shape \(2,\)"),
        ((2, 1), (2, 1, 4), r"m must have 2 dimensions, got shape \(2, 1, 4\)"),
    ],
    ids=["d", "channels", "batch", "1-D u_t", "3-D m"],
)
def test_delay_network_step_rejects_bad_shapes(u_shape, m_shape, match):
    with pytest.raises(ValueError, match=match):
        DelayNetwork(4, 10.0).step(torch.zeros(u_shape), torch.zeros(m_shape))


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((0, 4, 5, 10.0), {}, "d_x must be a positive integer, got 0"),
        ((3, 0, 5, 10.0), {}, "d_h must be a positive integer, got 0"),
        ((3, 4, 0, 10.0), {}, "d must be a positive integer, got 0"),
        ((3, 4, 5, -1.0), {}, "theta must be a positive number .* got -1.0"),
        (
            (3, 4, 5, 10.0),
            {"init": "glorot"},
            r"init must be one of \('psmnist', 'uniform'\), got 'glorot'",
        ),
    ],
    ids=["d_x", "d_h", "d", "theta", "init"],
)
def test_cell_constructor_rejects_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        LMUCell(*args, **kwargs)


@pytest.mark.parametrize(
    "x_shape, state_shapes, match",
    [
        ((2, 4), None, r"x_t must have the input size d_x = 3 in dimension 1, got shape \(2, 4\)"),
        ((2, 1, 3), None, r"x_t must have 2 dimensions, got shape \(2, 1, 3\)"),
        (
            (2, 3),
            [(2, 4), (2, 6)],
            r"each state tensor must have shape .* = \(2, 5\), got \(2, 6\)",
        ),
        (
            (2, 3),
            [(2, 7), (2, 5)],
            r"each state tensor must have shape .* = \(2, 4\), got \(2, 7\)",
        ),
        (
            (2, 3),
            [(1, 4), (1, 5)],
            r"each state tensor must have shape .* = \(2, 4\), got \(1, 4\)",
        ),
    ],
    ids=["d_x", "3-D x", "m width", "h width", "batch"],
)
def test_cell_step_rejects_bad_input(x_shape, state_shapes, match):
    state = None if state_shapes is None else tuple(torch.zeros(s) for s in state_shapes)
    with pytest.raises(ValueError, match=match):
        LMUCell(3, 4, 5, 10.0)(torch.zeros(x_shape), state)


def test_cell_rejects_a_single_tensor_state():
    with pytest.raises(ValueError, match="LMUCell needs its state as a tuple of 2 tensors"):
        LMUCell(3, 4, 5, 10.0)(torch.zeros(2, 3), torch.zeros(2, 4))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"d_x": 0}, ValueError, "d_x must be a positive integer, got 0"),
        ({"d_u": 0}, ValueError, "d_u must be a positive integer, got 0"),
        ({"d": 0}, ValueError, "d must be a positive integer, got 0"),
        ({"theta": 0.0}, ValueError, "theta must be a positive number .* got 0.0"),
        ({"d_o": 0}, ValueError, "d_o must be a positive integer, got 0"),
        ({"f1": "sigmoid"}, ValueError, r"f1 must be one of \('identity', 'relu', 'tanh'\)"),
        ({"f2": "gelu"}, ValueError, r"f2 must be one of .* got 'gelu'"),
        (
            {"mode": "scan"},
            ValueError,
            r"mode must be one of \('auto', 'recurrent', 'matrix', 'fft', 'final'\), got 'scan'",
        ),
        (
            {"mode": "final", "return_sequences": True},
            ValueError,
            'mode "final" computes only the last state: it cannot return sequences',
        ),
        (
            {"return_sequences": 1},
            TypeError,
            "return_sequences must be True or False, got 1",
        ),
    ],
    ids=["d_x", "d_u", "d", "theta", "d_o", "f1", "f2", "mode", "final+sequences", "bool"],
)
def test_parallel_lmu_constructor_rejects_bad_arguments(kwargs, error, match):
    args = {"d_x": 2, "d_u": 1, "d": 4, "theta": 8.0, "d_o": 3} | kwargs
    with pytest.raises(error, match=match):
        ParallelLMU(**args)


@pytest.mark.parametrize(
    "method, shape, match",
    [
        ("forward", (2, 5), r"x must have 3 dimensions, got shape \(2, 5\)"),
        (
            "forward",
            (2, 5, 3),
            r"x must have the input size d_x = 2 in dimension 2, got shape \(2, 5, 3\)",
        ),
        ("step", (2, 5, 2), r"x_t must have 2 dimensions, got shape \(2, 5, 2\)"),
        (
            "step",
            (2, 3),
            r"x_t must have the input size d_x = 2 in dimension 1, got shape \(2, 3\)",
        ),
    ],
    ids=["2-D x", "x d_x", "3-D x_t", "x_t d_x"],
)
def test_parallel_lmu_rejects_bad_input(method, shape, match):
    model = ParallelLMU(2, 3, 4, 8.0, 5)
    with pytest.raises(ValueError, match=match):
        getattr(model, method)(torch.zeros(shape))


def test_parallel_lmu_step_rejects_a_wrong_size_memory():
    model = ParallelLMU(2, 3, 4, 8.0, 5)
    with pytest.raises(
        ValueError, match=r"m must have shape \(B, c\*d\) = \(2, 12\) .* got \(2, 4\)"
    ):
        model.step(torch.zeros(2, 2), torch.zeros(2, 4))
