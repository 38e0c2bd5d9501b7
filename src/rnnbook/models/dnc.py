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
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rnnbook._validate import check_shape, check_tensor

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
    links = (1 - w_i - w_j) * links_prev + w_i * precedence_prev.unsqueeze(-2)
    off_diagonal = 1 - torch.eye(N, dtype=links.dtype, device=links.device)
    return links * off_diagonal


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
