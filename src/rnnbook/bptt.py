"""Backpropagation through time written out by hand, (rnn-R4)-(rnn-R8) of Chapter 1.

No autograd: the forward pass stores every pre-activation ``a_t`` and hidden state ``h_t``,
and the backward pass runs the recursion from ``t = T`` down to 1. The chapter checks it
against ``loss.backward()``.
"""

from __future__ import annotations

import torch

from rnnbook._validate import check_choice, check_tensor

PARAMETER_NAMES = ("W_xh", "W_hh", "b_h", "W_hy", "b_y")


def _phi_and_derivative(nonlinearity: str):
    if nonlinearity == "tanh":
        return torch.tanh, lambda a, h: 1 - h**2
    return torch.relu, lambda a, h: (a > 0).to(a.dtype)


def manual_bptt(
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    loss: str = "mse",
    *,
    nonlinearity: str = "tanh",
    h0: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Loss and gradients of an SRN by BPTT, without autograd.

    Args:
        params: ``W_xh`` (d_h, d_x), ``W_hh`` (d_h, d_h), ``b_h`` (d_h), ``W_hy`` (d_y, d_h),
            ``b_y`` (d_y); see :func:`rnnbook.models.srn.math_parameters`.
        x: inputs (B, T, d_x).
        y: targets: (B, T, d_y) for ``loss="mse"``, class indices (B, T) for ``"ce"``.
        loss: ``"mse"`` sums ``1/2 ||v_t - y_t||^2``; ``"ce"`` sums the softmax cross-entropy.
            Both are sums over the batch and over time, ``L = sum_t l_t``.
        mask: (B, T), which steps carry a loss (many-to-one: only the last); default all.

    Returns:
        ``{"loss": L, "W_xh": dL/dW_xh, ..., "b_y": dL/db_y, "h0": dL/dh_0}``.
    """
    check_choice(loss, "loss", ("mse", "ce"))
    check_choice(nonlinearity, "nonlinearity", ("tanh", "relu"))
    missing = [n for n in PARAMETER_NAMES if n not in params]
    if missing:
        raise KeyError(f"params lacks {missing}; expected the names {PARAMETER_NAMES}")
    W_xh, W_hh, b_h, W_hy, b_y = (params[n].detach() for n in PARAMETER_NAMES)
    check_tensor(x, "x", ndim=3)
    B, T, _ = x.shape
    phi, phi_prime = _phi_and_derivative(nonlinearity)
    h_prev = torch.zeros(B, W_hh.shape[0], dtype=x.dtype) if h0 is None else h0.detach()
    m = torch.ones(B, T, dtype=x.dtype) if mask is None else mask.to(x.dtype)

    # Forward pass, keeping a_t and h_t for the backward pass.
    a, h, v = [], [h_prev], []
    for t in range(T):
        a.append(x[:, t] @ W_xh.T + h[-1] @ W_hh.T + b_h)  # (rnn-R1)  (B, d_h)
        h.append(phi(a[-1]))  # (rnn-R2)
        v.append(h[-1] @ W_hy.T + b_y)  # (rnn-R3)  (B, d_y)

    # Loss and eps_t = dL/dv_t, (rnn-R4).
    total = torch.zeros((), dtype=x.dtype)
    eps = []
    for t in range(T):
        w = m[:, t : t + 1]  # (B, 1)
        if loss == "mse":
            diff = v[t] - y[:, t]
            total = total + 0.5 * (w * diff**2).sum()
            eps.append(w * diff)
        else:
            log_p = torch.log_softmax(v[t], dim=-1)
            onehot = torch.nn.functional.one_hot(y[:, t], v[t].shape[-1]).to(x.dtype)
            total = total - (w * onehot * log_p).sum()
            eps.append(w * (log_p.exp() - onehot))

    # Backward recursion from t = T to 1, with delta_{T+1} = 0.
    grads = {n: torch.zeros_like(p) for n, p in zip(PARAMETER_NAMES, (W_xh, W_hh, b_h, W_hy, b_y))}
    delta_next = torch.zeros_like(h_prev)
    for t in reversed(range(T)):
        h_bar = eps[t] @ W_hy + delta_next @ W_hh  # (rnn-R5)  h_bar_t = dL/dh_t
        delta = phi_prime(a[t], h[t + 1]) * h_bar  # (rnn-R6)  dL/da_t
        grads["W_hh"] += delta.T @ h[t]  # (rnn-R7)  h[t] is h_{t-1}
        grads["W_xh"] += delta.T @ x[:, t]
        grads["b_h"] += delta.sum(0)
        grads["W_hy"] += eps[t].T @ h[t + 1]  # (rnn-R8)
        grads["b_y"] += eps[t].sum(0)
        delta_next = delta
    grads["h0"] = delta_next @ W_hh  # (rnn-R8)  dL/dh_0 = W_hh^T delta_1
    grads["loss"] = total
    return grads
