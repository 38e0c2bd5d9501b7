"""The one time loop: run any cell over a batch-first sequence.

A cell offers ``project_inputs(x)`` (the part of every step that only depends on the input)
and ``step(x_proj, state) -> state``. The loop projects the whole sequence in one matrix
product, then walks through time with ``step``: the same arithmetic as calling the cell step
by step, with one large product instead of T small ones.
"""

from __future__ import annotations

import torch
from torch import nn

from rnnbook._validate import check_positive_int, check_size, check_tensor


def hidden_of(state):
    """The hidden vector ``h`` of a state: the state itself, or its first entry (``(h, c)``)."""
    return state[0] if isinstance(state, tuple | list) else state


def check_state(cell, state, B: int) -> None:
    """``state`` must have the structure and shapes of ``cell.initial_state(B)``: a tensor,
    or a tuple of them such as ``(h, c)``, usually each of shape (B, H)."""
    expected = cell.initial_state(B)
    n_parts = len(expected) if isinstance(expected, tuple) else 1
    got = len(state) if isinstance(state, tuple | list) else 1
    if isinstance(expected, tuple) != isinstance(state, tuple | list) or got != n_parts:
        form = "a tensor h" if n_parts == 1 else f"a tuple of {n_parts} tensors"
        what = f"a tuple of {got}" if isinstance(state, tuple | list) else type(state).__name__
        raise ValueError(f"{type(cell).__name__} needs its state as {form}, got {what}")
    parts = state if isinstance(state, tuple | list) else (state,)
    for part, like in zip(parts, expected if isinstance(expected, tuple) else (expected,)):
        check_tensor(part, "each state tensor", ndim=2)
        if part.shape != like.shape:
            width = like.shape[1]
            name = "H" if width == cell.hidden_size else "width"
            raise ValueError(
                f"each state tensor must have shape (B, {name}) = ({B}, {width}), "
                f"got {tuple(part.shape)}"
            )


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
    check_state(cell, state, B)
    x_proj = cell.project_inputs(x)  # (B, T, k*H): the input half of every step, at once
    outputs = []
    # unbind, not x_proj[:, t]: indexing would give every step's backward a full (B, T, k*H)
    # gradient to fill, which makes the backward pass quadratic in T.
    for x_proj_t in x_proj.unbind(dim=1):
        state = cell.step(x_proj_t, state)
        outputs.append(hidden_of(state))
    return torch.stack(outputs, dim=1), state  # (B, T, d_h)


class Recurrent(nn.Module):
    """Loop ``cell`` over a sequence and answer the way ``nn.RNN``/``nn.LSTM``/``nn.GRU`` do.

    ``forward(x, state=None)`` takes ``x`` of shape (B, T, d_x) (or (T, B, d_x) with
    ``batch_first=False``) and returns ``(output, state_n)``: ``output`` holds ``h_t`` of
    every step in the input's layout, ``state_n`` is the final state with torch's leading
    layer axis, ``h_n`` (1, B, H) for an SRN or GRU, ``(h_n, c_n)`` for an LSTM. ``state``
    may be given in the same form, or without the layer axis.
    """

    def __init__(self, cell: nn.Module, batch_first: bool = True):
        super().__init__()
        self.cell, self.batch_first = cell, batch_first

    def forward(self, x: torch.Tensor, state=None):
        check_tensor(x, "x", ndim=3)
        if not self.batch_first:
            if x.shape[0] == 0:
                raise ValueError(f"x must have at least one time step, got shape {tuple(x.shape)}")
            check_size(x, "x", 2, self.cell.input_size, "the input size d_x")
            x = x.transpose(0, 1)
        if state is not None:
            state = _drop_layer_axis(state)
        output, state_n = unroll(self.cell, x, state)
        if not self.batch_first:
            output = output.transpose(0, 1)
        if isinstance(state_n, tuple | list):
            return output, tuple(s.unsqueeze(0) for s in state_n)
        return output, state_n.unsqueeze(0)

    def extra_repr(self) -> str:
        return f"batch_first={self.batch_first}"


def _drop_layer_axis(state):
    if isinstance(state, tuple | list):
        return tuple(_drop_layer_axis(s) for s in state)
    check_tensor(state, "each initial state tensor", ndim=(2, 3))
    if state.dim() == 3:
        if state.shape[0] != 1:
            raise ValueError(
                f"a state with a layer axis must have shape (1, B, H), got {tuple(state.shape)}"
            )
        return state[0]
    return state


def count_parameters(model: nn.Module) -> int:
    """The number of trainable numbers of ``model``: the sum of ``p.numel()`` over its
    parameters that require a gradient (a frozen matrix, such as the LMU's ``A_bar``, is not
    counted; nor is a weight shared by two layers counted twice). Models with masked weights
    (the Clockwork RNN) have their own ``n_parameters``, which leaves the masked zeros out."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def as_core(core: nn.Module) -> nn.Module:
    """A recurrent core for a model: one of the book's cells (``project_inputs``/``step``),
    looped by :class:`Recurrent`, or a batch-first, one-layer, unidirectional
    ``nn.RNN``/``nn.LSTM``/``nn.GRU`` as it is (its fused kernels compute the same function
    faster). Either way ``core(x, state) -> (output, state_n)`` with torch's layer axis."""
    if isinstance(core, nn.RNNBase):
        if not core.batch_first or core.num_layers != 1 or core.bidirectional:
            raise ValueError(
                f"a torch core must be batch-first, one-layer and unidirectional, got {core}"
            )
        return core
    if hasattr(core, "project_inputs") and hasattr(core, "step"):
        return Recurrent(core)
    raise TypeError(
        "core must be a cell with project_inputs/step or an nn.RNN/LSTM/GRU, "
        f"got {type(core).__name__}"
    )


class RecurrentModel(nn.Module):
    """A recurrent core followed by a linear read-out ``y_t = W_hy h_t + b_y``.

    ``core`` is one of the book's cells (looped by :class:`Recurrent`) or a batch-first,
    one-layer ``nn.RNN``/``nn.LSTM``/``nn.GRU``, whose fused kernels train the same function
    faster. ``forward(x)`` takes (B, T, d_x) and returns ``(y, h)``: the read-out at every step
    (B, T, d_y) and the hidden states (B, T, H), the interface of
    :class:`rnnbook.models.srn.SRN`.
    """

    def __init__(self, core: nn.Module, d_y: int):
        super().__init__()
        check_positive_int(d_y, "d_y")
        self.core = as_core(core)
        self.readout = nn.Linear(core.hidden_size, d_y)

    @property
    def cell(self) -> nn.Module:
        """The book's cell, or the torch module, that computes the hidden states."""
        return self.core.cell if isinstance(self.core, Recurrent) else self.core

    def forward(self, x: torch.Tensor):
        check_tensor(x, "x", ndim=3)
        h, _ = self.core(x)
        return self.readout(h), h
