"""rnnbook.models.ntm: reading and writing (spec ntm §8.2 tests 1, 8), the addressing steps
(tests 2-7), the cell against a NumPy step, the parameter count of the copy configuration,
the symmetry trap of §5.3 and bad input.

Expected values are computed by hand or by the NumPy functions below (the equations written
out with loops and modular indices), never by the function tested.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from rnnbook.models.ntm import (
    NTM,
    NTMCell,
    NTMState,
    address,
    content_weighting,
    cosine_similarity,
    fix_head_parameters,
    head_outputs,
    interpolate,
    read,
    sharpen,
    shift,
    write,
)
from rnnbook.testing import assert_close_ulps

F64 = torch.float64


def _t(values, dtype=F64) -> torch.Tensor:
    return torch.tensor(np.asarray(values, dtype=float), dtype=dtype)


def _same(actual, expected, msg=None):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=msg)


def _close(actual, expected, atol, msg=None):
    if not isinstance(expected, torch.Tensor):
        expected = torch.tensor(np.asarray(expected, dtype=float))
    expected = expected.to(actual.dtype)
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol, msg=msg)


def _onehot(i: int, N: int, B: int = 1) -> torch.Tensor:
    w = torch.zeros(B, N, dtype=F64)
    w[:, i] = 1
    return w


def _col(value: float, B: int = 1) -> torch.Tensor:
    """A per-example scalar such as beta, g or gamma: shape (B, 1)."""
    return torch.full((B, 1), float(value), dtype=F64)


def _delta(shift_by: int, S: int = 1, B: int = 1) -> torch.Tensor:
    """The shift distribution s (B, 2S+1) with all mass on the shift ``shift_by``."""
    s = torch.zeros(B, 2 * S + 1, dtype=F64)
    s[:, shift_by + S] = 1
    return s


# --- NumPy references: the equations, written out -----------------------------------------------


def np_softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_softplus(z):
    return np.logaddexp(0, z)


def np_sigmoid(z):
    return 1 / (1 + np.exp(-z))


def np_cosine(memory, k):
    """(N4) row by row."""
    B, N, _ = memory.shape
    K = np.empty((B, N))
    for b in range(B):
        for i in range(N):
            u, v = k[b], memory[b, i]
            K[b, i] = u @ v / (np.linalg.norm(u) * np.linalg.norm(v) + 1e-8)
    return K


def np_shift(w, s):
    """(N7) ``w~(i) = sum_j w(j) s(i - j)`` with i - j taken modulo N; s[k] is shift k - S."""
    B, N = w.shape
    S = (s.shape[1] - 1) // 2
    out = np.zeros((B, N))
    for b in range(B):
        for i in range(N):
            for j in range(N):
                delta = (i - j) % N  # in 0..N-1; shifts -S..-1 appear as N-S..N-1
                if delta <= S:
                    out[b, i] += w[b, j] * s[b, delta + S]
                elif delta >= N - S:
                    out[b, i] += w[b, j] * s[b, delta - N + S]
    return out


def np_sharpen(w, gamma):
    """(N8) without any epsilon."""
    p = w**gamma
    return p / p.sum(axis=-1, keepdims=True)


def np_address(memory, k, beta, g, s, gamma, w_prev):
    w_c = np_softmax(beta * np_cosine(memory, k))  # (N5)
    w_g = g * w_c + (1 - g) * w_prev  # (N6)
    return np_sharpen(np_shift(w_g, s), gamma)


def np_write(memory, ws, erases, adds):
    """(N2)-(N3) for several heads: every erase factor, then every add."""
    memory = memory.copy()
    for w, e in zip(ws, erases):
        memory = memory * (1 - np.einsum("bn,bm->bnm", w, e))
    for w, a in zip(ws, adds):
        memory = memory + np.einsum("bn,bm->bnm", w, a)
    return memory


def _random_head(B, N, M, S=1, seed=0, beta_max=10.0, gamma_max=5.0):
    """Random valid inputs of address(): memory, k, beta, g, s, gamma, w_prev (float64)."""
    g = torch.Generator().manual_seed(seed)
    memory = torch.randn(B, N, M, generator=g, dtype=F64)
    k = torch.tanh(torch.randn(B, M, generator=g, dtype=F64))
    beta = beta_max * torch.rand(B, 1, generator=g, dtype=F64)
    gate = torch.rand(B, 1, generator=g, dtype=F64)
    s = torch.softmax(torch.randn(B, 2 * S + 1, generator=g, dtype=F64), dim=-1)
    gamma = 1 + (gamma_max - 1) * torch.rand(B, 1, generator=g, dtype=F64)
    w_prev = torch.softmax(2 * torch.randn(B, N, generator=g, dtype=F64), dim=-1)
    return memory, k, beta, gate, s, gamma, w_prev


# --- spec test 1: the read/write table -------------------------------------------------------


E = np.eye(4)
# (w, e, a, read(w) after the write), spec §8.2 test 1; the expected reads derived by hand
READ_WRITE_TABLE = [
    (E[0], [1, 1, 1, 1], E[0], E[0]),
    (E[1], [1, 1, 1, 1], E[1], E[1]),
    (E[2], [1, 1, 1, 1], E[2], E[2]),
    (E[3], [1, 1, 1, 1], E[3], E[3]),
    (E[0], [0, 1, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1]),
    (E[1], [0, 0, 0, 0], [0, 0, 1, 0], [0, 1, 1, 0]),
    (E[2], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0]),
    (E[3], [0, 0, 0, 0.5], [0, 0, 0, 0.2], [0, 0, 0, 0.7]),
    ([0.5, 0.5, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0], [0.25, 0.5, 0.5, 0.25]),
]


def test_read_write_table_of_the_spec():
    memory = torch.zeros(1, 4, 4, dtype=F64)
    for row, (w, e, a, expected) in enumerate(READ_WRITE_TABLE, start=1):
        w = _t([w])
        memory = write(memory, w, _t([e]), _t([a]))
        _close(read(memory, w), [expected], 1e-15, msg=f"row {row}")
    # and the memory itself at the end, row by row (after row 9 of the table)
    expected_memory = [[0.5, 0.5, 0.5, 0.5], [0, 0.5, 0.5, 0], [0, 0, 1, 0], [0, 0, 0, 0.7]]
    _close(memory, [expected_memory], 1e-15)


def test_read_is_the_weighted_sum_of_rows():
    g = torch.Generator().manual_seed(0)
    memory = torch.randn(3, 5, 4, generator=g, dtype=F64)
    w = torch.softmax(torch.randn(3, 5, generator=g, dtype=F64), -1)
    expected = np.einsum("bn,bnm->bm", w.numpy(), memory.numpy())
    _close(read(memory, w), expected, 1e-14)


def test_one_hot_read_returns_the_row():
    memory = torch.arange(24, dtype=F64).view(2, 3, 4)
    _same(read(memory, _onehot(2, 3, B=2)), memory[:, 2])


def test_full_erase_replaces_a_row_and_no_erase_accumulates():
    """Exercise 1: e = 1 with a one-hot w replaces the row, e = 0 adds to it; other rows keep."""
    memory = torch.arange(12, dtype=F64).view(1, 3, 4)
    a = _t([[9.0, 8.0, 7.0, 6.0]])
    replaced = write(memory, _onehot(1, 3), torch.ones(1, 4, dtype=F64), a)
    _same(replaced[0, 1], a[0])
    accumulated = write(memory, _onehot(1, 3), torch.zeros(1, 4, dtype=F64), a)
    _same(accumulated[0, 1], memory[0, 1] + a[0])
    for result in (replaced, accumulated):
        _same(result[0, [0, 2]], memory[0, [0, 2]])


def test_write_matches_the_matrix_form():
    g = torch.Generator().manual_seed(1)
    memory = torch.randn(2, 6, 3, generator=g, dtype=F64)
    w = torch.softmax(torch.randn(2, 6, generator=g, dtype=F64), -1)
    e = torch.rand(2, 3, generator=g, dtype=F64)
    a = torch.randn(2, 3, generator=g, dtype=F64)
    expected = np_write(memory.numpy(), [w.numpy()], [e.numpy()], [a.numpy()])
    _close(write(memory, w, e, a), expected, 1e-14)


# --- spec test 8: several write heads ---------------------------------------------------------


def test_two_write_heads_commute_and_match_erases_then_adds():
    g = torch.Generator().manual_seed(2)
    memory = torch.randn(3, 7, 4, generator=g, dtype=F64)
    w = torch.softmax(torch.randn(3, 2, 7, generator=g, dtype=F64), -1)
    e = torch.rand(3, 2, 4, generator=g, dtype=F64)
    a = torch.randn(3, 2, 4, generator=g, dtype=F64)
    forwards = write(memory, w, e, a)
    swapped = write(memory, w.flip(1), e.flip(1), a.flip(1))
    _close(swapped, forwards, 1e-14)
    heads = [(w[:, h].numpy(), e[:, h].numpy(), a[:, h].numpy()) for h in (0, 1)]
    expected = np_write(memory.numpy(), *[list(x) for x in zip(*heads)])
    _close(forwards, expected, 1e-14)


def test_one_head_with_a_head_axis_equals_one_head_without():
    memory, _, _, _, _, _, w = _random_head(2, 5, 3, seed=3)
    e, a = torch.rand(2, 3, dtype=F64), torch.randn(2, 3, dtype=F64)
    assert_close_ulps(write(memory, w[:, None], e[:, None], a[:, None]), write(memory, w, e, a))


# --- content addressing (N4)-(N5) and spec test 2 ---------------------------------------------


def test_cosine_similarity_matches_numpy():
    memory, k, *_ = _random_head(3, 6, 4, seed=4)
    _close(cosine_similarity(memory, k), np_cosine(memory.numpy(), k.numpy()), 1e-14)


def test_cosine_of_parallel_and_opposite_rows():
    memory = _t([[[2.0, 0.0], [-3.0, 0.0], [0.0, 5.0]]])
    _close(cosine_similarity(memory, _t([[1.0, 0.0]])), [[1.0, -1.0, 0.0]], 1e-8)


def test_content_focus_spec_test_2():
    """memory = I_4, k = e0, beta = 100, g = 1, s = delta_0, gamma = 100 gives e0."""
    memory = torch.eye(4, dtype=F64).unsqueeze(0)
    w_prev = torch.full((1, 4), 0.25, dtype=F64)
    w = address(memory, _onehot(0, 4), _col(100), _col(1), _delta(0), _col(100), w_prev)
    _close(w, _onehot(0, 4), 1e-6)


def test_content_weighting_matches_numpy():
    memory, k, beta, *_ = _random_head(4, 9, 5, seed=5)
    expected = np_softmax(beta.numpy() * np_cosine(memory.numpy(), k.numpy()))
    _close(content_weighting(memory, k, beta), expected, 1e-14)


@pytest.mark.parametrize("beta", [0.0, 1.0, 100.0])
def test_all_equal_similarities_give_uniform_content_weights(beta):
    """Constant memory: every row equally similar, so w^c is uniform for any beta.

    Within a few ulp, not bitwise: identical rows need not round alike (a vectorised kernel
    may sum the last rows of a block in another order), and beta magnifies the difference.
    """
    memory = torch.full((2, 8, 3), 1e-6, dtype=F64)
    k = _t([[0.3, -0.2, 0.9], [1.0, 1.0, 1.0]])
    weights = content_weighting(memory, k, _col(beta, B=2))
    assert_close_ulps(weights, torch.full((2, 8), 1 / 8, dtype=F64))


def test_zero_key_strength_gives_uniform_weights():
    memory, k, *_ = _random_head(2, 5, 3, seed=6)
    _close(content_weighting(memory, k, _col(0.0, B=2)), torch.full((2, 5), 0.2, dtype=F64), 1e-15)


def test_content_weighting_by_hand():
    """Rows (1, 0), (0, 1), (-1, 0), (0, 2) and k = (1, 0): K = (1, 0, -1, 0). With
    beta = ln 2 the exponentials are (2, 1, 1/2, 1), which sum to 4.5."""
    memory = _t([[[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, 2.0]]])
    w = content_weighting(memory, _t([[1.0, 0.0]]), _col(math.log(2)))
    _close(w, [[4 / 9, 2 / 9, 1 / 9, 2 / 9]], 1e-8)


def test_a_uniform_weighting_is_a_fixed_point_of_every_location_step():
    """The symmetry trap step by step: interpolating, shifting and sharpening uniform
    weightings gives the uniform weighting, for any gate, shift weighting and gamma."""
    uniform = torch.full((3, 8), 1 / 8, dtype=F64)
    g = torch.Generator().manual_seed(15)
    s = torch.softmax(torch.randn(3, 3, generator=g, dtype=F64), -1)
    gate = torch.rand(3, 1, generator=g, dtype=F64)
    _close(interpolate(uniform, uniform, gate), uniform, 1e-16)
    _close(shift(uniform, s), uniform, 1e-16)
    _close(sharpen(uniform, _col(7.5, B=3)), uniform, 1e-12)  # the 1e-12 in the sum


# --- interpolation (N6), shift (N7), sharpening (N8): spec tests 3, 4 -----------------------


def test_interpolation_by_hand():
    w_c, w_prev = _t([[1.0, 0.0, 0.0]]), _t([[0.0, 0.5, 0.5]])
    _close(interpolate(w_c, w_prev, _col(0.25)), [[0.25, 0.375, 0.375]], 1e-15)
    _same(interpolate(w_c, w_prev, _col(1.0)), w_c)
    _same(interpolate(w_c, w_prev, _col(0.0)), w_prev)


@pytest.mark.parametrize(
    "shift_by, expected_row", [(1, 1), (-1, 5), (0, 0)], ids=["+1", "-1 wraps", "0"]
)
def test_shift_direction_spec_test_3(shift_by, expected_row):
    """w_prev = e0, g = 0, gamma = 1: s = delta(+1) gives e1, delta(-1) gives e_{N-1}."""
    N = 6
    memory = torch.randn(1, N, 3, dtype=F64)
    k = torch.randn(1, 3, dtype=F64)
    w = address(memory, k, _col(5), _col(0), _delta(shift_by), _col(1), _onehot(0, N))
    _close(w, _onehot(expected_row, N), 1e-11)


@pytest.mark.parametrize(
    "start, shift_by, S, expected_row",
    [(5, 1, 1, 0), (0, -1, 1, 5), (5, 2, 2, 1), (1, -2, 2, 5), (3, 2, 2, 5)],
    ids=["N-1 +1", "0 -1", "N-1 +2", "1 -2", "3 +2"],
)
def test_shift_wraps_around(start, shift_by, S, expected_row):
    _same(shift(_onehot(start, 6), _delta(shift_by, S)), _onehot(expected_row, 6))


@pytest.mark.parametrize("S", [0, 1, 2, 3])
def test_shift_matches_numpy_convolution(S):
    g = torch.Generator().manual_seed(7 + S)
    w = torch.softmax(torch.randn(3, 7, generator=g, dtype=F64), -1)
    s = torch.softmax(torch.randn(3, 2 * S + 1, generator=g, dtype=F64), -1)
    _close(shift(w, s), np_shift(w.numpy(), s.numpy()), 1e-15)


def test_shift_by_hand():
    """s = (0.1, 0.8, 0.1) on e2 of N = 5 spreads 0.1 to each neighbour."""
    _close(shift(_onehot(2, 5), _t([[0.1, 0.8, 0.1]])), [[0, 0.1, 0.8, 0.1, 0]], 1e-15)


def test_identity_step_spec_test_4():
    """g = 0, s = delta_0, gamma = 1 returns w_prev (to the 1e-12 of the sharpening)."""
    memory, k, beta, _, _, _, w_prev = _random_head(3, 8, 4, seed=8)
    w = address(memory, k, beta, _col(0, 3), _delta(0, B=3), _col(1, 3), w_prev)
    _close(w, w_prev, 1e-11)


def test_gamma_one_is_the_identity():
    _, _, _, _, _, _, w = _random_head(4, 10, 2, seed=9)
    _close(sharpen(w, _col(1, 4)), w, 1e-11)


def test_large_gamma_approaches_the_one_hot_at_the_argmax():
    w = _t([[0.1, 0.2, 0.4, 0.3], [0.5, 0.1, 0.1, 0.3]])
    _close(sharpen(w, _col(200, 2)), [[0, 0, 1, 0], [1, 0, 0, 0]], 1e-11)


def test_sharpen_matches_numpy():
    g = torch.Generator().manual_seed(10)
    w = torch.softmax(torch.randn(5, 9, generator=g, dtype=F64), -1)
    gamma = 1 + 10 * torch.rand(5, 1, generator=g, dtype=F64)
    _close(sharpen(w, gamma), np_sharpen(w.numpy(), gamma.numpy()), 1e-11)


def test_sharpen_by_hand():
    """gamma = 2 on (0.5, 0.25, 0.25): squares 0.25, 0.0625, 0.0625, sum 0.375."""
    _close(sharpen(_t([[0.5, 0.25, 0.25]]), _col(2)), [[2 / 3, 1 / 6, 1 / 6]], 1e-12)


def test_sharpen_of_a_one_hot_is_the_one_hot():
    _close(sharpen(_onehot(3, 5), _col(4.5)), _onehot(3, 5), 1e-11)


def test_sharpening_a_flat_weighting_with_a_large_gamma_does_not_underflow():
    """float32, N = 128: (1/128)^20 underflows; the result must still be the flat weighting."""
    w = torch.full((2, 128), 1 / 128)
    out = sharpen(w, torch.full((2, 1), 21.0))
    _close(out, torch.full((2, 128), 1 / 128), 1e-7)


def test_address_matches_numpy():
    inputs = _random_head(4, 9, 5, S=2, seed=11, beta_max=30, gamma_max=15)
    expected = np_address(*[x.numpy() for x in inputs])
    _close(address(*inputs), expected, 1e-10)


# --- spec test 5: every weighting on the simplex ---------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_every_step_stays_on_the_simplex(seed):
    memory, k, beta, g, s, gamma, w_prev = _random_head(
        16, 10, 4, S=2, seed=seed, beta_max=50, gamma_max=25
    )
    w_c = content_weighting(memory, k, beta)
    w_g = interpolate(w_c, w_prev, g)
    w_tilde = shift(w_g, s)
    w = sharpen(w_tilde, gamma)
    for name, weights in {"w_c": w_c, "w_g": w_g, "w~": w_tilde, "w": w}.items():
        assert weights.min() >= 0, name
        _close(weights.sum(-1), torch.ones(16), 1e-9, msg=name)
    _same(address(memory, k, beta, g, s, gamma, w_prev), w)


# --- spec tests 6-7: no NaN, gradcheck --------------------------------------------------------


def test_zero_memory_and_zero_key_give_finite_values_and_gradients():
    inputs = list(_random_head(3, 6, 4, seed=12))
    inputs[0] = torch.zeros(3, 6, 4, dtype=F64)  # memory
    inputs[1] = torch.zeros(3, 4, dtype=F64)  # key
    for x in inputs:
        x.requires_grad_(True)
    w = address(*inputs)
    assert torch.isfinite(w).all()
    _close(w.sum(-1), torch.ones(3), 1e-12)
    (w * torch.randn(3, 6, dtype=F64)).sum().backward()
    names = ("memory", "k", "beta", "g", "s", "gamma", "w_prev")
    for name, x in zip(names, inputs):
        assert x.grad is not None and torch.isfinite(x.grad).all(), name


def test_one_hot_previous_weighting_gives_finite_gamma_gradient():
    """g = 0 and s = delta_0 leave exact zeros in w~: d/dgamma of 0^gamma needs the epsilon."""
    memory, k, beta, _, _, gamma, _ = _random_head(2, 5, 3, seed=13)
    gamma.requires_grad_(True)
    w = address(memory, k, beta, _col(0, 2), _delta(0, B=2), gamma, _onehot(1, 5, B=2))
    (w * torch.arange(5, dtype=F64)).sum().backward()
    assert torch.isfinite(gamma.grad).all()


def test_sharpening_an_all_zero_weighting_gives_no_nan():
    """Not reachable inside the NTM (w~ sums to 1), but a reader may try it."""
    w_tilde = torch.zeros(2, 4, dtype=F64, requires_grad=True)
    gamma = _col(3, 2).requires_grad_(True)
    w = sharpen(w_tilde, gamma)
    w.sum().backward()
    assert torch.isfinite(w).all() and torch.isfinite(w_tilde.grad).all()
    assert torch.isfinite(gamma.grad).all()


def test_gradcheck_address():
    """float64, N = 6, M = 3; softmax inputs keep w~ away from 0."""
    inputs = tuple(x.requires_grad_(True) for x in _random_head(2, 6, 3, seed=14))
    assert torch.autograd.gradcheck(address, inputs, eps=1e-6, atol=1e-7)


# --- head outputs (spec §4.5) ------------------------------------------------------------------


def test_head_outputs_split_and_activations():
    M, n_shifts = 3, 3
    xi = torch.arange(3 * M + 6, dtype=F64).view(1, -1) / 10 - 0.5
    head = head_outputs(xi, M, n_shifts, write=True)
    raw = xi[0].numpy()
    _close(head.k, [np.tanh(raw[0:3])], 1e-15)
    _close(head.beta, [np_softplus(raw[3:4])], 1e-15)
    _close(head.g, [np_sigmoid(raw[4:5])], 1e-15)
    _close(head.s, [np_softmax(raw[5:8])], 1e-15)
    _close(head.gamma, [1 + np_softplus(raw[8:9])], 1e-15)
    _close(head.erase, [np_sigmoid(raw[9:12])], 1e-15)
    _close(head.add, [np.tanh(raw[12:15])], 1e-15)
    read_head = head_outputs(xi[:, : M + 6], M, n_shifts, write=False)
    assert read_head.erase is None and read_head.add is None


# --- the cell: against a NumPy step, spec §1.1 -------------------------------------------------


def _small_cell(controller="lstm", n_read=2, n_write=2, seed=0, **options):
    torch.manual_seed(seed)
    cell = NTMCell(
        3, 2, N=7, M=4, controller=controller, d_ctrl=5, n_read=n_read, n_write=n_write, **options
    ).double()
    with torch.no_grad():  # give the zero-initialised h_0, c_0 values, so they are tested
        for name in ("h0", "c0"):
            if hasattr(cell, name):
                getattr(cell, name).copy_(0.5 * torch.randn(5, dtype=F64))
    return cell


def np_cell_steps(cell: NTMCell, x: np.ndarray) -> np.ndarray:
    """The NTM of spec §1.1 in NumPy from the cell's weights, for x (B, T, d_x): the logits."""
    p = {name: t.detach().numpy() for name, t in cell.named_parameters()}
    B, T, _ = x.shape
    N, M, R, W, S, clip = cell.N, cell.M, cell.n_read, cell.n_write, cell.shift, cell.clip
    n_shifts = 2 * S + 1
    lstm = cell.controller_kind == "lstm"
    h = np.tile(p["h0"], (B, 1)) if lstm else None
    c = np.tile(p["c0"], (B, 1)) if lstm else None
    reads = np.tile(np.tanh(p["read0_bias"]), (B, 1, 1))  # (B, R, M)
    w0 = np_softmax(p["w0_logits"])
    w_read, w_write = np.tile(w0[:R], (B, 1, 1)), np.tile(w0[R:], (B, 1, 1))
    memory = np.full((B, N, M), 1e-6)
    all_logits = []
    for t in range(T):
        inp = np.concatenate([x[:, t], reads.reshape(B, -1)], axis=1)
        if lstm:  # gates stacked (i, f, g, o), as in torch
            a = inp @ p["controller.weight_ih"].T + h @ p["controller.weight_hh"].T
            a = a + p["controller.bias_ih"] + p["controller.bias_hh"]
            ai, af, ag, ao = np.split(a, 4, axis=1)
            c = np_sigmoid(af) * c + np_sigmoid(ai) * np.tanh(ag)
            h = np_sigmoid(ao) * np.tanh(c)
        else:
            h = np.tanh(inp @ p["controller.weight"].T + p["controller.bias"])
        xi = np.clip(h @ p["interface.weight"].T + p["interface.bias"], -clip, clip)
        head_sizes = [M, 1, 1, n_shifts, 1] * R + [M, 1, 1, n_shifts, 1, M, M] * W
        parts = iter(np.split(xi, np.cumsum(head_sizes)[:-1], axis=1))  # spec §4.5 order
        heads = []
        for head in range(R + W):
            k, beta, g = np.tanh(next(parts)), np_softplus(next(parts)), np_sigmoid(next(parts))
            s, gamma = np_softmax(next(parts)), 1 + np_softplus(next(parts))
            e, a = (np_sigmoid(next(parts)), np.tanh(next(parts))) if head >= R else (None, None)
            heads.append((k, beta, g, s, gamma, e, a))
        new_w_read = np.stack(
            [np_address(memory, *heads[i][:5], w_read[:, i]) for i in range(R)], axis=1
        )
        reads = np.einsum("brn,bnm->brm", new_w_read, memory)  # read M_{t-1}
        new_w_write = np.stack(
            [np_address(memory, *heads[R + i][:5], w_write[:, i]) for i in range(W)], axis=1
        )
        memory = np_write(
            memory,
            [new_w_write[:, i] for i in range(W)],
            [heads[R + i][5] for i in range(W)],
            [heads[R + i][6] for i in range(W)],
        )
        w_read, w_write = new_w_read, new_w_write
        out = np.concatenate([h, reads.reshape(B, -1)], axis=1)
        all_logits.append(np.clip(out @ p["readout.weight"].T + p["readout.bias"], -clip, clip))
    return np.stack(all_logits, axis=1)


@pytest.mark.parametrize("controller", ["lstm", "ff"])
@pytest.mark.parametrize("scale", [1.0, 200.0], ids=["plain", "clipped"])
def test_ntm_matches_a_numpy_step_in_the_canonical_order(controller, scale):
    """Two read and two write heads; scale 200 drives xi and the logits into the clip."""
    cell = _small_cell(controller)
    with torch.no_grad():
        cell.interface.weight.mul_(scale)
        cell.readout.weight.mul_(scale)
    xi = []
    cell.interface.register_forward_hook(lambda module, args, out: xi.append(out.detach()))
    x = torch.rand(3, 4, 3, generator=torch.Generator().manual_seed(1), dtype=F64)
    logits, _, _ = _wrap(cell)(x)
    _close(logits, np_cell_steps(cell, x.numpy()), 1e-9)
    if scale > 1:  # both clips were active
        assert (torch.cat(xi).abs() > 20).any()
        assert (logits.abs() == 20).any()


def _wrap(cell: NTMCell) -> NTM:
    """An NTM around an existing cell."""
    model = NTM(cell.input_size, cell.output_size, N=cell.N, M=cell.M, d_ctrl=cell.d_ctrl)
    model.cell = cell
    return model


def test_ntm_loop_equals_stepping_the_cell():
    cell = _small_cell()
    model = _wrap(cell)
    x = torch.rand(2, 5, 3, dtype=F64)
    logits, final, internals = model(x, return_internals=True)
    state, expected = None, []
    for t in range(5):
        y, state, extras = cell(x[:, t], state, return_internals=True)
        expected.append(y)
        for name, value in extras.items():
            assert_close_ulps(internals[name][:, t], value, msg=f"{name} at t = {t}")
    assert_close_ulps(logits, torch.stack(expected, 1))
    assert_close_ulps(final.memory, state.memory)


def test_internals_shapes_and_meaning():
    cell = _small_cell(n_read=2, n_write=1)
    x = torch.rand(4, 6, 3, dtype=F64)
    logits, state, internals = _wrap(cell)(x, return_internals=True)
    assert logits.shape == (4, 6, 2)
    shapes = {name: tuple(v.shape) for name, v in internals.items()}
    assert shapes == {
        "w_read": (4, 6, 2, 7),
        "w_write": (4, 6, 1, 7),
        "erase": (4, 6, 1, 4),
        "add": (4, 6, 1, 4),
        "reads": (4, 6, 2, 4),
        **{f"{name}_read": (4, 6, 2, 1) for name in ("beta", "g", "gamma")},
        **{f"{name}_write": (4, 6, 1, 1) for name in ("beta", "g", "gamma")},
        "s_read": (4, 6, 2, 3),
        "s_write": (4, 6, 1, 3),
    }
    assert (internals["gamma_read"] >= 1).all() and (internals["beta_write"] >= 0).all()
    _close(internals["s_read"].sum(-1), torch.ones(4, 6, 2, 1)[..., 0], 1e-12, msg="s")
    for name in ("w_read", "w_write"):
        assert internals[name].min() >= 0
        _close(internals[name].sum(-1), torch.ones(internals[name].shape[:-1]), 1e-12, msg=name)
    assert 0 < internals["erase"].min() and internals["erase"].max() < 1
    assert internals["add"].abs().max() < 1
    _same(state.w_read, internals["w_read"][:, -1])
    assert _wrap(cell)(x)[2] is None


def test_fixed_head_parameters_replace_the_controllers_values():
    head = head_outputs(torch.randn(3, 4 + 6 + 8, dtype=F64), 4, 3, write=True)
    fixed = fix_head_parameters(head, {"gamma": torch.ones(1), "s": torch.tensor([0.0, 1, 0])})
    _same(fixed.gamma, torch.ones(3, 1, dtype=F64))
    _same(fixed.s, torch.tensor([[0.0, 1, 0]] * 3, dtype=F64))
    _same(fixed.k, head.k)
    unchanged = fix_head_parameters(head, {})
    assert all(a is b for a, b in zip(unchanged, head, strict=True))


@pytest.mark.parametrize(
    ("overrides", "write", "match"),
    [
        ({"gama": 1.0}, True, "cannot fix 'gama'"),
        ({"erase": 0.0}, False, "read head has no 'erase'"),
        ({"s": torch.ones(2)}, True, "last size 1 or 3"),
    ],
)
def test_fixed_head_parameters_reject_bad_overrides(overrides, write, match):
    head = head_outputs(torch.randn(2, 4 + 6 + 8 * write), 4, 3, write=write)
    with pytest.raises(ValueError, match=match):
        fix_head_parameters(head, overrides)


def test_no_erase_and_no_add_leave_the_memory_as_it_was():
    cell = _small_cell(n_read=1, n_write=2)
    x = torch.rand(2, 5, 3, dtype=F64)
    start = cell.initial_state(2, dtype=F64)
    cell.write_overrides = {"erase": torch.zeros(1), "add": torch.zeros(1)}
    _, state, _ = _wrap(cell)(x, start)
    _same(state.memory, start.memory)
    cell.write_overrides = {}
    assert not torch.equal(_wrap(cell)(x, start)[1].memory, start.memory)


def test_reads_use_the_memory_before_the_write():
    cell = _small_cell(n_read=1, n_write=1)
    x = torch.rand(2, 3, dtype=F64)
    state = cell.initial_state(2)
    state = state._replace(memory=torch.randn(2, 7, 4, dtype=F64))
    _, new_state, extras = cell(x, state, return_internals=True)
    w_read = extras["w_read"][:, 0].detach().numpy()
    expected = np.einsum("bn,bnm->bm", w_read, state.memory.numpy())
    _close(extras["reads"][:, 0], expected, 1e-14)
    assert not torch.allclose(new_state.memory, state.memory)


# --- initial state, the symmetry trap (spec §5.3) ----------------------------------------------


def test_initial_state_of_recipe_B():
    torch.manual_seed(0)
    cell = NTMCell(9, 8)
    state = cell.initial_state(3)
    _same(state.memory, torch.full((3, 128, 20), 1e-6))
    h, c = state.controller
    _same(h, torch.zeros(3, 100))
    _same(c, torch.zeros(3, 100))
    logits = cell.w0_logits.detach()
    assert logits.abs().max() <= 0.2 and logits.std() > 0.05  # U(-0.2, 0.2), not constant
    w0 = torch.softmax(logits, -1)
    _same(state.w_read[0], w0[:1])
    _same(state.w_write[1], w0[1:])
    assert state.reads.abs().max() <= math.tanh(0.2)
    assert "memory0" not in cell.state_dict()  # a constant, not a parameter
    _same(cell.double().initial_state(1).memory, torch.full((1, 128, 20), 1e-6, dtype=F64))


def _random_steps(cell: NTMCell, steps: int = 5, seed: int = 0) -> NTMState:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 2, (2, steps, cell.input_size), generator=g).to(F64)
    return _wrap(cell)(x)[1]


def _row_spread(memory: torch.Tensor) -> float:
    """The largest difference between any row and row 0."""
    return float((memory - memory[:, :1]).abs().max().detach())


def test_symmetry_trap_constant_memory_and_uniform_weightings_keep_rows_equal():
    """Spec §5.3: with every row equal and every w_0 uniform, all weightings stay uniform,
    every write touches every row alike, and the rows never differ."""
    cell = _small_cell(n_read=1, n_write=1)
    with torch.no_grad():
        cell.w0_logits.zero_()
    state = _random_steps(cell)
    assert _row_spread(state.memory) < 1e-12
    assert (state.memory - 1e-6).abs().max() > 1e-3  # the memory was written to


def test_random_initial_weightings_break_the_symmetry():
    cell = _small_cell(n_read=1, n_write=1)
    assert _row_spread(_random_steps(cell).memory) > 1e-6


def test_symmetric_memory_gets_symmetric_gradients():
    """The trap holds for training too: no parameter's gradient can tell the rows apart,
    so the rows' update is the same; here, the gradient wrt the (shared) initial memory."""
    cell = _small_cell(n_read=1, n_write=1)
    with torch.no_grad():
        cell.w0_logits.zero_()
    state = cell.initial_state(2)
    memory0 = state.memory.clone().requires_grad_(True)
    state = state._replace(memory=memory0)
    x = torch.rand(2, 4, 3, dtype=F64)
    logits, _, _ = _wrap(cell)(x, state)
    logits.pow(2).sum().backward()
    assert _row_spread(memory0.grad) < 1e-12


# --- parameter counts, options, gradients, devices --------------------------------------------


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_copy_configuration_has_the_planned_63136_parameters():
    """N = 128, M = 20, LSTM 100, one read and one write head, 9 inputs, 8 outputs."""
    model = NTM(9, 8)
    lstm = 4 * 100 * (9 + 20 + 100) + 2 * 4 * 100  # torch's two bias vectors
    heads = (100 + 1) * ((20 + 6) + (20 + 6 + 2 * 20))  # W_xi, b_xi: 26 + 66 outputs
    readout = (100 + 20 + 1) * 8
    initial = 2 * 100 + 20 + 2 * 128  # h_0, c_0, r_0 bias, w_0 logits
    assert lstm + heads + readout + initial == 63_136
    assert _count(model) == 63_136


def test_other_configurations_count():
    assert _count(NTM(9, 8, controller="ff")) == (29 + 1) * 100 + 9292 + 968 + 20 + 256
    assert _count(NTM(9, 8, mem_init="learned")) == 63_136 + 128 * 20
    assert _count(NTM(9, 8, mem_init="random")) == 63_136


def test_memory_initialisations():
    torch.manual_seed(0)
    learned = NTMCell(2, 1, N=16, M=4, mem_init="learned")
    bound = math.tanh(math.sqrt(6 / (1 + 16 * 4)))
    m = learned.initial_state(2).memory
    assert m.abs().max() <= bound and m.std() > 0
    random = NTMCell(2, 1, N=16, M=4, mem_init="random")
    first, second = random.initial_state(1).memory, random.initial_state(1).memory
    _same(first, second)  # drawn once, then fixed
    assert 0.2 < float(first.std()) < 0.6  # tanh of N(0, 0.5^2)
    assert "memory0" in random.state_dict()


def test_gradients_reach_every_parameter():
    cell = _small_cell(n_read=1, n_write=1, mem_init="learned")
    x = torch.rand(2, 6, 3, dtype=F64)
    logits, _, _ = _wrap(cell)(x)
    logits.pow(2).sum().backward()
    for name, p in cell.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().max() > 0, name


def test_zero_memory_cell_has_finite_gradients():
    cell = _small_cell(n_read=1, n_write=1)
    state = cell.initial_state(2)._replace(memory=torch.zeros(2, 7, 4, dtype=F64))
    logits, _, _ = _wrap(cell)(torch.zeros(2, 3, 3, dtype=F64), state)
    logits.sum().backward()
    for name, p in cell.named_parameters():
        assert torch.isfinite(p.grad).all(), name


def test_no_shift_and_feed_forward_options_run():
    cell = _small_cell(controller="ff", n_read=1, n_write=1, shift=0)
    logits, state, _ = _wrap(cell)(torch.rand(2, 3, 3, dtype=F64))
    assert state.controller == () and torch.isfinite(logits).all()


def test_everything_stays_on_the_input_device_and_dtype():
    """On the meta device a CPU tensor made inside forward would raise."""
    model = NTM(9, 8, N=16, M=4, d_ctrl=8).to("meta")
    logits, state, internals = model(torch.empty(2, 5, 9, device="meta"), return_internals=True)
    assert logits.device.type == "meta" and state.memory.device.type == "meta"
    model = NTM(9, 8, N=16, M=4, d_ctrl=8).double()
    logits, state, _ = model(torch.rand(2, 3, 9, dtype=F64))
    assert logits.dtype == F64 and state.memory.dtype == F64


def test_same_seed_same_model():
    torch.manual_seed(3)
    first = NTM(9, 8, N=16, M=4, d_ctrl=8, mem_init="random")
    torch.manual_seed(3)
    second = NTM(9, 8, N=16, M=4, d_ctrl=8, mem_init="random")
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        _same(a, b, msg=name)


def test_extra_repr_names_the_options():
    text = repr(NTMCell(9, 8, controller="ff", mem_init="learned"))
    for part in ("d_x=9", "d_y=8", "N=128", "M=20", "controller='ff'", "mem_init='learned'"):
        assert part in text, part


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"d_x": 0}, "d_x must be a positive integer, got 0"),
        ({"N": 2.0}, "N must be a positive integer, got 2.0"),
        ({"n_write": 0}, "n_write must be a positive integer, got 0"),
        ({"controller": "gru"}, r"controller must be one of \('lstm', 'ff'\), got 'gru'"),
        ({"mem_init": "zeros"}, r"mem_init must be one of \('constant', 'learned', 'random'\)"),
        ({"shift": -1}, "shift must be a non-negative integer, got -1"),
        ({"shift": True}, "shift must be a non-negative integer, got True"),
        ({"N": 4, "shift": 2}, r"the 2 \* shift \+ 1 = 5 shifts must fit in N = 4 rows"),
        ({"clip": 0}, "clip must be a positive finite number, got 0"),
        ({"clip": math.inf}, "clip must be a positive finite number, got inf"),
    ],
    ids=str,
)
def test_cell_rejects_bad_arguments(kwargs, match):
    args = {"d_x": 9, "d_y": 8} | kwargs
    with pytest.raises(ValueError, match=match):
        NTMCell(**args)


def test_cell_rejects_bad_steps():
    cell = _small_cell(n_read=1, n_write=1)
    with pytest.raises(ValueError, match=r"x_t must have the input size d_x = 3 in dimension 1"):
        cell(torch.zeros(2, 4, dtype=F64))
    with pytest.raises(ValueError, match=r"x_t must have 2 dimensions, got shape \(3,\)"):
        cell(torch.zeros(3, dtype=F64))
    with pytest.raises(TypeError, match="state must be an NTMState, got tuple"):
        cell(torch.zeros(2, 3, dtype=F64), tuple(cell.initial_state(2)))
    state = cell.initial_state(2)
    with pytest.raises(ValueError, match=r"state.memory must have shape \(B, N, M\) = \(2, 7, 4\)"):
        cell(torch.zeros(2, 3, dtype=F64), state._replace(memory=torch.zeros(2, 7, 5, dtype=F64)))
    with pytest.raises(ValueError, match=r"state.w_read must have shape \(B, R, N\) = \(2, 1, 7\)"):
        cell(torch.zeros(2, 3, dtype=F64), state._replace(w_read=torch.zeros(2, 2, 7, dtype=F64)))
    with pytest.raises(
        ValueError, match=r"each controller state must have shape \(B, d_ctrl\) = \(3, 5\)"
    ):
        cell(torch.zeros(3, 3, dtype=F64), state)
    with pytest.raises(ValueError, match="state.controller must be a tuple of 2 tensors"):
        cell(torch.zeros(2, 3, dtype=F64), state._replace(controller=()))


def test_ntm_rejects_bad_sequences():
    model = NTM(3, 2, N=8, M=4, d_ctrl=5)
    with pytest.raises(ValueError, match=r"x must have 3 dimensions, got shape \(2, 3\)"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"at least one time step, got shape \(2, 0, 3\)"):
        model(torch.zeros(2, 0, 3))
    with pytest.raises(ValueError, match="x must have the input size d_x = 3 in dimension 2"):
        model(torch.zeros(2, 4, 5))


def _bad_calls():
    mem, w, k = torch.zeros(2, 5, 3), torch.full((2, 5), 0.2), torch.zeros(2, 3)
    one, s = torch.ones(2, 1), torch.full((2, 3), 1 / 3)
    return [
        ("read 2-D memory", lambda: read(mem[0], w), ValueError, r"memory must have 3 dimensions"),
        (
            "read N",
            lambda: read(mem, w[:, :4]),
            ValueError,
            r"w must have shape \(B, N\) = \(2, 5\), got \(2, 4\)",
        ),
        (
            "read ints",
            lambda: read(mem, w.long()),
            TypeError,
            "w must be a floating-point tensor, got torch.int64",
        ),
        (
            "read list",
            lambda: read(mem, [0.2] * 5),
            TypeError,
            "w must be a torch.Tensor, got list",
        ),
        (
            "empty memory",
            lambda: read(torch.zeros(2, 0, 3), w),
            ValueError,
            "memory must have B, N, M >= 1",
        ),
        (
            "write erase M",
            lambda: write(mem, w, torch.zeros(2, 4), k),
            ValueError,
            r"erase must have shape \(B, M\) = \(2, 3\), got \(2, 4\)",
        ),
        (
            "write heads",
            lambda: write(mem, w[:, None], torch.zeros(2, 2, 3), torch.zeros(2, 2, 3)),
            ValueError,
            r"erase must have shape \(B, H, M\) = \(2, 1, 3\)",
        ),
        (
            "write 4-D w",
            lambda: write(mem, w[:, None, None], k, k),
            ValueError,
            "w must have 2 or 3 dimensions",
        ),
        (
            "key M",
            lambda: content_weighting(mem, torch.zeros(2, 4), one),
            ValueError,
            r"k must have shape \(B, M\) = \(2, 3\), got \(2, 4\)",
        ),
        (
            "beta (B,)",
            lambda: content_weighting(mem, k, torch.ones(2)),
            ValueError,
            r"beta must have 2 dimensions, got shape \(2,\)",
        ),
        (
            "g batch",
            lambda: interpolate(w, w, torch.ones(3, 1)),
            ValueError,
            r"g must have shape \(B, 1\) = \(2, 1\), got \(3, 1\)",
        ),
        (
            "w_prev N",
            lambda: interpolate(w, w[:, :4], one),
            ValueError,
            r"w_prev must have shape \(B, N\) = \(2, 5\)",
        ),
        (
            "even shifts",
            lambda: shift(w, torch.full((2, 2), 0.5)),
            ValueError,
            r"odd number of shifts, got \(2, 2\)",
        ),
        (
            "too many shifts",
            lambda: shift(w, torch.full((2, 7), 1 / 7)),
            ValueError,
            "the 7 shifts of s must fit in the N = 5 rows",
        ),
        (
            "gamma",
            lambda: sharpen(w, torch.ones(2, 2)),
            ValueError,
            r"gamma must have shape \(B, 1\) = \(2, 1\), got \(2, 2\)",
        ),
        (
            "address w_prev",
            lambda: address(mem, k, one, one, s, one, w[:1]),
            ValueError,
            r"w_prev must have shape \(B, N\) = \(2, 5\), got \(1, 5\)",
        ),
    ]


@pytest.mark.parametrize(
    "call, error, match", [c[1:] for c in _bad_calls()], ids=[c[0] for c in _bad_calls()]
)
def test_functions_reject_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- the copy task's loss and metrics (spec §5.2) -----------------------------------------------


def _copy_logits(y: torch.Tensor, answer: torch.Tensor) -> torch.Tensor:
    """Logits for all 2L+1 steps: junk (large values) on steps 0..L, ``answer`` after them."""
    B, L, width = y.shape
    logits = torch.full((B, 2 * L + 1, width), 7.0, dtype=answer.dtype)
    logits[:, L + 1 :] = answer
    return logits


def test_copy_loss_is_summed_bce_over_the_answer_in_nats_and_bits():
    from rnnbook.models.ntm import bits_per_sequence, copy_loss

    y = torch.tensor([[[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]], [[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]])
    # zero logits: every one of the 6 answer bits of each sequence costs ln 2, i.e. 1 bit
    loss = copy_loss(_copy_logits(y, torch.zeros(2, 3, 2)), y)
    _close(loss, math.log(2) * 6, 1e-6)
    _close(bits_per_sequence(loss), 6.0, 1e-6)
    assert bits_per_sequence(math.log(2) * 84) == pytest.approx(84.0)  # guessing, mean L = 10.5
    # one logit 2 on a target 1, everything else 0: -log(sigmoid(2)) replaces one ln 2
    answer = torch.zeros(2, 3, 2)
    answer[0, 0, 0] = 2.0
    expected = (12 * math.log(2) - math.log(2) + math.log1p(math.exp(-2.0))) / 2
    _close(copy_loss(_copy_logits(y, answer), y), expected, 1e-6)
    # the steps 0..L (the 7.0 junk) get no loss: a perfect answer costs nearly nothing
    assert float(copy_loss(_copy_logits(y, 40 * y - 20), y)) < 1e-7


def test_bit_errors_per_sequence_counts_wrong_thresholded_bits():
    from rnnbook.models.ntm import bit_errors_per_sequence

    y = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [0.0, 0.0]]])
    perfect = 2 * y - 1  # logit > 0 exactly where the target is 1
    assert bit_errors_per_sequence(_copy_logits(y, perfect), y) == 0.0
    # 3 wrong bits in sequence 0, 1 in sequence 1: 2 per sequence
    wrong = perfect.clone()
    wrong[0, 0, 0], wrong[0, 1, 0], wrong[0, 1, 1], wrong[1, 1, 1] = -1.0, 1.0, -1.0, 1.0
    assert bit_errors_per_sequence(_copy_logits(y, wrong), y) == 2.0
    assert bit_errors_per_sequence(_copy_logits(y, -perfect), y) == 4.0  # all 4 bits wrong


def test_copy_metrics_reject_logits_of_the_wrong_length():
    from rnnbook.models.ntm import bit_errors_per_sequence, copy_loss

    y = torch.zeros(2, 3, 8)
    for fn in (copy_loss, bit_errors_per_sequence):
        with pytest.raises(ValueError, match=r"logits must have shape \(B, 2L\+1, width\)"):
            fn(torch.zeros(2, 6, 8), y)
