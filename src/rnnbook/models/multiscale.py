"""Several timescales without a clock: the leaky SRN, the RPN and the SCRN (Chapter 5).

Each model takes x (B, L, d_x) and returns ``(y, h_all, state_L)``: outputs (B, L, d_y),
the hidden states (B, L, H) and what the next window would start from. Weights keep torch's
layout (``W[out, in]``), one bias per layer, drawn as the Clockwork models' (N(0, std =
1/sqrt(fan_in + fan_out)), biases 0), so parameter counts compare with the source's.

* :class:`LeakySRN`: ``h_t = α h_{t−1} + (1 − α) tanh(W_x x_t + W_h h_{t−1} + b)``
  (leaky-srn): slowness, a little change at every step.
* :class:`RPN`: ``h_t = tanh(W_x x_t + Σ_k W_k c^(k)_{t−1} + b)``, with the context shift
  register ``c^(1)_t = (1 − φ) h_t + φ c^(1)_{t−1}``, ``c^(k)_t = c^(k−1)_{t−1}`` (rpn): the
  last m smoothed states, each through its own matrix.
* :class:`SCRN`: a slow linear group ``s_t = (1 − α) W_xs x_t + α s_{t−1}`` beside a fast
  SRN group ``h_t = σ(W_sh s_t + W_xh x_t + W_hh h_{t−1} + b)``, both read out (scrn); σ is
  the sigmoid of Mikolov et al.'s paper and code by default, tanh on request.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rnnbook._validate import check_choice, check_positive_int, check_size, check_tensor


def _linear(d_in: int, d_out: int, bias: bool = False) -> nn.Linear:
    layer = nn.Linear(d_in, d_out, bias=bias)
    nn.init.normal_(layer.weight, 0.0, 1.0 / math.sqrt(d_in + d_out))
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


def _check_fraction(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _check_x(model, x: torch.Tensor) -> None:
    check_tensor(x, "x", ndim=3)
    check_size(x, "x", 2, model.input_size, "the input size d_x")


class _Counted(nn.Module):
    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


class LeakySRN(_Counted):
    """(leaky-srn) with a fixed leak ``alpha`` in [0, 1]: 0 is the SRN, 1 never changes."""

    def __init__(self, d_x: int, H: int, d_y: int, alpha: float = 0.9):
        super().__init__()
        for value, name in ((d_x, "d_x"), (H, "H"), (d_y, "d_y")):
            check_positive_int(value, name)
        self.input_size, self.hidden_size = d_x, H
        self.alpha = _check_fraction(alpha, "alpha")
        self.input = _linear(d_x, H, bias=True)
        self.recurrent = _linear(H, H)
        self.readout = _linear(H, d_y, bias=True)

    def forward(self, x: torch.Tensor, h: torch.Tensor | None = None):
        _check_x(self, x)
        h = x.new_zeros(x.shape[0], self.hidden_size) if h is None else h
        states = []
        for x_t in self.input(x).unbind(dim=1):
            h = self.alpha * h + (1 - self.alpha) * torch.tanh(x_t + self.recurrent(h))
            states.append(h)
        h_all = torch.stack(states, dim=1)
        return self.readout(h_all), h_all, h


class RPN(_Counted):
    """(rpn): ``n_context`` context layers and hysteresis ``φ`` on the newest one."""

    def __init__(self, d_x: int, H: int, d_y: int, n_context: int = 5, hysteresis: float = 0.2):
        super().__init__()
        for value, name in ((d_x, "d_x"), (H, "H"), (d_y, "d_y"), (n_context, "n_context")):
            check_positive_int(value, name)
        self.input_size, self.hidden_size = d_x, H
        self.hysteresis = _check_fraction(hysteresis, "hysteresis")
        self.input = _linear(d_x, H, bias=True)
        self.contexts = nn.ModuleList(_linear(H, H) for _ in range(n_context))
        self.readout = _linear(H, d_y, bias=True)

    def forward(self, x: torch.Tensor, context: list[torch.Tensor] | None = None):
        """``context``: the m context layers c^(1..m) of the previous step (default zeros)."""
        _check_x(self, x)
        B, phi = x.shape[0], self.hysteresis
        if context is None:
            context = [x.new_zeros(B, self.hidden_size) for _ in self.contexts]
        states = []
        for x_t in self.input(x).unbind(dim=1):
            h = torch.tanh(x_t + sum(W(c) for W, c in zip(self.contexts, context)))
            context = [(1 - phi) * h + phi * context[0], *context[:-1]]  # shift the register
            states.append(h)
        h_all = torch.stack(states, dim=1)
        return self.readout(h_all), h_all, context


class SCRN(_Counted):
    """(scrn): ``n_fast`` SRN units beside ``n_slow`` linear leaky units.

    ``adaptive=False`` keeps one fixed ``alpha``; ``adaptive=True`` learns one leak per slow
    unit, ``α_j = sigmoid(a_j)`` with ``a_j`` starting at logit(alpha). ``activation`` is the
    fast group's non-linearity: ``"sigmoid"`` as in Mikolov et al. (2015), the default, or
    ``"tanh"`` (the spec allows either; the source does not say).
    """

    def __init__(
        self,
        d_x: int,
        n_fast: int,
        n_slow: int,
        d_y: int,
        alpha=0.95,
        adaptive: bool = False,
        activation: str = "sigmoid",
    ):
        super().__init__()
        check_choice(activation, "activation", ("sigmoid", "tanh"))
        self.activation = activation
        for value, name in ((d_x, "d_x"), (n_fast, "n_fast"), (n_slow, "n_slow"), (d_y, "d_y")):
            check_positive_int(value, name)
        alpha = _check_fraction(alpha, "alpha")
        self.input_size, self.hidden_size, self.n_slow = d_x, n_fast, n_slow
        self.to_slow = _linear(d_x, n_slow)
        self.slow_to_fast = _linear(n_slow, n_fast)
        self.input = _linear(d_x, n_fast, bias=True)
        self.recurrent = _linear(n_fast, n_fast)
        self.readout = _linear(n_fast, d_y, bias=True)
        self.slow_readout = _linear(n_slow, d_y)
        self.adaptive = adaptive
        if adaptive:
            if not 0 < alpha < 1:
                raise ValueError(f"an adaptive leak starts inside (0, 1), got alpha = {alpha}")
            self.leak_logit = nn.Parameter(torch.full((n_slow,), math.log(alpha / (1 - alpha))))
        else:
            self.register_buffer("fixed_alpha", torch.tensor(alpha))

    @property
    def alpha(self) -> torch.Tensor:
        """The leak of the slow units, one fixed number or one learned value per unit."""
        return torch.sigmoid(self.leak_logit) if self.adaptive else self.fixed_alpha

    def forward(self, x: torch.Tensor, state=None):
        _check_x(self, x)
        B = x.shape[0]
        if state is None:
            state = (x.new_zeros(B, self.hidden_size), x.new_zeros(B, self.n_slow))
        h, s = state
        alpha = self.alpha.to(x.dtype)
        act = torch.sigmoid if self.activation == "sigmoid" else torch.tanh
        fast, slow = [], []
        for x_t, xs_t in zip(self.input(x).unbind(dim=1), self.to_slow(x).unbind(dim=1)):
            s = (1 - alpha) * xs_t + alpha * s
            h = act(self.slow_to_fast(s) + x_t + self.recurrent(h))  # (scrn)
            fast.append(h)
            slow.append(s)
        h_all, s_all = torch.stack(fast, dim=1), torch.stack(slow, dim=1)
        return self.readout(h_all) + self.slow_readout(s_all), h_all, (h, s)
