"""The gated recurrent unit, (lstm-G1)-(lstm-G4) of Chapter 2, in three conventions.

Parameters keep the names, shapes and gate order of ``torch.nn.GRU``: ``weight_ih`` (3H, d_x),
``weight_hh`` (3H, H), ``bias_ih`` and ``bias_hh`` (3H), rows stacked as **(r, z, n)**: reset
gate, update gate, candidate. ``variant`` picks the equations:

- ``"torch"`` (``nn.GRU``): ``h = (1 - z) * n + z * h_prev``, reset *after* the recurrent
  product, ``n = tanh(W_n x + b_in + r * (U_n h + b_hn))``;
- ``"seed"`` (lstm-G1)-(lstm-G4): ``h = (1 - z) * h_prev + z * n``, reset *before* the product,
  ``n = tanh(W_n x + U_n (r * h) + b_n)``;
- ``"cho"`` (Cho et al. 2014): ``h = z * h_prev + (1 - z) * n``, reset before, as ``"seed"``.

In the reset-before variants the two n-biases simply add up, ``b_n = b_in + b_hn``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rnnbook._validate import check_choice, check_positive_int
from rnnbook.models.lstm import check_step_inputs, copy_torch_weights, make_torch_module

VARIANTS = ("torch", "seed", "cho")


class GRUCell(nn.Module):
    """One GRU step. Args: ``d_x``, ``d_h``, ``variant`` (see the module docstring).

    State: ``h`` (B, H). Shapes: ``x_t`` (B, d_x).
    """

    def __init__(self, d_x: int, d_h: int, variant: str = "torch"):
        super().__init__()
        check_positive_int(d_x, "d_x")
        check_positive_int(d_h, "d_h")
        check_choice(variant, "variant", VARIANTS)
        self.input_size, self.hidden_size, self.variant = d_x, d_h, variant
        self.weight_ih = nn.Parameter(torch.empty(3 * d_h, d_x))  # [W_r; W_z; W_n]
        self.weight_hh = nn.Parameter(torch.empty(3 * d_h, d_h))  # [U_r; U_z; U_n]
        self.bias_ih = nn.Parameter(torch.empty(3 * d_h))
        self.bias_hh = nn.Parameter(torch.empty(3 * d_h))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Torch's default: every entry from U(-1/sqrt(H), 1/sqrt(H))."""
        bound = 1 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def initial_state(self, B: int, dtype=None, device=None) -> torch.Tensor:
        return torch.zeros(B, self.hidden_size, dtype=dtype, device=device)

    def project_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """``W_* x + b_i*`` for the three gates: (..., d_x) -> (..., 3H)."""
        return x @ self.weight_ih.T + self.bias_ih

    def gates(self, x_proj: torch.Tensor, h_prev: torch.Tensor):
        """Reset gate (lstm-G2), update gate (lstm-G1) and candidate (lstm-G3) from the
        projected input."""
        xr, xz, xn = x_proj.chunk(3, dim=-1)
        hr, hz, hn = (h_prev @ self.weight_hh.T + self.bias_hh).chunk(3, dim=-1)
        reset_gate = torch.sigmoid(xr + hr)  # (lstm-G2)
        update_gate = torch.sigmoid(xz + hz)  # (lstm-G1)
        if self.variant == "torch":
            candidate = torch.tanh(xn + reset_gate * hn)  # reset after: r * (U_n h + b_hn)
        else:
            U_n, b_hn = self.weight_hh[2 * self.hidden_size :], self.bias_hh[2 * self.hidden_size :]
            candidate = torch.tanh(xn + (reset_gate * h_prev) @ U_n.T + b_hn)  # (lstm-G3): before
        return reset_gate, update_gate, candidate

    def step(self, x_proj: torch.Tensor, h_prev: torch.Tensor) -> torch.Tensor:
        _, z, n = self.gates(x_proj, h_prev)
        if self.variant == "torch":
            return (1 - z) * n + z * h_prev
        if self.variant == "seed":
            return (1 - z) * h_prev + z * n  # (lstm-G4): z gates the new candidate
        return z * h_prev + (1 - z) * n  # Cho et al. 2014: z keeps the old state

    def forward(self, x_t: torch.Tensor, h_prev: torch.Tensor) -> torch.Tensor:
        check_step_inputs(self, x_t, h_prev)
        return self.step(self.project_inputs(x_t), h_prev)

    @torch.no_grad()
    def load_from_torch(self, gru: nn.GRU) -> GRUCell:
        """Copy the weights of a one-layer, unidirectional ``nn.GRU``."""
        copy_torch_weights(self, gru, "GRU")
        return self

    def to_torch(self) -> nn.GRU:
        """A batch-first ``nn.GRU`` with these weights (``variant="torch"`` only)."""
        if self.variant != "torch":
            raise ValueError(f"nn.GRU computes the 'torch' variant, this cell is {self.variant!r}")
        return make_torch_module(self, nn.GRU)

    def extra_repr(self) -> str:
        return f"d_x={self.input_size}, d_h={self.hidden_size}, variant={self.variant}"
