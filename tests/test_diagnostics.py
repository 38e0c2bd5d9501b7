"""rnnbook.diagnostics: Jacobian products (R10) and the bound (R11), spec test 4."""

from __future__ import annotations

import pytest
import torch

from rnnbook.diagnostics import jacobian_norms, jacobian_norms_autograd, step_jacobians
from rnnbook.models.srn import SRNCell

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
    torch.testing.assert_close(jacobian_norms(cell, x, h0)[:, -1], last, rtol=0, atol=0)


def test_diagnostics_leave_no_gradients_behind():
    x, h0 = _inputs()
    cell = _cell()
    jacobian_norms(cell, x, h0)
    assert all(p.grad is None for p in cell.parameters())


def test_wrong_input_size_is_rejected():
    with pytest.raises(ValueError, match="input size d_x = 3"):
        jacobian_norms(_cell(), torch.zeros(B, T, 4, dtype=torch.float64))
