"""Checkers for the exercises of the chapter on hierarchical attention networks (HAN) for
cloze questions and the surprisal-gated GRUs (SGRU, SENS-GRU).

Each takes the student's answer, tests it on prepared inputs against the book's equations
(:mod:`rnnbook.models.han`, :func:`rnnbook.skip.effective_update_rate`, and the SENS-GRU
decision written out below), prints what passed, and raises
:class:`~rnnbook.checks.grading.CheckFailed` with a hint that names the mistake it
recognised, never the solution.
"""

from __future__ import annotations

import math
import numbers

import torch

from rnnbook import skip as _skip
from rnnbook.checks.dtypes import expect_dtype
from rnnbook.checks.grading import (
    allclose,
    call,
    close,
    equal,
    expect_tensor,
    fail,
    gradient,
    isclose,
    name_of,
    own_random_state,
    passed,
    unchanged,
)
from rnnbook.models import han as _han

F64 = torch.float64


# --- the references -------------------------------------------------------------------------


def _pointer_sum(alpha_doc, doc, cands):
    """(han-pointer): each candidate's attention summed over its positions, PAD excluded."""
    return _han.pointer_sum(alpha_doc, doc, cands)


def _masked_softmax(scores, mask):
    """The softmax over the last dimension's real positions, exactly 0 elsewhere."""
    return _han.masked_softmax(scores, mask, dim=-1)


def _effective_update_rate(u, u_min):
    """(han-u-effective), in percent."""
    return _skip.effective_update_rate(u, u_min)


def _sens_step(h_hat, h_prev, s, s_prev, theta):
    """(sens-vote), (sens-select) with the identity straight-through estimator on the votes
    and on the layer's decision; the straight-through terms are formed before they are added,
    so the 0/1 values survive a margin d of any size."""
    d = s - s_prev - theta  # (B, M)
    vote = (d > 0).to(d.dtype) + (d - d.detach())  # (sens-vote): 0/1 forward, identity back
    p = vote.mean(-1, keepdim=True)  # (B, 1)
    b = (p.detach() >= 0.5).to(p.dtype) + (p - p.detach())  # (sens-select): a tie updates
    return b * h_hat + (1 - b) * h_prev


def _own_work(fn, exercise: str) -> None:
    """The package's function (or the checker's reference) is not an answer."""
    own = (_pointer_sum, _masked_softmax, _effective_update_rate, _sens_step,
           _han.pointer_sum, _han.masked_softmax, _skip.effective_update_rate)  # fmt: skip
    if fn in own:
        fail(
            f"{exercise}: you passed the book's own function.",
            "write the exercise's function yourself; the checker compares it with that one.",
        )


# --- exercise: the pointer sum --------------------------------------------------------------


def _pointer_cases(gen):
    """Random documents with short vocabularies (so candidates repeat) and PAD at the ends of
    the sentences, attention that is a softmax over the real tokens; then a hand-made batch
    whose attention also sits on PAD and whose candidate list is padded with id 0."""
    cases = []
    for B, S, W, K, V in ((3, 4, 6, 5, 9), (2, 5, 4, 3, 6), (4, 3, 7, 6, 12)):
        doc = torch.randint(1, V, (B, S, W), generator=gen)
        lengths = torch.randint(1, W + 1, (B, S), generator=gen)
        doc = torch.where(torch.arange(W) < lengths.unsqueeze(-1), doc, 0)
        cands = torch.stack([torch.randperm(V - 1, generator=gen)[:K] + 1 for _ in range(B)])
        scores = torch.randn(B, S * W, generator=gen, dtype=F64)
        alpha = _masked_softmax(scores, doc.view(B, -1) != 0).view(B, S, W)
        cases.append((alpha, doc, cands, f"a batch of {B} documents of {S} x {W} tokens, K={K}"))
    doc = torch.tensor([[[3, 5, 3, 0], [5, 3, 0, 0]], [[2, 2, 4, 0], [4, 0, 0, 0]]])
    alpha = torch.tensor([[[0.10, 0.20, 0.05, 0.15], [0.10, 0.10, 0.20, 0.10]],
                          [[0.25, 0.05, 0.20, 0.10], [0.15, 0.05, 0.10, 0.10]]])  # fmt: skip
    alpha = alpha.to(F64)  # attention on PAD too: 0.15 + 0.20 + 0.10 and 0.10 + 0.15
    cands = torch.tensor([[3, 5, 7, 0], [4, 2, 0, 6]])
    cases.append((alpha, doc, cands, "a hand-made batch with attention on PAD and id 0 in cands"))
    cases.append(_pointer_case_like_syncloze(gen))
    return cases


def _pointer_case_like_syncloze(gen):
    """As in SynCloze, the candidates are entities, which have the low ids (2-9 here); the
    document's other tokens (relations, fillers, punctuation) have ids above every
    candidate's, so a vocabulary sized or clipped by the candidates' ids breaks."""
    B, S, W, K = 3, 4, 6, 4
    doc = torch.randint(10, 40, (B, S, W), generator=gen)  # relations, fillers, punctuation
    entity = torch.rand(B, S, W, generator=gen) < 0.4
    doc = torch.where(entity, torch.randint(2, 10, (B, S, W), generator=gen), doc)
    lengths = torch.randint(3, W + 1, (B, S), generator=gen)
    doc = torch.where(torch.arange(W) < lengths.unsqueeze(-1), doc, 0)
    cands = torch.stack([torch.randperm(8, generator=gen)[:K] + 2 for _ in range(B)])
    scores = torch.randn(B, S * W, generator=gen, dtype=F64)
    alpha = _masked_softmax(scores, doc.view(B, -1) != 0).view(B, S, W)
    what = (
        f"a batch of {B} documents like SynCloze's, whose other tokens have ids above every "
        "candidate's"
    )
    return alpha, doc, cands, what


def _occurrences(doc, cands):
    """(B, S*W, K): True where a real (non-PAD) position holds candidate k."""
    tokens = doc.flatten(1)
    return (tokens.unsqueeze(-1) == cands.unsqueeze(1)) & (tokens != 0).unsqueeze(-1)


@own_random_state
def pointer_sum(fn) -> str:
    """Exercise: ``fn(alpha_doc (B, S, W), doc (B, S, W), cands (B, K)) -> P (B, K)``,
    (han-pointer): each candidate's attention summed over every position holding its id."""
    _own_work(fn, "pointer_sum")
    name = name_of(fn, "pointer_sum")
    gen = torch.Generator().manual_seed(81)
    cases = _pointer_cases(gen)
    high_ids = cases[-1][3]  # the last case: ids above every candidate's, after the others
    for alpha, doc, cands, what in cases:
        B, S, W = doc.shape
        K = cands.shape[1]
        where = f"{name} on {what}"
        want = _pointer_sum(alpha, doc, cands)
        given = [alpha.clone(), doc.clone(), cands.clone()]
        # a crash on the last case gets the usual hint, with the case named
        got = call(fn, *given, name=where if what == high_ids else name)
        if isinstance(got, torch.Tensor) and tuple(got.shape) != (B, K):
            wrong_shapes = {
                (K, B): "the result is transposed: one row per document, one column per candidate.",
                (B, S, K): "sum over the sentences as well: every position of the document counts.",
                (B, S, W, K): "sum the matches over the document's positions: one number per "
                "candidate.",
                (B, S * W, K): "sum the matches over the document's positions: one number per "
                "candidate.",
            }
            shape = tuple(got.shape)
            if shape in wrong_shapes:
                fail(f"{where} returned shape {shape}, not ({B}, {K}).", wrong_shapes[shape])
        got = expect_dtype(expect_tensor(got, (B, K), where), alpha.dtype, where)
        if not unchanged(given, (alpha, doc, cands)):
            fail(f"{where} changed an argument in place.", "build the scores in a new tensor.")
        value = got.detach().to(F64)
        if not close(value, want, atol=1e-6 if got.dtype != F64 else 1e-12):
            _explain_pointer(where, value, alpha, doc, cands, want, what == high_ids)
    for alpha, doc, cands, what in cases:  # the gradients, once every value is right
        tracked = alpha.clone().requires_grad_()
        where = f"{name} on {what}"
        out = call(fn, tracked.clone(), doc.clone(), cands.clone(), name=where)
        _check_pointer_gradient(where, out, tracked, doc, cands)
    return passed(
        name,
        [f"{len(cases)} batches with repeated candidates, PAD and absent candidates, other "
         "tokens with ids above every candidate's", "no change in place",
         "the gradient to alpha_doc"],
    )  # fmt: skip


def _explain_pointer(where, got, alpha, doc, cands, want, high_ids=False):
    """Name the mistake behind wrong pointer sums."""

    def same(a, b):
        return allclose(a, b, atol=1e-6)

    if high_ids:  # right on every earlier batch, whose ids never exceed the candidates'
        fail(
            f"{where}: the scores are not right (they were right on the batches whose tokens "
            "never had ids above the largest candidate's).",
            "a non-candidate token may have any id, larger than every candidate's too (in "
            "SynCloze the entities have the low ids): it must add nothing to any candidate, "
            "so nothing may be sized or clipped by the candidates' ids.",
        )
    a = alpha.flatten(1).unsqueeze(-1)  # (B, N, 1)
    hits = _occurrences(doc, cands)  # (B, N, K)
    with_pad = doc.flatten(1).unsqueeze(-1) == cands.unsqueeze(1)
    if same(got, torch.where(with_pad, a, 0.0).sum(1)):
        fail(
            f"{where}: attention on PAD positions was counted for a candidate slot holding id 0.",
            "padding never counts, even if a candidate list is itself padded with 0: match "
            "only the real tokens of the document (id 0 is PAD).",
        )
    found = hits.any(1)
    N = hits.shape[1]
    first = hits.to(torch.int64).argmax(1)  # (B, K): the first position holding c_k
    last = N - 1 - hits.flip(1).to(torch.int64).argmax(1)
    for index in (first, last):
        if same(got, torch.where(found, alpha.flatten(1).gather(1, index), 0.0)):
            fail(
                f"{where}: only one occurrence of each candidate was counted.",
                "a candidate that occurs several times in the document gets the attention of "
                "all its positions added up (the 'sum' of pointer-sum attention). Indexed "
                "assignment P[..., doc] = alpha keeps one value per repeated index.",
            )
    if same(got, torch.where(hits, a, 0.0).amax(1)):
        fail(
            f"{where} took the largest attention among a candidate's occurrences.",
            "pointer-sum attention adds the attention of all the candidate's positions.",
        )
    if same(got, hits.to(F64).sum(1)):
        fail(
            f"{where} counted the occurrences.",
            "weight each occurrence by the attention alpha_doc on its position.",
        )
    total = want.sum(-1, keepdim=True)
    if (total > 0).all() and same(got, want / total):
        fail(
            f"{where}: the scores were renormalised over the candidates (each row sums to 1).",
            "the pointer sum keeps the attention lost on non-candidate tokens (the rows sum to "
            "at most 1); a renormalisation belongs to the loss, not to the scores.",
        )
    if same(got, torch.softmax(want, -1)) or same(got, torch.log_softmax(want, -1)):
        fail(
            f"{where}: a softmax was applied to the summed attention.",
            "the pointer sums are already probabilities of the document's positions: return "
            "them as they are.",
        )
    if same(got, want.log()):
        fail(f"{where} returned the log of the sums.", "return the sums themselves.")
    fail(
        f"{where}: the scores are not right.",
        "for one document and one candidate, add up alpha_doc over the positions of doc that "
        "hold the candidate's id (never PAD) and compare with your tensor.",
    )


def _check_pointer_gradient(where, out, alpha, doc, cands):
    """d(sum w * P)/d alpha_doc = sum_k w_k [doc = c_k, doc != PAD]."""
    hint = (
        "keep the attention in the graph: match the ids into a float mask and sum the "
        "attention with it (no .item(), .detach(), argmax or integer arithmetic on alpha_doc)."
    )
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        fail(f"{where}: no gradient flows from the scores back to alpha_doc.", hint)
    weights = torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype).view_as(out)
    (grad,) = gradient((out * weights).sum(), (alpha,), where, hint)
    want = (_occurrences(doc, cands).to(F64) * weights.to(F64).unsqueeze(1)).sum(-1)
    if grad is None or not allclose(grad.to(F64).flatten(1), want, atol=1e-6):
        fail(f"{where}: the gradient that reaches alpha_doc is not right.", hint)


# --- exercise: the masked softmax -----------------------------------------------------------


def _softmax_cases(gen):
    """Random masks (not only prefixes) with an empty and a full row; masked scores larger
    than the real ones; then real scores of magnitude 1e6, to catch a fill value that is not
    low enough and an exp that overflows."""
    cases = []
    for shape, dtype in (((3, 4, 5), F64), ((4, 7), torch.float32)):
        scores = 3 * torch.randn(shape, generator=gen, dtype=F64)
        mask = torch.rand(shape, generator=gen) < 0.6
        rows = mask.view(-1, shape[-1])
        rows[0] = False  # a row with no real position
        rows[1] = True  # a row with no PAD
        rows[2, 0], rows[2, 1:] = True, False  # a single real position
        scores = torch.where(mask, scores, scores.abs() + 10)  # masked scores are the largest
        cases.append((scores.to(dtype), mask, False))
    scores = torch.randn(2, 3, 6, generator=gen, dtype=F64)
    mask = torch.rand(2, 3, 6, generator=gen) < 0.5
    mask[..., 0] = True
    mask[1, 2] = False
    shift = torch.tensor([-1e6, 1e6], dtype=F64).view(2, 1, 1)
    scores = torch.where(mask, scores + shift, scores)  # real scores far from the masked ones
    cases.append((scores, mask, True))
    return cases


@own_random_state
def masked_softmax(fn) -> str:
    """Exercise: ``fn(scores, mask) -> alpha`` of the same shape: the softmax over the last
    dimension's real positions (mask True), exactly 0 on the others; a row with no real
    position gives zeros, without NaN in the forward and the backward pass."""
    _own_work(fn, "masked_softmax")
    name = name_of(fn, "masked_softmax")
    gen = torch.Generator().manual_seed(82)
    cases = _softmax_cases(gen)
    for scores, mask, large in cases:
        shape = tuple(scores.shape)
        kind = "scores of magnitude 1e6" if large else "scores of order 1"
        where = f"{name} on {scores.dtype} scores of shape {shape} ({kind})"
        want = _masked_softmax(scores, mask).to(F64)
        given = [scores.clone(), mask.clone()]
        got = expect_tensor(call(fn, *given, name=name), shape, where)
        got = expect_dtype(got, scores.dtype, where)
        if not unchanged(given, (scores, mask)):
            fail(f"{where} changed an argument in place.", "build the result in a new tensor.")
        value = got.detach().to(F64)
        atol = 1e-6 if got.dtype != F64 or scores.dtype != F64 else 1e-12
        if not close(value, want, atol=atol):
            _explain_softmax(where, value, scores, mask, want, large)
        if got.dtype == F64 and scores.dtype == F64:  # sums are 1 to ~1e-15: 1e-9 shows
            _check_softmax_sums(where, value, mask)
        _check_softmax_gradient(fn, name, where, scores, mask)
    return passed(
        name,
        ["random masks with an empty, a full and a one-token row", "scores of magnitude 1e6",
         "no NaN forward or backward, the gradient", "no change in place"],
    )  # fmt: skip


_EMPTY_ROW_HINT = (
    "a row with no real position must give zeros: with -inf in every position the softmax is "
    "0/0 = NaN, and so is exp(...) * mask divided by a sum of 0. Mask with a finite value, or "
    "guard the empty rows."
)

_NAN_GRADIENT_HINT = (
    "the forward pass is right, but a NaN or inf computed on the row with no real position "
    "(a 0/0, a division by a sum of 0) still reaches the backward pass, even when torch.where "
    "or masked_fill discards it afterwards (0 x NaN = NaN): make every intermediate value of "
    "that row finite."
)


def _explain_softmax(where, got, scores, mask, want, large):
    """Name the mistake behind a wrong masked softmax."""

    def same(a, b):
        return allclose(a, b.to(F64), atol=1e-6)

    if large:  # the same answer was right on scores of order 1
        if torch.isnan(got).any():
            fail(
                f"{where}: NaN with scores of magnitude 1e6.",
                "exp of a large score overflows to inf (and inf/inf = NaN): subtract each row's "
                "largest real score before exp, as torch.softmax does for you.",
            )
        fail(
            f"{where}: wrong with scores of magnitude 1e6 (right with scores of order 1).",
            "the masked positions took the real ones' mass: the value that masks a position "
            "must lie below any real score, however large, and a fixed constant such as -1e4 "
            "is not low enough.",
        )
    empty = ~mask.any(-1, keepdim=True).expand_as(mask)
    if torch.isnan(got).any():
        if torch.isnan(got[empty]).any() and not torch.isnan(got[~empty]).any():
            fail(f"{where}: NaN on the row with no real position.", _EMPTY_ROW_HINT)
        fail(f"{where}: the result has NaN.", _EMPTY_ROW_HINT)
    if same(got, torch.softmax(scores.to(F64), -1)):
        fail(
            f"{where} ignores the mask.",
            "the positions where mask is False must get no attention at all.",
        )
    if same(got, _masked_softmax(scores.to(F64), ~mask)):
        fail(f"{where}: the mask is read the wrong way round.", "mask True marks a real position.")
    if (got[~mask] != 0).any():
        if (got[~mask & ~empty] == 0).all():
            fail(
                f"{where}: the row with no real position got non-zero weights.",
                "a row whose positions are all masked must come out all zeros: no position of "
                "it is real, so none may get attention.",
            )
        fail(
            f"{where}: a masked position got a non-zero weight.",
            "the weight of a position where mask is False must be exactly 0.",
        )
    if same(got, torch.softmax(scores.to(F64), -1).masked_fill(~mask, 0.0)):
        fail(
            f"{where}: the softmax ran over all positions and the masked ones were zeroed "
            "afterwards, so the real positions do not sum to 1.",
            "leave the masked positions out of the softmax itself (or renormalise over the "
            "real ones).",
        )
    for dim in range(scores.dim() - 1):
        if same(got, _han.masked_softmax(scores.to(F64), mask, dim=dim)):
            fail(
                f"{where}: the softmax ran over dimension {dim}.",
                "normalise over the last dimension (the words of a sentence, dim=-1).",
            )
    real_rows = mask.any(-1)
    if not allclose(got.sum(-1)[real_rows], torch.ones_like(got.sum(-1)[real_rows])):
        fail(
            f"{where}: a row with real positions does not sum to 1.",
            "the weights of a row's real positions form a distribution.",
        )
    fail(
        f"{where}: the weights are not right.",
        "compare one row by hand: torch.softmax of its real scores alone, 0 elsewhere.",
    )


def _check_softmax_sums(where, got, mask):
    """Values close to the softmax's (to rtol 1e-6) whose rows do not sum to 1: the classic
    e / (e.sum() + eps), an epsilon that biases every row instead of guarding the empty ones."""
    real_rows = mask.any(-1)
    gap = got.sum(-1)[real_rows] - 1
    if gap.abs().max() <= 1e-9:
        return
    if (gap < 0).all():
        fail(
            f"{where}: the rows with real positions sum to slightly less than 1 (down to "
            f"1 - {-gap.min().item():.1g}), not exactly 1.",
            "a constant added to the denominator (an epsilon, as in sum + 1e-6) biases every "
            "row's weights and their gradient; it is only the empty rows, whose sum is 0, that "
            "need a guard.",
        )
    fail(
        f"{where}: the rows with real positions do not sum to exactly 1 (off by up to "
        f"{gap.abs().max().item():.1g}).",
        "the weights of a row's real positions form a distribution: no constant may be added "
        "to the exponentials or to their sum.",
    )


def _check_softmax_gradient(fn, name, where, scores, mask):
    """No NaN in the backward pass (the empty row), and the softmax's gradient."""
    hint = "keep the scores in the graph: no .detach(), .data or torch.no_grad()."
    tracked = scores.clone().requires_grad_()
    out = call(fn, tracked, mask.clone(), name=name)
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        fail(f"{where}: no gradient flows back to the scores.", hint)
    weights = torch.linspace(-1.0, 2.0, out.numel(), dtype=out.dtype).view_as(out)
    (grad,) = gradient((out * weights).sum(), (tracked,), where, hint)
    if grad is None:
        fail(f"{where}: no gradient reaches the scores.", hint)
    if torch.isnan(grad).any():
        fail(
            f"{where}: the gradient has NaN (on the row with no real position).", _NAN_GRADIENT_HINT
        )
    reference = scores.clone().requires_grad_()
    (want,) = torch.autograd.grad((_masked_softmax(reference, mask) * weights).sum(), reference)
    atol = 1e-12 if grad.dtype == F64 and out.dtype == F64 else 1e-5
    if not close(grad.to(F64), want.to(F64), atol=atol, rtol=1e-5):
        fail(
            f"{where}: the gradient that reaches the scores is not right.",
            "the values are right, so something outside torch's operations changed them: "
            "compute the weights with differentiable tensor operations only.",
        )


# --- exercise: the effective update rate ----------------------------------------------------


def _number(value, what: str) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        fail(f"{what} should be a number, got {type(value).__name__}.", "return a plain number.")
    return float(value)


def _safe(formula, u, u_min) -> float:
    try:
        return formula(u, u_min)
    except ZeroDivisionError:
        return math.nan


# (formula, what went wrong, hint): the classic wrong versions of (han-u-effective)
_RATE_MISTAKES = (
    (lambda u, m: (m - u) / (m - 1), "the formula is written for rates on the [0, 1] scale",
     "u and u_min are percentages (0-100), as the source's tables give them: the formula's "
     "top of the scale is 100, not 1."),
    (lambda u, m: 100 * (m - u) / (m - 1), "1 stands for the top of the scale",
     "u and u_min are percentages (0-100): the top of the scale is 100, not 1."),
    (lambda u, m: 100 * (m - u) / (m - 100) / 100, "this is a fraction, not a percentage",
     "ũ is a percentage, like u and u_min: do not divide by 100."),
    (lambda u, m: -100 * (m - u) / (m - 100), "the sign is flipped",
     "ũ rises with u: it is 100 at u = 100 and negative below the bound."),
    (lambda u, m: 100 * (u - m) / (u - 100), "u and u_min are swapped",
     "u_min is the bound (ũ = 0 there), u the measured rate."),
    (lambda u, m: 100 * (m - u) / m, "the formula divides by u_min",
     "ũ maps the bound u_min to 0 and the top of the scale, 100, to 100: check your "
     "denominator with u = 100."),
    (lambda u, m: 100 * (u - m) / m, "the formula divides by u_min",
     "ũ maps the bound u_min to 0 and the top of the scale, 100, to 100: check your "
     "denominator with u = 100."),
    (lambda u, m: u - m, "u is only shifted by the bound",
     "ũ is also rescaled, so that u = 100 still gives 100."),
)  # fmt: skip


@own_random_state
def effective_update_rate(fn) -> str:
    """Exercise: ``fn(u, u_min) -> ũ``, (han-u-effective), all in percent."""
    _own_work(fn, "effective_update_rate")
    name = name_of(fn, "effective_update_rate")
    source = ((0.44, 0.05, 0.39), (0.03, 0.05, -0.02))  # the source's values, to 0.005
    for u, u_min, quoted in source:
        where = f"{name}(u={u}, u_min={u_min})"
        got = _number(call(fn, u, u_min, name=name), where)
        if abs(got - quoted) > 0.005:
            _explain_rate(where, got, u, u_min)
    pairs = ((37.5, 5.0), (12.0, 1.0), (0.2, 0.025), (0.0, 0.5), (2.5, 2.5), (5.0, 5.0),
             (0.05, 0.05), (100.0, 0.05), (100.0, 5.0), (100.0, 1.0), (60.0, 0.0))  # fmt: skip
    for u, u_min in pairs:
        where = f"{name}(u={u}, u_min={u_min})"
        got = _number(call(fn, u, u_min, name=name), where)
        want = _effective_update_rate(u, u_min)
        if not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6):
            _explain_rate(where, got, u, u_min)
    return passed(
        name,
        ["the source's values (u_min = 0.05: u = 0.44 and 0.03)", "ũ = 0 at the bound, "
         "100 at u = 100, negative below the bound, u itself when u_min = 0"],
    )  # fmt: skip


def _explain_rate(where, got, u, u_min):
    """Name the mistake behind a wrong effective update rate."""
    want = _effective_update_rate(u, u_min)
    # first, as every case with ũ < 0 comes after one with ũ > 0 (where a flipped sign fails)
    if want < 0 and (got == 0 or math.isclose(got, -want, rel_tol=1e-6)):
        fail(
            f"{where} = {got:.6g}, not {want:.6g}: the negative ũ below the bound was lost "
            "(clamped at 0 or made positive).",
            "ũ may be negative: below the bound (u < u_min) it is below 0, as the source's "
            "-0.02 for u = 0.03 % shows. Do not clamp it (max(0, ...)) or take abs().",
        )
    for formula, what, hint in _RATE_MISTAKES:
        wrong = _safe(formula, u, u_min)
        if math.isfinite(wrong) and math.isclose(got, wrong, rel_tol=1e-6, abs_tol=1e-9):
            fail(f"{where} = {got:.6g}: {what}.", hint)
    rounded = [math.floor(want), math.ceil(want), math.trunc(want)]
    rounded += [round(want, digits) for digits in range(6)]
    if any(math.isclose(got, r, rel_tol=1e-9, abs_tol=1e-12) for r in rounded):
        fail(
            f"{where} = {got:.6g}, not {want:.6g}: the result was rounded.",
            "do not round: no round(), int() or floor division //; return ũ with all its "
            "digits (the source's 0.39 and -0.02 are rounded only for display).",
        )
    if u == u_min:
        fail(f"{where} = {got:.6g}, not 0 at the bound.", "ũ is 0 when u equals u_min.")
    if u == 100:
        fail(f"{where} = {got:.6g}, not 100 at the top of the scale.", "ũ(100) = 100.")
    fail(
        f"{where} = {got:.6g} is not right.",
        "check your formula at its two anchors: ũ = 0 at u = u_min, ũ = 100 at u = 100, all "
        "in percent; in between it is linear in u.",
    )


# --- exercise: SENS-GRU's layer decision ----------------------------------------------------

# The kinds of module vote in a SENS case, by the margin d = s - s_prev - theta they get:
YES, NO, EVEN, SMALL = "Y", "N", "E", "S"  # d = 0.5, -0.5, exactly 0, a rise of theta / 2
HIGH = "H"  # d = 0.5 with surprisals near 10: s_prev * theta is far above theta

_SENS_PATTERNS = {
    # M = 4, theta = 0.25: unanimous, a tie (updates), one or three votes, an even margin;
    # high surprisals, which a threshold multiplied with s_prev (s > s_prev (1 + theta)) stops
    (4, 3, 0.25): [
        "YYYY",
        "NNNN",
        "YYNN",
        "YNNN",
        "YYYN",
        "YENN",
        "EEEY",
        "NYNY",
        "YSSN",
        "HHHH",
        "HHYN",
    ],
    # M = 2: one vote is a tie, which updates
    (2, 4, 0.5): ["YN", "NY", "NN", "YY", "EN", "SN", "EE"],
    # M = 3, theta = 0: an unchanged surprisal is an even margin
    (3, 2, 0.0): ["YYN", "YNN", "EEY", "NNN", "YYY", "EYN"],
}


def _sens_case(gen, M, K, theta, patterns):
    """Dyadic surprisals chosen so that every margin d = s - s_prev - theta is exact: 0.5,
    -0.5, 0 or -theta/2, as the patterns say."""
    B, H = len(patterns), M * K
    margin = {YES: 0.5, NO: -0.5, EVEN: 0.0, SMALL: -theta / 2, HIGH: 0.5}
    d = torch.tensor([[margin[c] for c in row] for row in patterns], dtype=F64)
    base = torch.tensor([[8.0 if c == HIGH else 0.0 for c in row] for row in patterns], dtype=F64)
    s = 2.0 + base + torch.randint(0, 16, (B, M), generator=gen).to(F64) / 8
    s_prev = s - theta - d
    h_hat = torch.randn(B, H, generator=gen, dtype=F64)
    h_prev = torch.randn(B, H, generator=gen, dtype=F64)
    return h_hat, h_prev, s, s_prev


def _decisions(s, s_prev, theta, strict_votes=True, rule="tie", relative=False):
    """The layer's decision (B,) under a rule, as floats: the reference and its variants."""
    bound = s_prev * (1 + theta) if relative else s_prev + theta
    votes = (s > bound) if strict_votes else (s >= bound)
    count, M = votes.sum(-1), votes.shape[-1]
    if rule == "tie":
        return (2 * count >= M).to(F64)
    if rule == "strict":
        return (2 * count > M).to(F64)
    if rule == "any":
        return (count > 0).to(F64)
    return (count == M).to(F64)  # "all"


@own_random_state
def sens_step(fn) -> str:
    """Exercise: ``fn(h_hat, h_prev, s, s_prev, theta) -> h`` (B, H): SENS-GRU's decision,
    (sens-vote) and (sens-select), with the identity straight-through estimator on both
    discrete steps."""
    _own_work(fn, "sens_step")
    name = name_of(fn, "sens_step")
    gen = torch.Generator().manual_seed(84)
    for (M, K, theta), patterns in _SENS_PATTERNS.items():
        inputs = _sens_case(gen, M, K, theta, patterns)
        where = f"{name} with {M} modules of {K} units, theta = {theta}"
        _check_sens(fn, name, where, inputs, theta, M, patterns)
    # theta = -1e9 in float32: every module votes; +1e9: none does
    for theta in (-1e9, 1e9):
        B, M, K = 5, 4, 2
        h_hat, h_prev = (torch.randn(B, M * K, generator=gen) for _ in range(2))
        s, s_prev = (2 + torch.rand(B, M, generator=gen) for _ in range(2))
        where = f"{name} in float32 with {M} modules of {K} units, theta = {theta:g}"
        _check_sens(fn, name, where, (h_hat, h_prev, s, s_prev), theta, M, None)
    return passed(
        name,
        ["unanimous, split and tied votes, margins of exactly 0, M = 2, 3, 4",
         "the whole state selected", "theta = -1e9 and +1e9 in float32",
         "straight-through gradients to s and s_prev", "no change in place"],
    )  # fmt: skip


def _check_sens(fn, name, where, inputs, theta, M, patterns):
    h_hat, h_prev, s, s_prev = inputs
    B, H = h_hat.shape
    b = _decisions(s, s_prev, theta)
    given = [t.clone() for t in inputs]
    got = call(fn, *given, theta, name=name)
    if isinstance(got, torch.Tensor) and tuple(got.shape) in ((B, 1), (B,), (B, M)):
        fail(
            f"{where} returned shape {tuple(got.shape)}, not the new state ({B}, {H}).",
            "return h itself: h_hat or h_prev, chosen by the layer's decision.",
        )
    got = expect_dtype(expect_tensor(got, (B, H), where), h_hat.dtype, where)
    if not unchanged(given, inputs):
        fail(f"{where} changed an argument in place.", "build h in a new tensor.")
    _check_sens_values(where, got.detach(), h_hat, h_prev, s, s_prev, theta, b, patterns)
    tracked = [t.clone().requires_grad_() for t in inputs]
    out = call(fn, *tracked, theta, name=name)
    _check_sens_gradient(where, out, tracked, b, M)


def _check_sens_values(where, got, h_hat, h_prev, s, s_prev, theta, b, patterns):
    """The state is h_hat or h_prev, row by row, as the reference decides."""
    eps = torch.finfo(h_hat.dtype).eps
    got = got.to(h_hat.dtype)

    def is_(x):  # unit by unit: a copy of x, within a few ulp
        return isclose(got, x, rtol=8 * eps, atol=8 * eps)

    new, old = is_(h_hat), is_(h_prev)
    if not (new | old).all():
        fail(
            f"{where}: some units are neither h_hat nor h_prev.",
            "the layer's update is all or nothing: h is exactly h_hat or exactly h_prev, with "
            "a 0/1 decision in the forward pass (no sigmoid, no mix weighted by p).",
        )
    decided = torch.where(new.all(-1), 1.0, torch.where(old.all(-1), 0.0, -1.0)).to(F64)
    if (decided < 0).any():
        fail(
            f"{where}: within one row, some units updated and others kept.",
            "SENS decides for the whole layer: the modules' votes make one decision per row, "
            "and all H units follow it (not each module its own vote).",
        )
    if equal(decided, b):
        return
    if patterns is None:  # theta = +-1e9 in float32
        if theta < 0:
            fail(
                f"{where}: every module votes to update, yet the state was kept.",
                "the 0/1 value was lost to float32 rounding: written as x + d - d.detach(), "
                "the sum x + d comes first, and 1 + 1e9 rounds to 1e9. Mind the order in "
                "which the straight-through terms are added.",
            )
        fail(f"{where}: no module votes to update, yet the state changed.", "check the votes.")
    variants = (
        (_decisions(s, s_prev, theta, relative=True),
         "a module voted only when s rose by theta times s_prev (a relative threshold)",
         "the threshold is added to the previous surprisal, not multiplied with it: a module "
         "votes when s > s_prev + theta."),
        (_decisions(s, s_prev, theta, rule="strict"),
         "a tie kept the state (p > 0.5, or torch.round(0.5), which is 0)",
         "a tie updates: the layer takes h_hat when p >= 0.5 (with M = 2, one vote is enough)."),
        (_decisions(s, s_prev, theta, strict_votes=False),
         "a module whose margin is exactly 0 voted to update (>= instead of >)",
         "a vote is a strict inequality: s > s_prev + theta."),
        (1 - b, "updating and keeping are the wrong way round",
         "when p >= 0.5 the layer takes the proposal h_hat; otherwise it keeps h_prev."),
        (_decisions(s, s_prev, 0.0), "a rise smaller than theta voted to update",
         "the threshold is left out: a module votes when s > s_prev + theta."),
        (_decisions(s, s_prev, -theta), "a rise smaller than theta voted to update",
         "the threshold works against the rule: it is added to s_prev, s > s_prev + theta."),
        (_decisions(s, s_prev, theta, rule="any"), "a single vote updated the layer",
         "the layer follows the majority: p, the share of the M votes, must reach 0.5."),
        (_decisions(s, s_prev, theta, rule="all"), "only a unanimous vote updated the layer",
         "the layer follows the majority: p, the share of the M votes, must reach 0.5."),
    )  # fmt: skip
    for want, what, hint in variants:
        if equal(decided, want):
            fail(f"{where}: {what}.", hint)
    fail(
        f"{where}: the layer's decisions are not right.",
        "write the votes [s > s_prev + theta] of one row by hand, take their mean p, and update "
        "the whole state when p >= 0.5.",
    )


_STE_HINT = (
    "the votes [d > 0] and the layer's decision [p >= 0.5] are comparisons, which have no "
    "gradient; the identity straight-through estimator passes the gradient through each of "
    "them as if it were the identity (derivative 1, the 0/1 value unchanged in the forward "
    "pass), so that it reaches s and s_prev. A comparison, torch.where or round alone passes "
    "none, and neither does a mix that leaves the decision out of the graph."
)


def _check_sens_gradient(where, out, tracked, b, M):
    """With L = sum w * h: dL/dh_hat = b w, dL/dh_prev = (1 - b) w, and through the identity
    straight-through estimator dL/ds = (1/M) sum_j w_j (h_hat_j - h_prev_j) per module,
    dL/ds_prev = -dL/ds."""
    h_hat, h_prev, s, s_prev = tracked
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        fail(f"{where}: no gradient flows through the result.", _STE_HINT)
    weights = torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype).view_as(out)
    grads = gradient((out * weights).sum(), tracked, where, _STE_HINT)
    w = weights.to(F64)
    gap = (w * (h_hat - h_prev).detach().to(F64)).sum(-1, keepdim=True) / M  # (B, 1)
    want_s = gap.expand(-1, M)
    expected = (b[:, None] * w, (1 - b[:, None]) * w, want_s, -want_s)
    small = h_hat.dtype == torch.float32 or out.dtype == torch.float32
    rtol, atol = (1e-4, 1e-5) if small else (1e-9, 1e-12)
    for grad, want, what in zip(grads[:2], expected[:2], ("h_hat", "h_prev")):
        if grad is None or not allclose(grad.to(F64), want, rtol=rtol, atol=atol):
            fail(
                f"{where}: the gradient that reaches {what} is not right.",
                "a row that updates passes its gradient to h_hat, a row that keeps to h_prev: "
                "do not detach either.",
            )
    for grad, want, what in zip(grads[2:], expected[2:], ("s", "s_prev")):
        if grad is None or not (grad != 0).any():
            if what == "s_prev" and grads[2] is not None and (grads[2] != 0).any():
                fail(
                    f"{where}: no gradient reaches s_prev, though one reaches s.",
                    "the margin d = s - s_prev - theta carries the gradient to both "
                    "surprisals: do not detach s_prev.",
                )
            fail(f"{where}: no gradient reaches {what}.", _STE_HINT)
        grad = grad.to(F64)
        if allclose(grad, want, rtol=rtol, atol=atol):
            continue
        if allclose(grad, -want, rtol=rtol, atol=atol):
            fail(
                f"{where}: the gradient that reaches {what} has the wrong sign.",
                "d = s - s_prev - theta rises with s and falls with s_prev.",
            )
        sign = 1 if what == "s" else -1  # the gradient through b alone, per term
        through_hat = sign * (w * h_hat.detach().to(F64)).sum(-1, keepdim=True) / M
        through_prev = -sign * (w * h_prev.detach().to(F64)).sum(-1, keepdim=True) / M
        for alone in (through_hat, through_prev):
            if allclose(grad, alone.expand(-1, M), rtol=rtol, atol=atol):
                fail(
                    f"{where}: the gradient that reaches {what} comes from only one of the two "
                    "terms b h_hat and (1 - b) h_prev.",
                    "the decision b's gradient is missing from one of the two terms: b or "
                    "1 - b was detached there (or computed apart without the straight-through "
                    "part). Both terms must use the same b, with its gradient.",
                )
        if allclose(grad, M * want, rtol=rtol, atol=atol):
            fail(
                f"{where}: the gradient that reaches {what} is M times too large.",
                "p is the mean of the M votes (sens-vote), not their count.",
            )
        fail(
            f"{where}: the gradient that reaches {what} is not the identity straight-through "
            "estimator's.",
            "the identity straight-through estimator has derivative 1 on both discrete "
            "steps: no sigmoid's derivative, no scaling.",
        )
