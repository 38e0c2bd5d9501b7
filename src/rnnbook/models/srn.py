"""The simple recurrent network (Elman network), equations (rnn-R1)-(rnn-R3) of Chapter 1.

Parameters keep the names and shapes of ``torch.nn.RNN`` (``weight_ih``, ``weight_hh``,
``bias_ih``, ``bias_hh``), so weights copy both ways. Torch carries two bias vectors;
their sum plays the role of the single ``b_h`` of the maths.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rnnbook._validate import check_choice, check_positive_int, check_size, check_tensor
from rnnbook.models.recurrent import unroll

NONLINEARITIES = {"tanh": torch.tanh, "relu": torch.relu}


class SRNCell(nn.Module):
    """One SRN step: ``h_t = phi(W_xh x_t + W_hh h_{t-1} + b_h)``, (rnn-R1)-(rnn-R2).

    Args:
        d_x: input size. d_h: hidden size. nonlinearity: ``"tanh"`` or ``"relu"``.
    Shapes: ``x_t`` (B, d_x), ``h`` (B, d_h) -> (B, d_h).
    """

    def __init__(self, d_x: int, d_h: int, nonlinearity: str = "tanh", bias: bool = True):
        super().__init__()
        check_positive_int(d_x, "d_x")
        check_positive_int(d_h, "d_h")
        check_choice(nonlinearity, "nonlinearity", tuple(NONLINEARITIES))
        self.input_size, self.hidden_size, self.nonlinearity = d_x, d_h, nonlinearity
        self.weight_ih = nn.Parameter(torch.empty(d_h, d_x))  # W_xh
        self.weight_hh = nn.Parameter(torch.empty(d_h, d_h))  # W_hh
        if bias:
            self.bias_ih = nn.Parameter(torch.empty(d_h))
            self.bias_hh = nn.Parameter(torch.empty(d_h))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Torch's default: every entry from U(-1/sqrt(d_h), 1/sqrt(d_h))."""
        bound = 1 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def initial_state(self, B: int, dtype=None, device=None) -> torch.Tensor:
        return torch.zeros(B, self.hidden_size, dtype=dtype, device=device)

    def pre_activation(self, x_t: torch.Tensor, h_prev: torch.Tensor) -> torch.Tensor:
        """(rnn-R1): ``a_t = W_xh x_t + W_hh h_{t-1} + b_h`` in row-major form."""
        a = x_t @ self.weight_ih.T + h_prev @ self.weight_hh.T  # (B, d_h)
        if self.bias_ih is not None:
            a = a + self.bias_ih + self.bias_hh
        return a

    def project_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """The input half of (rnn-R1), ``W_xh x + b_h``, for any leading shape (..., d_x)."""
        a = x @ self.weight_ih.T
        if self.bias_ih is not None:
            a = a + self.bias_ih + self.bias_hh
        return a

    def step(self, x_proj: torch.Tensor, h_prev: torch.Tensor) -> torch.Tensor:
        """(rnn-R1)-(rnn-R2) from the projected input: ``h_t = phi(x_proj + W_hh h_{t-1})``."""
        return NONLINEARITIES[self.nonlinearity](x_proj + h_prev @ self.weight_hh.T)

    def forward(self, x_t: torch.Tensor, h_prev: torch.Tensor) -> torch.Tensor:
        check_tensor(x_t, "x_t", ndim=2)
        check_tensor(h_prev, "h_prev", ndim=2)
        check_size(x_t, "x_t", 1, self.input_size, "the input size d_x")
        check_size(h_prev, "h_prev", 1, self.hidden_size, "the hidden size d_h")
        if x_t.shape[0] != h_prev.shape[0]:
            raise ValueError(
                f"x_t and h_prev must have the same batch size, got {x_t.shape[0]} and "
                f"{h_prev.shape[0]}"
            )
        return NONLINEARITIES[self.nonlinearity](self.pre_activation(x_t, h_prev))  # (rnn-R2)

    @torch.no_grad()
    def load_from_torch(self, rnn: nn.RNN) -> SRNCell:
        """Copy the weights of a one-layer, unidirectional ``nn.RNN`` into this cell."""
        expected = {
            "weight_ih_l0": self.weight_ih,
            "weight_hh_l0": self.weight_hh,
            "bias_ih_l0": self.bias_ih,
            "bias_hh_l0": self.bias_hh,
        }
        expected = {k: v for k, v in expected.items() if v is not None}
        theirs = dict(rnn.named_parameters())
        if set(theirs) != set(expected):
            raise ValueError(
                f"nn.RNN parameters {sorted(theirs)} do not match the cell's {sorted(expected)} "
                "(one layer, unidirectional, same bias setting)"
            )
        if rnn.nonlinearity != self.nonlinearity:
            raise ValueError(f"nn.RNN uses {rnn.nonlinearity}, the cell {self.nonlinearity}")
        for name, ours in expected.items():
            if theirs[name].shape != ours.shape:
                raise ValueError(
                    f"{name}: shape {tuple(theirs[name].shape)} != {tuple(ours.shape)}"
                )
            ours.copy_(theirs[name])
        return self

    def extra_repr(self) -> str:
        return f"d_x={self.input_size}, d_h={self.hidden_size}, {self.nonlinearity}"


class SRN(nn.Module):
    """An SRN with a linear read-out ``v_t = W_hy h_t + b_y``, (rnn-R1)-(rnn-R3).

    Args:
        d_x, d_h, d_y: input, hidden and output sizes.
        nonlinearity: ``"tanh"`` or ``"relu"``.
        learn_h0: learn the initial state instead of starting from zeros.
        init: ``"default"`` (torch's), ``"orthogonal"`` (W_hh orthogonal), ``"identity"``
            (W_hh = I and zero bias: the IRNN of Le et al. 2015) or ``("scaled_orthogonal", rho)``.

    ``forward(x, h0=None)`` takes ``x`` (B, T, d_x) and returns ``(y, h)``: the outputs
    ``v_t`` (B, T, d_y) before any softmax/sigmoid and the hidden states (B, T, d_h).
    """

    def __init__(
        self,
        d_x: int,
        d_h: int,
        d_y: int,
        nonlinearity: str = "tanh",
        bias: bool = True,
        learn_h0: bool = False,
        init="default",
    ):
        super().__init__()
        check_positive_int(d_y, "d_y")
        self.cell = SRNCell(d_x, d_h, nonlinearity, bias)
        self.readout = nn.Linear(d_h, d_y, bias=bias)
        self.h0 = nn.Parameter(torch.zeros(d_h)) if learn_h0 else None
        self.init = init
        initialise_recurrent(self.cell, init)

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None):
        check_tensor(x, "x", ndim=3)
        if h0 is None and self.h0 is not None:
            h0 = self.h0.expand(x.shape[0], -1)
        if h0 is not None:
            check_tensor(h0, "h0", ndim=2)
            if h0.shape != (x.shape[0], self.cell.hidden_size):
                raise ValueError(
                    f"h0 must have shape (B, d_h) = ({x.shape[0]}, {self.cell.hidden_size}), "
                    f"got {tuple(h0.shape)}"
                )
        h, _ = unroll(self.cell, x, h0)  # (B, T, d_h)
        return self.readout(h), h  # (B, T, d_y), (B, T, d_h)

    @torch.no_grad()
    def load_from_torch(self, rnn: nn.RNN) -> SRN:
        """Copy the weights of a one-layer, batch-first ``nn.RNN`` into this SRN's cell."""
        self.cell.load_from_torch(rnn)
        return self

    def to_torch(self) -> nn.RNN:
        """An ``nn.RNN`` (batch-first) with this SRN's recurrent weights."""
        cell = self.cell
        rnn = nn.RNN(
            cell.input_size,
            cell.hidden_size,
            nonlinearity=cell.nonlinearity,
            bias=cell.bias_ih is not None,
            batch_first=True,
        ).to(dtype=cell.weight_ih.dtype, device=cell.weight_ih.device)
        with torch.no_grad():
            rnn.weight_ih_l0.copy_(cell.weight_ih)
            rnn.weight_hh_l0.copy_(cell.weight_hh)
            if cell.bias_ih is not None:
                rnn.bias_ih_l0.copy_(cell.bias_ih)
                rnn.bias_hh_l0.copy_(cell.bias_hh)
        return rnn


@torch.no_grad()
def initialise_recurrent(cell: SRNCell, init) -> None:
    """Set ``W_hh`` (and for ``"identity"`` the bias) as named; see :class:`SRN`."""
    if init == "default":
        return
    if init == "orthogonal":
        nn.init.orthogonal_(cell.weight_hh)
    elif init == "identity":
        cell.weight_hh.copy_(torch.eye(cell.hidden_size))
        if cell.bias_ih is not None:
            cell.bias_ih.zero_()
            cell.bias_hh.zero_()
    elif isinstance(init, tuple) and len(init) == 2 and init[0] == "scaled_orthogonal":
        rho = init[1]
        if not isinstance(rho, int | float) or rho <= 0:
            raise ValueError(f"scaled_orthogonal needs a positive scale rho, got {rho!r}")
        nn.init.orthogonal_(cell.weight_hh)
        cell.weight_hh.mul_(rho)
    else:
        raise ValueError(
            "init must be 'default', 'orthogonal', 'identity' or ('scaled_orthogonal', rho), "
            f"got {init!r}"
        )


def math_parameters(model: SRN) -> dict[str, torch.Tensor]:
    """The SRN's parameters under the names of the maths: W_xh, W_hh, b_h, W_hy, b_y.

    ``b_h`` is torch's ``bias_ih + bias_hh``; a missing bias is returned as zeros.
    """
    cell = model.cell
    zeros_h = torch.zeros(cell.hidden_size, dtype=cell.weight_hh.dtype)
    zeros_y = torch.zeros(model.readout.out_features, dtype=cell.weight_hh.dtype)
    return {
        "W_xh": cell.weight_ih,
        "W_hh": cell.weight_hh,
        "b_h": cell.bias_ih + cell.bias_hh if cell.bias_ih is not None else zeros_h,
        "W_hy": model.readout.weight,
        "b_y": model.readout.bias if model.readout.bias is not None else zeros_y,
    }
