"""The Neural Turing Machine of Chapter 3: memory, addressing, the cell and the sequence model.

Equation labels (ntm-read)-(ntm-sharpen) are Chapter 3's (Graves et al. 2014, eqs. 2-9).
Every tensor is batch-first; the memory has shape (B, N, M): N rows (locations) of width M.

The memory operations are pure functions: the memory is passed in and a new one returned.

* :func:`read` (ntm-read) and :func:`write` (ntm-write), erase then add, for one or several
  heads;
* the four addressing steps, each runnable on its own: :func:`cosine_similarity` and
  :func:`content_weighting` (ntm-content), :func:`interpolate` (ntm-interpolate),
  :func:`shift` (ntm-shift),
  :func:`sharpen` (ntm-sharpen); :func:`address` composes them in that order.

:class:`NTMCell` is one time step in the book's canonical order (ntm-step): controller,
head outputs, read heads, write heads, output. Reads and all addressing use the memory of
the previous step (read before write). :class:`NTM` loops the cell over a sequence.

Defaults follow recipe (B) of Collier & Beel (2018): LSTM controller, memory
initialised to the constant 1e-6, learned non-uniform initial weightings
``softmax(U(-0.2, 0.2))`` (the symmetry trap: with constant memory, uniform initial
weightings can never become non-uniform), head outputs and logits clipped to ±20.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from rnnbook._validate import (
    check_choice,
    check_positive_int,
    check_shape,
    check_size,
    check_tensor,
)
from rnnbook.models.lstm import LSTMCell

COSINE_EPS = 1e-8  # (ntm-content): added to ||u|| ||v||, so a zero key or a zero row gives K = 0
SHARPEN_EPS = 1e-12  # (ntm-sharpen): keeps 0^gamma (and its log in d/dgamma) away from the weights
MEMORY_CONSTANT = 1e-6  # recipe (B): every memory entry starts at this value
INIT_BOUND = 0.2  # initial weighting logits and read-vector biases start in U(-0.2, 0.2)


# --- argument checks ---------------------------------------------------------------------------


def _check_memory(memory) -> tuple[int, int, int]:
    """The memory is (B, N, M); returns its three sizes."""
    check_tensor(memory, "memory", ndim=3)
    if not memory.is_floating_point():
        raise TypeError(f"memory must be a floating-point tensor, got {memory.dtype}")
    B, N, M = memory.shape
    if 0 in (B, N, M):
        raise ValueError(f"memory must have B, N, M >= 1, got shape {tuple(memory.shape)}")
    return B, N, M


# --- reading and writing, (ntm-read)-(ntm-write) ---------------------------------------------


def read(memory: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """(ntm-read) ``r = sum_i w(i) M(i) = M^T w``: memory (B, N, M), weighting (B, N) -> (B, M)."""
    B, N, _ = _check_memory(memory)
    check_shape(w, "w", (B, N), "(B, N)")
    return torch.einsum("bn,bnm->bm", w, memory)


def write(
    memory: torch.Tensor, w: torch.Tensor, erase: torch.Tensor, add: torch.Tensor
) -> torch.Tensor:
    """(ntm-write): erase, then add. Returns the new memory (B, N, M).

    One head: ``w`` (B, N), ``erase`` and ``add`` (B, M), and
    ``M_t = M_{t-1} * (1 1^T - w e^T) + w a^T``.

    Several heads: ``w`` (B, H, N), ``erase`` and ``add`` (B, H, M). All erases come first,
    their factors multiplied, then all adds, summed; so the heads' order does not
    matter.
    """
    B, N, M = _check_memory(memory)
    check_tensor(w, "w", ndim=(2, 3))
    if w.dim() == 2:  # one head: give it a head axis of size 1
        check_shape(w, "w", (B, N), "(B, N)")
        check_shape(erase, "erase", (B, M), "(B, M)")
        check_shape(add, "add", (B, M), "(B, M)")
        w, erase, add = w.unsqueeze(1), erase.unsqueeze(1), add.unsqueeze(1)
    else:
        H = w.shape[1]
        check_shape(w, "w", (B, H, N), "(B, H, N)")
        check_shape(erase, "erase", (B, H, M), "(B, H, M)")
        check_shape(add, "add", (B, H, M), "(B, H, M)")
    # (ntm-write) for every head h: the factor 1 - w_h(i) e_h[j]; their product over the heads
    keep = torch.prod(1 - w.unsqueeze(-1) * erase.unsqueeze(-2), dim=1)  # (B, N, M)
    # (ntm-write) the adds w_h(i) a_h[j], summed over the heads
    added = torch.einsum("bhn,bhm->bnm", w, add)
    return memory * keep + added


# --- addressing, (ntm-content)-(ntm-sharpen) -------------------------------------------------


def cosine_similarity(memory: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(ntm-content) ``K[k, M(i)] = k . M(i) / (||k|| ||M(i)|| + 1e-8)`` for every row: (B, N)."""
    B, _, M = _check_memory(memory)
    check_shape(k, "k", (B, M), "(B, M)")
    dot = torch.einsum("bnm,bm->bn", memory, k)
    row_norms = torch.linalg.vector_norm(memory, dim=-1)  # (B, N)
    key_norm = torch.linalg.vector_norm(k, dim=-1, keepdim=True)  # (B, 1)
    return dot / (row_norms * key_norm + COSINE_EPS)


def content_weighting(memory: torch.Tensor, k: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """(ntm-content) ``w^c = softmax_i(beta K[k, M(i)])``, the softmax over the N rows: (B, N).

    ``k`` (B, M) is the key, ``beta`` (B, 1) the key strength (beta -> 0 gives uniform
    weights, a large beta a one-hot at the most similar row).
    """
    B, _, _ = _check_memory(memory)
    check_shape(beta, "beta", (B, 1), "(B, 1)")
    return torch.softmax(beta * cosine_similarity(memory, k), dim=-1)


def interpolate(w_c: torch.Tensor, w_prev: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """(ntm-interpolate) ``w^g = g w^c + (1 - g) w_{t-1}``: g = 1 uses the content weighting
    only, g = 0 keeps the previous weighting. ``w_c`` and ``w_prev`` (B, N), ``g`` (B, 1) in
    (0, 1)."""
    check_tensor(w_c, "w_c", ndim=2)
    B, N = w_c.shape
    check_shape(w_c, "w_c", (B, N), "(B, N)")
    check_shape(w_prev, "w_prev", (B, N), "(B, N)")
    check_shape(g, "g", (B, 1), "(B, 1)")
    return g * w_c + (1 - g) * w_prev


def shift(w_g: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """(ntm-shift) the circular convolution ``w~(i) = sum_j w^g(j) s(i - j)``, indices modulo N.

    ``s`` (B, 2S+1) is a distribution over the shifts ``delta = -S, ..., S``: entry ``k`` is
    the shift ``delta = k - S`` (the book's convention). Since
    ``torch.roll(w, delta)[i] = w[i - delta]``, the sum is ``sum_delta s(delta) roll(w^g,
    delta)``, so ``s(+1) = 1`` moves all mass from row i to row i+1 (and from N-1 to 0).
    """
    check_tensor(w_g, "w_g", ndim=2)
    B, N = w_g.shape
    check_shape(w_g, "w_g", (B, N), "(B, N)")
    check_tensor(s, "s", ndim=2)
    n_shifts = s.shape[1]
    if s.shape[0] != B or n_shifts % 2 == 0:
        raise ValueError(
            f"s must have shape (B, 2S+1) with B = {B} and an odd number of shifts, "
            f"got {tuple(s.shape)}"
        )
    if n_shifts > N:
        raise ValueError(f"the {n_shifts} shifts of s must fit in the N = {N} rows of w_g")
    S = n_shifts // 2
    # rolled[b, i, k] = w_g[b, i - delta] for delta = k - S: every shifted copy at once
    rolled = torch.stack([torch.roll(w_g, shifts=delta, dims=-1) for delta in range(-S, S + 1)], -1)
    return torch.einsum("bnk,bk->bn", rolled, s)


def sharpen(w_tilde: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """(ntm-sharpen) ``w(i) = w~(i)^gamma / sum_j w~(j)^gamma``, with ``gamma`` (B, 1) >= 1.

    Numerics: ``(w~ + 1e-12)^gamma``, divided by ``sum + 1e-12``. Before that,
    ``w~`` is divided by its largest entry. (ntm-sharpen) does not change when w~ is scaled, and the
    rescaling keeps the largest term at 1: without it a flat w~ raised to a large gamma
    underflows (``(1/128)^10 = 1e-21``) and the sum drowns in the 1e-12. (The largest entry
    is taken as at least 1e-12, so an all-zero w~ gives no NaN.)
    """
    check_tensor(w_tilde, "w_tilde", ndim=2)
    B, N = w_tilde.shape
    check_shape(w_tilde, "w_tilde", (B, N), "(B, N)")
    check_shape(gamma, "gamma", (B, 1), "(B, 1)")
    w_scaled = w_tilde / w_tilde.amax(dim=-1, keepdim=True).clamp_min(SHARPEN_EPS)
    powered = (w_scaled + SHARPEN_EPS) ** gamma
    return powered / (powered.sum(dim=-1, keepdim=True) + SHARPEN_EPS)


def address(
    memory: torch.Tensor,
    k: torch.Tensor,
    beta: torch.Tensor,
    g: torch.Tensor,
    s: torch.Tensor,
    gamma: torch.Tensor,
    w_prev: torch.Tensor,
) -> torch.Tensor:
    """One head's weighting (B, N): content (ntm-content), interpolation (ntm-interpolate),
    shift (ntm-shift), sharpening (ntm-sharpen), in that order.

    ``memory`` (B, N, M), key ``k`` (B, M), key strength ``beta`` (B, 1), gate ``g`` (B, 1),
    shift distribution ``s`` (B, 2S+1), ``gamma`` (B, 1) >= 1 and the head's previous
    weighting ``w_prev`` (B, N).
    """
    B, N, _ = _check_memory(memory)
    check_shape(w_prev, "w_prev", (B, N), "(B, N)")
    w_c = content_weighting(memory, k, beta)  # (ntm-content)
    w_g = interpolate(w_c, w_prev, g)  # (ntm-interpolate)
    w_tilde = shift(w_g, s)  # (ntm-shift)
    return sharpen(w_tilde, gamma)  # (ntm-sharpen)


# --- the heads' outputs --------------------------------------------------------------------------


class HeadOutputs(NamedTuple):
    """One head's parameters after their activations; erase and add only for a
    write head."""

    k: torch.Tensor  # (B, M), tanh
    beta: torch.Tensor  # (B, 1), softplus
    g: torch.Tensor  # (B, 1), sigmoid
    s: torch.Tensor  # (B, 2S+1), softmax
    gamma: torch.Tensor  # (B, 1), 1 + softplus
    erase: torch.Tensor | None = None  # (B, M), sigmoid
    add: torch.Tensor | None = None  # (B, M), tanh


def head_sizes(M: int, n_shifts: int, write: bool) -> list[int]:
    """The sizes of one head's slice of xi, in order: k, beta, g, s, gamma (and e, a).

    M + 6 for a read head with three shifts, M + 6 + 2M for a write head.
    """
    sizes = [M, 1, 1, n_shifts, 1]
    return sizes + [M, M] if write else sizes


def head_outputs(xi_head: torch.Tensor, M: int, n_shifts: int, write: bool) -> HeadOutputs:
    """Split one head's slice of the (clipped) xi_t and apply their activations."""
    parts = xi_head.split(head_sizes(M, n_shifts, write), dim=-1)
    k, beta, g, s, gamma = parts[:5]
    outputs = HeadOutputs(
        k=torch.tanh(k),
        beta=F.softplus(beta),
        g=torch.sigmoid(g),
        s=torch.softmax(s, dim=-1),
        gamma=1 + F.softplus(gamma),
    )
    if write:
        erase, add = parts[5:]
        outputs = outputs._replace(erase=torch.sigmoid(erase), add=torch.tanh(add))
    return outputs


def fix_head_parameters(head: HeadOutputs, overrides: dict[str, torch.Tensor]) -> HeadOutputs:
    """``head`` with the parameters named in ``overrides`` replaced by fixed values, broadcast
    over the batch: an inference-time ablation such as gamma = 1 (no sharpening), g = 1 (content
    only), s = (0, 1, 0) (no shift) or e = a = 0 (no writing). ``overrides`` empty: ``head``."""
    fixed = {}
    for name, value in overrides.items():
        if name not in HeadOutputs._fields:
            raise ValueError(f"cannot fix {name!r}: a head's parameters are {HeadOutputs._fields}")
        current = getattr(head, name)
        if current is None:
            raise ValueError(f"a read head has no {name!r}; only write heads erase and add")
        value = torch.as_tensor(value, dtype=current.dtype, device=current.device)
        if value.shape[-1:] not in ((1,), current.shape[-1:]) and value.ndim > 0:
            raise ValueError(
                f"the fixed {name!r} must have last size 1 or {current.shape[-1]}, "
                f"got shape {tuple(value.shape)}"
            )
        fixed[name] = value.expand_as(current)
    return head._replace(**fixed)


# --- the cell ---------------------------------------------------------------------------------


class NTMState(NamedTuple):
    """What one step hands to the next (ntm-step)."""

    controller: tuple[torch.Tensor, ...]  # (h, c) of the LSTM, each (B, d_ctrl); () for "ff"
    reads: torch.Tensor  # r_{t-1} of every read head, (B, R, M)
    w_read: torch.Tensor  # the read heads' weightings w_{t-1}, (B, R, N)
    w_write: torch.Tensor  # the write heads' weightings w_{t-1}, (B, W, N)
    memory: torch.Tensor  # M_{t-1}, (B, N, M)


CONTROLLERS = ("lstm", "ff")
MEMORY_INITS = ("constant", "learned", "random")


class NTMCell(nn.Module):
    """One NTM step in the book's order (ntm-step).

    1. controller: ``(h_t, c_t) = LSTM([x_t; r_{t-1}], (h_{t-1}, c_{t-1}))``;
    2. head parameters: ``xi_t = clip(W_xi h_t + b_xi, -clip, clip)``;
    3. each head's slice of xi_t through its activations;
    4. read heads: ``w_t^r = address(M_{t-1}, ..., w_{t-1}^r)``, ``r_t = M_{t-1}^T w_t^r``;
    5. write heads: ``w_t^w = address(M_{t-1}, ..., w_{t-1}^w)``,
       ``M_t = write(M_{t-1}, w_t^w, e_t, a_t)``;
    6. output logits: ``o_t = clip(W_y [h_t; r_t] + b_y, -clip, clip)``.

    Args:
        d_x: input size. d_y: output size (logits).
        N, M: memory rows and row width. d_ctrl: controller size.
        controller: ``"lstm"`` (the book's default; forget-gate bias +1 as in [CB18]) or
            ``"ff"``, one ``tanh`` layer ``h_t = tanh(W [x_t; r_{t-1}] + b)`` with no state.
        n_read, n_write: numbers of read and write heads.
        shift: S, the largest shift; the heads choose among the 2S+1 shifts -S..S.
        mem_init: ``"constant"`` (1e-6 everywhere, not learned; recipe (B)), ``"learned"``
            (``tanh`` of a parameter (N, M) from Glorot's U(±sqrt(6 / (1 + N M))), as
            [CB18]'s learned init) or ``"random"`` (``tanh`` of N(0, 0.5^2), drawn once when
            the cell is built and then fixed; [CB18]'s code lets it train).
        clip: the bound on xi_t and the logits.

    Learned initial state: ``h_0``, ``c_0`` (zeros at first), the read vectors
    ``r_0 = tanh(bias)`` and the weightings ``w_0 = softmax(logits)``, both from
    U(-0.2, 0.2). Random logits make w_0 non-uniform, which is what lets the rows of a
    constant memory ever differ (the symmetry trap).
    """

    def __init__(
        self,
        d_x: int,
        d_y: int,
        N: int = 128,
        M: int = 20,
        controller: str = "lstm",
        d_ctrl: int = 100,
        n_read: int = 1,
        n_write: int = 1,
        shift: int = 1,
        mem_init: str = "constant",
        clip: float = 20.0,
    ):
        super().__init__()
        for value, name in (
            (d_x, "d_x"),
            (d_y, "d_y"),
            (N, "N"),
            (M, "M"),
            (d_ctrl, "d_ctrl"),
            (n_read, "n_read"),
            (n_write, "n_write"),
        ):
            check_positive_int(value, name)
        check_choice(controller, "controller", CONTROLLERS)
        check_choice(mem_init, "mem_init", MEMORY_INITS)
        if isinstance(shift, bool) or not isinstance(shift, int) or shift < 0:
            raise ValueError(f"shift must be a non-negative integer, got {shift!r}")
        if 2 * shift + 1 > N:
            raise ValueError(f"the 2 * shift + 1 = {2 * shift + 1} shifts must fit in N = {N} rows")
        if isinstance(clip, bool) or not isinstance(clip, int | float) or not 0 < clip < math.inf:
            raise ValueError(f"clip must be a positive finite number, got {clip!r}")
        self.input_size, self.output_size = d_x, d_y
        self.N, self.M, self.d_ctrl = N, M, d_ctrl
        self.controller_kind, self.n_read, self.n_write = controller, n_read, n_write
        self.shift, self.n_shifts = shift, 2 * shift + 1
        self.mem_init, self.clip = mem_init, float(clip)
        # Inference experiments only (empty in training): replace a head parameter by a fixed
        # value, e.g. {"gamma": torch.tensor([1.0])} switches sharpening off in every read
        # head. Keys are HeadOutputs fields; see fix_head_parameters.
        self.read_overrides: dict[str, torch.Tensor] = {}
        self.write_overrides: dict[str, torch.Tensor] = {}

        d_in = d_x + n_read * M  # [x_t; r_{t-1}^(1); ...; r_{t-1}^(R)]
        if controller == "lstm":
            self.controller = LSTMCell(d_in, d_ctrl, forget_bias=1.0)
            self.h0 = nn.Parameter(torch.zeros(d_ctrl))
            self.c0 = nn.Parameter(torch.zeros(d_ctrl))
        else:
            self.controller = nn.Linear(d_in, d_ctrl)
        read_size = sum(head_sizes(M, self.n_shifts, write=False))  # M + 2S + 4
        write_size = sum(head_sizes(M, self.n_shifts, write=True))  # 3M + 2S + 4
        self.xi_sizes = [read_size] * n_read + [write_size] * n_write  # xi_t, head by head
        self.interface = nn.Linear(d_ctrl, sum(self.xi_sizes))  # W_xi, b_xi
        self.readout = nn.Linear(d_ctrl + n_read * M, d_y)  # W_y, b_y
        self.read0_bias = nn.Parameter(torch.empty(n_read, M))  # r_0 = tanh(read0_bias)
        self.w0_logits = nn.Parameter(torch.empty(n_read + n_write, N))  # w_0 = softmax(...)
        if mem_init == "learned":
            self.memory0_logits = nn.Parameter(torch.empty(N, M))  # M_0 = tanh(memory0_logits)
        elif mem_init == "random":
            self.register_buffer("memory0", torch.tanh(0.5 * torch.randn(N, M)))  # saved, fixed
        self.reset_initial_state()

    @torch.no_grad()
    def reset_initial_state(self) -> None:
        """Draw the learned initial state: r_0 and w_0 logits from U(-0.2, 0.2), h_0 = c_0 = 0
        and, for ``mem_init="learned"``, the memory's logits from Glorot's uniform."""
        nn.init.uniform_(self.read0_bias, -INIT_BOUND, INIT_BOUND)
        nn.init.uniform_(self.w0_logits, -INIT_BOUND, INIT_BOUND)
        if self.controller_kind == "lstm":
            nn.init.zeros_(self.h0)
            nn.init.zeros_(self.c0)
        if self.mem_init == "learned":
            bound = math.sqrt(6 / (1 + self.N * self.M))
            nn.init.uniform_(self.memory0_logits, -bound, bound)

    def initial_memory(self, dtype, device) -> torch.Tensor:
        """M_0, (N, M), shared by every sequence of a batch."""
        if self.mem_init == "constant":
            return torch.full((self.N, self.M), MEMORY_CONSTANT, dtype=dtype, device=device)
        if self.mem_init == "learned":
            return torch.tanh(self.memory0_logits)
        return self.memory0

    def initial_state(self, B: int, dtype=None, device=None) -> NTMState:
        """The learned initial state, repeated over a batch of B sequences."""
        check_positive_int(B, "B")
        like = self.w0_logits
        dtype, device = dtype or like.dtype, device or like.device
        R, W = self.n_read, self.n_write

        def batch(x):
            return x.to(dtype=dtype, device=device).expand(B, *x.shape)

        if self.controller_kind == "lstm":
            controller = (batch(self.h0), batch(self.c0))
        else:
            controller = ()
        w0 = torch.softmax(self.w0_logits, dim=-1)
        return NTMState(
            controller=controller,
            reads=batch(torch.tanh(self.read0_bias)),
            w_read=batch(w0[:R]),
            w_write=batch(w0[R : R + W]),
            memory=batch(self.initial_memory(dtype, device)),
        )

    def check_state(self, state, B: int) -> None:
        """``state`` must be an :class:`NTMState` with the shapes of ``initial_state(B)``."""
        if not isinstance(state, NTMState):
            raise TypeError(f"state must be an NTMState, got {type(state).__name__}")
        n_parts = 2 if self.controller_kind == "lstm" else 0
        parts = state.controller
        if not isinstance(parts, tuple) or len(parts) != n_parts:
            got = f"a tuple of {len(parts)}" if isinstance(parts, tuple) else type(parts).__name__
            raise ValueError(
                f"state.controller must be a tuple of {n_parts} tensors for controller="
                f"{self.controller_kind!r}, got {got}"
            )
        for part in state.controller:
            check_shape(part, "each controller state", (B, self.d_ctrl), "(B, d_ctrl)")
        R, W, N, M = self.n_read, self.n_write, self.N, self.M
        check_shape(state.reads, "state.reads", (B, R, M), "(B, R, M)")
        check_shape(state.w_read, "state.w_read", (B, R, N), "(B, R, N)")
        check_shape(state.w_write, "state.w_write", (B, W, N), "(B, W, N)")
        check_shape(state.memory, "state.memory", (B, N, M), "(B, N, M)")

    def controller_step(self, controller_input: torch.Tensor, controller_state):
        """Step 1: ``h_t`` and the controller state to hand on, ``(h_t, c_t)`` for the LSTM
        and ``()`` for the feed-forward controller."""
        if self.controller_kind == "lstm":
            x_proj = self.controller.project_inputs(controller_input)
            h, c = self.controller.step(x_proj, controller_state)
            return h, (h, c)
        return torch.tanh(self.controller(controller_input)), ()

    def forward(self, x_t: torch.Tensor, state: NTMState | None = None, return_internals=False):
        """One step: ``x_t`` (B, d_x) -> ``(logits_t (B, d_y), state_t, extras)``.

        ``extras`` is None unless ``return_internals=True``; then a dict of this step's
        ``w_read`` (B, R, N), ``w_write`` (B, W, N), ``erase`` and ``add`` (B, W, M),
        ``reads`` (B, R, M) and each head's activated parameters ``beta_read``, ``g_read``,
        ``gamma_read`` (B, R, 1), ``s_read`` (B, R, 2S+1) and the same with ``_write``
        (B, W, ...), for figures.
        """
        check_tensor(x_t, "x_t", ndim=2)
        check_size(x_t, "x_t", 1, self.input_size, "the input size d_x")
        B = x_t.shape[0]
        if state is None:
            state = self.initial_state(B, dtype=x_t.dtype, device=x_t.device)
        self.check_state(state, B)
        memory = state.memory  # M_{t-1}: every head addresses it, and the reads see it

        # 1. controller, fed with the input and the previous read vectors
        controller_input = torch.cat([x_t, state.reads.flatten(1)], dim=-1)
        h, controller = self.controller_step(controller_input, state.controller)
        # 2.-3. the head parameters, clipped, then split per head and activated
        xi = torch.clamp(self.interface(h), -self.clip, self.clip)
        slices = xi.split(self.xi_sizes, dim=-1)
        read_heads = [
            fix_head_parameters(head_outputs(p, self.M, self.n_shifts, False), self.read_overrides)
            for p in slices[: self.n_read]
        ]
        write_heads = [
            fix_head_parameters(head_outputs(p, self.M, self.n_shifts, True), self.write_overrides)
            for p in slices[self.n_read :]
        ]
        # 4. read heads: address M_{t-1} and read from it (ntm-read)
        w_read = torch.stack(
            [
                address(memory, p.k, p.beta, p.g, p.s, p.gamma, state.w_read[:, i])
                for i, p in enumerate(read_heads)
            ],
            dim=1,
        )
        reads = torch.stack([read(memory, w_read[:, i]) for i in range(self.n_read)], dim=1)
        # 5. write heads: address M_{t-1}, then erase and add (ntm-write)
        w_write = torch.stack(
            [
                address(memory, p.k, p.beta, p.g, p.s, p.gamma, state.w_write[:, i])
                for i, p in enumerate(write_heads)
            ],
            dim=1,
        )
        erase = torch.stack([p.erase for p in write_heads], dim=1)
        add = torch.stack([p.add for p in write_heads], dim=1)
        new_memory = write(memory, w_write, erase, add)
        # 6. output logits from h_t and the new read vectors
        logits = self.readout(torch.cat([h, reads.flatten(1)], dim=-1))
        logits = torch.clamp(logits, -self.clip, self.clip)

        new_state = NTMState(controller, reads, w_read, w_write, new_memory)
        extras = None
        if return_internals:
            extras = {
                "w_read": w_read,
                "w_write": w_write,
                "erase": erase,
                "add": add,
                "reads": reads,
            }
            for name in ("beta", "g", "gamma", "s"):  # the heads' parameters, (B, heads, size)
                extras[f"{name}_read"] = torch.stack([getattr(p, name) for p in read_heads], 1)
                extras[f"{name}_write"] = torch.stack([getattr(p, name) for p in write_heads], 1)
        return logits, new_state, extras

    def extra_repr(self) -> str:
        return (
            f"d_x={self.input_size}, d_y={self.output_size}, N={self.N}, M={self.M}, "
            f"controller={self.controller_kind!r}, d_ctrl={self.d_ctrl}, n_read={self.n_read}, "
            f"n_write={self.n_write}, shift={self.shift}, mem_init={self.mem_init!r}, "
            f"clip={self.clip:g}"
        )


class NTM(nn.Module):
    """An :class:`NTMCell` looped over a batch-first sequence.

    ``NTM(d_x, d_y, **options)`` takes the arguments of :class:`NTMCell`.
    ``forward(x, state=None, return_internals=False)`` takes ``x`` (B, T, d_x) and returns
    ``(logits, state_T, internals)``: the logits of every step (B, T, d_y), the final
    :class:`NTMState`, and None or (with ``return_internals=True``) the cell's extras
    stacked over time, each of shape (B, T, ...).
    """

    def __init__(self, d_x: int, d_y: int, **options):
        super().__init__()
        self.cell = NTMCell(d_x, d_y, **options)

    def forward(self, x: torch.Tensor, state: NTMState | None = None, return_internals=False):
        return run_memory_cell(self.cell, x, state, return_internals)


def run_memory_cell(cell: nn.Module, x: torch.Tensor, state=None, return_internals=False):
    """Loop a memory cell, ``cell(x_t, state, return_internals) -> (logits_t, state, extras)``
    (the NTM's or the DNC's), over ``x`` (B, T, d_x); ``state=None`` starts from
    ``cell.initial_state``. Returns ``(logits (B, T, d_y), state_T, internals)``, the
    internals (with ``return_internals=True``) the extras stacked over time, (B, T, ...)."""
    check_tensor(x, "x", ndim=3)
    check_size(x, "x", 2, cell.input_size, "the input size d_x")
    B, T, _ = x.shape
    if T == 0:
        raise ValueError(f"x must have at least one time step, got shape {tuple(x.shape)}")
    if state is None:
        state = cell.initial_state(B, dtype=x.dtype, device=x.device)
    logits, steps = [], []
    for x_t in x.unbind(dim=1):
        logits_t, state, extras = cell(x_t, state, return_internals)
        logits.append(logits_t)
        steps.append(extras)
    internals = None
    if return_internals:
        internals = {name: torch.stack([s[name] for s in steps], dim=1) for name in steps[0]}
    return torch.stack(logits, dim=1), state, internals


# --- the copy task's loss and metrics ------------------------------------------------------


def copy_answer(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The logits of the answer steps L+1..2L, (B, L, width), for copy targets ``y`` (B, L, width).

    ``logits`` are the outputs of all 2L+1 steps of a ``copy_task`` input, (B, 2L+1, width).
    """
    check_tensor(y, "y", ndim=3)
    B, L, width = y.shape
    check_shape(logits, "logits", (B, 2 * L + 1, width), "(B, 2L+1, width)")
    return logits[:, L + 1 :]


def copy_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy with logits on the answer steps, summed over the bits and the L
    steps and averaged over the batch: the cost per sequence in nats.

    Divide by ``ln 2`` (:func:`bits_per_sequence`) for the cost in bits; guessing costs 8L bits.
    """
    answer = copy_answer(logits, y)
    return F.binary_cross_entropy_with_logits(answer, y, reduction="sum") / y.shape[0]


def bits_per_sequence(loss_nats: torch.Tensor | float) -> torch.Tensor | float:
    """A cost per sequence in nats (as :func:`copy_loss` returns) in bits: ``loss / ln 2``."""
    return loss_nats / math.log(2)


def bit_errors_per_sequence(logits: torch.Tensor, y: torch.Tensor) -> float:
    """The mean number of wrong answer bits per sequence after thresholding the output at 0.5
    (a logit above 0 means 1): 0 is a perfect copy, 4L is guessing."""
    answer = copy_answer(logits, y)
    wrong = ((answer > 0).to(y.dtype) != y).sum()
    return float(wrong) / y.shape[0]
