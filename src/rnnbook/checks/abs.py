"""Checkers for the exercises of the chapter on attention-based skipping (ABS, Chapter 9).

Each takes the student's answer, tests it on prepared inputs against the book's equations
(:mod:`rnnbook.models.abs`: (abs-fill), (abs-expected), (abs-rank), and the per-direction
fill of the fourth exercise, written out below), prints what passed, and raises
:class:`~rnnbook.checks.grading.CheckFailed` with a hint that names the mistake it
recognised, never the solution.

* :func:`forward_fill`: ``fn(h_hat (B, T, D), b (B, T)) -> (B, T, D)`` floats, (abs-fill), with
  the gradient to ``b`` that the straight-through estimator (abs-ste) needs.
* :func:`predicted_update_rate`: ``fn(mask (N, T) bool) -> float``, the word-level update
  rate that (abs-expected) predicts for stochastic ABS. PAD may stand at either end of a row.
* :func:`ranked_decisions`: ``fn(alpha (N, T), mask (N, T) bool, rate) -> (N, T)`` 0/1,
  (abs-rank). Floats, integers or booleans are accepted: only the values are checked. PAD
  may stand at either end of a row.
* :func:`bidirectional_fill`: ``fn(h_hat (B, T, 2H), b (B, T)) -> (B, T, 2H)``: the forward
  direction's H features filled from the left, the backward direction's from the right.
"""

from __future__ import annotations

import math

import torch

from rnnbook.checks.dtypes import expect_dtype
from rnnbook.checks.grading import (
    allclose,
    as_number,
    call,
    equal,
    fail,
    gradient,
    name_of,
    own_random_state,
    passed,
    reject_own,
    tolerance,
    unchanged,
)
from rnnbook.models import abs as _abs

F64 = torch.float64


# --- the references -------------------------------------------------------------------------


def _forward_fill(h_hat, b, seed=None, grad_hat=True, grad_prev=True):
    """(abs-fill) over dim 1: ``h_t = b_t ĥ_t + (1 − b_t) h_{t−1}``, ``h_0 = seed`` (zeros).
    ``grad_hat`` / ``grad_prev`` False detach ``b`` in that term (for naming a half-detached
    decision)."""
    h = torch.zeros_like(h_hat[:, 0]) if seed is None else seed
    rows = []
    for t in range(h_hat.shape[1]):
        b_t = b[:, t, None]
        keep = b_t if grad_hat else b_t.detach()
        skip = b_t if grad_prev else b_t.detach()
        h = keep * h_hat[:, t] + (1 - skip) * h
        rows.append(h)
    return torch.stack(rows, dim=1)


def _backward_fill(h_hat, b, **options):
    """The fill from the right: ``h_t = b_t ĥ_t + (1 − b_t) h_{t+1}``, ``h_{T+1} = 0``."""
    return _forward_fill(h_hat.flip(1), b.flip(1), **options).flip(1)


def _bidirectional_fill(h_hat, b, **options):
    """The forward direction's H features filled from the left, the backward one's from the
    right, with one shared decision per token."""
    H = h_hat.shape[-1] // 2
    return torch.cat(
        [_forward_fill(h_hat[..., :H], b, **options), _backward_fill(h_hat[..., H:], b, **options)],
        dim=-1,
    )


def _predicted_rate(mask) -> float:
    """(abs-expected) at the word level: one expected update per non-empty sequence, divided
    by the real positions."""
    return mask.any(-1).sum().item() / mask.sum().item()


def _keep(n, rate, rule="nearest"):
    """How many positions a row of ``n`` real ones keeps at ``rate``: (abs-rank) with
    ``rule="nearest"``, and the classic wrong rules. 0 for an empty row."""
    x = rate * n.to(F64)
    k = {
        "nearest": torch.floor(x + 0.5).clamp_min(1),
        "floor": torch.floor(x).clamp_min(1),
        "ceil": torch.ceil(x).clamp_min(1),
        "even": torch.round(x).clamp_min(1),  # halves to even, as round() and torch.round
        "half down": torch.ceil(x - 0.5).clamp_min(1),
        "no max": torch.floor(x + 0.5),
    }[rule].long()
    return torch.minimum(k, n)


def _ranked(alpha, mask, k, later_first=False, lowest=False):
    """(abs-rank) for ``k`` (N,) positions per row: the real positions ranked by attention,
    ties by position, earlier first (``later_first``: later first; ``lowest``: ascending)."""
    score = -alpha.to(F64) if lowest else alpha.to(F64)
    score = score.masked_fill(~mask, -math.inf)  # PAD ranks last
    if later_first:
        score = score.flip(-1)
    order = torch.sort(score, dim=-1, descending=True, stable=True).indices
    positions = torch.arange(score.shape[-1]).expand_as(order)
    rank = torch.empty_like(order).scatter_(-1, order, positions)
    if later_first:
        rank = rank.flip(-1)
    return ((rank < k.unsqueeze(-1)) & mask).to(F64)


def _order_as_rank(alpha, mask, rate):
    """The vectorised slip: the sort's indices (the position at each rank) compared with k as
    if they were each position's rank."""
    score = alpha.to(F64).masked_fill(~mask, -math.inf)
    order = torch.sort(score, dim=-1, descending=True, stable=True).indices
    return ((order < _keep(mask.sum(-1), rate).unsqueeze(-1)) & mask).to(F64)


def _ranked_decisions(alpha, mask, rate):
    """(abs-rank): keep the top ``max(1, ⌊rate n + ½⌋)`` real positions of each row."""
    return _ranked(alpha, mask, _keep(mask.sum(-1), rate))


def _own_work(fn, exercise: str) -> None:
    """The package's function (or the checker's reference) is not an answer."""
    own = (_forward_fill, _backward_fill, _bidirectional_fill, _predicted_rate,
           _ranked_decisions, _abs.forward_fill, _abs.abs_decisions, _abs.keep_count)  # fmt: skip
    reject_own(fn, own, exercise)


def _grad(out, inputs, where: str, hint: str):
    """:func:`~rnnbook.checks.grading.gradient`, naming the in-place pitfall of the fill."""
    return gradient(out, inputs, where, hint, inplace_hint=_SAVED_HINT)


_SAVED_HINT = (
    "the values are right, but a row written into a preallocated tensor (out[:, t] = ...) "
    "changed a value that autograd had saved: the mix b_t h_hat_t + (1 - b_t) h_{t-1} keeps "
    "h_{t-1} for the gradient of b. Collect the rows in a list and torch.stack them (or clone "
    "the previous row before you use it)."
)


def _same(got, want, atol=1e-6) -> bool:
    return got.shape == want.shape and bool(allclose(got, want.to(F64), atol=atol))


# --- the fills: cases, shapes, classic mistakes, gradients -----------------------------------

_B_ROWS = [[0, 1, 0, 0, 1, 0, 0],  # a leading skip, a run of two, trailing skips
           [0, 0, 1, 1, 0, 1, 0],  # two leading skips after a row that kept something
           [1, 0, 0, 0, 0, 1, 1],  # a run of four
           [0, 0, 0, 0, 0, 0, 0]]  # nothing kept  # fmt: skip


def _fill_cases(gen, features):
    """(h_hat, b, what) for a fill of ``features(n)`` features: a hand-made batch whose rows
    tell the classic mistakes apart, random decisions with an all-keep and an all-skip row,
    a float32 batch and sequences of one position."""
    cases = []
    b = torch.tensor(_B_ROWS, dtype=F64)
    h_hat = torch.randn(4, 7, features(2), generator=gen, dtype=F64)
    cases.append((h_hat, b, "a hand-made batch of 4 rows of 7 positions"))
    b = (torch.rand(5, 9, generator=gen) < 0.4).to(F64)
    b[0], b[1] = 1.0, 0.0
    h_hat = torch.randn(5, 9, features(3), generator=gen, dtype=F64)
    cases.append((h_hat, b, "random decisions, a row keeping all, a row skipping all"))
    b = (torch.rand(3, 6, generator=gen) < 0.5).to(torch.float32)
    b[:, 0] = torch.tensor([0.0, 1.0, 0.0])
    h_hat = torch.randn(3, 6, features(4), generator=gen)
    cases.append((h_hat, b, "float32 inputs"))
    b = torch.tensor([[1.0], [0.0], [1.0]], dtype=F64)
    h_hat = torch.randn(3, 1, features(1), generator=gen, dtype=F64)
    cases.append((h_hat, b, "sequences of one position"))
    return cases


def _fill_output(fn, name, where, h_hat, b, shape_hints, pieces_hint=None):
    """Call the student's fill, check the type, the shape, the dtype and that nothing changed
    in place; the result as float64, detached."""
    given = [h_hat.clone(), b.clone()]
    got = call(fn, *given, name=name)
    B, T, D = h_hat.shape
    if isinstance(got, list | tuple) and got and all(isinstance(t, torch.Tensor) for t in got):
        fail(
            f"{where} returned a {type(got).__name__} of {len(got)} tensors, not one tensor.",
            pieces_hint or "stack the filled rows into one tensor of the shape of h_hat.",
        )
    if not isinstance(got, torch.Tensor):
        fail(f"{where} should be a torch.Tensor, got {type(got).__name__}.", "return a tensor.")
    shape = tuple(got.shape)
    if shape != (B, T, D):
        hint = shape_hints(B, T, D).get(shape, "the filled outputs have the shape of h_hat.")
        fail(f"{where} returned shape {shape}, not {(B, T, D)}.", hint)
    if not got.is_floating_point() or got.dtype in (torch.float16, torch.bfloat16):
        fail(
            f"{where} returned a tensor of {got.dtype}, which does not hold h_hat's values.",
            "the filled outputs are h_hat's rows or copies of them: build them in h_hat's dtype "
            "(torch.zeros_like(h_hat), h_hat.new_zeros), not in an integer, bool or half type.",
        )
    expect_dtype(got, h_hat.dtype, where)
    if not unchanged(given, (h_hat, b)):
        fail(
            f"{where} changed an argument in place.",
            "build the filled outputs in a new tensor; h_hat and b must stay as they were.",
        )
    return got


def _fill_shape_hints(B, T, D):
    every = "return the filled output of every position, not only the last state."
    if T == 1:
        every = (
            "the time dimension has length 1 here, and it stays: a squeeze(), or an index "
            "[:, 0] or [:, -1], drops it. Return the filled output of every position."
        )
    return {
        (B, D): every,
        (T, B, D): "the result is time-major: keep the batch first, (B, T, D), like h_hat.",
        (B, T): "keep the D features of each position: a skipped position copies a whole row.",
    }


def _fill_mistakes(h_hat, b, half=""):
    """(result, what went wrong, hint): the classic wrong forward fills of h_hat (B, T, D)."""
    B, T, D = h_hat.shape
    b3 = b[..., None]
    previous = torch.cat([torch.zeros_like(h_hat[:, :1]), h_hat[:, :-1]], dim=1)
    flat = _forward_fill(h_hat.reshape(1, B * T, D), b.reshape(1, B * T)).view(B, T, D)
    right = _forward_fill(h_hat, b)
    lagged = torch.cat([torch.zeros_like(h_hat[:, :1]), right[:, :-1]], dim=1)
    over_batch = _forward_fill(h_hat.transpose(0, 1), b.transpose(0, 1)).transpose(0, 1)
    return (
        (b3 * h_hat, f"{half}skipped positions are zeros instead of copies",
         "a skipped position (b_t = 0) is not blanked out: it holds a copy of the most recent "
         "kept output, h_{t-1}. (abs-fill) is a recurrence over t."),
        (h_hat, f"{half}h_hat came back unchanged: the decisions were not applied",
         "where b_t = 0 the output is the previous filled state h_{t-1}, not h_hat_t."),
        (_backward_fill(h_hat, b), f"{half}the fill ran from the right: a skipped position "
         "copied the next kept output", "(abs-fill) copies forward, in reading order: a "
         "skipped position takes the most recent kept output on its left."),
        (_forward_fill(h_hat, b, seed=h_hat[:, 0]), f"{half}the positions before the first "
         "kept one copied h_hat_1", "h_0 = 0: before the first kept position there is nothing "
         "to copy, so those positions are zeros (h_hat_1 itself was skipped)."),
        (flat, f"{half}the fill ran across the rows of the batch: a row's leading skips copied "
         "the previous row's last kept output", "each row of the batch is its own sequence "
         "that starts from h_0 = 0: run the recurrence along time (dim 1) for all rows at "
         "once, not over the B*T positions as one sequence."),
        (b3 * h_hat + (1 - b3) * previous, f"{half}a skipped position copied the previous "
         "output h_hat_{t-1}, not the previous filled state h_{t-1}", "after two skips in a "
         "row the copy must still be the last kept output: copy the previous filled row, "
         "which is itself a copy after a skip."),
        (_forward_fill(h_hat, 1 - b), f"{half}the decisions were read the wrong way round",
         "b_t = 1 keeps (updates with) h_hat_t; b_t = 0 skips and copies."),
        (lagged, f"{half}every position holds the state of the position before it (h_{{t-1}} "
         "at t)", "the output at t is the state after position t's own decision: update h "
         "with b_t first, then store it."),
        (over_batch, f"{half}the recurrence ran over the batch (dim 0), not over time",
         "h_hat is (B, T, D), batch first: step along dim 1, one position of every row at once."),
        ((b3 * h_hat).cumsum(1), f"{half}the kept outputs were added up", "a kept position "
         "replaces the state, (1 - b_t) h_{t-1} is dropped when b_t = 1: nothing accumulates."),
    )  # fmt: skip


def _explain_forward_fill(where, got, h_hat, b):
    for wrong, what, hint in _fill_mistakes(h_hat.to(F64), b.to(F64)):
        if _same(got, wrong):
            fail(f"{where}: {what}.", hint)
    if torch.isnan(got).any():
        fail(f"{where}: the result has NaN.", "the fill needs no division: copy or keep rows.")
    fail(
        f"{where}: the filled outputs are not right.",
        "work out one row by hand from (abs-fill), with h_0 = 0, and compare it with yours.",
    )


_NO_B_GRADIENT = (
    "b carries the straight-through gradient of (abs-ste), so the loss must reach it through "
    "the fill: use b as a number in the mix of (abs-fill). A comparison (b > 0, b.bool()), "
    "torch.where, a boolean mask used as an index, integer positions (argmax, cummax, gather), "
    "b.round(), a cast to an integer type (.long(), .int()) or .detach() pass no gradient to b."
)


def _check_fill_gradient(fn, name, where, h_hat, b, reference):
    """d(sum w * out) / d h_hat and d b, against the reference's (float64 cases)."""
    tracked = [h_hat.clone().requires_grad_(), b.clone().requires_grad_()]
    try:
        out = fn(*(t.clone() for t in tracked))
    except Exception as error:  # right values on plain tensors, a crash once b has a gradient
        fail(
            f"{where} raised {type(error).__name__} when h_hat and b require grad: {error}",
            "b carries the gradient of (abs-ste): keep it a torch tensor in the graph (no "
            ".numpy(), .item(), .tolist(), no in-place change of a tensor that requires grad).",
        )
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        fail(f"{where}: no gradient flows through the result.", _NO_B_GRADIENT)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(92), dtype=F64)
    grads = _grad((out * weights.to(out.dtype)).sum(), tracked, where, _NO_B_GRADIENT)

    def reference_grads(**options):
        leaves = [h_hat.clone().requires_grad_(), b.clone().requires_grad_()]
        value = (reference(*leaves, **options) * weights).sum()
        return torch.autograd.grad(value, leaves)

    want_hat, want_b = reference_grads()
    rtol, atol = (1e-9, 1e-10) if out.dtype == F64 else (1e-4, 1e-5)
    grad_hat, grad_b = grads
    if grad_hat is None or not allclose(grad_hat.to(F64), want_hat, rtol=rtol, atol=atol):
        fail(
            f"{where}: the gradient that reaches h_hat is not right.",
            "a kept h_hat_t passes the gradient of its own position and of every skipped "
            "position that copies it: do not detach h_hat or the copies.",
        )
    if grad_b is None or not (grad_b != 0).any():
        fail(f"{where}: no gradient reaches b.", _NO_B_GRADIENT)
    if allclose(grad_b.to(F64), want_b, rtol=rtol, atol=atol):
        return
    for options in ({"grad_hat": False}, {"grad_prev": False}):
        if allclose(grad_b.to(F64), reference_grads(**options)[1], rtol=rtol, atol=atol):
            fail(
                f"{where}: the gradient that reaches b comes from only one of the two terms "
                "b_t h_hat_t and (1 - b_t) h_{t-1}.",
                "b was detached (or turned into a mask) in one of the two terms: both must use "
                "the same b, with its gradient.",
            )
    fail(
        f"{where}: the gradient that reaches b is not right.",
        "the values are right, so b enters the computation in another way than the mix of "
        "(abs-fill): b_t weighs h_hat_t and 1 - b_t weighs the previous filled state.",
    )


# --- exercise: the forward fill ---------------------------------------------------------------


@own_random_state
def forward_fill(fn) -> str:
    """Exercise: ``fn(h_hat (B, T, D), b (B, T)) -> h (B, T, D)``, (abs-fill):
    ``h_t = b_t ĥ_t + (1 − b_t) h_{t−1}`` with ``h_0 = 0``, b floats 0/1 that may carry a
    gradient (abs-ste)."""
    _own_work(fn, "forward_fill")
    name = name_of(fn, "forward_fill")
    gen = torch.Generator().manual_seed(91)
    cases = _fill_cases(gen, lambda n: n + 1)
    for h_hat, b, what in cases:
        where = f"{name} on {what}"
        got = _fill_output(fn, name, where, h_hat, b, _fill_shape_hints)
        want = _forward_fill(h_hat.to(F64), b.to(F64))
        value = got.detach().to(F64)
        if not _same(value, want, atol=max(tolerance(got), tolerance(h_hat))):
            _explain_forward_fill(where, value, h_hat, b)
    for h_hat, b, what in cases:
        if h_hat.dtype == F64:
            where = f"{name} on {what}"
            _check_fill_gradient(fn, name, where, h_hat, b, _forward_fill)
    return passed(
        name,
        ["leading, trailing and repeated skips, rows keeping all or nothing, float32, T = 1",
         "no change in place", "the gradients to h_hat and b"],
    )  # fmt: skip


# --- exercise: the predicted update rate ------------------------------------------------------


def _mask(lengths, T):
    return torch.arange(T) < torch.tensor(lengths).unsqueeze(-1)


def _rate_cases(gen):
    """Masks of sentences of different lengths: PAD at the end, padded beyond the longest
    sentence, with empty rows, without, a single full row, a batch like SynCloze's; last,
    PAD at the start of each row."""
    lengths = torch.randint(0, 13, (64,), generator=gen)
    lengths[0] = 12
    return [
        (_mask([8, 5, 3, 0, 6], 10), "5 sentences of 8, 5, 3, 0 and 6 tokens, padded to 10"),
        (_mask([2, 7, 9, 3], 9), "4 sentences of 2, 7, 9 and 3 tokens, padded to 9"),
        (_mask([0, 4, 0, 4, 1], 6), "5 sentences of 0, 4, 0, 4 and 1 tokens, padded to 6"),
        (_mask([6], 6), "one sentence of 6 tokens"),
        (_mask(lengths.tolist(), 12), "64 sentences of 0 to 12 tokens, padded to 12"),
        (
            _mask([3, 0, 7, 5], 7).flip(-1),
            "4 sentences of 3, 0, 7 and 5 tokens, padded on the left to 7",
        ),
    ]


def _per_row(mask, empty_as_zero=False):
    n = mask.sum(-1).to(F64)
    real = n > 0
    inverse = torch.where(real, 1 / n.clamp_min(1), 0.0)
    return (inverse.sum() / (len(n) if empty_as_zero else real.sum())).item()


_PAD_COUNTED = (
    "PAD positions were counted as positions",
    "the rate is per real token: PAD never updates and never counts, so the padded length "
    "plays no part.",
)
_AVERAGED = (
    "the per-sentence rates 1/n_i were averaged",
    "the word-level rate is the share of all real tokens that update, a ratio of two totals "
    "(as (skip-rate) counts them), so a long sentence weighs more than a short one.",
)

# (formula of the mask, what went wrong, hint): the classic wrong predictions
_RATE_MISTAKES = (
    (lambda m: 1 / m.shape[-1], *_PAD_COUNTED),
    (lambda m: m.any(-1).sum().item() / m.numel(), *_PAD_COUNTED),
    (lambda m: _per_row(m), *_AVERAGED),
    (lambda m: _per_row(m, empty_as_zero=True), *_AVERAGED),
    (lambda m: m.shape[0] / m.sum().item(), "an empty sentence was counted as an update",
     "a row with no real position has no attention to sample from: it makes no update."),
    (lambda m: 1.0, "1 is the expected number of updates per sentence, not a rate",
     "the update rate is per real token: how many of them are expected to update."),
    (lambda m: float(m.any(-1).sum()), "this is the expected number of updates, not a rate",
     "the update rate is per real token: how many of them are expected to update."),
    (lambda m: 100 * _predicted_rate(m), "this is a percentage, not a fraction",
     "return the rate as a fraction in [0, 1], as (skip-rate) defines it."),
    (lambda m: m.sum().item() / m.any(-1).sum().item(), "the ratio is upside down: this is the "
     "mean sentence length", "the rate is updates per real token, at most 1."),
    (lambda m: m.sum().item() / m.shape[0], "the ratio is upside down: this is the mean "
     "sentence length", "the rate is updates per real token, at most 1."),
    (lambda m: 1 - _predicted_rate(m), "this is the skip rate, the share of tokens that do "
     "not update", "the update rate is the share of real tokens that update."),
    (lambda m: 1 / m.sum(-1).max().item(), "this is the rate of the longest sentence alone",
     "every sentence counts, the short ones too: each makes its own expected update."),
    (lambda m: m.any(0).sum().item() / m.sum().item(), "the sentences were counted along the "
     "wrong dimension: mask.any(0) marks the positions that are real in some sentence",
     "mask is (N, T), one row per sentence: reduce over the positions, dim -1."),
    (lambda m: m[:, 0].sum().item() / m.sum().item(), "the non-empty sentences were counted "
     "by their first position", "PAD can stand at the start of a row too: a sentence is "
     "non-empty when any of its positions is real."),
    (lambda m: m[:, -1].sum().item() / m.sum().item(), "the non-empty sentences were counted "
     "by their last position", "a sentence shorter than the padded length ends in PAD: it is "
     "non-empty when any of its positions is real."),
)  # fmt: skip


@own_random_state
def predicted_update_rate(fn) -> str:
    """Exercise: ``fn(mask (N, T) bool) -> float``: the word-level update rate that
    (abs-expected) predicts for stochastic ABS on these sentences, as a fraction; PAD at the end
    of a row, or at its start."""
    _own_work(fn, "predicted_update_rate")
    name = name_of(fn, "predicted_update_rate")
    gen = torch.Generator().manual_seed(93)
    cases = _rate_cases(gen)
    for mask, what in cases:
        where = f"{name} on {what}"
        given = mask.clone()
        got = as_number(call(fn, given, name=name), where)
        if not equal(given, mask):
            fail(f"{where} changed the mask in place.", "count without changing the mask.")
        want = _predicted_rate(mask)
        if math.isclose(got, want, rel_tol=1e-6):
            continue
        if not math.isfinite(got):
            fail(
                f"{where} = {got}: a division by zero.",
                "a sentence with no real token has n_i = 0, so its 1/n_i is not a number; and "
                "the rate is a ratio of two totals, not a mean of per-sentence rates.",
            )
        if got == 0 and all(as_number(call(fn, m.clone(), name=name), where) == 0
                            for m, _ in cases):  # fmt: skip
            fail(
                f"{where} = 0, and 0 on every batch: an integer division (//) rounded it down.",
                "divide with /, which keeps the fraction.",
            )
        for formula, wrong_what, hint in _RATE_MISTAKES:
            if math.isclose(got, formula(mask), rel_tol=1e-6):
                fail(f"{where} = {got:.6g}: {wrong_what}.", hint)
        if any(math.isclose(got, round(want, digits), rel_tol=1e-9) for digits in range(2, 5)):
            fail(
                f"{where} = {got:.6g}: the rate was rounded.",
                "return it unrounded; round only where you print it.",
            )
        fail(
            f"{where} = {got:.6g} is not right.",
            "count, for these sentences, the updates (abs-expected) expects and the real "
            "tokens that could update, and divide.",
        )
    return passed(
        name,
        ["sentences of different lengths with PAD, empty sentences, one full sentence",
         "a batch of 64", "PAD at the start of a row"],
    )  # fmt: skip


# --- exercise: ranked attention ---------------------------------------------------------------


def _rows(rows, T, dtype=F64):
    """alpha (N, T) and mask from the real attentions of each row, PAD (0) after them."""
    alpha = torch.zeros(len(rows), T, dtype=dtype)
    for i, row in enumerate(rows):
        alpha[i, : len(row)] = torch.tensor(row, dtype=dtype)
    return alpha, _mask([len(row) for row in rows], T)


def _spread(gen, n):
    """n distinct attentions of a sentence, summing to 1."""
    return torch.softmax(torch.randn(n, generator=gen, dtype=F64), 0).tolist()


def _rank_cases(gen):
    """(alpha, mask, rate, what): hand-made rows with ties at the k-th place, short rows,
    empty rows and halves (u n = 2.5, 4.5), at the rates 0.5, 0.1, 0.25, 0.9 and 1; attention
    from a softmax that left mass on PAD; random sentences in float32, with and without ties."""
    cases = []
    rows = [[0.1, 0.3, 0.2, 0.2, 0.2], [0.5, 0.25, 0.25], [1.0], [], _spread(gen, 10),
            _spread(gen, 7), [0.125, 0.25, 0.125, 0.25, 0.125, 0.125]]  # fmt: skip
    cases.append((*_rows(rows, 10), 0.5, "hand-made rows with ties, a short and an empty row"))
    rows = [_spread(gen, 12), [0.25, 0.25, 0.25, 0.25], _spread(gen, 8), [0.5, 0.5], [],
            _spread(gen, 6), [0.2, 0.1, 0.3, 0.4]]  # fmt: skip
    cases.append((*_rows(rows, 12), 0.1, "short rows, ties and an empty row"))
    rows = [_spread(gen, 10), _spread(gen, 6), [0.5, 0.25, 0.25], _spread(gen, 12), [1.0],
            [0.5, 0.5], _spread(gen, 5), [0.25, 0.125, 0.25, 0.125, 0.125, 0.125]]  # fmt: skip
    cases.append((*_rows(rows, 12), 0.25, "rows of 1 to 12 tokens, with ties"))
    rows = [_spread(gen, 5), _spread(gen, 8), [0.25, 0.5, 0.25], [1.0],
            [0.2, 0.2, 0.2, 0.2, 0.2]]  # fmt: skip
    cases.append((*_rows(rows, 8), 0.9, "rows of 1 to 8 tokens, with ties"))
    rows = [_spread(gen, 6), [0.5, 0.25, 0.25], [], [0.5, 0.5]]
    cases.append((*_rows(rows, 6), 1.0, "full and short rows, an empty row"))
    lengths = [4, 6, 2, 8]
    scores = torch.randn(4, 8, generator=gen, dtype=F64)
    scores = torch.where(_mask(lengths, 8), scores, scores.abs() + 1)  # PAD scores the highest
    alpha = torch.softmax(scores, -1)
    what = "attention from a softmax that left mass on PAD"
    cases.append((alpha, _mask(lengths, 8), 0.5, what))
    lengths = torch.randint(0, 13, (16,), generator=gen)
    alpha = torch.softmax(torch.randn(16, 12, generator=gen), -1) * _mask(lengths.tolist(), 12)
    cases.append((alpha, _mask(lengths.tolist(), 12), 0.3, "16 random float32 sentences"))
    tied = torch.randint(1, 4, (16, 12), generator=gen).to(F64) / 8  # many ties
    mask = _mask(torch.randint(0, 13, (16,), generator=gen).tolist(), 12)
    cases.append((tied * mask, mask, 0.4, "16 random sentences with many ties"))
    tied = torch.randint(1, 4, (16, 24), generator=gen).to(F64) / 8  # past 16, sorts differ
    mask = _mask(torch.randint(0, 25, (16,), generator=gen).tolist(), 24)
    cases.append((tied * mask, mask, 0.3, "16 random sentences of up to 24 tokens, many ties"))
    rows = [[0.5, 0.25, 0.25], [0.2, 0.2, 0.2, 0.2, 0.2], [], _spread(gen, 7), [1.0]]
    alpha, mask = _rows(rows, 9)
    lengths = mask.sum(-1, keepdim=True)
    shift = (torch.arange(9) - (9 - lengths)) % 9  # each row's real positions moved to its end
    cases.append((alpha.gather(-1, shift), mask.gather(-1, shift), 0.5, "rows padded on the left"))
    return cases


def _decisions(got, N, T, where):
    """The student's decisions as float64 0/1 values; floats, integers and booleans are fine."""
    if not isinstance(got, torch.Tensor):
        fail(f"{where} should be a torch.Tensor, got {type(got).__name__}.", "return a tensor.")
    shape = tuple(got.shape)
    if shape != (N, T):
        if len(shape) == 2 and shape[0] == N and not got.is_floating_point():
            fail(
                f"{where} returned shape {shape}, not {(N, T)}.",
                "return one 0/1 decision per position, not the indices of the kept ones.",
            )
        fail(
            f"{where} returned shape {shape}, not {(N, T)}.",
            "one decision per position: the result has the shape of alpha.",
        )
    value = got.detach().to(F64)
    if not ((value == 0) | (value == 1)).all():
        fail(
            f"{where}: some decisions are neither 0 nor 1.",
            "each position is kept (1) or skipped (0): no attention values, no probabilities.",
        )
    return value


def _rank_where(name, case):
    alpha, mask, rate, what = case
    return f"{name} at rate {rate} on {what}"


def _strict_counts(alpha, mask, rate, at_least=False):
    """How many real positions lie strictly above the k-th highest attention (the source's
    ``α_t > α_θ``); ``at_least``: at or above it (``α_t ≥ α_θ``)."""
    n = mask.sum(-1)
    k = _keep(n, rate)
    values = alpha.to(F64).masked_fill(~mask, -math.inf).sort(-1, descending=True).values
    kth = values.gather(-1, (k - 1).clamp_min(0).unsqueeze(-1))
    above = alpha.to(F64) >= kth if at_least else alpha.to(F64) > kth
    return torch.where(k > 0, (above & mask).sum(-1), 0)


def _threshold_counts(alpha, mask, rate):
    return _strict_counts(alpha, mask, rate, at_least=True)


# (count of each row from (alpha, mask, rate), what went wrong, hint)
_COUNT_MISTAKES = (
    (_strict_counts, "only the positions strictly above the k-th highest attention were kept "
     "(the source's strict alpha_t > alpha_theta)", "taken literally, alpha_t > alpha_theta "
     "drops the k-th position itself: the book keeps the top k, the k-th included."),
    (lambda a, m, r: _threshold_counts(a, m, r), "every position tied with the k-th highest "
     "attention was kept (alpha_t >= alpha_theta)", "a threshold keeps all the ties at the "
     "k-th place; the rule keeps exactly k positions, ties to the earlier one."),
    (lambda a, m, r: _keep(m.sum(-1), r, "floor"), "k was rounded down (floor of u n)",
     "the rule rounds u n to the nearest integer, a half upwards."),
    (lambda a, m, r: _keep(m.sum(-1), r, "ceil"), "k was rounded up (ceil of u n)",
     "the rule rounds u n to the nearest integer, a half upwards."),
    (lambda a, m, r: _keep(m.sum(-1), r, "even"), "a half was rounded to the even integer "
     "(Python's round and torch.round take 2.5 to 2)", "the rule rounds a half upwards: "
     "floor(u n + 1/2)."),
    (lambda a, m, r: _keep(m.sum(-1), r, "half down"), "a half was rounded down",
     "the rule rounds a half upwards: floor(u n + 1/2)."),
    (lambda a, m, r: _keep(m.sum(-1), r, "no max"), "a row with real positions kept none",
     "at a low rate a short row's u n rounds to 0; the rule keeps at least one position in "
     "every row that has one."),
    (lambda a, m, r: torch.minimum(_keep(torch.full_like(m.sum(-1), m.shape[-1]), r),
                                   m.sum(-1)),
     "k was computed from T, the padded length", "n is the number of real positions of the "
     "row: PAD does not count."),
)  # fmt: skip


def _explain_ranked(name, cases, results):
    """Name the mistake behind wrong decisions: inverted decisions, PAD kept, then the number
    kept per row (over all cases at once), then which positions were kept."""
    wants = [_ranked_decisions(a, m, r) for a, m, r, _ in cases]
    if all(equal(got, 1 - want) or equal(got, (1 - want) * m)
           for got, want, (_, m, _, _) in zip(results, wants, cases)):  # fmt: skip
        fail(
            f"{name}: the decisions are inverted, 1 on the positions that are skipped.",
            "1 (True) keeps a position (it updates), 0 (False) skips it.",
        )
    if all(equal(got, _order_as_rank(a, m, r)) for got, (a, m, r, _) in zip(results, cases)):
        fail(
            f"{name}: the sort's indices were used as ranks.",
            "argsort gives, for each rank, the position that has it; the rank of each position "
            "is the inverse permutation (argsort it again, or scatter the ranks into place).",
        )
    for case, got in zip(cases, results):
        alpha, mask, rate, _ = case
        where = _rank_where(name, case)
        kept = got != 0
        if not (kept & ~mask).any():
            continue
        from_T = _keep(torch.full_like(mask.sum(-1), mask.shape[-1]), rate)
        if equal(kept.sum(-1), from_T):
            fail(
                f"{where}: PAD positions were kept, and k was computed from T, the padded length.",
                "n is the number of real positions of the row, and PAD is never kept.",
            )
        empty = ~mask.any(-1)
        if (kept & empty.unsqueeze(-1)).any():
            fail(
                f"{where}: a row with no real position kept one.",
                "at least one position is kept only in a row that has one: an empty row (n = "
                "0) keeps nothing.",
            )
        n = mask.sum(-1)
        prefix = _mask(n.tolist(), mask.shape[-1])
        if not equal(prefix, mask) and equal(got, _ranked(alpha, prefix, _keep(n, rate))):
            fail(
                f"{where}: the first n positions of each row were ranked, but here the "
                "padding comes first.",
                "find the real positions from the mask itself, wherever they stand in the row.",
            )
        there = "whatever alpha holds there"
        if (alpha[~mask] != 0).any():
            there += " (here the attention came from a softmax that left mass on PAD)"
        fail(
            f"{where}: a PAD position was kept.",
            f"PAD never updates, {there}: rank the real positions only.",
        )
    counts = [(got != 0).sum(-1) for got in results]
    wanted = [_keep(mask.sum(-1), rate) for _, mask, rate, _ in cases]
    wrong = [i for i, (c, w) in enumerate(zip(counts, wanted)) if not equal(c, w)]
    if wrong:
        i = wrong[0]
        row = int((counts[i] != wanted[i]).nonzero()[0])
        n = int(cases[i][1][row].sum())
        where = f"{_rank_where(name, cases[i])}: a row of {n} real positions kept {counts[i][row]}"
        for count, what, hint in _COUNT_MISTAKES:
            if all(equal(c, count(a, m, r)) for c, (a, m, r, _) in zip(counts, cases)):
                fail(f"{where}; {what}.", hint)
        fail(
            f"{where}, which is not the rule's k.",
            "count one row by hand: n real positions, k = max(1, floor(u n + 1/2)), and none "
            "in an empty row.",
        )
    for case, got in zip(cases, results):
        alpha, mask, rate, _ = case
        want = _ranked_decisions(alpha, mask, rate)
        for row in (got != want).any(-1).nonzero().flatten().tolist():
            real = mask[row]
            a, kept = alpha[row][real].to(F64), got[row][real] != 0
            top = not kept.all() and a[kept].min() >= a[~kept].max()
            bottom = not kept.all() and a[kept].max() <= a[~kept].min()
            where = f"{_rank_where(name, case)}, row {row}"
            if top:
                fail(
                    f"{where}: a tie at the k-th place went to a later position.",
                    "among equal attentions the earlier position is kept. torch.topk, and a "
                    "sort or argsort without stable=True, promise no order among equal values.",
                )
            if bottom:
                fail(
                    f"{where}: the lowest attentions were kept.",
                    "ranked attention keeps the positions the reader attends to most.",
                )
            fail(
                f"{where}: the kept positions are not the ones with the highest attention.",
                "rank the row's real positions by alpha, highest first, and keep the first k.",
            )
    fail(f"{name}: the decisions are not right.", "compare one row with the rule by hand.")


@own_random_state
def ranked_decisions(fn) -> str:
    """Exercise: ``fn(alpha (N, T), mask (N, T) bool, rate) -> b (N, T)``, (abs-rank): in each
    row keep the ``k = max(1, ⌊rate n + ½⌋)`` real positions with the highest attention (n
    real positions, k = 0 for an empty row), ties broken by position, the earlier first; PAD
    is never kept, whatever alpha holds there and at whichever end of the row it stands.
    The decisions may be floats, integers or
    booleans: their values are checked, 1 (or True) = keep."""
    _own_work(fn, "ranked_decisions")
    name = name_of(fn, "ranked_decisions")
    gen = torch.Generator().manual_seed(94)
    cases = _rank_cases(gen)
    results = []
    for case in cases:
        alpha, mask, rate, _ = case
        where = _rank_where(name, case)
        given = [alpha.clone(), mask.clone()]
        got = call(fn, *given, rate, name=name)
        value = _decisions(got, *alpha.shape, where)
        if not unchanged(given, (alpha, mask)):
            fail(f"{where} changed an argument in place.", "build the decisions in a new tensor.")
        results.append(value)
    if not all(equal(got, _ranked_decisions(a, m, r)) for got, (a, m, r, _) in
               zip(results, cases)):  # fmt: skip
        _explain_ranked(name, cases, results)
    return passed(
        name,
        ["rates 0.1, 0.25, 0.3, 0.4, 0.5, 0.9 and 1", "ties at the k-th place, short and empty "
         "rows, halves", "rows of up to 24 tokens", "attention on PAD", "PAD at the start of a "
         "row", "no change in place"],
    )  # fmt: skip


# --- exercise: the per-direction fill ---------------------------------------------------------


def _bidirectional_shape_hints(B, T, D):
    return {
        (B, T, D // 2): "keep both directions: the forward half and the backward half, "
        "concatenated, 2H features.",
        (B, T, 2 * D): "fill the 2H features in place of each other: the two halves side by side "
        "make 2H, not 4H.",
        (B, 2 * T, D // 2): "put the two filled halves side by side along the features (the last "
        "dimension), not one after the other in time.",
        (B, T, D // 2, 2): "join the two filled halves end to end along the features (torch.cat), "
        "not on a new dimension (torch.stack).",
        **_fill_shape_hints(B, T, D),
    }


def _trailing_copies(h_hat, b, seed):
    """The fill from the right whose positions after the last kept one hold ``seed`` (B, T, H)
    instead of zeros."""
    after_last = b.flip(1).cumsum(1).flip(1) == 0  # no kept position at or after t
    return torch.where(after_last.unsqueeze(-1), seed, _backward_fill(h_hat, b))


def _bidirectional_mistakes(h_hat, b):
    """(result, what went wrong, hint): the classic wrong per-direction fills."""
    B, T, D = h_hat.shape
    H = D // 2
    first, second = h_hat[..., :H], h_hat[..., H:]
    forward = _forward_fill(first, b)

    def with_backward_half(x):
        return torch.cat([forward, x], dim=-1)

    from_the_end = (
        "the backward fill starts from zeros at the end (h_{T+1} = 0), as the "
        "forward fill starts from h_0 = 0: after the last kept position there is nothing to copy."
    )
    mistakes = [
        (_forward_fill(h_hat, b), "both halves were forward-filled",
         "the backward direction reads the sentence from the right: its half (the last H "
         "features) copies the next kept output on its right, zeros after the last kept one. "
         "(A flip of the features, flip(-1), changes nothing: the order is that of time.)"),
        (torch.cat([_backward_fill(first, b), _forward_fill(second, b)], -1),
         "the halves are swapped: the forward half was filled from the right",
         "the forward direction's H features come first in a bidirectional output, the "
         "backward direction's last: the first half is filled from the left."),
        (_backward_fill(h_hat, b), "both halves were filled from the right",
         "the forward direction's half (the first H features) is filled from the left."),
        (b[..., None] * h_hat, "skipped positions are zeros instead of copies",
         "a skipped position holds a copy: in the forward half of the last kept output on its "
         "left, in the backward half of the next kept output on its right."),
        (with_backward_half(second), "only the forward half was filled; the backward half is "
         "h_hat unchanged", "the backward half (the last H features) is filled too, from the "
         "right."),
        (with_backward_half(b[..., None] * second), "the backward half has zeros instead of "
         "copies", "a skipped position of the backward half copies the next kept output on "
         "its right."),
        (with_backward_half(_trailing_copies(second, b, second[:, -1:].expand_as(second))),
         "after the last kept position the backward half copied h_hat_T", from_the_end),
        (with_backward_half(_trailing_copies(second, b, _forward_fill(second, b))),
         "after the last kept position the backward half copied the last kept output",
         from_the_end),
        (with_backward_half(_forward_fill(second.flip(1), b.flip(1))), "the backward half came "
         "out in reversed time order", "a fill of the flipped sequence is itself flipped: flip "
         "the result back along time."),
        (with_backward_half(_forward_fill(second.flip(1), b).flip(1)), "the backward half was "
         "flipped in time but its decisions were not", "flip b along time together with the "
         "outputs, so that each decision stays with its token."),
    ]  # fmt: skip
    interleaved = torch.empty_like(h_hat)
    interleaved[..., 0::2] = _forward_fill(h_hat[..., 0::2], b)
    interleaved[..., 1::2] = _backward_fill(h_hat[..., 1::2], b)
    mistakes.append(
        (interleaved, "the features were taken alternately, the even ones forward and the odd "
         "ones backward", "the two directions are concatenated, not interleaved: the first H "
         "features are the forward direction's, the last H the backward direction's.")
    )  # fmt: skip
    for s in range(1, D):  # a split anywhere else
        if s != H:
            split = [_forward_fill(h_hat[..., :s], b), _backward_fill(h_hat[..., s:], b)]
            mistakes.append(
                (torch.cat(split, -1), f"the halves were split at feature {s}, not in the middle",
                 f"h_hat holds 2H = {D} features, H per direction: the forward half is the "
                 "first H, the backward half the last H.")
            )  # fmt: skip
    return mistakes


def _explain_bidirectional(where, got, h_hat, b):
    h_hat, b = h_hat.to(F64), b.to(F64)
    want = _bidirectional_fill(h_hat, b)
    for wrong, what, hint in _bidirectional_mistakes(h_hat, b):
        if _same(got, wrong):
            fail(f"{where}: {what}.", hint)
    H = h_hat.shape[-1] // 2
    if not _same(got[..., :H], want[..., :H]):
        for wrong, what, hint in _fill_mistakes(h_hat[..., :H], b, half="in the forward half, "):
            if _same(got[..., :H], wrong):
                fail(f"{where}: {what}.", hint)
        fail(
            f"{where}: the forward half (the first H features) is not right.",
            "the forward half is filled from the left, (abs-fill), with h_0 = 0.",
        )
    second = h_hat[..., H:]
    B, T, _ = second.shape
    flat = _backward_fill(second.reshape(1, B * T, H), b.reshape(1, B * T)).view(B, T, H)
    flipped = second.flip(1).reshape(1, B * T, H)  # each row flipped, then one sequence
    flat_flipped = _forward_fill(flipped, b.flip(1).reshape(1, B * T)).view(B, T, H).flip(1)
    following = torch.cat([second[:, 1:], torch.zeros_like(second[:, :1])], dim=1)
    backward = want[..., H:]
    lead = torch.cat([backward[:, 1:], torch.zeros_like(backward[:, :1])], dim=1)
    b3 = b[..., None]
    backward_mistakes = (
        (flat, "in the backward half, the fill ran across the rows of the batch: a row's "
         "trailing skips copied another row's output", "each row is its own "
         "sequence, which the backward direction starts from zeros at its end: fill along time "
         "(dim 1) for all rows at once, not over the B*T positions as one sequence."),
        (b3 * second + (1 - b3) * following, "in the backward half, a skipped position copied "
         "the next output h_hat_{t+1}, not the next filled state", "after two skips in a row "
         "the copy must still be the next kept output: copy the filled row on the right, which "
         "is itself a copy after a skip."),
        (_backward_fill(second, 1 - b), "in the backward half, the decisions were read the "
         "wrong way round", "b_t = 1 keeps h_hat_t; b_t = 0 skips and copies."),
        (lead, "in the backward half, every position holds the state of the position after it",
         "the output at t is the state after position t's own decision: update with b_t "
         "first, then store it."),
    )  # fmt: skip
    for wrong, what, hint in ((flat_flipped, *backward_mistakes[0][1:]), *backward_mistakes):
        if _same(got[..., H:], wrong):
            fail(f"{where}: {what}.", hint)
    fail(
        f"{where}: the backward half (the last H features) is not right.",
        "the backward half is filled from the right: a skipped position copies the next kept "
        "output on its right, zeros after the last kept one.",
    )


@own_random_state
def bidirectional_fill(fn) -> str:
    """Exercise: ``fn(h_hat (B, T, 2H), b (B, T)) -> (B, T, 2H)``: one shared decision per
    token; the first H features (the forward direction) filled from the left, zeros before the
    first kept position, the last H (the backward direction) from the right, zeros after the
    last kept position; b may carry a gradient (abs-ste)."""
    _own_work(fn, "bidirectional_fill")
    name = name_of(fn, "bidirectional_fill")
    gen = torch.Generator().manual_seed(95)
    cases = _fill_cases(gen, lambda n: 2 * (n + 1))
    for h_hat, b, what in cases:
        where = f"{name} on {what}, 2H = {h_hat.shape[-1]}"
        got = _fill_output(
            fn, name, where, h_hat, b, _bidirectional_shape_hints, "concatenate the two filled "
            "halves into one tensor of the shape of h_hat, the forward half first.",
        )  # fmt: skip
        want = _bidirectional_fill(h_hat.to(F64), b.to(F64))
        value = got.detach().to(F64)
        if not _same(value, want, atol=max(tolerance(got), tolerance(h_hat))):
            _explain_bidirectional(where, value, h_hat, b)
    for h_hat, b, what in cases:
        if h_hat.dtype == F64:
            where = f"{name} on {what}, 2H = {h_hat.shape[-1]}"
            _check_fill_gradient(fn, name, where, h_hat, b, _bidirectional_fill)
    return passed(
        name,
        ["leading, trailing and repeated skips, rows keeping all or nothing, float32, T = 1",
         "the forward half from the left, the backward half from the right",
         "no change in place", "the gradients to h_hat and b"],
    )  # fmt: skip
