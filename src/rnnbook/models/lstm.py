"""The LSTM cell (lstm-L1)-(lstm-L6), its peephole variant (lstm-P1)-(lstm-P5) and the DCM
(lstm-D1)-(lstm-D5) of Chapter 2.

Parameters keep the names, shapes and gate order of ``torch.nn.LSTM``: ``weight_ih``
(4H, d_x), ``weight_hh`` (4H, H), ``bias_ih`` and ``bias_hh`` (4H), with the rows stacked as
**(i, f, g, o)**: input gate, forget gate, candidate, output gate. Torch carries two bias
vectors; their sum is the single ``b_*`` of the maths. So ``W_f = weight_ih[H:2H]``,
``U_f = weight_hh[H:2H]`` and ``b_f = bias_ih[H:2H] + bias_hh[H:2H]``.

Every cell offers three methods:

* ``project_inputs(x)``: the input half ``W x + b`` of every gate. It does not depend on the
  state, so :class:`~rnnbook.models.recurrent.Recurrent` computes it for all time steps in
  one matrix product before the loop;
* ``step(x_proj, state)``: one step from the projected input, returning the new state;
* ``forward(x_t, state)``: both, for a single step of raw input.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from rnnbook._validate import check_choice, check_positive_int, check_size, check_tensor
from rnnbook.models.recurrent import check_state

OUTPUT_ACTIVATIONS = {"tanh": torch.tanh, "identity": lambda c: c}


class LSTMStep(NamedTuple):
    """Everything one LSTM step computes; ``(h, c)`` is the state it hands on."""

    h: torch.Tensor
    c: torch.Tensor
    input_gate: torch.Tensor
    forget_gate: torch.Tensor
    candidate: torch.Tensor
    output_gate: torch.Tensor


def check_step_inputs(cell, x_t: torch.Tensor, state) -> None:
    """Shapes of one step's input ``(B, d_x)`` and of the cell's state of ``(B, H)`` tensors."""
    check_tensor(x_t, "x_t", ndim=2)
    check_size(x_t, "x_t", 1, cell.input_size, "the input size d_x")
    check_state(cell, state, x_t.shape[0])


class LSTMCell(nn.Module):
    """One LSTM step, (lstm-L1)-(lstm-L6); with ``peephole=True``, (lstm-P1)-(lstm-P5).

    Args:
        d_x: input size. d_h: hidden size H.
        peephole: add the diagonal peepholes ``p_i, p_f`` (reading ``c_{t-1}``) and ``p_o``
            (reading ``c_t``), initialised to 0.
        output_activation: ``sigma_h`` of (lstm-L6)/(lstm-P5), ``"tanh"`` or ``"identity"`` (Gers &
            Schmidhuber's peephole LSTM drops it).
        forget_bias: added to the forget slice of ``bias_ih`` at initialisation.
    State: ``(h, c)``, each (B, H). Shapes: ``x_t`` (B, d_x).
    """

    def __init__(
        self,
        d_x: int,
        d_h: int,
        peephole: bool = False,
        output_activation: str = "tanh",
        forget_bias: float = 0.0,
    ):
        super().__init__()
        check_positive_int(d_x, "d_x")
        check_positive_int(d_h, "d_h")
        check_choice(output_activation, "output_activation", tuple(OUTPUT_ACTIVATIONS))
        if not isinstance(peephole, bool):
            raise TypeError(f"peephole must be True or False, got {peephole!r}")
        if (
            isinstance(forget_bias, bool)
            or not isinstance(forget_bias, int | float)
            or not math.isfinite(forget_bias)
        ):
            raise ValueError(f"forget_bias must be a finite number, got {forget_bias!r}")
        self.input_size, self.hidden_size = d_x, d_h
        self.peephole, self.output_activation = peephole, output_activation
        self.forget_bias = float(forget_bias)
        self.weight_ih = nn.Parameter(torch.empty(4 * d_h, d_x))  # [W_i; W_f; W_g; W_o]
        self.weight_hh = nn.Parameter(torch.empty(4 * d_h, d_h))  # [U_i; U_f; U_g; U_o]
        self.bias_ih = nn.Parameter(torch.empty(4 * d_h))
        self.bias_hh = nn.Parameter(torch.empty(4 * d_h))
        if peephole:
            self.peephole_i = nn.Parameter(torch.zeros(d_h))  # p_i
            self.peephole_f = nn.Parameter(torch.zeros(d_h))  # p_f
            self.peephole_o = nn.Parameter(torch.zeros(d_h))  # p_o
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Torch's default U(-1/sqrt(H), 1/sqrt(H)) for the weights and biases, peepholes 0,
        then ``forget_bias`` added to the forget gate's ``bias_ih`` slice."""
        bound = 1 / math.sqrt(self.hidden_size)
        for name, p in self.named_parameters():
            if name.startswith("peephole"):
                p.zero_()
            else:
                nn.init.uniform_(p, -bound, bound)
        H = self.hidden_size
        self.bias_ih[H : 2 * H] += self.forget_bias

    def initial_state(self, B: int, dtype=None, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        """``h_0 = c_0 = 0``."""
        zeros = torch.zeros(B, self.hidden_size, dtype=dtype, device=device)
        return zeros, zeros.clone()

    def project_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """``W_* x + b_*`` for all four gates at once: (..., d_x) -> (..., 4H)."""
        return x @ self.weight_ih.T + self.bias_ih + self.bias_hh

    def step_gates(self, x_proj: torch.Tensor, state) -> LSTMStep:
        """(lstm-L1)-(lstm-L6) (or (lstm-P1)-(lstm-P5)) from the projected input; returns every
        intermediate."""
        h_prev, c_prev = state
        a_i, a_f, a_g, a_o = (x_proj + h_prev @ self.weight_hh.T).chunk(4, dim=-1)
        if self.peephole:
            a_i = a_i + self.peephole_i * c_prev  # (lstm-P2)
            a_f = a_f + self.peephole_f * c_prev  # (lstm-P1)
        input_gate = torch.sigmoid(a_i)  # (lstm-L2)
        forget_gate = torch.sigmoid(a_f)  # (lstm-L1)
        candidate = torch.tanh(a_g)  # (lstm-L3)
        c = forget_gate * c_prev + input_gate * candidate  # (lstm-L4): the carousel
        if self.peephole:
            a_o = a_o + self.peephole_o * c  # (lstm-P4) reads the *current* cell state
        output_gate = torch.sigmoid(a_o)  # (lstm-L5)
        h = output_gate * OUTPUT_ACTIVATIONS[self.output_activation](c)  # (lstm-L6)
        return LSTMStep(h, c, input_gate, forget_gate, candidate, output_gate)

    def next_state(self, out: LSTMStep) -> tuple[torch.Tensor, torch.Tensor]:
        """The part of a step's results that the next step needs: ``(h, c)``."""
        return out.h, out.c

    def step(self, x_proj: torch.Tensor, state) -> tuple[torch.Tensor, torch.Tensor]:
        return self.next_state(self.step_gates(x_proj, state))

    def forward(self, x_t: torch.Tensor, state) -> tuple[torch.Tensor, torch.Tensor]:
        check_step_inputs(self, x_t, state)
        return self.step(self.project_inputs(x_t), state)

    @torch.no_grad()
    def load_from_torch(self, lstm: nn.LSTM) -> LSTMCell:
        """Copy the weights of a one-layer, unidirectional ``nn.LSTM`` (same gate order)."""
        copy_torch_weights(self, lstm, "LSTM")
        return self

    def to_torch(self) -> nn.LSTM:
        """A batch-first ``nn.LSTM`` with these weights (plain cells only: torch has no
        peepholes and always uses tanh)."""
        if self.peephole or self.output_activation != "tanh":
            raise ValueError(
                "nn.LSTM has no peepholes and always applies tanh to c_t; this cell has "
                f"peephole={self.peephole}, output_activation={self.output_activation!r}"
            )
        return make_torch_module(self, nn.LSTM)

    def extra_repr(self) -> str:
        extras = ", peephole" if self.peephole else ""
        if self.output_activation != "tanh":
            extras += f", output_activation={self.output_activation}"
        if self.forget_bias:
            extras += f", forget_bias={self.forget_bias:g}"
        return f"d_x={self.input_size}, d_h={self.hidden_size}{extras}"


def torch_lstm(d_x: int, H: int, forget_bias: float = 0.0) -> nn.LSTM:
    """A batch-first one-layer ``nn.LSTM`` with torch's initialisation, except that the
    forget gate's bias starts at ``forget_bias``: its slice of ``bias_ih`` is set to it and
    ``bias_hh`` to zero, so the bias that enters (lstm-L1) is exactly ``forget_bias``; the
    other gates' slices of ``bias_ih`` keep torch's initialisation. Wrap it in
    :class:`~rnnbook.models.recurrent.RecurrentModel` for a read-out."""
    check_positive_int(d_x, "d_x")
    check_positive_int(H, "H")
    if isinstance(forget_bias, bool) or not isinstance(forget_bias, int | float):
        raise TypeError(f"forget_bias must be a number, got {forget_bias!r}")
    lstm = nn.LSTM(d_x, H, batch_first=True)
    with torch.no_grad():
        lstm.bias_hh_l0.zero_()
        lstm.bias_ih_l0[H : 2 * H] = forget_bias  # torch's gate order: i, f, g, o
    return lstm


class DCMCell(LSTMCell):
    """The Dynamic Cortex Memory, (lstm-D1)-(lstm-D5): a peephole LSTM whose gates also see
    each other.

    Gate ``a`` receives gate ``b``'s activation through the diagonal weight ``v_ab``: the
    input and forget gates read the *previous* step's i, f and o; the output gate, computed
    last, reads the *current* i and f and the previous o. All of ``p_*`` and ``v_*`` start at
    0, so a fresh DCM computes exactly what an LSTM with the same weights computes.

    The equations come from a third-party transcription of Otte et al. (2014) and are not
    verified against the paper. ``out_peephole_state`` chooses which cell state the output
    gate's peephole reads: ``"current"`` (``c_t``, as in (lstm-P4), the default) or
    ``"previous"`` (``c_{t-1}``, as the transcription shows).

    State: ``(h, c, i, f, o)``, each (B, H), all zero at t = 0.
    """

    GATE_NAMES = ("i", "f", "o")

    def __init__(self, d_x: int, d_h: int, out_peephole_state: str = "current"):
        check_choice(out_peephole_state, "out_peephole_state", ("current", "previous"))
        super().__init__(d_x, d_h, peephole=True)
        self.out_peephole_state = out_peephole_state
        for a in self.GATE_NAMES:
            for b in self.GATE_NAMES:
                self.register_parameter(f"v_{a}{b}", nn.Parameter(torch.zeros(d_h)))

    @torch.no_grad()
    def reset_parameters(self) -> None:
        super().reset_parameters()
        for name, p in self.named_parameters():
            if name.startswith("v_"):
                p.zero_()

    def initial_state(self, B: int, dtype=None, device=None):
        """``h_0 = c_0 = i_0 = f_0 = o_0 = 0``."""
        zeros = torch.zeros(B, self.hidden_size, dtype=dtype, device=device)
        return tuple(zeros.clone() for _ in range(5))

    def step_gates(self, x_proj: torch.Tensor, state) -> LSTMStep:
        h_prev, c_prev, i_prev, f_prev, o_prev = state
        a_i, a_f, a_g, a_o = (x_proj + h_prev @ self.weight_hh.T).chunk(4, dim=-1)
        a_i = a_i + self.peephole_i * c_prev + self.v_ii * i_prev + self.v_if * f_prev
        a_i = a_i + self.v_io * o_prev  # (lstm-D1)
        a_f = a_f + self.peephole_f * c_prev + self.v_fi * i_prev + self.v_ff * f_prev
        a_f = a_f + self.v_fo * o_prev  # (lstm-D2)
        input_gate, forget_gate = torch.sigmoid(a_i), torch.sigmoid(a_f)
        candidate = torch.tanh(a_g)
        c = forget_gate * c_prev + input_gate * candidate  # (lstm-D3)
        c_seen = c if self.out_peephole_state == "current" else c_prev
        a_o = a_o + self.peephole_o * c_seen + self.v_oi * input_gate + self.v_of * forget_gate
        output_gate = torch.sigmoid(a_o + self.v_oo * o_prev)  # (lstm-D4)
        h = output_gate * torch.tanh(c)  # (lstm-D5)
        return LSTMStep(h, c, input_gate, forget_gate, candidate, output_gate)

    def next_state(self, out: LSTMStep):
        """The DCM hands on its gates too: ``(h, c, i, f, o)``."""
        return out.h, out.c, out.input_gate, out.forget_gate, out.output_gate

    def extra_repr(self) -> str:
        return (
            f"d_x={self.input_size}, d_h={self.hidden_size}, "
            f"out_peephole_state={self.out_peephole_state}"
        )


def copy_torch_weights(cell: nn.Module, module: nn.Module, kind: str) -> None:
    """Copy ``weight_ih_l0`` etc. of a one-layer torch RNN module into ``cell``."""
    if module.num_layers != 1 or module.bidirectional or not module.bias:
        raise ValueError(
            f"only a one-layer, unidirectional nn.{kind} with biases can be copied, got "
            f"num_layers={module.num_layers}, bidirectional={module.bidirectional}, "
            f"bias={module.bias}"
        )
    if getattr(module, "proj_size", 0):
        raise ValueError(f"nn.{kind} with proj_size > 0 has no counterpart here")
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        theirs, ours = getattr(module, f"{name}_l0"), getattr(cell, name)
        if theirs.shape != ours.shape:
            raise ValueError(
                f"{name}_l0 has shape {tuple(theirs.shape)}, the cell expects {tuple(ours.shape)} "
                "(d_x and d_h must match)"
            )
        ours.copy_(theirs)


def make_torch_module(cell: nn.Module, module_type) -> nn.Module:
    """A batch-first one-layer ``module_type`` (nn.LSTM or nn.GRU) holding ``cell``'s weights."""
    module = module_type(cell.input_size, cell.hidden_size, batch_first=True)
    module = module.to(dtype=cell.weight_ih.dtype, device=cell.weight_ih.device)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(module, f"{name}_l0").copy_(getattr(cell, name))
    return module


def record_gates(cell: LSTMCell, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Run ``cell`` over ``x`` (B, T, d_x) without gradients and keep every gate's value.

    Returns a dict of (B, T, H) tensors: ``input_gate``, ``forget_gate``, ``candidate``,
    ``output_gate``, ``c`` and ``h``.
    """
    check_tensor(x, "x", ndim=3)
    check_size(x, "x", 2, cell.input_size, "the input size d_x")
    if x.shape[1] == 0:
        raise ValueError(f"x must have at least one time step, got shape {tuple(x.shape)}")
    with torch.no_grad():
        x_proj = cell.project_inputs(x)
        state = cell.initial_state(x.shape[0], dtype=x.dtype, device=x.device)
        steps = []
        for t in range(x.shape[1]):
            out = cell.step_gates(x_proj[:, t], state)
            steps.append(out)
            state = cell.next_state(out)
    return {
        name: torch.stack([getattr(s, name) for s in steps], dim=1) for name in LSTMStep._fields
    }


class StackedLSTM(nn.Module):
    """Stacked ``torch.nn.LSTM`` layers and a linear read-out of every step: the baseline of
    Chapter 3's copy task (Graves et al. 2014, Table 1), with PyTorch's own initialisation.

    ``forward(x, state=None)`` takes ``x`` (B, T, d_x) and returns ``(logits, state)``:
    logits (B, T, d_y) and torch's ``(h, c)``, each (layers, B, hidden).
    """

    def __init__(self, d_x: int, d_y: int, hidden: int = 256, layers: int = 3):
        super().__init__()
        for value, name in ((d_x, "d_x"), (d_y, "d_y"), (hidden, "hidden"), (layers, "layers")):
            check_positive_int(value, name)
        self.lstm = nn.LSTM(d_x, hidden, num_layers=layers, batch_first=True)
        self.readout = nn.Linear(hidden, d_y)

    def forward(self, x: torch.Tensor, state=None):
        check_tensor(x, "x", ndim=3)
        check_size(x, "x", 2, self.lstm.input_size, "the input size d_x")
        h, state = self.lstm(x, state)
        return self.readout(h), state
