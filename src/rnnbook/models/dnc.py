"""The Differentiable Neural Computer's memory addressing (Graves et al. 2016), Chapter 3.

Pure functions, one equation each, batch-first. The memory has N rows of width W; there are
R read heads and one write head. Weightings are (B, N), or (B, R, N) for the read heads.

* dynamic allocation: :func:`retention` psi_t, :func:`update_usage` u_t and
  :func:`allocation_weighting` a_t; :func:`write_weighting` mixes a_t with content;
* temporal links: :func:`update_precedence` p_t and :func:`update_links` L_t;
* reading: :func:`forward_weighting` f_t, :func:`backward_weighting` b_t and
  :func:`read_weighting`, which mixes them with content by the read modes pi_t.

Content lookup is the NTM's (ntm-content), :func:`rnnbook.models.ntm.content_weighting`, with
strengths from :func:`oneplus`. The DNC has no shift and no sharpening.

:class:`DNCCell` composes them into one trainable step (an LSTM controller, deepmind/dnc's
interface vector, write then read), :class:`DNC` loops it over a sequence; equation labels
(ntm-content), (ntm-read), (ntm-write), (ntm-dnc-allocation) and (ntm-dnc-links) are
Chapter 3's.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from rnnbook._validate import check_positive_int, check_shape, check_size, check_tensor
from rnnbook.models.ntm import COSINE_EPS, content_weighting, run_memory_cell, write

USAGE_EPS = 1e-6  # deepmind/dnc squashes usage to eps + (1 - eps) u before sorting


def _check_weightings(w, name: str) -> tuple[int, int]:
    """A (B, N) weighting; returns (B, N)."""
    check_tensor(w, name, ndim=2)
    check_shape(w, name, tuple(w.shape), "(B, N)")
    return w.shape


def _check_read_weightings(w, name: str, B: int, N: int) -> int:
    """The read heads' (B, R, N) weightings; returns R."""
    check_tensor(w, name, ndim=3)
    R = w.shape[1]
    check_shape(w, name, (B, R, N), "(B, R, N)")
    return R


def oneplus(x: torch.Tensor) -> torch.Tensor:
    """``oneplus(x) = 1 + log(1 + e^x)``, in [1, inf): the DNC's key strengths."""
    return 1 + F.softplus(x)


# --- usage and allocation ---------------------------------------------------------------------


def retention(free_gates: torch.Tensor, w_read_prev: torch.Tensor) -> torch.Tensor:
    """``psi_t = prod_i (1 - f_t^i w_{t-1}^{r,i})``: how much of each row is *not* freed.

    ``free_gates`` (B, R) in [0, 1], ``w_read_prev`` (B, R, N) -> (B, N). A free gate at 1
    releases the rows that its head read at the previous step.
    """
    check_tensor(free_gates, "free_gates", ndim=2)
    B, R = free_gates.shape
    check_shape(free_gates, "free_gates", (B, R), "(B, R)")
    check_tensor(w_read_prev, "w_read_prev", ndim=3)
    check_shape(w_read_prev, "w_read_prev", (B, R, w_read_prev.shape[2]), "(B, R, N)")
    return torch.prod(1 - free_gates.unsqueeze(-1) * w_read_prev, dim=1)


def update_usage(
    usage_prev: torch.Tensor, w_write_prev: torch.Tensor, psi: torch.Tensor
) -> torch.Tensor:
    """``u_t = (u_{t-1} + w_{t-1}^w - u_{t-1} * w_{t-1}^w) * psi_t``, all (B, N).

    Writing raises a row's usage towards 1; freeing (psi < 1) lowers it. (deepmind/dnc
    stops the gradient through ``w_{t-1}^w`` here; a cell can pass ``w.detach()``.)
    """
    B, N = _check_weightings(usage_prev, "usage_prev")
    check_shape(w_write_prev, "w_write_prev", (B, N), "(B, N)")
    check_shape(psi, "psi", (B, N), "(B, N)")
    return (usage_prev + w_write_prev - usage_prev * w_write_prev) * psi


def allocation_weighting(usage: torch.Tensor, eps: float = USAGE_EPS) -> torch.Tensor:
    """``a_t[phi[j]] = (1 - u_t[phi[j]]) prod_{i<j} u_t[phi[i]]``, (B, N).

    ``phi`` lists the rows by ascending usage (the free list). The least-used row gets
    ``1 - u``; each later row only what the rows before it leave over, so a fully free row
    (u = 0) takes all the weight. First the usage is squashed to ``eps + (1 - eps) u``, as
    deepmind/dnc does; ``eps=0`` gives the formula as written. The sort makes a_t only
    piecewise differentiable in u.
    """
    _check_weightings(usage, "usage")
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 <= eps < 1:
        raise ValueError(f"eps must be a number in [0, 1), got {eps!r}")
    usage = eps + (1 - eps) * usage
    sorted_usage, phi = torch.sort(usage, dim=-1, stable=True)  # phi: the free list
    # prod_{i<j} u[phi[i]]: the cumulative product of the sorted usages, shifted by one
    ones = torch.ones_like(sorted_usage[:, :1])
    before = torch.cumprod(torch.cat([ones, sorted_usage[:, :-1]], dim=-1), dim=-1)
    sorted_allocation = (1 - sorted_usage) * before
    return torch.zeros_like(usage).scatter(-1, phi, sorted_allocation)  # back to row order


def write_weighting(
    allocation: torch.Tensor,
    content: torch.Tensor,
    allocation_gate: torch.Tensor,
    write_gate: torch.Tensor,
) -> torch.Tensor:
    """``w_t^w = g^w [g^a a_t + (1 - g^a) c_t]``: allocation ``a_t`` and content weighting
    ``c_t`` (B, N), gates ``g^a`` and ``g^w`` (B, 1) in [0, 1]. A write gate at 0 writes
    nowhere."""
    B, N = _check_weightings(allocation, "allocation")
    check_shape(content, "content", (B, N), "(B, N)")
    check_shape(allocation_gate, "allocation_gate", (B, 1), "(B, 1)")
    check_shape(write_gate, "write_gate", (B, 1), "(B, 1)")
    return write_gate * (allocation_gate * allocation + (1 - allocation_gate) * content)


# --- temporal links ---------------------------------------------------------------------------


def update_precedence(precedence_prev: torch.Tensor, w_write: torch.Tensor) -> torch.Tensor:
    """``p_t = (1 - sum_i w_t^w[i]) p_{t-1} + w_t^w``, (B, N); ``p_0 = 0``.

    p_t[i] is how much row i was the last row written to.
    """
    B, N = _check_weightings(precedence_prev, "precedence_prev")
    check_shape(w_write, "w_write", (B, N), "(B, N)")
    return (1 - w_write.sum(dim=-1, keepdim=True)) * precedence_prev + w_write


def update_links(
    links_prev: torch.Tensor, precedence_prev: torch.Tensor, w_write: torch.Tensor
) -> torch.Tensor:
    """``L_t[i, j] = (1 - w[i] - w[j]) L_{t-1}[i, j] + w[i] p_{t-1}[j]``, ``L_t[i, i] = 0``.

    ``links_prev`` (B, N, N), ``precedence_prev`` and ``w_write`` (B, N). L_t[i, j] is how
    much row i was written right after row j. Note ``p_{t-1}``: update the links before the
    precedence.
    """
    B, N = _check_weightings(w_write, "w_write")
    check_shape(links_prev, "links_prev", (B, N, N), "(B, N, N)")
    check_shape(precedence_prev, "precedence_prev", (B, N), "(B, N)")
    w_i, w_j = w_write.unsqueeze(-1), w_write.unsqueeze(-2)  # (B, N, 1) and (B, 1, N)
    links = torch.addcmul(w_i * precedence_prev.unsqueeze(-2), 1 - w_i - w_j, links_prev)
    links.diagonal(dim1=-2, dim2=-1).zero_()  # L_t[i, i] = 0, in place: no (N, N) mask to apply
    return links


def forward_weighting(links: torch.Tensor, w_read_prev: torch.Tensor) -> torch.Tensor:
    """``f_t^i = L_t w_{t-1}^{r,i}``: one step forward in the order of writing, (B, R, N)."""
    check_tensor(links, "links", ndim=3)
    B, N = links.shape[0], links.shape[1]
    check_shape(links, "links", (B, N, N), "(B, N, N)")
    _check_read_weightings(w_read_prev, "w_read_prev", B, N)
    return torch.einsum("bij,brj->bri", links, w_read_prev)


def backward_weighting(links: torch.Tensor, w_read_prev: torch.Tensor) -> torch.Tensor:
    """``b_t^i = L_t^T w_{t-1}^{r,i}``: one step backward in the order of writing, (B, R, N)."""
    check_tensor(links, "links", ndim=3)
    B, N = links.shape[0], links.shape[1]
    check_shape(links, "links", (B, N, N), "(B, N, N)")
    _check_read_weightings(w_read_prev, "w_read_prev", B, N)
    return torch.einsum("bji,brj->bri", links, w_read_prev)


def read_weighting(
    backward: torch.Tensor, content: torch.Tensor, forward: torch.Tensor, modes: torch.Tensor
) -> torch.Tensor:
    """``w_t^{r,i} = pi^i[1] b_t^i + pi^i[2] c_t^i + pi^i[3] f_t^i``, (B, R, N).

    ``modes`` (B, R, 3) is each head's distribution over (backward, content, forward).
    """
    check_tensor(backward, "backward", ndim=3)
    B, R, N = backward.shape
    check_shape(backward, "backward", (B, R, N), "(B, R, N)")
    check_shape(content, "content", (B, R, N), "(B, R, N)")
    check_shape(forward, "forward", (B, R, N), "(B, R, N)")
    check_shape(modes, "modes", (B, R, 3), "(B, R, 3)")
    pi_backward, pi_content, pi_forward = modes.unsqueeze(-1).unbind(dim=2)  # each (B, R, 1)
    return pi_backward * backward + pi_content * content + pi_forward * forward


def content_weighting_heads(
    memory: torch.Tensor, keys: torch.Tensor, strengths: torch.Tensor
) -> torch.Tensor:
    """(ntm-content) for R heads at once: ``c^i = softmax_n(beta^i K[k^i, M(n)])``, (B, R, N).

    ``memory`` (B, N, W), ``keys`` (B, R, W), ``strengths`` (B, R, 1). The same numbers as
    :func:`rnnbook.models.ntm.content_weighting` head by head (cosine with the same 1e-8),
    without copying the memory once per head.
    """
    check_tensor(memory, "memory", ndim=3)
    B, N, W = memory.shape
    check_tensor(keys, "keys", ndim=3)
    R = keys.shape[1]
    check_shape(memory, "memory", (B, N, W), "(B, N, W)")
    check_shape(keys, "keys", (B, R, W), "(B, R, W)")
    check_shape(strengths, "strengths", (B, R, 1), "(B, R, 1)")
    dot = torch.einsum("brw,bnw->brn", keys, memory)
    row_norms = torch.linalg.vector_norm(memory, dim=-1).unsqueeze(1)  # (B, 1, N)
    key_norms = torch.linalg.vector_norm(keys, dim=-1, keepdim=True)  # (B, R, 1)
    similarity = dot / (key_norms * row_norms + COSINE_EPS)
    return torch.softmax(strengths * similarity, dim=-1)


# --- the cell ---------------------------------------------------------------------------------


class DNCState(NamedTuple):
    """What one DNC step hands to the next; zeros at t = 0 (:meth:`DNCCell.initial_state`)."""

    controller: tuple[torch.Tensor, torch.Tensor]  # (h, c) of the LSTM, each (B, d_ctrl)
    reads: torch.Tensor  # r_{t-1} of every read head, (B, R, W)
    w_read: torch.Tensor  # the read weightings w_{t-1}^r, (B, R, N)
    w_write: torch.Tensor  # the write weighting w_{t-1}^w, (B, N)
    memory: torch.Tensor  # M_{t-1}, (B, N, W)
    usage: torch.Tensor  # u_{t-1}, (B, N)
    links: torch.Tensor  # L_{t-1}, (B, N, N)
    precedence: torch.Tensor  # p_{t-1}, (B, N)


class InterfaceVector(NamedTuple):
    """The interface vector xi_t after its activations, in deepmind/dnc's order."""

    read_keys: torch.Tensor  # (B, R, W), linear
    read_strengths: torch.Tensor  # (B, R, 1), oneplus
    write_key: torch.Tensor  # (B, W), linear
    write_strength: torch.Tensor  # (B, 1), oneplus
    erase: torch.Tensor  # (B, W), sigmoid
    write_vector: torch.Tensor  # (B, W), linear
    free_gates: torch.Tensor  # (B, R), sigmoid
    allocation_gate: torch.Tensor  # (B, 1), sigmoid
    write_gate: torch.Tensor  # (B, 1), sigmoid
    read_modes: torch.Tensor  # (B, R, 3), softmax over (backward, content, forward)


def interface_sizes(W: int, R: int) -> list[int]:
    """The sizes of the slices of xi_t, in order: R W + 3 W + 5 R + 3 entries in all."""
    return [R * W, R, W, 1, W, W, R, 1, 1, 3 * R]


def split_interface(xi: torch.Tensor, W: int, R: int) -> InterfaceVector:
    """Split the (clipped) xi_t (B, R W + 3 W + 5 R + 3) and apply the activations."""
    B = xi.shape[0]
    parts = xi.split(interface_sizes(W, R), dim=-1)
    read_keys, read_strengths, write_key, write_strength, erase, write_vector = parts[:6]
    free_gates, allocation_gate, write_gate, read_modes = parts[6:]
    return InterfaceVector(
        read_keys=read_keys.reshape(B, R, W),
        read_strengths=oneplus(read_strengths).unsqueeze(-1),
        write_key=write_key,
        write_strength=oneplus(write_strength),
        erase=torch.sigmoid(erase),
        write_vector=write_vector,
        free_gates=torch.sigmoid(free_gates),
        allocation_gate=torch.sigmoid(allocation_gate),
        write_gate=torch.sigmoid(write_gate),
        read_modes=torch.softmax(read_modes.reshape(B, R, 3), dim=-1),
    )


class DNCCell(nn.Module):
    """One DNC step (Graves et al. 2016), in deepmind/dnc's order: write first, then read M_t.

    1. controller: ``(h_t, c_t) = LSTM([x_t; r_{t-1}], (h_{t-1}, c_{t-1}))``;
    2. interface: ``xi_t = clip(W_xi h_t + b_xi, -clip, clip)``, split by :func:`split_interface`;
    3. usage: ``psi_t`` and ``u_t`` (ntm-dnc-allocation), the gradient through w_{t-1}^w stopped;
    4. write weighting: ``a_t`` and ``c_t^w = C(M_{t-1}, k^w, beta^w)`` (ntm-content),
       mixed by the gates (ntm-dnc-allocation);
    5. write: ``M_t = write(M_{t-1}, w_t^w, e_t, v_t)`` (ntm-write);
    6. links and precedence: ``L_t`` with ``p_{t-1}``, then ``p_t`` (ntm-dnc-links);
    7. read weightings: ``b_t``, ``c_t^r = C(M_t, k^r, beta^r)`` and ``f_t`` mixed by the read
       modes (ntm-dnc-links); read vectors ``r_t = M_t^T w_t^r`` (ntm-read);
    8. output logits: ``o_t = clip(W_y [h_t; r_t] + b_y, -clip, clip)``.

    Args:
        d_x: input size. d_y: output size (logits).
        N, W: memory rows and row width. R: number of read heads (one write head).
        d_ctrl: controller size; an LSTM (``torch.nn.LSTMCell``) with forget-gate bias +1.
        clip: the bound on xi_t and the logits.

    The initial state is all zeros (memory, usage, links, precedence, weightings, h, c and
    read vectors), as in deepmind/dnc; nothing of it is learned.
    """

    def __init__(
        self,
        d_x: int,
        d_y: int,
        N: int = 64,
        W: int = 16,
        R: int = 4,
        d_ctrl: int = 100,
        clip: float = 20.0,
    ):
        super().__init__()
        for value, name in ((d_x, "d_x"), (d_y, "d_y"), (N, "N"), (W, "W"), (R, "R")):
            check_positive_int(value, name)
        check_positive_int(d_ctrl, "d_ctrl")
        if isinstance(clip, bool) or not isinstance(clip, int | float) or not 0 < clip < math.inf:
            raise ValueError(f"clip must be a positive finite number, got {clip!r}")
        self.input_size, self.output_size = d_x, d_y
        self.N, self.W, self.R, self.d_ctrl, self.clip = N, W, R, d_ctrl, float(clip)
        self.xi_sizes = interface_sizes(W, R)
        self.controller = nn.LSTMCell(d_x + R * W, d_ctrl)  # on [x_t; r_{t-1}]
        with torch.no_grad():  # forget-gate bias +1; torch orders the gates (i, f, g, o)
            self.controller.bias_ih[d_ctrl : 2 * d_ctrl] += 1.0
        self.interface = nn.Linear(d_ctrl, sum(self.xi_sizes))  # W_xi, b_xi
        self.readout = nn.Linear(d_ctrl + R * W, d_y)  # W_y, b_y

    def initial_state(self, B: int, dtype=None, device=None) -> DNCState:
        """The all-zero state for a batch of B sequences."""
        check_positive_int(B, "B")
        like = self.readout.weight
        dtype, device = dtype or like.dtype, device or like.device
        N, W, R = self.N, self.W, self.R

        def zeros(*shape):
            return torch.zeros(B, *shape, dtype=dtype, device=device)

        return DNCState(
            controller=(zeros(self.d_ctrl), zeros(self.d_ctrl)),
            reads=zeros(R, W),
            w_read=zeros(R, N),
            w_write=zeros(N),
            memory=zeros(N, W),
            usage=zeros(N),
            links=zeros(N, N),
            precedence=zeros(N),
        )

    def check_state(self, state, B: int) -> None:
        """``state`` must be a :class:`DNCState` with the shapes of ``initial_state(B)``."""
        if not isinstance(state, DNCState):
            raise TypeError(f"state must be a DNCState, got {type(state).__name__}")
        parts = state.controller
        if not isinstance(parts, tuple) or len(parts) != 2:
            got = f"a tuple of {len(parts)}" if isinstance(parts, tuple) else type(parts).__name__
            raise ValueError(f"state.controller must be a tuple (h, c) of 2 tensors, got {got}")
        for part in parts:
            check_shape(part, "each controller state", (B, self.d_ctrl), "(B, d_ctrl)")
        N, W, R = self.N, self.W, self.R
        check_shape(state.reads, "state.reads", (B, R, W), "(B, R, W)")
        check_shape(state.w_read, "state.w_read", (B, R, N), "(B, R, N)")
        check_shape(state.w_write, "state.w_write", (B, N), "(B, N)")
        check_shape(state.memory, "state.memory", (B, N, W), "(B, N, W)")
        check_shape(state.usage, "state.usage", (B, N), "(B, N)")
        check_shape(state.links, "state.links", (B, N, N), "(B, N, N)")
        check_shape(state.precedence, "state.precedence", (B, N), "(B, N)")

    def forward(self, x_t: torch.Tensor, state: DNCState | None = None, return_internals=False):
        """One step: ``x_t`` (B, d_x) -> ``(logits_t (B, d_y), state_t, extras)``.

        ``extras`` is None unless ``return_internals=True``; then a dict of this step's
        ``usage``, ``allocation``, ``w_write`` (B, N), ``w_read`` (B, R, N), ``reads`` (B, R, W),
        ``free_gates`` (B, R), ``allocation_gate`` and ``write_gate`` (B, 1) and ``read_modes``
        (B, R, 3), for figures.
        """
        check_tensor(x_t, "x_t", ndim=2)
        check_size(x_t, "x_t", 1, self.input_size, "the input size d_x")
        B = x_t.shape[0]
        if state is None:
            state = self.initial_state(B, dtype=x_t.dtype, device=x_t.device)
        self.check_state(state, B)
        W, R = self.W, self.R

        # 1. controller on [x_t; r_{t-1}]
        h, c = self.controller(torch.cat([x_t, state.reads.flatten(1)], dim=-1), state.controller)
        # 2. the interface vector, clipped, split and activated
        xi = split_interface(torch.clamp(self.interface(h), -self.clip, self.clip), W, R)
        # 3. (ntm-dnc-allocation) usage; deepmind/dnc stops the gradient through w_{t-1}^w
        psi = retention(xi.free_gates, state.w_read)
        usage = update_usage(state.usage, state.w_write.detach(), psi)
        # 4. (ntm-content), (ntm-dnc-allocation) the write weighting, content on M_{t-1}
        allocation = allocation_weighting(usage)
        write_content = content_weighting(state.memory, xi.write_key, xi.write_strength)
        w_write = write_weighting(allocation, write_content, xi.allocation_gate, xi.write_gate)
        # 5. (ntm-write) erase, then add the write vector
        memory = write(state.memory, w_write, xi.erase, xi.write_vector)
        # 6. (ntm-dnc-links) links with p_{t-1}, then the precedence
        links = update_links(state.links, state.precedence, w_write)
        precedence = update_precedence(state.precedence, w_write)
        # 7. (ntm-content), (ntm-dnc-links) read weightings on M_t
        read_content = content_weighting_heads(memory, xi.read_keys, xi.read_strengths)
        forward = forward_weighting(links, state.w_read)
        backward = backward_weighting(links, state.w_read)
        w_read = read_weighting(backward, read_content, forward, xi.read_modes)
        # (ntm-read) r_t = M_t^T w_t^r for every head, (B, R, W)
        reads = torch.einsum("brn,bnw->brw", w_read, memory)
        # 8. output logits from h_t and the new read vectors
        logits = self.readout(torch.cat([h, reads.flatten(1)], dim=-1))
        logits = torch.clamp(logits, -self.clip, self.clip)

        new_state = DNCState((h, c), reads, w_read, w_write, memory, usage, links, precedence)
        extras = None
        if return_internals:
            extras = {
                "usage": usage,
                "allocation": allocation,
                "w_write": w_write,
                "w_read": w_read,
                "reads": reads,
                "free_gates": xi.free_gates,
                "allocation_gate": xi.allocation_gate,
                "write_gate": xi.write_gate,
                "read_modes": xi.read_modes,
            }
        return logits, new_state, extras

    def extra_repr(self) -> str:
        return (
            f"d_x={self.input_size}, d_y={self.output_size}, N={self.N}, W={self.W}, "
            f"R={self.R}, d_ctrl={self.d_ctrl}, clip={self.clip:g}"
        )


class DNC(nn.Module):
    """A :class:`DNCCell` looped over a batch-first sequence.

    ``DNC(d_x, d_y, **options)`` takes the arguments of :class:`DNCCell`.
    ``forward(x, state=None, return_internals=False)`` takes ``x`` (B, T, d_x) and returns
    ``(logits, state_T, internals)``: the logits of every step (B, T, d_y), the final
    :class:`DNCState`, and None or (with ``return_internals=True``) the cell's extras
    stacked over time, each of shape (B, T, ...).
    """

    def __init__(self, d_x: int, d_y: int, **options):
        super().__init__()
        self.cell = DNCCell(d_x, d_y, **options)

    def forward(self, x: torch.Tensor, state: DNCState | None = None, return_internals=False):
        return run_memory_cell(self.cell, x, state, return_internals)
