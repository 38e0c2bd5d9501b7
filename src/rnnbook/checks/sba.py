"""Checkers for the exercises of the chapter on surprisal-based activation (SBA).

Each takes the student's answer, tests it on fresh random activations against the
package's own equations (:mod:`rnnbook.models.sba`), prints what passed, and
raises :class:`~rnnbook.checks.grading.CheckFailed` with a hint that names the mistake it
recognised, never the solution.
"""

from __future__ import annotations

import torch

from rnnbook.checks.dtypes import expect_dtype, reject_float32_inside
from rnnbook.checks.grading import (
    allclose,
    call,
    equal,
    expect_pair,
    expect_tensor,
    fail,
    gradient,
    isclose,
    own_random_state,
    passed,
    tolerance,
)
from rnnbook.models import sba as _sba
from rnnbook.skip import expand_modules

F64 = torch.float64

# the package's functions that answer this chapter's exercises: an answer may not call them
BOOK_REFERENCES = (_sba.module_surprisal, _sba.sba_decision)


# --- the references: the package's equations, and S_ic's cell written out ----------------


def _surprisal(v: torch.Tensor, M: int, pooling: str) -> torch.Tensor:
    """(sba-pool), (sba-surprisal): v (B, H) -> s (B, M), modules of neighbouring units."""
    return _sba.module_surprisal(v, M, pooling)


def _select(v_hat, v_prev, s, s_prev, theta):
    """(sba-decision), (sba-select): the new value and the module decisions (B, M)."""
    b = _sba.sba_decision(s, s_prev, theta)
    B_units = expand_modules(b, v_hat.shape[1] // b.shape[1])
    return B_units * v_hat + (1 - B_units) * v_prev, b


def _s_ic(i, f, g, o, c_prev, B_units):
    """S_ic: the input gate forced to 0 in the kept modules; h from the selected cell.
    Returns ``(h, c)``, the order of the book's LSTM cells (and torch's)."""
    c = f * c_prev + (B_units * i) * g
    return o * torch.tanh(c), c


# --- exercise: the surprisal of a layer's modules -------------------------------------------


def _own_work(fn, exercise: str) -> None:
    """The package's function (or the checker's reference) is not an answer."""
    if fn in (_sba.module_surprisal, _sba.sba_decision, _surprisal, _select, _s_ic):
        fail(
            f"{exercise}: you passed the book's own function.",
            "write the exercise's function yourself; the checker compares it with that one.",
        )


def _name(fn, default: str) -> str:
    return getattr(fn, "__name__", default)


@own_random_state
def module_surprisal(fn) -> str:
    """Exercise: ``fn(v (B, H), M, pooling) -> s (B, M)``, (sba-pool) and (sba-surprisal)."""
    _own_work(fn, "module_surprisal")
    name = _name(fn, "module_surprisal")
    g = torch.Generator().manual_seed(61)
    cases = [(3, 12, 4, "max"), (3, 12, 4, "mean"), (2, 10, 5, "max"), (4, 6, 6, "mean"),
             (2, 8, 1, "max"), (5, 12, 3, "mean")]  # fmt: skip
    for B, H, M, pooling in cases:
        v = torch.randn(B, H, generator=g, dtype=F64)
        want = _surprisal(v, M, pooling)
        where = f"{name}(v of shape ({B}, {H}), M={M}, pooling={pooling!r})"
        got = call(fn, v.clone(), M, pooling, name=name)
        if isinstance(got, torch.Tensor) and tuple(got.shape) != (B, M):
            shape = tuple(got.shape)
            wrong_shapes = {
                (B, H): "pool each module of H/M neighbouring units to one number first "
                "(sba-pool).",
                (B, H // M): "M is the number of modules, not the size of one: a module has "
                "H/M units.",
                (B, M, 1): "one number per module: pool without keepdim.",
                (B,): "one surprisal per module, not one per layer: do not sum or average "
                "over the modules.",
            }
            if shape in wrong_shapes and not (shape == (B, H) and M == H):
                fail(f"{where} returned shape {shape}, not ({B}, {M}).", wrong_shapes[shape])
        got = expect_dtype(expect_tensor(got, (B, M), where), v.dtype, where)
        if allclose(got.detach(), want, rtol=1e-8, atol=1e-10):
            _check_surprisal_gradient(fn, name, where, v, M, pooling)
            continue
        got = got.detach()
        reject_float32_inside(got, want, where)
        batch = v.view(B, M, H // M)
        p = batch.amax(-1) if pooling == "max" else batch.mean(-1)
        if allclose(got, -want, rtol=1e-6, atol=1e-9):
            fail(f"{where}: the values are <= 0.", "surprisal is minus the log of a probability.")
        ratio = got / want
        if M > 1 and (want.abs() > 1e-3).all() and allclose(ratio, ratio.flatten()[:1]):
            fail(
                f"{where} is the right answer times {float(ratio.flatten()[0]):.4g}.",
                "a logarithm of another base: the book uses the natural logarithm (torch.log).",
            )
        if allclose(got, torch.softmax(p, dim=-1), rtol=1e-6, atol=1e-9):
            fail(f"{where} returned the shares.", "the surprisal is minus the log of each share.")
        other = "mean" if pooling == "max" else "max"
        if M != H and allclose(got, _surprisal(v, M, other), rtol=1e-6, atol=1e-9):
            fail(
                f"{where} pooled with the {other}.", f"pooling={pooling!r} asks for the {pooling}."
            )
        if M != H and allclose(got, -torch.log_softmax(batch.sum(-1), -1), atol=1e-9):
            fail(f"{where} pooled with the sum.", f"pooling={pooling!r} asks for the {pooling}.")
        interleaved = v.view(B, H // M, M).transpose(1, 2).contiguous().view(B, H)
        if M not in (1, H) and allclose(
            got, _surprisal(interleaved, M, pooling), rtol=1e-6, atol=1e-9
        ):
            fail(
                f"{where}: the modules take every M-th unit.",
                "a module is a block of neighbouring units: 0..K-1, K..2K-1, ... (K = H/M).",
            )
        if B > 1 and allclose(got, -torch.log_softmax(p, dim=0), rtol=1e-6, atol=1e-9):
            fail(f"{where}: the softmax runs over the batch.", "normalise over the M modules.")
        units = -torch.log_softmax(v, -1).view(B, M, H // M)
        if M != H and allclose(got, units.amax(-1) if pooling == "max" else units.mean(-1)):
            fail(
                f"{where}: the softmax ran over the units and was pooled afterwards.",
                "pool each module first (sba-pool), then take the softmax over the M modules.",
            )
        if (
            allclose(got, -torch.log(p.abs() + 1e-300), rtol=1e-6, atol=1e-9)
            or torch.isnan(got).any()
        ):
            fail(
                f"{where} takes the log of the pooled values themselves.",
                "turn the M pooled values into a distribution first (sba-surprisal).",
            )
        fail(
            f"{where} is not right.",
            "check the three steps one by one on torch.randn(2, 6) with M=3: the pooled values "
            "(B, M), their softmax over the modules (rows sum to 1), minus its log.",
        )
    return passed(
        name,
        [f"{len(cases)} layers, max and mean, M = 1 to H", "the gradient that reaches v"],
    )


def _check_surprisal_gradient(fn, name, where, v, M, pooling):
    """The surprisal is differentiable in v: Chapter 7's penalties train through it."""
    tracked = v.clone().requires_grad_()
    got = call(fn, tracked, M, pooling, name=name)
    hint = (
        "keep v in the graph: no .detach(), .data, .item(), torch.tensor(...) or "
        "torch.no_grad() on the way (Chapter 7's penalties differentiate the surprisal)."
    )
    if not got.requires_grad:
        fail(f"{where}: no gradient reaches v.", hint)
    weights = torch.linspace(0.5, 1.5, got.numel(), dtype=got.dtype).view_as(got)
    (grad,) = gradient((weights * got).sum(), tracked, where, hint)
    reference = v.clone().requires_grad_()
    (want,) = torch.autograd.grad((weights * _surprisal(reference, M, pooling)).sum(), reference)
    if grad is None or not allclose(grad, want, rtol=1e-9, atol=1e-12):
        fail(f"{where}: the gradient that reaches v is not right.", hint)


# --- exercise: one SBA selection ------------------------------------------------------------

# The kinds of module in a selection case: how its surprisal moved since the previous step.
RISE, FALL, SMALL_RISE, TIE, MEDIUM_RISE, SMALL_FALL = range(6)


def _selection_case(g, B, M, K, theta):
    """A candidate, a previous value and surprisals chosen so that every kind of module
    occurs: a rise of 0.5 and of 1.5 theta (update), a fall of 0.5 and of theta / 2, a rise
    of theta / 2 and no change (keep)."""
    H = M * K
    v_hat = torch.randn(B, H, generator=g, dtype=F64)
    v_prev = torch.randn(B, H, generator=g, dtype=F64)
    s = 2.0 + torch.rand(B, M, generator=g, dtype=F64)
    kinds = torch.arange(B * M).view(B, M) % 6
    change = torch.tensor([0.5, -0.5, theta / 2, 0.0, 1.5 * theta, -theta / 2], dtype=F64)
    s_prev = s - change[kinds]  # s - s_prev = the change
    if theta == 0:  # the changes of +-theta/2 and 1.5 theta are no change at all
        kinds = torch.where(change[kinds] == 0, TIE, kinds)
    return v_hat, v_prev, s, s_prev, kinds


def _inferred_decisions(got, v_hat, v_prev, K):
    """Per module: 1 if all its units are the candidate's, 0 if all are the previous value's,
    -1 otherwise (B, M)."""
    B, H = got.shape
    shape = (B, H // K, K)
    took_new = isclose(got, v_hat, rtol=0, atol=1e-12).view(shape).all(-1)
    kept_old = isclose(got, v_prev, rtol=0, atol=1e-12).view(shape).all(-1)
    return torch.where(took_new, 1, torch.where(kept_old, 0, -1))


@own_random_state
def sba_select(fn) -> str:
    """Exercise: ``fn(v_hat, v_prev, s, s_prev, theta) -> v`` (B, H): (sba-decision) per
    module and (sba-select), without decay; the gradient reaches v_hat where a module updates
    and v_prev where it keeps, and never the surprisals."""
    _own_work(fn, "sba_select")
    name = _name(fn, "sba_select")
    g = torch.Generator().manual_seed(62)
    for B, M, K, theta in ((4, 6, 3, 0.1), (3, 5, 2, 0.3), (8, 3, 4, 0.0)):
        v_hat, v_prev, s, s_prev, kinds = _selection_case(g, B, M, K, theta)
        want, b = _select(v_hat, v_prev, s, s_prev, theta)
        given = [t.clone() for t in (v_hat, v_prev, s, s_prev)]
        got = call(fn, *given, theta, name=name)
        where = f"{name} with {M} modules of {K} units, theta = {theta}"
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, M):
            fail(
                f"{where} returned one value per module, shape ({B}, {M}).",
                "give each of a module's K units its module's decision, then select per unit.",
            )
        got = expect_dtype(expect_tensor(got, (B, M * K), where), v_hat.dtype, where)
        if not all(equal(a, b_) for a, b_ in zip(given, (v_hat, v_prev, s, s_prev))):
            fail(f"{where} changed an argument in place.", "build the new value in a new tensor.")
        value = got.detach()
        if not allclose(value, want, rtol=0, atol=tolerance(got)):
            reject_float32_inside(value, want, where)
            _explain_selection(where, value, v_hat, v_prev, b, kinds, K, theta)
        tracked = [t.clone().requires_grad_() for t in (v_hat, v_prev, s, s_prev)]
        _check_selection_gradient(where, call(fn, *tracked, theta, name=name), tracked, b, K)
    return passed(
        name,
        ["rises above, below and within the threshold, falls and ties, two thresholds",
         "module layout, no change in place", "gradients to v_hat, v_prev, not to s"],
    )  # fmt: skip


def _explain_selection(where, value, v_hat, v_prev, b, kinds, K, theta):
    """Name the mistake behind a wrong selection, from the decision each module seems to
    have taken."""
    tiled = b.repeat(1, K)
    if allclose(value, tiled * v_hat + (1 - tiled) * v_prev, atol=1e-12):
        fail(
            f"{where}: the decisions were spread over the units in the wrong order.",
            "module m owns units m*K .. (m+1)*K - 1: repeat each decision K times in place.",
        )
    decided = _inferred_decisions(value, v_hat, v_prev, K)
    if (decided < 0).any():
        fail(
            f"{where}: some units are neither the candidate nor the previous value.",
            "each unit either takes v_hat (its module updates) or keeps v_prev exactly: no "
            "mixing, no decay, no other arithmetic.",
        )
    wrong = decided != b.long()
    wrong_kinds = set(kinds[wrong].tolist())
    if wrong.all() or wrong_kinds >= {RISE, FALL}:
        fail(
            f"{where}: updating and keeping are the wrong way round.",
            "a module updates when its surprisal rises by more than theta, and then takes "
            "the candidate v_hat; otherwise it keeps v_prev.",
        )
    if wrong_kinds <= {FALL, SMALL_FALL} and FALL in wrong_kinds:
        fail(
            f"{where}: modules whose surprisal fell updated too.",
            "only a rise counts: compare s with s_prev + theta, not the size of the change.",
        )
    if TIE in wrong_kinds and wrong_kinds <= {TIE, SMALL_FALL, SMALL_RISE} and theta > 0:
        fail(
            f"{where}: the threshold works against the rule (an unchanged surprisal updated).",
            "the threshold is added to the previous surprisal: s > s_prev + theta.",
        )
    if wrong_kinds == {TIE}:
        fail(
            f"{where}: an unchanged surprisal counts as a rise (>= instead of >).",
            "(sba-decision) is a strict inequality.",
        )
    if wrong_kinds == {SMALL_RISE}:
        fail(
            f"{where}: a rise smaller than theta updated.",
            "the threshold is left out or too small: a rise must exceed theta itself.",
        )
    if wrong_kinds <= {SMALL_RISE, MEDIUM_RISE}:
        fail(
            f"{where}: a rise of 1.5 theta kept its value.",
            "the threshold is too large: a module updates exactly when its surprisal rose by "
            "more than theta itself (not a multiple of it, not a share of s_prev, not a constant).",
        )
    fail(f"{where}: the new value is not right.", "decide per module, then copy or update.")


def _check_selection_gradient(where, got, given, b, K):
    """d(sum w * v)/d v_hat = B w, d/d v_prev = (1 - B) w; no gradient into s or s_prev."""
    if not got.requires_grad:
        fail(
            f"{where}: no gradient flows through the result.",
            "keep v_hat and v_prev in the graph: no .detach(), no .data, no torch.no_grad().",
        )
    v_hat, v_prev, s, s_prev = given
    weights = torch.linspace(0.5, 1.5, got.numel(), dtype=got.dtype).view_as(got)
    grads = torch.autograd.grad(
        (got * weights).sum(), (v_hat, v_prev, s, s_prev), allow_unused=True
    )
    units = b.repeat_interleave(K, dim=1)
    expected = (units * weights.to(F64), (1 - units) * weights.to(F64))
    for grad, want, what in zip(grads[:2], expected, ("v_hat", "v_prev"), strict=True):
        if grad is None or not allclose(grad.to(F64), want, atol=1e-6):
            fail(
                f"{where}: the gradient that reaches {what} is not right.",
                "an updated unit passes its gradient to v_hat, a kept one to v_prev, unchanged; "
                "do not detach either branch.",
            )
    for grad, what in zip(grads[2:], ("s", "s_prev"), strict=True):
        if grad is not None and grad.abs().max() > 0:
            fail(
                f"{where}: a gradient reaches {what}.",
                "the decision is a constant in the backward pass: compare the surprisals, do "
                "not mix them into the value (no straight-through trick).",
            )


# --- exercise: the S_ic variant -------------------------------------------------------------


@own_random_state
def s_ic_cell(fn) -> str:
    """Exercise: ``fn(i, f, g, o, c_prev, b_units) -> (h, c)``: the S_ic LSTM variant's new
    output and cell (in the order of the book's LSTM cells and torch's), given the gates of
    the plain step and the decisions spread over the units (1 = update); the gradients reach
    every gate and ``c_prev`` as through the S_ic cell."""
    _own_work(fn, "s_ic_cell")
    name = _name(fn, "s_ic_cell")
    gen = torch.Generator().manual_seed(63)
    for batch, H in ((3, 8), (5, 4)):
        i, f, o = (torch.rand(batch, H, generator=gen, dtype=F64) for _ in range(3))
        g = 2 * torch.rand(batch, H, generator=gen, dtype=F64) - 1
        c_prev = torch.randn(batch, H, generator=gen, dtype=F64)
        B_units = (torch.rand(batch, H, generator=gen) < 0.5).to(F64)
        B_units[0] = 1.0  # one row updates everywhere: there S_ic is the plain LSTM
        want_h, want_c = _s_ic(i, f, g, o, c_prev, B_units)
        originals = (i, f, g, o, c_prev, B_units)
        given = [t.clone() for t in originals]
        out = call(fn, *given, name=name)
        where = f"{name} on a batch of {batch}, {H} units"
        h, c = expect_pair(out, "hc", (batch, H), where)
        if not all(equal(a, b) for a, b in zip(given, originals)):
            fail(f"{where} changed an argument in place.", "build h and c as new tensors.")
        h, c = (expect_dtype(t, F64, f"{where}: {n}") for t, n in ((h, "h"), (c, "c")))
        h, c = h.detach(), c.detach()
        atol = tolerance(c)
        if allclose(c, want_c, rtol=1e-10, atol=atol) and allclose(
            h, want_h, rtol=1e-10, atol=atol
        ):
            _check_s_ic_gradient(fn, name, where, gen, originals)
            continue
        _explain_s_ic(where, h, c, i, f, g, o, c_prev, B_units, want_h, want_c)
    return passed(
        name,
        ["mixed decisions per unit and an all-update row (= the LSTM)", "the gradients of h "
         "and c to every gate and to c_prev, the input gate's only where a module updates"],
    )  # fmt: skip


def _explain_s_ic(where, h, c, i, f, g, o, c_prev, B_units, want_h, want_c):
    kept = B_units == 0
    hat_c = f * c_prev + i * g

    def same(a, b):
        return allclose(a, b, atol=1e-6)

    if same(h, want_c) and same(c, want_h):
        fail(
            f"{where} returned (c, h).",
            "the order is (h, c), the output first: the order in which the book's LSTM cells "
            "(and torch's) return their state.",
        )
    if same(c, hat_c):
        fail(f"{where}: the kept modules changed nothing.", "in S_ic they block the input.")
    if same(c, torch.where(kept, c_prev + i * g, hat_c)):
        fail(
            f"{where}: the kept modules forced the forget gate to 1 (that is S_f*).",
            "S_ic acts on the input gate.",
        )
    if same(c, torch.where(kept, c_prev, hat_c)):
        fail(f"{where}: the kept modules froze the cell (that is S_c).", "S_ic acts on a gate.")
    if same(c, torch.where(kept, f * c_prev + g, hat_c)):
        fail(f"{where}: the input gate was forced to 1.", "a kept module writes nothing.")
    if same(c, f * c_prev + ((1 - B_units) * i) * g):
        fail(f"{where}: the updating modules are the ones blocked.", "b_units = 1 means update.")
    if same(c, (B_units * f) * c_prev + i * g) or same(c, torch.where(kept, i * g, hat_c)):
        fail(
            f"{where}: the kept modules' forget gate was changed.",
            "S_ic leaves the forget gate alone and acts on the input gate.",
        )
    if same(c, torch.where(kept, torch.zeros_like(c), hat_c)):
        fail(
            f"{where}: the kept modules' cell was set to zero.",
            "with nothing written, the old cell still passes through the forget gate.",
        )
    reject_float32_inside(c, want_c, f"{where}: c")
    if same(c, want_c):
        reject_float32_inside(h, want_h, f"{where}: h")
        if same(h, o * torch.tanh(hat_c)):
            fail(
                f"{where}: h comes from the plain step's cell.",
                "compute h from the new cell c_t, after the gate was forced.",
            )
        fail(f"{where}: c is right, h is not.", "h = o * tanh(c), (lstm-L6).")
    fail(
        f"{where}: c is not right.",
        "write out (lstm-L4) for one kept unit (b_units = 0) and one updating unit by hand, "
        "with the input gate forced where the module keeps.",
    )


_S_IC_GRADIENT_HINT = (
    "S_ic replaces the input gate by 0 where a module keeps and changes nothing else: every "
    "other path of the LSTM step stays in the graph (no .detach(), .data or torch.no_grad())."
)


def _check_s_ic_gradient(fn, name, where, gen, originals):
    """The Jacobians of S_ic, all diagonal: dc/dc_prev = f, dc/df = c_prev, dc/di = b g,
    dc/dg = b i, and h = o tanh(c) passes dh/dc = o (1 - tanh^2 c) on to all of them, with
    dh/do = tanh c. A cut path (a detached gate, c_prev or c) or an input gate whose gradient
    leaks into the kept modules is named."""
    i, f, g, o, c_prev, B_units = originals
    names = ("i", "f", "g", "o", "c_prev")
    kept = B_units == 0
    for which, what in ((1, "c"), (0, "h")):
        leaves = [t.clone().requires_grad_() for t in (i, f, g, o, c_prev)]
        out = call(fn, *leaves, B_units.clone(), name=name)
        state = expect_pair(out, "hc", tuple(c_prev.shape), where)[which]
        if not state.requires_grad:
            fail(f"{where}: no gradient flows through {what} (it left the graph).",
                 _S_IC_GRADIENT_HINT)  # fmt: skip
        reference = [t.clone().requires_grad_() for t in (i, f, g, o, c_prev)]
        ref_state = _s_ic(*reference, B_units)[which]
        weights = 0.5 + torch.rand(state.shape, generator=gen, dtype=state.dtype)
        got = gradient((weights * state).sum(), leaves, where, _S_IC_GRADIENT_HINT)
        want = torch.autograd.grad((weights * ref_state).sum(), reference, allow_unused=True)
        for x, grad, right in zip(names, got, want):
            grad = torch.zeros_like(c_prev) if grad is None else grad
            right = torch.zeros_like(c_prev) if right is None else right
            if allclose(grad, right, rtol=1e-9, atol=1e-12):
                continue
            if (
                x == "i"
                and (grad[kept] != 0).any()
                and allclose(grad[~kept], right[~kept], rtol=1e-9, atol=1e-12)
            ):
                fail(
                    f"{where}: the input gate's gradient reaches the kept modules.",
                    "a kept module's input gate is replaced by 0, so no gradient reaches it "
                    "there; an updating module's is the plain LSTM's.",
                )
            if ((right != 0) & (grad == 0)).any():
                if what == "h" and x != "o":  # c passed it, so h = o * tanh(c) cut it
                    fail(
                        f"{where}: no gradient reaches {x} from h, although it reaches it "
                        "from c: was c detached before h = o * tanh(c)?",
                        _S_IC_GRADIENT_HINT,
                    )
                fail(
                    f"{where}: no gradient reaches {x} from {what}: was {x} detached, or the "
                    "step computed under torch.no_grad()?",
                    _S_IC_GRADIENT_HINT,
                )
            fail(f"{where}: the gradient of {what} with respect to {x} is not right.",
                 _S_IC_GRADIENT_HINT)  # fmt: skip
