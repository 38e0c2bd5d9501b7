"""Checkers for the exercises of the chapter on Neural Turing Machines and the DNC.

Each takes the student's answer, tests it on fresh random cases against the book's memory
functions (``rnnbook.models.ntm`` and ``rnnbook.models.dnc``, themselves tested against the
equations written out in NumPy), prints what passed, and raises
:class:`~rnnbook.checks.grading.CheckFailed` with a hint, never the solution.
"""

from __future__ import annotations

import torch

from rnnbook.checks.grading import call, close, expect_tensor, fail, own_random_state, passed
from rnnbook.models import dnc
from rnnbook.models import ntm as ntm_model

F64 = torch.float64


def _weightings(g, *shape) -> torch.Tensor:
    """Random weightings on the simplex over the last axis, float64."""
    return torch.softmax(2 * torch.randn(*shape, generator=g, dtype=F64), dim=-1)


# --- writing with several heads, (ntm-write) ------------------------------------------------------


def _write_add_first(memory, w, erase, add):
    for h in range(w.shape[1]):
        memory = memory + torch.einsum("bn,bm->bnm", w[:, h], add[:, h])
    for h in range(w.shape[1]):
        memory = memory * (1 - torch.einsum("bn,bm->bnm", w[:, h], erase[:, h]))
    return memory


def _write_head_by_head(memory, w, erase, add):
    for h in range(w.shape[1]):
        memory = memory * (1 - torch.einsum("bn,bm->bnm", w[:, h], erase[:, h]))
        memory = memory + torch.einsum("bn,bm->bnm", w[:, h], add[:, h])
    return memory


def _write_unweighted_erase(memory, w, erase, add):
    keep = torch.prod(1 - erase, dim=1).unsqueeze(1)  # (B, 1, M): every row erased alike
    return memory * keep + torch.einsum("bhn,bhm->bnm", w, add)


def _write_summed_erase(memory, w, erase, add):
    erased = torch.einsum("bhn,bhm->bnm", w, erase)
    return memory * (1 - erased) + torch.einsum("bhn,bhm->bnm", w, add)


@own_random_state
def write(fn) -> str:
    """Exercise: ``fn(memory (B, N, M), w (B, H, N), erase (B, H, M), add (B, H, M))`` returns
    the new memory (B, N, M) after H write heads: (ntm-write), all erases, then all adds."""
    g = torch.Generator().manual_seed(31)
    tests = []
    for B, H, N, M in ((3, 1, 6, 4), (2, 2, 5, 3), (1, 3, 7, 2)):
        memory = torch.randn(B, N, M, generator=g, dtype=F64)
        w = _weightings(g, B, H, N)
        erase = torch.rand(B, H, M, generator=g, dtype=F64)
        add = torch.randn(B, H, M, generator=g, dtype=F64)
        out = expect_tensor(
            call(fn, memory.clone(), w, erase, add, name="write"), (B, N, M), "the new memory"
        )
        want = ntm_model.write(memory, w, erase, add)
        if close(out, want):
            continue
        for wrong, hint in (
            (
                _write_add_first,
                "erase first (ntm-write), then add (ntm-write): the add must survive the erase.",
            ),
            (
                _write_head_by_head,
                "apply every head's erase before any head's add; head by head, the result "
                "depends on the order of the heads.",
            ),
            (
                _write_unweighted_erase,
                "the erase of row i is scaled by that row's weight: the factor is 1 - w(i) e.",
            ),
            (
                _write_summed_erase,
                "the heads' erase factors 1 - w_h(i) e_h multiply; they do not add up.",
            ),
        ):
            if close(out, wrong(memory, w, erase, add)):
                fail(f"the memory after {H} write head(s) is not right.", hint)
        fail(
            f"the memory after {H} write head(s) differs from (ntm-write) (B={B}, N={N}, M={M}).",
            "M * prod_h (1 - w_h e_h^T) + sum_h w_h a_h^T, with w_h(i) e_h[j] for row i, column j.",
        )
    tests.append("one, two and three heads on random memories")
    memory = torch.arange(12, dtype=F64).view(1, 3, 4)
    one_hot = torch.tensor([[[0.0, 1.0, 0.0]]], dtype=F64)
    a = torch.tensor([[[9.0, 8.0, 7.0, 6.0]]], dtype=F64)
    out = expect_tensor(
        call(fn, memory.clone(), one_hot, torch.ones(1, 1, 4, dtype=F64), a, name="write"),
        (1, 3, 4),
        "the new memory",
    )
    if not close(out[0, 1], a[0, 0]) or not close(out[0, [0, 2]], memory[0, [0, 2]]):
        fail(
            "a one-hot weighting with a full erase must replace its row and leave the others.",
            "check the erase-then-add order on this 3 x 4 example by hand.",
        )
    tests.append("a one-hot write with a full erase replaces one row")
    return passed("write", tests)


# --- the circular shift, (ntm-shift) --------------------------------------------------------


def _shift_by_loop(w: torch.Tensor, s: torch.Tensor, direction: int, wrap: bool) -> torch.Tensor:
    """w~(i) = sum_delta s(delta) w(i - direction * delta); without wrap, out-of-range is 0."""
    B, N = w.shape
    S = s.shape[1] // 2
    out = torch.zeros_like(w)
    for k in range(2 * S + 1):
        delta = direction * (k - S)
        for i in range(N):
            j = i - delta
            if wrap:
                j %= N
            elif not 0 <= j < N:
                continue
            out[:, i] += s[:, k] * w[:, j]
    return out


@own_random_state
def shift(fn) -> str:
    """Exercise: ``fn(w (B, N), s (B, 2S+1)) -> w~ (B, N)``, the circular convolution (ntm-shift) in
    the book's convention: entry k of s is the shift k - S, so s(+1) = 1 moves row i to i+1."""
    g = torch.Generator().manual_seed(32)
    tests = []
    for B, N, S in ((4, 7, 1), (3, 9, 2)):
        w = _weightings(g, B, N)
        s = _weightings(g, B, 2 * S + 1)
        out = expect_tensor(call(fn, w, s, name="shift"), (B, N), "the shifted weighting")
        want = ntm_model.shift(w, s)
        if close(out, want):
            continue
        if close(out, _shift_by_loop(w, s, direction=-1, wrap=True)):
            fail(
                f"your shift runs backwards (N = {N}, {2 * S + 1} shifts): s(+1) moves mass "
                "from row i to row i-1.",
                "that is a cross-correlation, which conv1d computes; (ntm-shift) sums "
                "w(j) s(i - j).",
            )
        if close(out, _shift_by_loop(w, s, direction=1, wrap=False)):
            fail(
                f"mass shifted past the last row disappears (N = {N}, {2 * S + 1} shifts).",
                "indices are modulo N: the last row shifted by +1 lands on row 0.",
            )
        if S > 1:
            fail(
                "your shift is right for three shifts but not for five.",
                "read S from s.shape[-1] = 2S + 1 instead of assuming S = 1.",
            )
        fail(
            f"the shifted weighting differs from (ntm-shift) (N = {N}, {2 * S + 1} shifts).",
            "try w = e_0 and s = (0, 0, 1): the result must be e_1.",
        )
    tests.append("3 and 5 shifts on random weightings, with wrap-around")
    out = call(
        fn, torch.eye(5, dtype=F64)[[4]], torch.tensor([[0.0, 0.0, 1.0]], dtype=F64), name="shift"
    )
    if not close(out, torch.eye(5, dtype=F64)[[0]]):
        fail("shifting e_4 of N = 5 by +1 must give e_0.", "indices are modulo N.")
    tests.append("e_(N-1) shifted by +1 wraps to e_0")
    return passed("shift", tests)


# --- sharpening, (ntm-sharpen) --------------------------------------------------------------


@own_random_state
def sharpen(fn) -> str:
    """Exercise: ``fn(w (B, N), gamma (B, 1)) -> (B, N)``, the sharpening (ntm-sharpen)
    ``w^gamma / sum_j w(j)^gamma``, safe in float32 and differentiable where w has zeros."""
    g = torch.Generator().manual_seed(33)
    tests = []
    w = _weightings(g, 5, 9)
    gamma = 1 + 9 * torch.rand(5, 1, generator=g, dtype=F64)
    out = expect_tensor(call(fn, w, gamma, name="sharpen"), (5, 9), "the sharpened weighting")
    powered = w**gamma
    want = powered / powered.sum(-1, keepdim=True)
    if not close(out, want, atol=1e-9):
        if close(out, torch.softmax(gamma * w, -1), atol=1e-9) or close(
            out, torch.softmax(w**gamma, -1), atol=1e-9
        ):
            fail(
                "your sharpening is a softmax.",
                "(ntm-sharpen) normalises the powers w(i)^gamma by their sum; no exponential "
                "is taken.",
            )
        fail(
            "the sharpened weightings differ from (ntm-sharpen) on random weightings, float64.",
            "raise each entry to gamma, then divide by the sum over the N rows (dim=-1).",
        )
    tests.append("random weightings and gamma in [1, 10], float64")
    out = call(fn, w, torch.ones(5, 1, dtype=F64), name="sharpen")
    if not close(out, w, atol=1e-9):
        fail("gamma = 1 must return the weighting unchanged.", "w^1 / sum w = w.")
    tests.append("gamma = 1 is the identity")
    near_flat = torch.softmax(0.1 * torch.randn(2, 128, generator=g), dim=-1)  # float32
    gamma = torch.full((2, 1), 30.0)
    powered = near_flat.double() ** 30  # about 128^-30 = 1e-63: zero in float32
    want = (powered / powered.sum(-1, keepdim=True)).float()
    out = call(fn, near_flat, gamma, name="sharpen")
    if (
        not isinstance(out, torch.Tensor)
        or not torch.isfinite(out).all()
        or not close(out, want, atol=1e-6)
    ):
        fail(
            "a nearly flat float32 weighting over 128 rows with gamma = 30 goes wrong.",
            "w(i)^30 is about 1e-63, which is 0 in float32. (ntm-sharpen) does not change when "
            "w is scaled: divide w by its largest entry first.",
        )
    tests.append("no underflow for a nearly flat float32 weighting, N = 128, gamma = 30")
    one_hot = torch.eye(5, dtype=F64)[[1, 3]]
    gamma = torch.full((2, 1), 2.5, dtype=F64, requires_grad=True)
    out = call(fn, one_hot, gamma, name="sharpen")
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        fail("no gradient flows from the result back to gamma.", "stay in torch: no .detach().")
    (out * torch.arange(5, dtype=F64)).sum().backward()
    if not torch.isfinite(out).all() or not torch.isfinite(gamma.grad).all():
        fail(
            "with a one-hot w the result or its gradient with respect to gamma is NaN.",
            "computed through log w, the rows where w = 0 bring in log 0 = -inf, and the "
            "gradient 0 * (-inf) is NaN; add a tiny epsilon (1e-12) to w before the logarithm.",
        )
    tests.append("finite gradient with respect to gamma at a one-hot weighting")
    return passed("sharpen", tests)


# --- the DNC's allocation weighting -------------------------------------------------------------


def _allocation_variant(u: torch.Tensor, descending=False, inclusive=False, scatter=True):
    sorted_u, phi = torch.sort(u, dim=-1, descending=descending, stable=True)
    if inclusive:
        before = torch.cumprod(sorted_u, dim=-1)
    else:
        ones = torch.ones_like(sorted_u[:, :1])
        before = torch.cumprod(torch.cat([ones, sorted_u[:, :-1]], dim=-1), dim=-1)
    a_sorted = (1 - sorted_u) * before
    if not scatter:
        return a_sorted
    return torch.zeros_like(u).scatter(-1, phi, a_sorted)


@own_random_state
def allocation(fn) -> str:
    """Exercise: ``fn(u (B, N)) -> a (B, N)``, the DNC's allocation weighting
    ``a[phi[j]] = (1 - u[phi[j]]) prod_{i<j} u[phi[i]]``, phi the rows by ascending usage
    (as written, without deepmind/dnc's squashing of u)."""
    g = torch.Generator().manual_seed(34)
    cases = [torch.tensor([[0.9, 0.1, 0.5, 1.0, 0.0]], dtype=F64)]
    cases += [torch.rand(B, N, generator=g, dtype=F64) for B, N in ((4, 7), (2, 12))]  # no ties
    for u in cases:
        B, N = u.shape
        out = expect_tensor(call(fn, u, name="allocation"), (B, N), "the allocation weighting")
        want = dnc.allocation_weighting(u, eps=0.0)
        if close(out, want):
            continue
        what = (
            "with usage (.9, .1, .5, 1, 0) all allocation must go to the unused row 4."
            if N == 5
            else f"the allocation differs for random usages (B={B}, N={N})."
        )
        for kwargs, hint in (
            ({"descending": True}, "the free list phi sorts the rows by *ascending* usage."),
            (
                {"inclusive": True},
                "the product runs over the rows *before* j in the free list (i < j), not j itself.",
            ),
            (
                {"scatter": False},
                "your weights are in free-list order; put the j-th value back at row phi[j].",
            ),
        ):
            if close(out, _allocation_variant(u, **kwargs)):
                fail(what, hint)
        fail(
            what,
            "sort the usages, take 1 - u times the product of the usages sorted before it, "
            "and put each value back at its row.",
        )
    tests = ["usage (.9, .1, .5, 1, 0) allocates row 4", "random usages, N = 7 and 12"]
    return passed("allocation", tests)
