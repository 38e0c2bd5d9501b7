"""rnnbook.diagnostics: Jacobian products (R10) and the bound (R11), spec test 4."""

from __future__ import annotations

import pytest
import torch

from rnnbook.diagnostics import jacobian_norms, jacobian_norms_autograd, step_jacobians
from rnnbook.models.srn import SRNCell
from rnnbook.testing import assert_close_ulps

B, T, D_X, D_H = 2, 40, 3, 6


def _orthogonal(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))  # a Haar-random orthogonal matrix


def _cell(nonlinearity: str = "tanh", scale: float = 0.9) -> SRNCell:
    torch.manual_seed(0)
    cell = SRNCell(D_X, D_H, nonlinearity=nonlinearity).double()
    with torch.no_grad():
        cell.weight_hh.copy_(scale * _orthogonal(D_H, seed=1))  # W_hh = 0.9 Q
    return cell


def _inputs(seed: int = 2):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, D_X, generator=g, dtype=torch.float64)
    h0 = 0.5 * torch.randn(B, D_H, generator=g, dtype=torch.float64)
    return x, h0


def test_spectral_norm_of_the_test_matrix_is_0_9():
    s = torch.linalg.svdvals(_cell().weight_hh.detach())
    torch.testing.assert_close(s, torch.full((D_H,), 0.9, dtype=torch.float64), rtol=0, atol=1e-12)


@pytest.mark.parametrize("use_h0", [True, False])
def test_jacobian_norms_obey_the_bound(use_h0):
    """(R11) with gamma = 1: ||dh_T/dh_k|| <= 0.9^(T-k)."""
    x, h0 = _inputs()
    norms = jacobian_norms(_cell(), x, h0 if use_h0 else None)
    assert norms.shape == (B, T)
    bound = 0.9 ** (T - torch.arange(T, dtype=torch.float64))  # entry k is lag T - k
    assert bool((norms <= bound * (1 + 1e-9)).all())
    assert bool((norms > 0).all())


def test_bound_is_tight_for_a_linear_regime():
    """With tiny inputs and h0 = 0 the tanh stays linear, so ||dh_T/dh_k|| ~ 0.9^(T-k)."""
    x = 1e-9 * _inputs()[0]
    cell = _cell()
    with torch.no_grad():
        cell.bias_ih.zero_()
        cell.bias_hh.zero_()
    norms = jacobian_norms(cell, x)
    bound = 0.9 ** (T - torch.arange(T, dtype=torch.float64))
    torch.testing.assert_close(norms, bound.expand(B, T), rtol=1e-9, atol=0)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_explicit_product_equals_autograd(nonlinearity):
    x, h0 = _inputs()
    cell = _cell(nonlinearity)
    explicit = jacobian_norms(cell, x, h0)
    by_autograd = jacobian_norms_autograd(cell, x, h0)
    torch.testing.assert_close(explicit, by_autograd, rtol=0, atol=1e-8)  # spec: to 1e-8
    torch.testing.assert_close(explicit, by_autograd, rtol=1e-9, atol=1e-300)  # and relatively


def test_explicit_product_equals_autograd_for_exploding_weights():
    x, h0 = _inputs()
    cell = _cell(scale=1.5)
    explicit = jacobian_norms(cell, x, h0)
    torch.testing.assert_close(explicit, jacobian_norms_autograd(cell, x, h0), rtol=1e-9, atol=0)


def test_step_jacobians_shape_and_values():
    x, h0 = _inputs()
    cell = _cell()
    jac = step_jacobians(cell, x, h0)
    assert jac.shape == (B, T, D_H, D_H)
    # The first step by hand: diag(1 - tanh(a_1)^2) W_hh.
    a1 = cell.pre_activation(x[:, 0], h0).detach()
    want = torch.diag_embed(1 - torch.tanh(a1) ** 2) @ cell.weight_hh.detach()
    torch.testing.assert_close(jac[:, 0], want, rtol=0, atol=1e-14)


def test_step_jacobians_of_relu_zero_the_rows_of_inactive_units():
    x, h0 = _inputs()
    cell = _cell("relu")
    jac = step_jacobians(cell, x, h0)
    h = h0
    for t in range(T):
        a = cell.pre_activation(x[:, t], h).detach()
        inactive = a <= 0  # (B, d_h)
        assert bool((jac[:, t][inactive] == 0).all())
        torch.testing.assert_close(
            jac[:, t][~inactive], cell.weight_hh.detach().expand(B, -1, -1)[~inactive]
        )
        h = torch.relu(a)


def test_lag_one_norm_is_the_last_step_jacobians_norm():
    x, h0 = _inputs()
    cell = _cell()
    last = torch.linalg.matrix_norm(step_jacobians(cell, x, h0)[:, -1], ord=2)
    assert_close_ulps(jacobian_norms(cell, x, h0)[:, -1], last)


def test_diagnostics_leave_no_gradients_behind():
    x, h0 = _inputs()
    cell = _cell()
    jacobian_norms(cell, x, h0)
    assert all(p.grad is None for p in cell.parameters())


def test_wrong_input_size_is_rejected():
    with pytest.raises(ValueError, match="input size d_x = 3"):
        jacobian_norms(_cell(), torch.zeros(B, T, 4, dtype=torch.float64))


# --- input_jacobian_norms: ||dh_T/dx_k||_F for any cell --------------------------------------

from rnnbook.diagnostics import input_jacobian_norms  # noqa: E402
from rnnbook.models.gru import GRUCell  # noqa: E402
from rnnbook.models.lstm import DCMCell, LSTMCell  # noqa: E402

IB, IT, ID_X, ID_H = 2, 5, 3, 4  # small: the brute force builds the full Jacobian

CELLS = {
    "srn-tanh": lambda: SRNCell(ID_X, ID_H),
    "srn-relu": lambda: SRNCell(ID_X, ID_H, nonlinearity="relu"),
    "lstm": lambda: LSTMCell(ID_X, ID_H),
    "lstm-peephole": lambda: LSTMCell(ID_X, ID_H, peephole=True),
    "gru-torch": lambda: GRUCell(ID_X, ID_H),
    "gru-seed": lambda: GRUCell(ID_X, ID_H, variant="seed"),
    "dcm": lambda: DCMCell(ID_X, ID_H),
}


def _random_cell(kind: str, seed: int = 3):
    """A float64 cell with every parameter (peepholes and gate-to-gate weights too) random."""
    cell = CELLS[kind]().double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in cell.parameters():
            p.copy_(0.7 * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return cell


def _input_and_state(cell, seed: int = 4):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(IB, IT, ID_X, generator=g, dtype=torch.float64)
    parts = cell.initial_state(1)
    n_parts = len(parts) if isinstance(parts, tuple) else 1
    state = tuple(
        0.5 * torch.randn(IB, ID_H, generator=g, dtype=torch.float64) for _ in range(n_parts)
    )
    return x, state if isinstance(parts, tuple) else state[0]


def _last_hidden(cell, x, state):
    """h_T by calling the cell step by step (not through unroll)."""
    if state is None:
        state = cell.initial_state(x.shape[0], dtype=x.dtype)
    for t in range(x.shape[1]):
        state = cell(x[:, t], state)
    return state[0] if isinstance(state, tuple) else state


def _brute_force_norms(cell, x, state):
    """Frobenius norms of the blocks dh_T[b]/dx[b, k] of the full autograd Jacobian."""
    jac = torch.autograd.functional.jacobian(lambda x: _last_hidden(cell, x, state), x)
    B, T = x.shape[:2]  # jac: (B, H, B, T, d_x)
    blocks = torch.stack([jac[b, :, b] for b in range(B)])  # (B, H, T, d_x)
    return blocks.pow(2).sum(dim=(1, 3)).sqrt()  # (B, T)


@pytest.mark.parametrize("kind", CELLS)
def test_input_jacobian_norms_shape_and_dtype(kind):
    cell = _random_cell(kind)
    x, _ = _input_and_state(cell)
    norms = input_jacobian_norms(cell, x)
    assert norms.shape == (IB, IT)
    assert norms.dtype == torch.float64
    assert not norms.requires_grad
    assert bool((norms >= 0).all()) and bool(torch.isfinite(norms).all())


@pytest.mark.parametrize("use_state", [False, True], ids=["zero-state", "given-state"])
@pytest.mark.parametrize("kind", CELLS)
def test_input_jacobian_norms_equal_the_brute_force_jacobian(kind, use_state):
    cell = _random_cell(kind)
    x, state = _input_and_state(cell)
    state = state if use_state else None
    got = input_jacobian_norms(cell, x, state)
    torch.testing.assert_close(got, _brute_force_norms(cell, x, state), rtol=1e-10, atol=1e-13)


def test_input_jacobian_norms_depend_on_the_given_state():
    cell = _random_cell("lstm")
    x, state = _input_and_state(cell)
    assert not torch.allclose(input_jacobian_norms(cell, x, state), input_jacobian_norms(cell, x))


def test_input_jacobian_norms_of_a_linear_srn_are_analytic():
    """ReLU with positive weights, inputs and biases never leaves its linear part, so
    dh_T/dx_k = W_hh^(T-k) W_xh exactly. With W_hh = diag(0.5, 0.9) and rows of W_xh of
    squared norms 5 and 10: ||dh_T/dx_k||_F^2 = 5 * 0.25^(T-k) + 10 * 0.81^(T-k)."""
    cell = SRNCell(2, 2, nonlinearity="relu").double()
    with torch.no_grad():
        cell.weight_ih.copy_(torch.tensor([[1.0, 2.0], [3.0, 1.0]], dtype=torch.float64))
        cell.weight_hh.copy_(torch.diag(torch.tensor([0.5, 0.9], dtype=torch.float64)))
        cell.bias_ih.fill_(0.1)
        cell.bias_hh.fill_(0.05)
    T = 8
    g = torch.Generator().manual_seed(5)
    x = 0.5 + 0.5 * torch.rand(3, T, 2, generator=g, dtype=torch.float64)  # in [0.5, 1]
    lag = T - torch.arange(1, T + 1, dtype=torch.float64)  # entry k - 1 has lag T - k
    want = (5 * 0.25**lag + 10 * 0.81**lag).sqrt()
    got = input_jacobian_norms(cell, x)
    torch.testing.assert_close(got, want.expand(3, T), rtol=1e-13, atol=0)
    assert got[0, -1].item() == pytest.approx(15**0.5, rel=1e-14)  # lag 0: ||W_xh||_F


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_last_input_jacobian_norm_of_an_srn(nonlinearity):
    """k = T: dh_T/dx_T = diag(phi'(a_T)) W_xh."""
    torch.manual_seed(0)
    cell = SRNCell(ID_X, ID_H, nonlinearity=nonlinearity).double()
    x, h0 = _input_and_state(cell)
    with torch.no_grad():
        h = h0
        for t in range(IT):
            a = cell.pre_activation(x[:, t], h)
            h = cell(x[:, t], h)
    slope = 1 - torch.tanh(a) ** 2 if nonlinearity == "tanh" else (a > 0).double()
    want = torch.linalg.matrix_norm(slope.unsqueeze(-1) * cell.weight_ih.detach())  # Frobenius
    got = input_jacobian_norms(cell, x, h0)[:, -1]
    torch.testing.assert_close(got, want, rtol=1e-12, atol=0)


def test_input_jacobian_norms_reject_the_wrong_input_size():
    cell = _random_cell("gru-torch")
    x = torch.zeros(IB, IT, ID_X + 1, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"x must have the input size d_x = 3 in dimension 2"):
        input_jacobian_norms(cell, x)


@pytest.mark.parametrize("shape", [(IT, ID_X), (1, IB, IT, ID_X)], ids=["2-D", "4-D"])
def test_input_jacobian_norms_reject_the_wrong_ndim(shape):
    with pytest.raises(ValueError, match="x must have 3 dimensions, got shape"):
        input_jacobian_norms(_random_cell("lstm"), torch.zeros(shape, dtype=torch.float64))


def test_input_jacobian_norms_reject_a_non_tensor():
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        input_jacobian_norms(_random_cell("srn-tanh"), [[[0.0] * ID_X]])


def test_input_jacobian_norms_reject_an_empty_sequence():
    x = torch.zeros(IB, 0, ID_X, dtype=torch.float64)
    with pytest.raises(ValueError, match="at least one time step"):
        input_jacobian_norms(_random_cell("srn-tanh"), x)


def test_input_jacobian_norms_reject_a_state_of_the_wrong_form():
    cell = _random_cell("lstm")
    x, (h0, _) = _input_and_state(cell)
    with pytest.raises(ValueError, match="LSTMCell needs its state as a tuple of 2 tensors"):
        input_jacobian_norms(cell, x, h0)


@pytest.mark.parametrize("kind", ["srn-tanh", "lstm", "gru-torch"])
def test_input_jacobian_norms_leave_no_gradients_behind(kind):
    cell = _random_cell(kind)
    x, state = _input_and_state(cell)
    before = {name: p.detach().clone() for name, p in cell.named_parameters()}
    input_jacobian_norms(cell, x, state)
    assert all(p.grad is None for p in cell.parameters())
    assert all(torch.equal(p, before[name]) for name, p in cell.named_parameters())


@pytest.mark.parametrize("requires_grad", [False, True])
def test_input_jacobian_norms_leave_x_as_it_was(requires_grad):
    cell = _random_cell("gru-torch")
    x, _ = _input_and_state(cell)
    x.requires_grad_(requires_grad)
    copy = x.detach().clone()
    input_jacobian_norms(cell, x)
    assert x.requires_grad is requires_grad
    assert x.grad is None
    assert torch.equal(x.detach(), copy)


def test_input_jacobian_norms_work_under_no_grad_and_for_frozen_cells():
    cell = _random_cell("lstm")
    x, state = _input_and_state(cell)
    want = input_jacobian_norms(cell, x, state)
    with torch.no_grad():
        torch.testing.assert_close(input_jacobian_norms(cell, x, state), want, rtol=0, atol=0)
    cell.requires_grad_(False)
    torch.testing.assert_close(input_jacobian_norms(cell, x, state), want, rtol=0, atol=0)
