"""Checkers for the exercises of the chapter on zoneout and update penalties.

Each takes the student's answer, tests it on fresh random values against the book's
equations (:mod:`rnnbook.models.zoneout`, :mod:`rnnbook.penalties`, of which the checker keeps
private copies), prints what passed, and raises :class:`~rnnbook.checks.grading.CheckFailed`
with a hint that names the mistake it recognised, never the solution. While the student's
function runs, the book's own penalties and zoneout step are out of reach: an answer that
calls them is refused.
"""

from __future__ import annotations

import contextlib
import sys

import torch
from torch.overrides import TorchFunctionMode

from rnnbook import penalties as _pen
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
    name_of,
    own_random_state,
    passed,
)
from rnnbook.models.zoneout import ZoneoutLSTMCell as _ZoneoutLSTMCell

F64 = torch.float64

# the package's functions that answer this chapter's exercises: an answer may not call them
BOOK_REFERENCES = (_pen.msure_penalty, _pen.straight_through, _pen.norm_stabiliser,
                   _ZoneoutLSTMCell.step)  # fmt: skip


# --- the references: private copies of the book's equations --------------------------------


def _zoneout(c_prev, h_prev, c_tilde, o, d_c, d_h):
    """(zo-lstm-c), (zo-lstm-h): the new (h, c), h from the un-zoned cell c_tilde."""
    c = d_c * c_prev + (1 - d_c) * c_tilde
    h = d_h * h_prev + (1 - d_h) * (o * torch.tanh(c_tilde))
    return h, c


def _ste(margins):
    """(pen-ste): the values of [m > 0], with derivative 1 in the margin."""
    return (margins > 0).to(margins.dtype) + (margins - margins.detach())  # exactly 0 or 1


def _msure(margins, u_target, lam):
    """(pen-msure) of the decisions [m > 0], through the straight-through surrogate
    (pen-ste)."""
    return lam * (u_target - _ste(margins).mean()) ** 2


def _ns(h, h0, lam):
    """(pen-ns) for states h (B, T, H) after the state h0 (B, H) carried in."""
    norms = torch.cat([h0.norm(dim=-1, keepdim=True), h.norm(dim=-1)], dim=1)  # (B, T + 1)
    return lam * (norms[:, 1:] - norms[:, :-1]).pow(2).mean()


# --- own work -------------------------------------------------------------------------------


def _own_work(fn, exercise: str) -> None:
    """The package's function (or the checker's reference) is not an answer."""
    own = (_zoneout, _msure, _ste, _ns, _pen.norm_stabiliser, _pen.msure_penalty,
           _pen.straight_through, _ZoneoutLSTMCell.step)  # fmt: skip
    if fn in own:
        fail(
            f"{exercise}: you passed the book's own function.",
            "write the exercise's function yourself; the checker compares it with that one.",
        )


# what the student's function may not call while it is checked: (owner, attribute, its name)
_BLOCKED = (
    (_pen, "msure_penalty", "rnnbook.penalties.msure_penalty"),
    (_pen, "straight_through", "rnnbook.penalties.straight_through"),
    (_pen, "norm_stabiliser", "rnnbook.penalties.norm_stabiliser"),
    (_ZoneoutLSTMCell, "step", "rnnbook.models.zoneout.ZoneoutLSTMCell.step"),
)


def _refuse(label: str) -> None:
    fail(
        f"you called the book's own {label}.",
        "write it yourself: the exercise asks for your own code, and the checker compares it "
        "with the book's.",
    )


def _refusing(label: str):
    def refused(*args, **kwargs):
        _refuse(label)

    return refused


@contextlib.contextmanager
def _without_the_book():
    """Make the book's penalties and zoneout step unavailable while the student's function
    runs: the module attributes raise, and a call through a name imported earlier (``from
    rnnbook.penalties import msure_penalty``) is noticed by a profiler and refused afterwards.
    Everything is restored on the way out."""
    saved = [(owner, attr, owner.__dict__[attr], label) for owner, attr, label in _BLOCKED]
    codes = {getattr(fn, "__code__", None): label for _, _, fn, label in saved}
    called: list[str] = []

    def profiler(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            called.append(codes[frame.f_code])

    previous = sys.getprofile()
    watch = previous is None or callable(previous)  # a profiler in C (cProfile) stays on
    try:
        for owner, attr, _, label in saved:
            setattr(owner, attr, _refusing(label))
        if watch:
            sys.setprofile(profiler)
        try:
            yield
        except Exception:
            if called:
                _refuse(called[0])
            raise
    finally:
        if watch:
            sys.setprofile(previous)
        for owner, attr, fn, _ in saved:
            setattr(owner, attr, fn)
    if called:
        _refuse(called[0])


def _call(fn, *args, name: str):
    """``grading.call`` with the book's own functions out of reach."""
    with _without_the_book():
        return call(fn, *args, name=name)


# --- exercise: one step of the zoneout LSTM -------------------------------------------------


def _zoneout_case(gen, B, H):
    """Random inputs and keep masks: row 0 keeps everything, row 1 updates everything (the
    plain LSTM), row 2 has opposite masks for c and h, the other rows independent coins."""
    c_prev, c_tilde = (torch.randn(B, H, generator=gen, dtype=F64) for _ in range(2))
    h_prev = 2 * torch.rand(B, H, generator=gen, dtype=F64) - 1
    o = torch.rand(B, H, generator=gen, dtype=F64)
    d_c, d_h = ((torch.rand(B, H, generator=gen) < 0.5).to(F64) for _ in range(2))
    d_c[0], d_h[0] = 1.0, 1.0
    d_c[1], d_h[1] = 0.0, 0.0
    d_c[2] = (torch.arange(H) % 2).to(F64)
    d_h[2] = 1 - d_c[2]
    return c_prev, h_prev, c_tilde, o, d_c, d_h


@own_random_state
def zoneout_step(fn) -> str:
    """Exercise: ``fn(c_prev, h_prev, c_tilde, o, d_c, d_h) -> (h, c)``, one step of
    Krueger's zoneout LSTM, (zo-lstm-c) and (zo-lstm-h), with keep masks (1 = keep): the
    values, and the gradients (a kept unit passes its gradient unchanged)."""
    _own_work(fn, "zoneout_step")
    name = name_of(fn, "zoneout_step")
    gen = torch.Generator().manual_seed(71)
    for B, H in ((5, 6), (4, 3), (6, 8)):
        originals = _zoneout_case(gen, B, H)
        want_h, want_c = _zoneout(*originals)
        given = [t.clone() for t in originals]
        where = f"{name} on a batch of {B}, {H} units"
        h, c = expect_pair(_call(fn, *given, name=name), "hc", (B, H), where)
        if not all(equal(a, b) for a, b in zip(given, originals)):
            fail(f"{where} changed an argument in place.", "build h and c as new tensors.")
        h, c = (expect_dtype(t, F64, f"{where}: {n}") for t, n in ((h, "h"), (c, "c")))
        h64, c64 = h.detach(), c.detach()
        if not (
            allclose(h64, want_h, rtol=1e-10, atol=1e-12)
            and allclose(c64, want_c, rtol=1e-10, atol=1e-12)
        ):
            reject_float32_inside(c64, want_c, f"{where}: c")
            reject_float32_inside(h64, want_h, f"{where}: h")
            _explain_zoneout(where, h64, c64, *originals, want_h, want_c)
        _check_zoneout_gradient(fn, name, where, gen, originals)
    return passed(
        name,
        ["random keep masks, an all-keep and an all-update row, different masks for c and h",
         "no change in place",
         "the gradients to c_prev, h_prev, c_tilde and o"],
    )  # fmt: skip


_KEEP_HINT = (
    "a kept unit passes its gradient unchanged and an updating unit passes it to the new "
    "value, (zo-lstm-c) and (zo-lstm-h): no .detach(), .data or torch.no_grad() in the step."
)


def _check_zoneout_gradient(fn, name, where, gen, originals):
    """The Jacobians of (zo-lstm-c) and (zo-lstm-h): diagonal, d_c for dc/dc_prev and d_h for
    dh/dh_prev, and the updating units' gradient reaches c_tilde and o."""
    c_prev, h_prev, c_tilde, o, d_c, d_h = originals
    B, H = c_prev.shape
    leaves = [t.clone().requires_grad_() for t in (c_prev, h_prev, c_tilde, o)]
    h, c = expect_pair(_call(fn, *leaves, d_c.clone(), d_h.clone(), name=name), "hc", (B, H), where)
    for out, what in ((c, "c"), (h, "h")):
        if not out.requires_grad:
            fail(f"{where}: no gradient flows through {what} (it left the graph).", _KEEP_HINT)
    w_c, w_h = (0.5 + torch.rand(B, H, generator=gen, dtype=F64) for _ in range(2))
    how = "every operation of the step must have a derivative; " + _KEEP_HINT
    got_c = gradient((w_c * c.to(F64)).sum(), leaves, where, how)
    got_h = gradient((w_h * h.to(F64)).sum(), leaves, where, how)
    zero = torch.zeros_like(c_prev)
    t = torch.tanh(c_tilde)
    want_c = (w_c * d_c, zero, w_c * (1 - d_c), zero)
    want_h = (zero, w_h * d_h, w_h * (1 - d_h) * o * (1 - t**2), w_h * (1 - d_h) * t)
    names = ("c_prev", "h_prev", "c_tilde", "o")
    for out, got, want in (("c", got_c, want_c), ("h", got_h, want_h)):
        for g, w, x in zip(got, want, names):
            g = zero if g is None else g.to(F64)
            if allclose(g, w, rtol=1e-4, atol=1e-6):
                continue
            through = (w != 0) & (g.abs() <= 1e-12)
            if through.any():
                kind = "kept" if x in ("c_prev", "h_prev") else "updating"
                fail(
                    f"{where}: no gradient reaches {x} from the {kind} units of {out} "
                    f"(was {x} detached, or did the step run under torch.no_grad()?).",
                    _KEEP_HINT,
                )
            if x == f"{out}_prev":
                fail(
                    f"{where}: the gradient of {out} with respect to {x} is not the mask d_{out}.",
                    f"{out} is linear in {x}: " + _KEEP_HINT,
                )
            fail(f"{where}: the gradient of {out} with respect to {x} is not right.", _KEEP_HINT)


def _zoneout_parts(which, got, prev, new, d, d_other, cand):
    """What went wrong in one state (``which`` is "c" or "h"), as a list of (key, what,
    hint), with ``{s}`` in ``what`` for the state's name: [] for right, None for a mistake the
    checker does not recognise. ``cand`` lists the wrong candidates the checker knows as
    (tensor, (key, what, hint))."""

    def same(a, b):
        return allclose(a, b, atol=1e-6)

    eq = "(zo-lstm-c)" if which == "c" else "(zo-lstm-h)"
    whole = [
        ((1 - d) * new, "dropout", "a kept unit of {s} was set to zero, as in dropout",
         "zoneout does not drop a unit: where d = 1 the unit keeps its previous value."),
        (d * new, "dropout", "{s} keeps the new value where d = 1 and zeroes the rest, as in "
         "dropout", "zoneout drops nothing, and d = 1 means that the unit keeps its previous "
         "value (zo-mask)."),
        (new, "ignored", "{s} ignores its mask", f"{which} is zoned as well, by d_{which} {eq}."),
        (prev, "stale", "nothing updates: {s} is the previous state",
         f"where d_{which} = 0 the unit takes the plain step's new value {eq}."),
    ]  # fmt: skip
    for wrong, key, what, hint in whole:
        if same(got, wrong):
            return [(key, what, hint)]
    expectation = ("mean", "the mean of the mask of {s} is used as a probability (the test-time "
                   "expectation)", "during training each unit either keeps or updates: the "
                   "mask itself is 0 or 1, not a share.")  # fmt: skip
    masks = [
        (d, None),
        (1 - d, ("inverted", "the mask of {s} has its meaning inverted (1 = update)",
                 "d = 1 means the unit keeps its previous value (zo-mask).")),
        (d_other, ("other", f"{which} is zoned by the other state's mask",
                   "Krueger's zoneout zones the cell and the output with independent masks, "
                   "d_c for the cell (zo-lstm-c), d_h for the output (zo-lstm-h).")),
        (d[:, :1], ("b1", "the mask of {s} is one coin per sequence, (B, 1), broadcast over the "
                    "units", "each unit has its own coin: the mask is (B, H), use it as it is "
                    "given.")),
        (d.mean(), expectation),
        (d.mean(-1, keepdim=True), expectation),
    ]  # fmt: skip
    for m, m_says in masks:
        for n, n_says in [(new, None), *cand]:
            if (m_says or n_says) and same(got, m * prev + (1 - m) * n):
                return [says for says in (m_says, n_says) if says is not None]
    # the updated units rescaled, as in dropout (by 1 / (1 - z))
    upd = 1 - d
    den = (upd * new * new).sum()
    if den > 0:
        k = float((upd * got * new).sum() / den)
        if abs(k - 1) > 1e-3 and same(got, d * prev + upd * k * new):
            return [("rescaled", f"the updating units of {{s}} are rescaled by {k:.4g}, as in "
                     "dropout", f"zoneout mixes the previous and the new value as they are "
                     f"{eq}: no rescaling.")]  # fmt: skip
    return None


def _explain_zoneout(where, h, c, c_prev, h_prev, c_tilde, o, d_c, d_h, want_h, want_c):
    """Name the mistake behind a wrong zoneout step."""

    def same(a, b):
        return allclose(a, b, atol=1e-6)

    h_tilde = o * torch.tanh(c_tilde)
    if same(h, want_c) and same(c, want_h):
        fail(f"{where} returned (c, h).", "the order is (h, c): the output first.")
    squashed = ("squashed", "the cell's candidate c_tilde was squashed by tanh",
                "c_tilde enters (zo-lstm-c) as the plain step computed it; the tanh belongs "
                "to the output (zo-lstm-h).")  # fmt: skip
    c_says = _zoneout_parts("c", c, c_prev, c_tilde, d_c, d_h, [(torch.tanh(c_tilde), squashed)])
    zoned = ("zoned", "h is built from the zoned cell c",
             "in (zo-lstm-h) the output's candidate comes from the plain step's cell, before "
             "the cell's own zoneout.")  # fmt: skip
    h_says = _zoneout_parts("h", h, h_prev, h_tilde, d_h, d_c, [
        (o * torch.tanh(c), zoned),
        (o * torch.tanh(want_c), zoned),
        (o * torch.tanh(c_prev), ("c_prev", "h's candidate is built from c_prev",
                                  "the output's candidate comes from this step's plain cell "
                                  "c_tilde (zo-lstm-h), not from the previous one.")),
        (torch.tanh(c_tilde), ("no o", "the output gate o is missing from h's candidate",
                               "the output's candidate in (zo-lstm-h) is the plain LSTM's "
                               "output, gate included.")),
    ])  # fmt: skip
    if h_says is None:
        if same(h, o * (d_h * h_prev + (1 - d_h) * torch.tanh(c_tilde))):
            h_says = [
                (
                    "o outside",
                    "the output gate o multiplies the whole mixture, so a kept "
                    "unit's h_prev is gated again",
                    "a kept unit keeps h_prev exactly as it "
                    "was (zo-lstm-h); the gate belongs to the plain step's output.",
                )
            ]
        elif same(h, d_h * o * torch.tanh(c_prev) + (1 - d_h) * h_tilde):
            h_says = [
                (
                    "recomputed",
                    "a kept unit's output is recomputed from c_prev",
                    "a kept unit keeps its previous output h_prev itself (zo-lstm-h).",
                )
            ]
    if same(c, want_c):
        if h_says:
            what, hint = _join(h_says, "h")
            if h_says[0][0] == "other":
                what = "the cell's mask d_c was used for h too (one shared mask)"
            fail(f"{where}: {what}.", hint)
        fail(f"{where}: c is right, h is not.", "write out (zo-lstm-h) for one unit by hand.")
    if same(h, want_h):
        if c_says:
            what, hint = _join(c_says, "c")
            if c_says[0][0] == "other":
                what = "the output's mask d_h was used for the cell too (one shared mask)"
            fail(f"{where}: c is not right: {what}.", hint)
        fail(
            f"{where}: c is not right.",
            "write out (zo-lstm-c) by hand for one kept unit (d_c = 1) and one updating unit "
            "(d_c = 0).",
        )
    _explain_both(where, c_says, h_says)


def _join(says, state: str):
    """One sentence and one hint from a list of (key, what, hint) about ``state``."""
    whats = [what.replace("{s}", state) for _, what, _ in says]
    return ", and ".join(whats), " ".join(dict.fromkeys(hint for _, _, hint in says))


def _explain_both(where, c_says, h_says):
    """c and h are both wrong: name what the checker recognised in each."""
    if c_says and h_says:
        if c_says[0][0] == "other" and h_says[0][0] == "other":
            what = "the masks of c and h are swapped"
            hint = "d_c zones the cell (zo-lstm-c), d_h the output (zo-lstm-h)."
            rest = c_says[1:] + h_says[1:]
            if rest:
                more, more_hint = _join(rest, "c and h")
                what, hint = f"{what}, and {more}", f"{hint} {more_hint}"
            fail(f"{where}: {what}.", hint)
        if [w for _, w, _ in c_says] == [w for _, w, _ in h_says]:  # the same mistake in both
            what, c_hint = _join(c_says, "each state")
            _, h_hint = _join(h_says, "each state")
            fail(f"{where}: in both c and h, {what}.", " ".join(dict.fromkeys((c_hint, h_hint))))
        c_text, c_hint = _join(c_says, "c")
        h_text, h_hint = _join(h_says, "h")
        fail(
            f"{where}: both c and h are wrong: {c_text}; {h_text}.",
            " ".join(dict.fromkeys((c_hint, h_hint))),
        )
    if c_says:
        c_text, c_hint = _join(c_says, "c")
        fail(
            f"{where}: both c and h are wrong: {c_text}, and h is wrong as well.",
            f"{c_hint} Then write out (zo-lstm-h) for one unit by hand.",
        )
    if h_says:
        h_text, h_hint = _join(h_says, "h")
        fail(
            f"{where}: both c and h are wrong: {h_text}, and c is wrong as well.",
            f"{h_hint} Then write out (zo-lstm-c) for one unit by hand.",
        )
    fail(
        f"{where}: neither c nor h is right.",
        "write out (zo-lstm-c) and (zo-lstm-h) by hand for one kept unit (d = 1) and one "
        "updating unit (d = 0).",
    )


# --- exercise: MSURE with the straight-through estimator ------------------------------------


class _DetachSpy(TorchFunctionMode):
    """Notes how the answer may have cut the graph: .detach(), .data or torch.no_grad() (which
    a right estimator uses too, on its stopgrad term), and .item(), float(...), .tolist(),
    torch.tensor(...) (which it does not need)."""

    _DETACH = (torch.Tensor.detach, torch.Tensor.detach_, torch.Tensor.data.__get__)
    _LEAVE = (torch.Tensor.item, torch.Tensor.__float__, torch.Tensor.tolist,
              torch.Tensor.numpy, torch.tensor, torch.as_tensor)  # fmt: skip

    def __init__(self):
        super().__init__()
        self.cut = False
        self.left = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self._DETACH or not torch.is_grad_enabled():
            self.cut = True
        if func in self._LEAVE:
            self.left = True
        return func(*args, **(kwargs or {}))


def _margins(gen, shape, positives: int) -> torch.Tensor:
    """Margins of the given shape, away from 0, ``positives`` of them > 0, at random places."""
    n = torch.Size(shape).numel()
    size = 0.1 + torch.rand(n, generator=gen, dtype=F64)
    sign = torch.full((n,), -1.0, dtype=F64)
    sign[torch.randperm(n, generator=gen)[:positives]] = 1.0
    return (sign * size).view(shape)


def _scalar(got, where: str) -> torch.Tensor:
    if isinstance(got, torch.Tensor) and got.dim() > 0 and got.numel() > 1:
        fail(
            f"{where} returned shape {tuple(got.shape)}, not one number.",
            "the penalty is a single number for the whole window: no value per step, "
            "sequence or unit is left over.",
        )
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.reshape(())
    return expect_tensor(got, (), where)


_STEP_HAS_NO_SLOPE = (
    "a step function has no derivative (torch gives [m > 0]-like operations none, or 0): "
    "(pen-ste) gives the decisions one, in the backward pass only."
)


@own_random_state
def msure_ste(fn) -> str:
    """Exercise: ``fn(margins (T, B, M), u_target, lam) -> R``, (pen-msure) of the
    decisions [m > 0] with the straight-through surrogate (pen-ste): the literal value, and
    a gradient of -2 lam (u_target - u) / n in every margin; margins of exactly 0 do not
    update (the strict bracket), and margins of 1e17 to 1e20 keep their 0/1 decisions (no
    rounding in the surrogate's forward value)."""
    _own_work(fn, "msure_ste")
    name = name_of(fn, "msure_ste")
    gen = torch.Generator().manual_seed(72)
    # (T, B, M, positives, u_target, lam): u above and below the target; the first lam is
    # not 1/2, 1 or 2, so that lam squared, lam missing and a factor 1/2 differ
    # then two windows of margins at the edges: some exactly 0 (and -0), a tie that does not
    # update, [m > 0]; and margins of 1e17 to 1e20, where 1 + m rounds to m in float64
    cases = [(4, 3, 6, 18, 0.8, 3.0, "random"), (5, 4, 3, 45, 0.2, 0.5, "random"),
             (6, 2, 4, 12, 0.6, 0.1, "random"), (3, 5, 2, 22, 0.5, 3.0, "random"),
             (8, 1, 2, 13, 0.05, 1.5, "random"), (4, 3, 5, 20, 0.25, 3.0, "zeros"),
             (3, 4, 4, 30, 0.5, 3.0, "huge")]  # fmt: skip
    for T, B, M, positives, u_target, lam, kind in cases:
        m = _margins(gen, (T, B, M), positives)
        if kind == "zeros":  # a third of the negative margins become exactly 0 or -0
            ties = (m < 0).flatten().nonzero().flatten()[::3]
            m.view(-1)[ties] = torch.tensor([0.0, -0.0], dtype=F64).repeat(len(ties))[: len(ties)]
        if kind == "huge":
            m = m * 10.0 ** (17 + 3 * torch.rand(m.shape, generator=gen, dtype=F64))
        n = m.numel()
        u = positives / n
        want = lam * (u_target - u) ** 2
        where = f"{name}(margins of shape ({T}, {B}, {M}), u_target={u_target}, lam={lam})"
        if kind != "random":
            where += " with margins of " + ("exactly 0" if kind == "zeros" else "1e17 to 1e20")
        given = m.clone().requires_grad_()
        with _DetachSpy() as spy:
            got = _call(fn, given, u_target, lam, name=name)
        got = expect_dtype(_scalar(got, where), m.dtype, where)
        if not equal(given.detach(), m):
            fail(f"{where} changed the margins in place.", "compute the decisions in new tensors.")
        value = got.detach()
        if not allclose(value, torch.tensor(want, dtype=F64), rtol=1e-10, atol=1e-12):
            reject_float32_inside(value, torch.tensor(want, dtype=F64), where)
            _explain_msure_value(where, float(value), m, u_target, lam, want)
        if not got.requires_grad:
            if spy.left:
                fail(
                    f"{where}: no gradient reaches the margins: the result left the graph "
                    "through .item(), float(...) or torch.tensor(...).",
                    "those make a new number without the history of how it was computed: keep "
                    "the penalty a tensor computed from the margins all the way.",
                )
            if spy.cut:
                fail(
                    f"{where}: no gradient reaches the margins: the graph was cut (something "
                    "was detached, or computed under torch.no_grad()) on the way to the penalty.",
                    "the margins must stay in the graph up to the penalty: only the term that "
                    "(pen-ste) stops is detached, not the margins, the decisions' sum or the "
                    "result.",
                )
            fail(
                f"{where}: no gradient reaches the margins (the literal bracket [m > 0]).",
                "a comparison has derivative 0, so the penalty would train nothing: the "
                "exercise asks for the straight-through surrogate (pen-ste).",
            )
        (grad,) = gradient(got, given, where, _STEP_HAS_NO_SLOPE)
        slope = -2 * lam * (u_target - u) / n
        _check_msure_gradient(where, grad, slope)
    return passed(
        name,
        [f"{len(cases)} windows, the rate above and below the target", "the literal value, "
         "margins of exactly 0 and of 1e17 to 1e20 included",
         "the straight-through gradient in every margin"],
    )  # fmt: skip


def _explain_msure_value(where, value, m, u_target, lam, want):
    """Name the mistake behind a wrong MSURE value."""
    n = m.numel()
    d = (m > 0).to(F64)
    u = float(d.mean())

    def same(a):  # to rounding (rtol=0): float32 on the way was refused before
        return abs(value - float(a)) <= 1e-10

    def says(what, hint):
        fail(f"{where} = {value:.6g}: {what}.", hint)

    if (m == 0).any() and same(lam * (u_target - float((m >= 0).to(F64).mean())) ** 2):
        says(
            "a margin of exactly 0 counted as an update ([m >= 0])",
            "the decision is the strict bracket [m > 0] (pen-ste), as in (sba-decision): a "
            "margin of 0 is a tie, and a tie keeps.",
        )
    rounded = ((m > 0).to(F64) + m) - m  # the surrogate added and subtracted left to right
    if not equal(rounded, (m > 0).to(F64)) and same(lam * (u_target - float(rounded.mean())) ** 2):
        says(
            "the decisions lost their 0/1 values to rounding: for a margin of 1e17, 1 + m "
            "rounds to m in float64, and (1 + m) - m is 0",
            "add the straight-through term of (pen-ste) as one bracket, m - stopgrad(m), which "
            "is exactly 0 for every finite margin, so that the forward value stays 0 or 1.",
        )

    if same(lam * (u_target - float(d.sum())) ** 2):
        says(
            "u is the sum of the decisions",
            "the update rate u is a share of the window's decisions, between 0 and 1.",
        )
    if same((u_target - u) ** 2):
        says("the weight lam is missing", "(pen-msure) is scaled by lam.")
    if same(lam * want):
        says(
            "lam is squared (it sits inside the square)",
            "(pen-msure) scales the squared distance by lam itself.",
        )
    if same(want / 2):
        says("the penalty has a factor 1/2", "(pen-msure) has no factor 1/2: lam is the weight.")
    if same(lam * (u_target - float(m.mean())) ** 2):
        says(
            "u is the mean of the margins themselves",
            "the margins are not decisions: u counts the margins that are > 0.",
        )
    if same(lam * (u_target - (1 - u)) ** 2):
        says("the decisions are [m < 0]", "a unit updates where its margin is positive.")
    if same(lam * (u_target - (2 * u - 1)) ** 2):
        says(
            "the decisions are sign(m), -1 or 1",
            "a decision is 0 or 1, the bracket [m > 0] (pen-ste).",
        )
    if same(lam * abs(u_target - u)) or same(lam * (u_target - u)) or same(lam * (u - u_target)):
        says(
            "the difference from the target is not squared",
            "(pen-msure) penalises the squared distance of u from u_target.",
        )
    if same(lam * (u_target**2 - u**2)) or same(lam * (u**2 - u_target**2)):
        says(
            "it is the difference of the squares",
            "(pen-msure) squares the difference u_target - u, not each term.",
        )
    if same(lam * ((u_target - d) ** 2).mean()):
        says(
            "the squared error of each decision is averaged",
            "(pen-msure) squares the distance of the window's rate u, one number, from u_target.",
        )
    dims = {0: "step", 1: "sequence", 2: "unit"}
    for dim, what in dims.items():
        rest = [k for k in range(3) if k != dim]
        if same(lam * ((u_target - d.mean(dim=rest)) ** 2).mean()):
            says(f"the penalty is computed per {what} and then averaged",
                 "u in (pen-msure) is one rate for the whole window, not one per "
                 f"{what}.")  # fmt: skip
    over = {0: "time (the steps)", 1: "the batch", 2: "the units"}
    for dim, what in over.items():
        if same(lam * (u_target - float(d.sum(dim).mean())) ** 2):
            says(
                f"the decisions are summed over {what}",
                "the update rate u is a share of all the window's decisions, between 0 and 1.",
            )
    if same(lam * (u_target - float(torch.sigmoid(m).mean())) ** 2):
        says(
            "the forward value uses a sigmoid of the margins",
            "a soft surrogate changes the penalty's value: the forward pass must use the 0/1 "
            "decisions [m > 0], the surrogate only acts in the backward pass (pen-ste).",
        )
    root = max(value, 0.0) / lam
    roots = (u_target + root**0.5, u_target - root**0.5)
    if value >= 0 and not any(abs(r * n - round(r * n)) < 1e-4 for r in roots):
        says(
            "that is no mean of 0/1 decisions (a soft surrogate in the forward value?)",
            "the forward pass must use the decisions [m > 0] themselves; a surrogate may only "
            "change the backward pass (pen-ste).",
        )
    fail(
        f"{where} = {value:.6g}, not {want:.6g}.",
        "count the positive margins by hand on a small window and compare u with yours.",
    )


def _check_msure_gradient(where, grad, slope):
    """The gradient of (pen-msure) through (pen-ste): ``slope`` in every margin."""
    tiny = 1e-9 * abs(slope)
    if grad is None or grad.abs().max() <= tiny:
        fail(
            f"{where}: the gradient to the margins is zero (the literal bracket [m > 0]).",
            "the bracket has derivative 0 everywhere: the exercise asks for the "
            "straight-through surrogate (pen-ste), whose derivative in the margin is 1.",
        )
    grad = grad.to(F64)
    if allclose(grad, torch.full_like(grad, slope), rtol=1e-5, atol=1e-9):
        return
    if allclose(grad, torch.full_like(grad, -slope), rtol=1e-5, atol=1e-9):
        fail(
            f"{where}: the gradient has the wrong sign.",
            "the surrogate's derivative in the margin is +1: a larger margin means more updates.",
        )
    if allclose(grad, grad.flatten()[:1].expand_as(grad), rtol=1e-5, atol=1e-12):
        fail(
            f"{where}: the gradient is {float(grad.flatten()[0]):.4g} in every margin, not "
            f"{slope:.4g}.",
            "the surrogate's derivative in the margin is exactly 1 (pen-ste): no scale, and "
            "the decisions are averaged, not summed.",
        )
    right = isclose(grad, torch.full_like(grad, slope), rtol=1e-5, atol=1e-12)
    zero = grad.abs() <= tiny
    if (right | zero).all():
        fail(
            f"{where}: the gradient is right in {int(right.sum())} margins and 0 in the other "
            f"{int(zero.sum())} (a one-sided or clipped estimator).",
            "the derivative must be 1 on every margin, negative or large ones too (pen-ste).",
        )
    fail(
        f"{where}: the gradient differs from margin to margin.",
        "a soft surrogate's slope (a sigmoid's, say) in the backward pass: (pen-ste) passes the "
        "gradient through with derivative 1 in every margin.",
    )


# --- exercise: the norm stabiliser ----------------------------------------------------------


def _ns_variants(h, h0, lam):
    """The wrong penalties the checker recognises, with what went wrong and a hint."""
    B, T, H = h.shape
    states = torch.cat([h0[:, None], h], dim=1)  # (B, T + 1, H)

    def stab(norms, dim=1):
        step = norms.narrow(dim, 1, norms.shape[dim] - 1) - norms.narrow(
            dim, 0, norms.shape[dim] - 1
        )
        return step.pow(2)

    norms = states.norm(dim=-1)  # (B, T + 1)
    d2 = stab(norms)  # (B, T), the right squared differences
    moves = (states[:, 1:] - states[:, :-1]).norm(dim=-1)
    per_unit = "a state's norm runs over its H units, one norm per sequence and step."
    not_a_norm = "(pen-ns) compares the Euclidean norms ||h_t|| of the states."
    zero_h0 = torch.cat([torch.zeros(B, 1, dtype=h.dtype), h.norm(dim=-1)], dim=1)
    return [
        (lam * moves.pow(2).mean(), "the norm of the difference ||h_t - h_{t-1}||",
         "(pen-ns) compares the lengths of the two states, not the states themselves."),
        (lam * moves.mean(), "the norm of the difference ||h_t - h_{t-1}||",
         "(pen-ns) compares the lengths of the two states, not the states themselves."),
        (lam * stab(h.norm(dim=-1)).mean(), "h0 is left out (only T - 1 differences)",
         "the first step's norm is compared with the state carried in, h0."),
        (lam * stab(h.norm(dim=-1)).sum() / (B * T), "h0 is left out (only T - 1 differences)",
         "the first step's norm is compared with the state carried in, h0."),
        (lam * stab(torch.cat([h, h0[:, None]], dim=1).norm(dim=-1)).mean(),
         "h0 is put at the end", "h0 is the state carried in from before the window: it comes "
         "before h_1."),
        (lam * stab(zero_h0).mean(), "a zero state is used instead of h0",
         "the first step's norm is compared with the state carried in, h0, as given."),
        (lam * (h.norm(dim=-1) - h0.norm(dim=-1, keepdim=True)).pow(2).mean(),
         "every step is compared with h0", "(pen-ns) compares each state with the one just "
         "before it."),
        (lam * stab(states.pow(2).sum(-1)).mean(), "it uses squared norms",
         "a norm is the square root of the sum of squares."),
        (lam * stab(states.mean(-1)).mean(), "it uses the mean over the units, not the norm",
         not_a_norm),
        (lam * stab(states.pow(2).mean(-1).sqrt()).mean(), "it uses the RMS over the units "
         "(the norm / sqrt(H)), not the norm", not_a_norm),
        (lam * stab(states.abs().sum(-1)).mean(), "it uses the L1 norm", not_a_norm),
        (lam * (norms[:, 1:] - norms[:, :-1]).abs().mean(),
         "the absolute difference replaces the square",
         "(pen-ns) squares the change of the norm from step to step."),
        (lam * d2.mean().sqrt(), "the square root of the mean is taken",
         "(pen-ns) is the mean of the squared changes itself."),
        (lam * (norms[:, 1:] - norms[:, :-1]).mean().pow(2), "the mean change is squared",
         "(pen-ns) averages the squared changes, not the changes."),
        (lam * norms.var(dim=1).mean(), "it is the variance of the norms over time",
         "(pen-ns) compares each step's norm with the step before it, not with the mean."),
        (lam * d2.sum(1).mean(), "it sums over the steps", "(pen-ns) averages over the T steps."),
        (lam * d2.sum() / (B * (T + 1)), "it divides by T + 1 states, not by the T differences",
         "(pen-ns) averages over the T differences."),
        (lam * d2.mean(1).sum(), "it sums over the batch", "(pen-ns) averages over the batch."),
        (lam * d2.sum(), "it sums over the steps and the batch",
         "(pen-ns) averages over both."),
        (lam * stab(norms, dim=0).mean(), "the differences are taken over the batch",
         "(pen-ns) compares each sequence's states at neighbouring steps."),
        (lam * stab(states.norm(dim=1)).mean(), "the norm is taken over time", per_unit),
        (lam * stab(states.norm(dim=0), dim=0).mean(), "the norm is taken over the batch",
         per_unit),
        (lam * stab(states.norm(dim=(0, 2)), dim=0).mean(),
         "one norm per step over the batch and the units", per_unit),
        (lam * stab(states, dim=2).sum(-1).sqrt().pow(2).mean(),
         "the differences are taken over the units (torch.diff's default dimension)", per_unit),
        (d2.mean(), "the weight lam is missing", "(pen-ns) is scaled by lam."),
    ]  # fmt: skip


@own_random_state
def norm_stabiliser(fn) -> str:
    """Exercise: ``fn(h (B, T, H), h0 (B, H), lam) -> R``, (pen-ns): lam times the mean over
    the batch and the T steps of (||h_t|| - ||h_{t-1}||)^2, with h0 the state carried in."""
    _own_work(fn, "norm_stabiliser")
    name = name_of(fn, "norm_stabiliser")
    gen = torch.Generator().manual_seed(73)
    for B, T, H, lam in ((3, 5, 4, 0.5), (2, 7, 6, 2.0), (4, 3, 5, 0.1), (5, 2, 3, 1.5)):
        scale = 0.5 + torch.rand(B, T, 1, generator=gen, dtype=F64)  # norms change per step
        h = scale * torch.randn(B, T, H, generator=gen, dtype=F64)
        h0 = torch.randn(B, H, generator=gen, dtype=F64)
        want = _ns(h, h0, lam)
        where = f"{name}(h of shape ({B}, {T}, {H}), h0 of shape ({B}, {H}), lam={lam})"
        given = [h.clone().requires_grad_(), h0.clone()]
        got = expect_dtype(_scalar(_call(fn, *given, lam, name=name), where), h.dtype, where)
        if not (equal(given[0].detach(), h) and equal(given[1], h0)):
            fail(f"{where} changed an argument in place.", "compute the norms in new tensors.")
        value = got.detach()
        if not allclose(value, want, rtol=1e-10, atol=1e-12):
            reject_float32_inside(value, want, where)
            for wrong, what, hint in _ns_variants(h, h0, lam):
                if allclose(value, wrong, rtol=1e-5, atol=1e-9):
                    fail(f"{where} = {float(value):.6g}: {what}.", hint)
            fail(
                f"{where} = {float(value):.6g}, not {float(want):.6g}.",
                "work (pen-ns) out by hand on a tiny case (one sequence, two steps, two units) "
                "and compare each intermediate result of yours with it.",
            )
        if not got.requires_grad:
            fail(
                f"{where}: no gradient reaches h.",
                "the penalty must train the weights: no .detach(), .item(), .data or "
                "torch.no_grad() on the way.",
            )
        tracked = h.clone().requires_grad_()
        (want_grad,) = torch.autograd.grad(_ns(tracked, h0, lam), tracked)
        (grad,) = gradient(
            got, given[0], where,
            "every operation on the way from h to the penalty must have a derivative: the "
            "norms, differences and squares of (pen-ns) all do.",
        )  # fmt: skip
        if grad is None or not allclose(grad.to(F64), want_grad, rtol=1e-4, atol=1e-6):
            fail(
                f"{where}: the gradient that reaches h is not right.",
                "some part of the penalty was cut from the graph (a detached norm?): every "
                "h_t gets gradient from both differences it takes part in.",
            )
    return passed(name, ["4 batches of sequences, the value", "the gradient that reaches h"])
