"""Checkers for the exercises of the chapter on Neural Turing Machines and the DNC.

Each takes the student's answer, tests it on fresh random cases against the book's memory
functions (``rnnbook.models.ntm`` and ``rnnbook.models.dnc``, themselves tested against the
equations written out in NumPy), prints what passed, and raises
:class:`~rnnbook.checks.grading.CheckFailed` with a hint, never the solution.
"""

from __future__ import annotations

import torch

from rnnbook.checks.dtypes import expect_dtype
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
        out = expect_dtype(out, memory.dtype, "the new memory")
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
        out = expect_dtype(out, w.dtype, "the shifted weighting")
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
    out = expect_dtype(out, w.dtype, "the sharpened weighting")
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
    if isinstance(out, torch.Tensor):
        expect_dtype(out, near_flat.dtype, "the sharpened float32 weighting")
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


# The package's functions an exercise asks the student to write: an answer may not call them.
BOOK_REFERENCES = (dnc.allocation_weighting,)


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
        given = u.clone()  # the answer gets a copy: u itself stays the checker's
        out = expect_tensor(call(fn, given, name="allocation"), (B, N), "the allocation weighting")
        if not torch.equal(given, u):
            fail(
                "allocation changed the usages u in place.",
                "compute the weights in new tensors (torch.sort returns new ones); u must stay "
                "as it was, since the memory keeps using it.",
            )
        out = expect_dtype(out, u.dtype, "the allocation weighting")
        if not bool(torch.isfinite(out).all()):
            fail(
                "the allocation weighting holds NaN or inf.",
                "every weight is a product of usages and 1 - u, all in [0, 1]: look for a "
                "division or a logarithm that is not in the formula.",
            )
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
        if close(out, dnc.allocation_weighting(u)):
            fail(what, "this squashes u to eps + (1 - eps) u first, as deepmind/dnc does; the "
                 "exercise asks for the formula as written.")  # fmt: skip
        fail(
            what,
            "sort the usages, take 1 - u times the product of the usages sorted before it, "
            "and put each value back at its row.",
        )
    tests = ["usage (.9, .1, .5, 1, 0) allocates row 4", "random usages, N = 7 and 12"]
    return passed("allocation", tests)


# --- a copy machine designed by hand ------------------------------------------------------------

HAND_N, HAND_M = 128, 9  # the hand-designed machine's memory: 128 rows of 9 numbers


def run_by_hand(controller, x: torch.Tensor, N: int = HAND_N) -> torch.Tensor:
    """Run a hand-written controller on copy-task inputs ``x`` (B, T, 9) and return the read
    vectors (B, T, 9): the machine's answer at step t is ``r_t[:, :8]``.

    The memory is (B, N, 9), all zeros at the start; both heads start on row 0 (one-hot).
    At every step ``controller(x_t, r_prev, memo)`` returns ``(read_head, write_head)``, two
    :class:`~rnnbook.models.ntm.HeadOutputs` (``k`` (B, 9), ``beta``, ``g``, ``gamma``
    (B, 1), ``s`` (B, 3) over the shifts -1, 0, +1; the write head also ``erase`` and
    ``add`` (B, 9)). ``memo`` is a dict that lives for the whole sequence: the controller's
    own state. Then, as in (ntm-step), both heads address the memory of the previous step
    (ntm-content)-(ntm-sharpen), the read head reads (ntm-read) and the write head erases
    and adds (ntm-write).
    """
    return _run_by_hand(controller, x, N)[0]


def _run_by_hand(controller, x: torch.Tensor, N: int = HAND_N):
    """:func:`run_by_hand`, also returning the read weightings (B, T, N)."""
    if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != 9:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be copy-task inputs of shape (B, T, 9), got {got}")
    B, T, _ = x.shape
    x = x.to(F64)
    memory = torch.zeros(B, N, HAND_M, dtype=F64)
    start = torch.zeros(B, N, dtype=F64)
    start[:, 0] = 1.0
    w_read, w_write = start, start.clone()
    r = torch.zeros(B, HAND_M, dtype=F64)
    memo: dict = {}
    reads, read_weightings = [], []
    for t in range(T):
        heads = call(controller, x[:, t], r.clone(), memo, name="controller")
        if not isinstance(heads, tuple) or len(heads) != 2:
            fail(
                f"at step {t} the controller returned {type(heads).__name__}, not a pair.",
                "return (read_head, write_head), two HeadOutputs.",
            )
        read_head, write_head = (_hand_head(h, B, t, write=w) for h, w in zip(heads, (0, 1)))
        new_read = ntm_model.address(memory, *read_head[:5], w_read)
        new_write = ntm_model.address(memory, *write_head[:5], w_write)
        r = ntm_model.read(memory, new_read)  # reads see M_{t-1}
        memory = ntm_model.write(memory, new_write, write_head.erase, write_head.add)
        w_read, w_write = new_read, new_write
        reads.append(r)
        read_weightings.append(w_read)
    return torch.stack(reads, dim=1), torch.stack(read_weightings, dim=1)


def _hand_head(head, B: int, t: int, write: int) -> ntm_model.HeadOutputs:
    """One head of the hand-written controller, checked: shapes, and values that the
    activations of (ntm-step) can produce."""
    kind = "write" if write else "read"
    if not isinstance(head, ntm_model.HeadOutputs):
        fail(
            f"at step {t} the {kind} head is a {type(head).__name__}.",
            "build each head with rnnbook.models.ntm.HeadOutputs(k=..., beta=..., g=..., s=..., "
            "gamma=...) (and erase=..., add=... for the write head).",
        )
    sizes = {"k": HAND_M, "beta": 1, "g": 1, "s": 3, "gamma": 1}
    if write:
        sizes.update(erase=HAND_M, add=HAND_M)
    checked = {}
    for name, size in sizes.items():
        value = getattr(head, name)
        if not isinstance(value, torch.Tensor):
            fail(
                f"at step {t} the {kind} head's {name} is {type(value).__name__}.",
                f"every parameter is a tensor of shape ({B}, {size}); broadcast constants "
                "with torch.full or .expand.",
            )
        if value.shape != (B, size):
            fail(
                f"at step {t} the {kind} head's {name} has shape {tuple(value.shape)}.",
                f"it must be ({B}, {size}): one row per sequence of the batch.",
            )
        checked[name] = value.to(F64)
    ranges = (
        ("beta", checked["beta"].min() >= 0, "beta >= 0 (a softplus)"),
        ("g", ((0 <= checked["g"]) & (checked["g"] <= 1)).all(), "0 <= g <= 1 (a sigmoid)"),
        ("gamma", checked["gamma"].min() >= 1, "gamma >= 1 (1 + softplus)"),
        (
            "s",
            checked["s"].min() >= 0 and close(checked["s"].sum(-1), torch.ones(B, dtype=F64)),
            "s a distribution over the three shifts (a softmax)",
        ),
    )
    if write:
        erase = checked["erase"]
        ranges += (("erase", ((0 <= erase) & (erase <= 1)).all(), "0 <= e <= 1 (a sigmoid)"),)
    for name, ok, rule in ranges:
        if not ok:
            fail(
                f"at step {t} the {kind} head's {name} is outside what its activation allows.",
                f"the controller can only emit {rule}.",
            )
    return ntm_model.HeadOutputs(**checked)


def _hand_copy_answers(controller, L: int, g: torch.Generator):
    """Four random copy sequences of length L: the machine's answers (4, L, 8), the targets
    and the read weightings of the answers (4, L, N)."""
    from rnnbook.data.synthetic import copy_task

    x, y = copy_task(4, L, generator=g)
    reads, weightings = _run_by_hand(controller, x)
    return reads[:, L + 1 :, :8], y.to(F64), weightings[:, L + 1 :]


def _same_vectors(answers: torch.Tensor, targets: torch.Tensor) -> bool:
    """Every bit of every vector on the right side of 1/2."""
    return bool(((answers - targets).abs() < 0.5).all())


HAND_LENGTHS = (1, 2, 3, 5, 10, 20, 50, 120)
DIAGNOSIS_LENGTH = 10  # long enough to tell a pattern in the wrong answers


@own_random_state
def copy_by_hand(controller) -> str:
    """Exercise: a copy machine designed by hand. ``controller(x_t, r_prev, memo)`` returns
    ``(read_head, write_head)`` at every step (see :func:`run_by_hand`); the answers, the
    first 8 entries of the read vectors after the delimiter, must reproduce the input
    vectors of copy sequences of every length from 1 to 120, to within 1/2 per bit."""
    g = torch.Generator().manual_seed(35)
    runs = {L: _hand_copy_answers(controller, L, g) for L in HAND_LENGTHS}
    failed = [L for L, (answers, targets, _) in runs.items() if not _same_vectors(answers, targets)]
    if not failed:
        return passed("copy by hand", [f"copy sequences of lengths {HAND_LENGTHS}, bit for bit"])
    copied = [L for L in HAND_LENGTHS if L < failed[0]]
    L = DIAGNOSIS_LENGTH if DIAGNOSIS_LENGTH in failed else failed[0]
    answers, targets, weightings = runs[L]
    right = ((answers - targets).abs() < 0.5).all(dim=-1).all(dim=0)  # (L,): answer t right
    first_wrong = int((~right).nonzero()[0])
    blurred = bool(weightings[:, 0].max(dim=-1).values.min() < 0.9)
    if L > 1 and _same_vectors(answers[:, :-1], targets[:, 1:]):
        fail(
            f"at length {L} every answer is the vector after the one asked for.",
            "the read head is one row ahead: it moved on before its first answer. On which "
            "step does it find the start, and on which does it begin to step?",
        )
    if L > 1 and _same_vectors(answers[:, 1:], targets[:, :-1]):
        fail(
            f"at length {L} every answer is the vector before the one asked for.",
            "the read head is one row behind: it starts a row early or steps a step late.",
        )
    if L > 1 and _same_vectors(answers, targets[:, :1].expand_as(targets)):
        fail(
            f"at length {L} every answer repeats the first vector.",
            "after the jump to the start, the read head must walk on from where it is "
            "(location mode), one row per answer.",
        )
    if first_wrong == 0 and blurred:
        fail(
            f"at length {L} the first answer reads a blend of several rows (no row gets 0.9 "
            "of the read weight).",
            "the jump back found no single row: does some row hold something that no other "
            "row holds, and is the key strength large enough to pick it out of 128 rows?",
        )
    if first_wrong == 0:
        fail(
            f"at length {L} the first answer is wrong.",
            "after the delimiter the read head must land on the row of the first vector; "
            "where does your content lookup point, and where did the write head put vector 0?",
        )
    if first_wrong > 0 and L > 2 and not right[1:].any():
        fail(
            f"at length {L} the first answer is right, the rest are not.",
            "the read head finds the start but does not walk the rows the write head used, in "
            "the same direction and by one row per step.",
        )
    if copied and copied[-1] >= 3:
        fail(
            f"sequences of length {copied[-1]} copy, but at length {L} answer {first_wrong} "
            "is wrong.",
            "something builds up with the length: a shift that is not quite one-hot blurs the "
            "weighting a little at every step (sharpen it), a key that also matches later rows, "
            "or writes that land on rows already used.",
        )
    fail(
        f"at length {L} answer {first_wrong} is wrong.",
        "compare the rows your write head used with the rows your read head reads, step by "
        "step, on a sequence of this length (run_by_hand returns the read vectors).",
    )
