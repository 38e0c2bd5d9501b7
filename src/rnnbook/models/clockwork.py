"""The Clockwork RNN and the Clockwork LSTM with its four skip targets (Chapter 5).

The hidden layer is split into M equal modules with periods T_1 <= ... <= T_M. Module m
updates when its clock ticks, ``(t0 + t) mod T_m = 0``, and otherwise keeps its state
(skip-update), as a CWRNN step:

    h_t^(m) = tanh(W_x^(m) x_t + Σ_{l >= m} W_h^(m,l) h_{t−1}^(l) + b^(m))   if it ticks
    h_t^(m) = h_{t−1}^(m)                                                     otherwise   (cw-rnn)

With ``connectivity="uni"`` module m reads only modules l >= m (slower ones, and itself):
the recurrent matrix is block-upper-triangular in torch's layout ``W[destination, source]``
(:func:`rnnbook.skip.connectivity_mask`); ``"bi"`` keeps it dense. Parameters keep torch's
layout (``weight_ih`` (H, d_x), ``weight_hh`` (H, H)) with one bias vector; masked weights
are zero from the start and the mask is applied again in every forward pass, so they get no
gradient and :meth:`CWRNN.n_parameters` does not count them.

Real skipping: the clock is known before the step, so a module that does not tick is not
computed (``mode="sliced"``): each ticking module multiplies its own rows of the recurrent
matrix, and with the "uni" mask only the columns of the modules it reads, so a step costs
its ticking modules' share of the arithmetic. (When every period divides the next, the
ticking modules are always the first few: a contiguous slice of the rows.)
``mode="masked"`` computes every module and then keeps the idle ones (skip-update): the
same numbers, none of the savings; it is the reference the tests and the benchmark compare
against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from rnnbook._validate import check_choice, check_positive_int, check_size, check_tensor
from rnnbook.skip import check_periods, clock, connectivity_mask, module_of_unit, skip_update

ACTIVATIONS = {"tanh": torch.tanh, "linear": lambda a: a}
MODES = ("sliced", "masked")
SKIP_TARGETS = ("c", "h", "ch", "i")


def _normal_init_(weight: torch.Tensor) -> None:
    """N(0, std = 1/sqrt(fan_in + fan_out)): the source's "normalized initialization",
    taken literally (PyTorch's xavier_normal_ is sqrt(2) wider)."""
    fan_out, fan_in = weight.shape
    nn.init.normal_(weight, 0.0, 1.0 / math.sqrt(fan_in + fan_out))


def _check_inputs(model, x: torch.Tensor, t0: int) -> None:
    check_tensor(x, "x", ndim=3)
    check_size(x, "x", 2, model.input_size, "the input size d_x")
    if x.shape[1] == 0:
        raise ValueError(f"x must have at least one time step, got shape {tuple(x.shape)}")
    if isinstance(t0, bool) or not isinstance(t0, int) or t0 < 0:
        raise ValueError(f"the clock offset t0 must be a non-negative integer, got {t0!r}")


class _Clockwork(nn.Module):
    """What both models share: the modules, their periods, the mask and the clock."""

    def __init__(self, d_x: int, H: int, periods: Sequence[int], connectivity: str):
        super().__init__()
        check_positive_int(d_x, "d_x")
        self.periods = check_periods(periods)
        self.input_size, self.hidden_size, self.n_modules = d_x, H, len(self.periods)
        self.module_size = H // self.n_modules
        self.register_buffer("module", module_of_unit(H, self.n_modules), persistent=False)
        self.connectivity = connectivity
        self.register_buffer(
            "mask", connectivity_mask(H, self.n_modules, connectivity), persistent=False
        )

    def unit_clock(self, L: int, t0: int = 0) -> torch.Tensor:
        """(L, H): 1 where the unit's module ticks at step t of a window starting at t0."""
        return clock(self.periods, L, t0)[:, self.module].float()


class CWRNN(_Clockwork):
    """A Clockwork RNN (cw-rnn) with a linear read-out of every unit.

    Args:
        d_x, H, d_y: input, hidden and output sizes; H must split into equal modules.
        periods: one period per module, non-decreasing, e.g. (1, 2, 4, 8).
        connectivity: ``"uni"`` (block-triangular, the original) or ``"bi"`` (dense).
        activation: ``"tanh"`` or ``"linear"``.

    ``forward(x, h0=None, t0=0, mode="sliced")`` takes x (B, L, d_x) and returns
    ``(y, h_all, h_L)``: outputs (B, L, d_y), states (B, L, H) and the last state (B, H).
    """

    def __init__(
        self,
        d_x: int,
        H: int,
        d_y: int,
        periods: Sequence[int],
        connectivity: str = "uni",
        activation: str = "tanh",
    ):
        super().__init__(d_x, H, periods, connectivity)
        check_positive_int(d_y, "d_y")
        check_choice(activation, "activation", tuple(ACTIVATIONS))
        self.activation = activation
        self.weight_ih = nn.Parameter(torch.empty(H, d_x))
        self.weight_hh = nn.Parameter(torch.empty(H, H))
        self.bias = nn.Parameter(torch.zeros(H))
        self.readout = nn.Linear(H, d_y)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _normal_init_(self.weight_ih)
        _normal_init_(self.weight_hh)
        with torch.no_grad():
            self.weight_hh.mul_(self.mask)
            self.bias.zero_()

    def n_parameters(self) -> int:
        """Trainable numbers, masked recurrent weights left out (the spec's counts)."""
        total = sum(p.numel() for p in self.parameters())
        return total - int((self.mask == 0).sum())

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None, t0: int = 0, mode="sliced"):
        _check_inputs(self, x, t0)
        check_choice(mode, "mode", MODES)
        B, L, _ = x.shape
        h = x.new_zeros(B, self.hidden_size) if h0 is None else h0
        check_tensor(h, "h0", ndim=2)
        if tuple(h.shape) != (B, self.hidden_size):
            raise ValueError(
                f"h0 must have shape (B, H) = ({B}, {self.hidden_size}), got {tuple(h.shape)}"
            )
        act = ACTIVATIONS[self.activation]
        x_proj = x @ self.weight_ih.T + self.bias  # (B, L, H): every step's input at once
        ticks = clock(self.periods, L, t0)  # (L, M) booleans
        states = []
        if mode == "masked":
            W = self.weight_hh * self.mask  # (H, H), W[destination, source]
            for t, x_t in enumerate(x_proj.unbind(dim=1)):
                update = ticks[t][self.module].to(x.dtype)  # (H,)
                h = skip_update(act(x_t + h @ W.T), h, update)
                states.append(h)
        else:
            blocks = self._blocks(self.weight_hh)
            # each module's input at every step, split once (not sliced at every step)
            x_modules = [x_m.unbind(dim=1) for x_m in x_proj.split(self.module_size, dim=2)]
            for t in range(L):
                h = self._sliced_step(
                    h, [x_m[t] for x_m in x_modules], blocks, ticks[t].tolist(), act
                )
                states.append(h)
        h_all = torch.stack(states, dim=1)
        return self.readout(h_all), h_all, h

    def _first_source(self, m: int) -> int:
        """The first unit module m reads: its own first unit ("uni") or unit 0 ("bi")."""
        return m * self.module_size if self.connectivity == "uni" else 0

    def _blocks(self, W: torch.Tensor) -> list[torch.Tensor]:
        """Each module's rows of W, only the columns it reads, copied once per sequence: the
        gradients of all steps then add up in these small blocks, not in the whole matrix.
        The columns a module reads are exactly the ones the mask keeps, so no mask is needed
        here, and the masked weights get no gradient."""
        k = self.module_size
        return [
            W[m * k : (m + 1) * k, self._first_source(m) :].clone() for m in range(self.n_modules)
        ]

    def _sliced_step(self, h, x_t, blocks, ticking, act):
        """Compute only the ticking modules' units; the others are the previous state.

        ``x_t`` is the list of the modules' projected inputs at this step. The state is split
        into its modules once (one node for autograd, not one slice per idle module)."""
        parts = list(h.split(self.module_size, dim=1))
        for m, (x_m, W_m, ticks) in enumerate(zip(x_t, blocks, ticking)):
            if ticks:
                first = self._first_source(m)
                source = h if first == 0 else h[:, first:]
                parts[m] = act(x_m + source @ W_m.T)
        return torch.cat(parts, dim=1)

    def extra_repr(self) -> str:
        return (
            f"d_x={self.input_size}, H={self.hidden_size}, periods={self.periods}, "
            f"connectivity={self.connectivity!r}, activation={self.activation!r}"
        )


class CWLSTM(_Clockwork):
    """A Clockwork LSTM: an LSTM split into clocked modules, with one skip target.

    The mask applies to all four recurrent matrices; on every step (all units)

        z_t = W x_t + (W_h ⊙ [C; C; C; C]) h_{t−1} + b,  (i, f, ĉ, o) from z_t,
        c̃_t = f ⊙ c_{t−1} + i ⊙ ĉ,

    and the unit clock k_t decides what an idle module keeps (cwlstm-targets):

    * ``"c"``:  c_t = k ⊙ c̃_t + (1 − k) ⊙ c_{t−1},  h_t = o ⊙ tanh(c_t)
    * ``"h"``:  c_t = c̃_t,  h_t = k ⊙ o ⊙ tanh(c̃_t) + (1 − k) ⊙ h_{t−1}
    * ``"ch"``: both of the above: the idle module is frozen
    * ``"i"``:  c_t = f ⊙ c_{t−1} + (k ⊙ i) ⊙ ĉ,  h_t = o ⊙ tanh(c_t)  (the input gate closed)

    Gate order and layout are torch's (i, f, g, o): ``weight_ih`` (4H, d_x), ``weight_hh``
    (4H, H), one ``bias`` (4H) whose forget part starts at ``forget_bias`` (2, as the
    source). With every period 1 and ``"bi"`` every target is the plain LSTM.
    ``forward(x, state=None, t0=0)`` returns ``(y, h_all, (h_L, c_L))``.
    """

    def __init__(
        self,
        d_x: int,
        H: int,
        d_y: int,
        periods: Sequence[int],
        skip_target: str = "c",
        connectivity: str = "uni",
        forget_bias: float = 2.0,
    ):
        super().__init__(d_x, H, periods, connectivity)
        check_positive_int(d_y, "d_y")
        check_choice(skip_target, "skip_target", SKIP_TARGETS)
        self.skip_target, self.forget_bias = skip_target, float(forget_bias)
        self.weight_ih = nn.Parameter(torch.empty(4 * H, d_x))
        self.weight_hh = nn.Parameter(torch.empty(4 * H, H))
        self.bias = nn.Parameter(torch.zeros(4 * H))
        self.register_buffer("mask4", self.mask.repeat(4, 1), persistent=False)
        self.readout = nn.Linear(H, d_y)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        H = self.hidden_size
        with torch.no_grad():
            for gate in range(4):  # per gate matrix, as the spec decides
                _normal_init_(self.weight_ih[gate * H : (gate + 1) * H])
                _normal_init_(self.weight_hh[gate * H : (gate + 1) * H])
            self.weight_hh.mul_(self.mask4)
            self.bias.zero_()
            self.bias[H : 2 * H] = self.forget_bias

    def n_parameters(self) -> int:
        total = sum(p.numel() for p in self.parameters())
        return total - int((self.mask4 == 0).sum())

    def forward(self, x: torch.Tensor, state=None, t0: int = 0):
        _check_inputs(self, x, t0)
        B, L, _ = x.shape
        H = self.hidden_size
        if state is None:
            h, c = x.new_zeros(B, H), x.new_zeros(B, H)
        else:
            h, c = state
            for part, name in ((h, "h0"), (c, "c0")):
                check_tensor(part, name, ndim=2)
                if tuple(part.shape) != (B, H):
                    raise ValueError(
                        f"{name} must have shape (B, H) = ({B}, {H}), got {tuple(part.shape)}"
                    )
        W = self.weight_hh * self.mask4
        x_proj = x @ self.weight_ih.T + self.bias  # (B, L, 4H)
        unit_clock = self.unit_clock(L, t0).to(x.dtype)  # (L, H)
        states = []
        for t, x_t in enumerate(x_proj.unbind(dim=1)):
            k = unit_clock[t]
            i, f, g, o = (x_t + h @ W.T).chunk(4, dim=-1)
            i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
            if self.skip_target == "i":
                c = f * c + (k * i) * g
                h = o * torch.tanh(c)
            else:
                c_candidate = f * c + i * g
                if self.skip_target == "h":
                    h = skip_update(o * torch.tanh(c_candidate), h, k)
                    c = c_candidate
                elif self.skip_target == "c":
                    c = skip_update(c_candidate, c, k)
                    h = o * torch.tanh(c)
                else:  # "ch"
                    h = skip_update(o * torch.tanh(c_candidate), h, k)
                    c = skip_update(c_candidate, c, k)
            states.append(h)
        h_all = torch.stack(states, dim=1)
        return self.readout(h_all), h_all, (h, c)

    def extra_repr(self) -> str:
        return (
            f"d_x={self.input_size}, H={self.hidden_size}, periods={self.periods}, "
            f"skip_target={self.skip_target!r}, connectivity={self.connectivity!r}"
        )


class ClockworkLM(nn.Module):
    """A word-level language model: an embedding, a Clockwork core, its read-out over words.

    ``cell="rnn"`` takes a :class:`CWRNN`, ``cell="lstm"`` a :class:`CWLSTM` with
    ``skip_target``. ``forward(tokens, state=None)`` takes ids (B, L) and returns
    ``(logits, state_L)``, logits (B, L, V). The clock restarts at every call (t0 = 0: all
    modules tick at the window's first word), while the state is carried from window to
    window by the caller (``rnnbook.train.tbptt_loop``).
    """

    def __init__(
        self,
        vocab_size: int,
        H: int,
        periods: Sequence[int],
        connectivity: str = "uni",
        cell: str = "rnn",
        skip_target: str = "c",
        embedding: int | None = None,
    ):
        super().__init__()
        check_positive_int(vocab_size, "vocab_size")
        check_choice(cell, "cell", ("rnn", "lstm"))
        embedding = H if embedding is None else embedding
        self.embedding = nn.Embedding(vocab_size, embedding)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        if cell == "rnn":
            self.core = CWRNN(embedding, H, vocab_size, periods, connectivity=connectivity)
        else:
            self.core = CWLSTM(
                embedding, H, vocab_size, periods, skip_target, connectivity=connectivity
            )

    def forward(self, tokens: torch.Tensor, state=None):
        check_tensor(tokens, "tokens", ndim=2)
        logits, _, state_L = self.core(self.embedding(tokens), state)
        return logits, state_L
