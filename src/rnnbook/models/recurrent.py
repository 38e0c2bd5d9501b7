"""The one time loop: run any cell ``cell(x_t, state) -> state`` over a batch-first sequence."""

from __future__ import annotations

import torch

from rnnbook._validate import check_size, check_tensor


def hidden_of(state):
    """The hidden vector ``h`` of a state: the state itself, or its first entry (``(h, c)``)."""
    return state[0] if isinstance(state, tuple | list) else state


def unroll(cell, x: torch.Tensor, state=None):
    """Apply ``cell`` at every step of ``x`` (B, T, d_x).

    Returns ``(h_all, state_T)``: the hidden vectors of every step ``(B, T, d_h)`` and the
    final state (whatever the cell carries, e.g. ``h`` or ``(h, c)``).
    """
    check_tensor(x, "x", ndim=3)
    check_size(x, "x", 2, cell.input_size, "the input size d_x")
    B, T, _ = x.shape
    if T == 0:
        raise ValueError(f"x must have at least one time step, got shape {tuple(x.shape)}")
    if state is None:
        state = cell.initial_state(B, dtype=x.dtype, device=x.device)
    outputs = []
    for t in range(T):
        state = cell(x[:, t], state)
        outputs.append(hidden_of(state))
    return torch.stack(outputs, dim=1), state  # (B, T, d_h)
