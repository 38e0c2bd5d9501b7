"""How gradients travel back in time: the norms of ``dh_T/dh_k``, (rnn-R10)-(rnn-R11)."""

from __future__ import annotations

import torch

from rnnbook._validate import check_size, check_tensor
from rnnbook.models.recurrent import unroll


def _states(cell, x: torch.Tensor, h0: torch.Tensor | None):
    check_tensor(x, "x", ndim=3)
    check_size(x, "x", 2, cell.input_size, "the input size d_x")
    B, T, _ = x.shape
    h = cell.initial_state(B, dtype=x.dtype, device=x.device) if h0 is None else h0
    pre, hidden = [], [h]
    for t in range(T):
        pre.append(cell.pre_activation(x[:, t], hidden[-1]))
        hidden.append(cell(x[:, t], hidden[-1]))
    return pre, hidden


def step_jacobians(cell, x: torch.Tensor, h0: torch.Tensor | None = None) -> torch.Tensor:
    """The one-step Jacobians ``dh_t/dh_{t-1} = diag(phi'(a_t)) W_hh`` for t = 1..T.

    Returns (B, T, d_h, d_h). Works for :class:`rnnbook.models.srn.SRNCell`.
    """
    with torch.no_grad():
        pre, hidden = _states(cell, x, h0)
    W = cell.weight_hh.detach()
    jac = []
    for a, h in zip(pre, hidden[1:]):
        slope = 1 - h**2 if cell.nonlinearity == "tanh" else (a > 0).to(a.dtype)  # phi'(a_t)
        jac.append(slope.unsqueeze(-1) * W)  # diag(phi'(a_t)) W_hh   (B, d_h, d_h)
    return torch.stack(jac, dim=1)


def jacobian_norms(cell, x: torch.Tensor, h0: torch.Tensor | None = None) -> torch.Tensor:
    """Spectral norms ``||dh_T/dh_k||_2`` for k = 0..T-1, built from the product (rnn-R10).

    Returns (B, T); entry ``k`` belongs to the time lag ``T - k``.
    """
    jac = step_jacobians(cell, x, h0)  # (B, T, d_h, d_h)
    B, T, d_h, _ = jac.shape
    product = torch.eye(d_h, dtype=jac.dtype, device=jac.device).expand(B, d_h, d_h)
    norms = torch.empty(B, T, dtype=jac.dtype, device=jac.device)
    for k in reversed(range(T)):
        product = product @ jac[:, k]  # dh_T/dh_k = (dh_T/dh_{k+1}) (dh_{k+1}/dh_k)
        norms[:, k] = torch.linalg.matrix_norm(product, ord=2)
    return norms


def jacobian_norms_autograd(cell, x: torch.Tensor, h0: torch.Tensor | None = None) -> torch.Tensor:
    """The same norms as :func:`jacobian_norms`, from autograd (one backward pass per unit)."""
    check_tensor(x, "x", ndim=3)
    B, T, _ = x.shape
    h = cell.initial_state(B, dtype=x.dtype, device=x.device) if h0 is None else h0
    states = []
    with torch.enable_grad():
        for t in range(T):
            h = h.detach().requires_grad_(True) if t == 0 else h
            states.append(h)
            h = cell(x[:, t], h)
        rows = []
        for unit in range(h.shape[-1]):
            grads = torch.autograd.grad(h[:, unit].sum(), states, retain_graph=True)
            rows.append(torch.stack(grads, dim=1))  # (B, T, d_h): row `unit` of each dh_T/dh_k
    jac = torch.stack(rows, dim=2)  # (B, T, d_h, d_h)
    return torch.linalg.matrix_norm(jac, ord=2)


def input_jacobian_norms(cell, x: torch.Tensor, state=None) -> torch.Tensor:
    """Frobenius norms ``||dh_T/dx_k||`` for k = 1..T, by autograd, for any cell.

    How strongly the last hidden state still depends on each input: the quantity that decides
    whether a loss at step T can teach the network anything about ``x_k``. Works for every
    cell with ``project_inputs``/``step`` (SRN, LSTM, GRU, DCM). One backward pass per hidden
    unit. Returns (B, T); entry ``k - 1`` belongs to the lag ``T - k``.
    """
    check_tensor(x, "x", ndim=3)
    check_size(x, "x", 2, cell.input_size, "the input size d_x")
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        h, _ = unroll(cell, x, state)
        h_T = h[:, -1]  # (B, H)
        squared = torch.zeros(x.shape[:2], dtype=x.dtype, device=x.device)
        for unit in range(h_T.shape[-1]):
            (grad,) = torch.autograd.grad(h_T[:, unit].sum(), x, retain_graph=True)
            squared += grad.pow(2).sum(-1)  # row `unit` of every dh_T/dx_k, (B, T)
    return squared.sqrt()
