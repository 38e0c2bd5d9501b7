"""Checkers for the exercises of the chapter on zoneout and update penalties.

Each takes the student's answer, tests it on fresh random values against the package's own
equations (:mod:`rnnbook.models.zoneout`, :mod:`rnnbook.penalties`), prints what passed,
and raises :class:`~rnnbook.checks.grading.CheckFailed` with a hint that names the mistake
it recognised, never the solution.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from rnnbook import penalties as _pen
from rnnbook.checks.grading import call, expect_tensor, fail, own_random_state, passed

F64 = torch.float64


# --- the references: the package's equations ------------------------------------------------


def _zoneout(c_prev, h_prev, c_tilde, o, d_c, d_h):
    """(zo-lstm-c), (zo-lstm-h): the new (h, c), h from the un-zoned cell c_tilde."""
    c = d_c * c_prev + (1 - d_c) * c_tilde
    h = d_h * h_prev + (1 - d_h) * (o * torch.tanh(c_tilde))
    return h, c


def _msure(margins, u_target, lam):
    """(pen-msure) of the decisions [m > 0], through the straight-through surrogate
    (pen-ste)."""
    return _pen.msure_penalty(_pen.straight_through(margins), u_target, lam)


def _own_work(fn, exercise: str) -> None:
    """The package's function (or the checker's reference) is not an answer."""
    if fn in (_zoneout, _msure, _pen.norm_stabiliser, _pen.msure_penalty):
        fail(
            f"{exercise}: you passed the book's own function.",
            "write the exercise's function yourself; the checker compares it with that one.",
        )


def _name(fn, default: str) -> str:
    return getattr(fn, "__name__", default)


def _atol(t: torch.Tensor, double: float = 1e-12) -> float:
    return double if t.dtype == F64 else 1e-6


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
    Krueger's zoneout LSTM, (zo-lstm-c) and (zo-lstm-h), with keep masks (1 = keep)."""
    _own_work(fn, "zoneout_step")
    name = _name(fn, "zoneout_step")
    gen = torch.Generator().manual_seed(71)
    for B, H in ((5, 6), (4, 3), (6, 8)):
        originals = _zoneout_case(gen, B, H)
        want_h, want_c = _zoneout(*originals)
        given = [t.clone() for t in originals]
        out = call(fn, *given, name=name)
        where = f"{name} on a batch of {B}, {H} units"
        if isinstance(out, list):
            out = tuple(out)
        if not isinstance(out, tuple) or len(out) != 2:
            fail(
                f"{where} returned {type(out).__name__}, not a pair of tensors.",
                "return the new output and cell as a tuple, in the order (h, c).",
            )
        h, c = (expect_tensor(t, (B, H), f"{where}: {n}") for t, n in zip(out, "hc"))
        if not all(torch.equal(a, b) for a, b in zip(given, originals)):
            fail(f"{where} changed an argument in place.", "build h and c as new tensors.")
        h64, c64 = h.detach().to(F64), c.detach().to(F64)
        atol = max(_atol(h), _atol(c))
        if torch.allclose(h64, want_h, atol=atol) and torch.allclose(c64, want_c, atol=atol):
            continue
        _explain_zoneout(where, h64, c64, *originals, want_h, want_c)
    return passed(
        name,
        ["random keep masks, an all-keep and an all-update row, different masks for c and h",
         "no change in place"],
    )  # fmt: skip


def _explain_zoneout(where, h, c, c_prev, h_prev, c_tilde, o, d_c, d_h, want_h, want_c):
    """Name the mistake behind a wrong zoneout step."""

    def same(a, b):
        return torch.allclose(a, b, atol=1e-6)

    def zoned(d, prev, new):
        return d * prev + (1 - d) * new

    h_tilde = o * torch.tanh(c_tilde)
    if same(h, want_c) and same(c, want_h):
        fail(f"{where} returned (c, h).", "the order is (h, c): the output first.")
    if same(c, zoned(1 - d_c, c_prev, c_tilde)) or same(h, zoned(1 - d_h, h_prev, h_tilde)):
        fail(
            f"{where}: the masks' meaning is inverted (1 = update).",
            "d = 1 means the unit keeps its previous value (zo-mask).",
        )
    if same(c, (1 - d_c) * c_tilde) or same(h, (1 - d_h) * h_tilde):
        fail(
            f"{where}: a kept unit was set to zero, as in dropout.",
            "zoneout does not drop a unit: where d = 1 the unit keeps its previous value.",
        )
    if same(c, zoned(d_h, c_prev, c_tilde)) and same(h, zoned(d_c, h_prev, h_tilde)):
        fail(
            f"{where}: the masks of c and h are swapped.",
            "d_c zones the cell (zo-lstm-c), d_h the output (zo-lstm-h).",
        )
    if same(c, want_c):
        if same(h, zoned(d_h, h_prev, o * torch.tanh(c))):
            fail(
                f"{where}: h is built from the zoned cell c.",
                "in (zo-lstm-h) the output's candidate comes from the plain step's cell, "
                "before the cell's own zoneout.",
            )
        if same(h, zoned(d_c, h_prev, h_tilde)):
            fail(
                f"{where}: the cell's mask d_c was used for h too (one shared mask).",
                "Krueger's zoneout zones the cell and the output with independent masks.",
            )
        if same(h, h_tilde):
            fail(f"{where}: h ignores its mask.", "h is zoned as well, by d_h (zo-lstm-h).")
        fail(f"{where}: c is right, h is not.", "write out (zo-lstm-h) for one unit by hand.")
    if same(h, want_h):
        if same(c, zoned(d_h, c_prev, c_tilde)):
            fail(
                f"{where}: the output's mask d_h was used for the cell too (one shared mask).",
                "Krueger's zoneout zones the cell and the output with independent masks.",
            )
        if same(c, c_tilde):
            fail(f"{where}: c ignores its mask.", "the cell is zoned as well, by d_c (zo-lstm-c).")
    fail(
        f"{where}: c is not right.",
        "write out (zo-lstm-c) by hand for one kept unit (d_c = 1) and one updating unit "
        "(d_c = 0).",
    )


# --- exercise: MSURE with the straight-through estimator ------------------------------------


class _DetachSpy(TorchFunctionMode):
    """Notes whether the answer cut the graph: .detach(), .data or torch.no_grad()."""

    def __init__(self):
        super().__init__()
        self.cut = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.detach, torch.Tensor.detach_, torch.Tensor.data.__get__):
            self.cut = True
        elif not torch.is_grad_enabled():
            self.cut = True
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


@own_random_state
def msure_ste(fn) -> str:
    """Exercise: ``fn(margins (T, B, M), u_target, lam) -> R``, (pen-msure) of the
    decisions [m > 0] with the straight-through surrogate (pen-ste): the literal value, and
    a gradient of -2 lam (u_target - u) / n in every margin."""
    _own_work(fn, "msure_ste")
    name = _name(fn, "msure_ste")
    gen = torch.Generator().manual_seed(72)
    # (T, B, M, positives, u_target, lam): u above and below the target
    cases = [(5, 4, 3, 45, 0.2, 0.5), (4, 3, 6, 18, 0.8, 2.0), (6, 2, 4, 12, 0.6, 0.1),
             (3, 5, 2, 22, 0.5, 3.0), (8, 1, 2, 13, 0.05, 1.5)]  # fmt: skip
    for T, B, M, positives, u_target, lam in cases:
        m = _margins(gen, (T, B, M), positives)
        n = m.numel()
        u = positives / n
        want = lam * (u_target - u) ** 2
        where = f"{name}(margins of shape ({T}, {B}, {M}), u_target={u_target}, lam={lam})"
        given = m.clone().requires_grad_()
        with _DetachSpy() as spy:
            got = call(fn, given, u_target, lam, name=name)
        got = _scalar(got, where)
        if not torch.equal(given.detach(), m):
            fail(f"{where} changed the margins in place.", "compute the decisions in new tensors.")
        value = got.detach().to(F64)
        if not torch.allclose(value, torch.tensor(want, dtype=F64), rtol=1e-5, atol=_atol(got)):
            _explain_msure_value(where, float(value), m, u_target, lam, want)
        if not got.requires_grad:
            if spy.cut:
                fail(
                    f"{where}: no gradient reaches the margins, they were detached.",
                    "the margins themselves must stay in the graph: no .detach(), .data or "
                    "torch.no_grad() on them, only on the part (pen-ste) stops.",
                )
            fail(
                f"{where}: no gradient reaches the margins (the literal bracket [m > 0]).",
                "a comparison has derivative 0, so the penalty would train nothing: the "
                "exercise asks for the straight-through surrogate (pen-ste).",
            )
        (grad,) = torch.autograd.grad(got, given, allow_unused=True)
        slope = -2 * lam * (u_target - u) / n
        _check_msure_gradient(where, grad, slope)
    return passed(
        name,
        [f"{len(cases)} windows, the rate above and below the target", "the literal value",
         "the straight-through gradient in every margin"],
    )  # fmt: skip


def _explain_msure_value(where, value, m, u_target, lam, want):
    """Name the mistake behind a wrong MSURE value."""
    n = m.numel()
    d = (m > 0).to(F64)
    u = float(d.mean())

    def same(a):
        return abs(value - float(a)) <= 1e-5 * max(abs(float(a)), 1e-3)

    if same(lam * (u_target - float(d.sum())) ** 2):
        fail(
            f"{where} = {value:.6g}: u is the sum of the decisions.",
            "the update rate u is a share of the window's decisions, between 0 and 1.",
        )
    if same((u_target - u) ** 2):
        fail(f"{where} = {value:.6g}: the weight lam is missing.", "(pen-msure) is scaled by lam.")
    if same(lam * (u_target - float(m.mean())) ** 2):
        fail(
            f"{where} = {value:.6g}: u is the mean of the margins themselves.",
            "the margins are not decisions: u counts the margins that are > 0.",
        )
    if same(lam * (u_target - (1 - u)) ** 2):
        fail(
            f"{where} = {value:.6g}: the decisions are [m < 0].",
            "a unit updates where its margin is positive.",
        )
    if same(lam * abs(u_target - u)) or same(lam * (u_target - u)) or same(lam * (u - u_target)):
        fail(
            f"{where} = {value:.6g}: the difference from the target is not squared.",
            "(pen-msure) penalises the squared distance of u from u_target.",
        )
    if same(lam * (u_target - float(torch.sigmoid(m).mean())) ** 2):
        fail(
            f"{where} = {value:.6g}: the forward value uses a sigmoid of the margins.",
            "a soft surrogate changes the penalty's value: the forward pass must use the 0/1 "
            "decisions [m > 0], the surrogate only acts in the backward pass (pen-ste).",
        )
    root = max(value, 0.0) / lam
    roots = (u_target + root**0.5, u_target - root**0.5)
    if value >= 0 and not any(abs(r * n - round(r * n)) < 1e-4 for r in roots):
        fail(
            f"{where} = {value:.6g}: that is no mean of 0/1 decisions (a soft surrogate in the "
            "forward value?).",
            "the forward pass must use the decisions [m > 0] themselves; a surrogate may only "
            "change the backward pass (pen-ste).",
        )
    fail(
        f"{where} = {value:.6g}, not {want:.6g}.",
        "count the positive margins by hand on a small window and compare u with yours.",
    )


def _check_msure_gradient(where, grad, slope):
    """The gradient of (pen-msure) through (pen-ste): ``slope`` in every margin."""
    if grad is None or (grad == 0).all():
        fail(
            f"{where}: the gradient to the margins is zero (the literal bracket [m > 0]).",
            "the bracket has derivative 0 everywhere: the exercise asks for the "
            "straight-through surrogate (pen-ste), whose derivative in the margin is 1.",
        )
    grad = grad.to(F64)
    if torch.allclose(grad, torch.full_like(grad, slope), rtol=1e-5, atol=1e-9):
        return
    if torch.allclose(grad, torch.full_like(grad, -slope), rtol=1e-5, atol=1e-9):
        fail(
            f"{where}: the gradient has the wrong sign.",
            "the surrogate's derivative in the margin is +1: a larger margin means more updates.",
        )
    if torch.allclose(grad, grad.flatten()[:1].expand_as(grad), rtol=1e-5, atol=1e-12):
        fail(
            f"{where}: the gradient is {float(grad.flatten()[0]):.4g} in every margin, not "
            f"{slope:.4g}.",
            "the surrogate's derivative in the margin is exactly 1 (pen-ste): no scale, and "
            "the decisions are averaged, not summed.",
        )
    fail(
        f"{where}: the gradient differs from margin to margin.",
        "a soft surrogate's slope (a sigmoid's, say) in the backward pass: (pen-ste) passes the "
        "gradient through with derivative 1 in every margin.",
    )


# --- exercise: the norm stabiliser ----------------------------------------------------------


def _ns_variants(h, h0, lam):
    """The wrong penalties the checker recognises, with what went wrong and a hint."""
    states = torch.cat([h0[:, None], h], dim=1)  # (B, T + 1, H)

    def stab(norms, dim=1):
        step = norms.narrow(dim, 1, norms.shape[dim] - 1) - norms.narrow(
            dim, 0, norms.shape[dim] - 1
        )
        return step.pow(2)

    d2 = stab(states.norm(dim=-1))  # (B, T), the right squared differences
    moves = (states[:, 1:] - states[:, :-1]).norm(dim=-1)
    return [
        (lam * moves.pow(2).mean(), "the norm of the difference ||h_t - h_{t-1}||",
         "(pen-ns) compares the lengths of the two states, not the states themselves."),
        (lam * moves.mean(), "the norm of the difference ||h_t - h_{t-1}||",
         "(pen-ns) compares the lengths of the two states, not the states themselves."),
        (lam * stab(h.norm(dim=-1)).mean(), "h0 is left out (only T - 1 differences)",
         "the first step's norm is compared with the state carried in, h0."),
        (lam * stab(states.pow(2).sum(-1)).mean(), "it uses squared norms",
         "a norm is the square root of the sum of squares."),
        (lam * d2.sum(1).mean(), "it sums over the steps", "(pen-ns) averages over the T steps."),
        (lam * d2.mean(1).sum(), "it sums over the batch", "(pen-ns) averages over the batch."),
        (lam * d2.sum(), "it sums over the steps and the batch",
         "(pen-ns) averages over both."),
        (lam * stab(states.norm(dim=1)).mean(), "the norm is taken over time",
         "a state's norm runs over its H units, one norm per sequence and step."),
        (lam * stab(states.norm(dim=0), dim=0).mean(), "the norm is taken over the batch",
         "a state's norm runs over its H units, one norm per sequence and step."),
        (d2.mean(), "the weight lam is missing", "(pen-ns) is scaled by lam."),
    ]  # fmt: skip


@own_random_state
def norm_stabiliser(fn) -> str:
    """Exercise: ``fn(h (B, T, H), h0 (B, H), lam) -> R``, (pen-ns): lam times the mean over
    the batch and the T steps of (||h_t|| - ||h_{t-1}||)^2, with h0 the state carried in."""
    _own_work(fn, "norm_stabiliser")
    name = _name(fn, "norm_stabiliser")
    gen = torch.Generator().manual_seed(73)
    for B, T, H, lam in ((3, 5, 4, 0.5), (2, 7, 6, 2.0), (4, 3, 5, 0.1), (5, 2, 3, 1.5)):
        scale = 0.5 + torch.rand(B, T, 1, generator=gen, dtype=F64)  # norms change per step
        h = scale * torch.randn(B, T, H, generator=gen, dtype=F64)
        h0 = torch.randn(B, H, generator=gen, dtype=F64)
        want = _pen.norm_stabiliser(h, h0, lam)
        where = f"{name}(h of shape ({B}, {T}, {H}), h0 of shape ({B}, {H}), lam={lam})"
        given = [h.clone().requires_grad_(), h0.clone()]
        got = _scalar(call(fn, *given, lam, name=name), where)
        if not (torch.equal(given[0].detach(), h) and torch.equal(given[1], h0)):
            fail(f"{where} changed an argument in place.", "compute the norms in new tensors.")
        value = got.detach().to(F64)
        if not torch.allclose(value, want, rtol=1e-5, atol=_atol(got)):
            for wrong, what, hint in _ns_variants(h, h0, lam):
                if torch.allclose(value, wrong, rtol=1e-5, atol=1e-9):
                    fail(f"{where} = {float(value):.6g}: {what}.", hint)
            fail(
                f"{where} = {float(value):.6g}, not {float(want):.6g}.",
                "compute the norms (B, T + 1) of h0, h_1, ..., h_T first, then their "
                "step-to-step differences, and check each on a small example by hand.",
            )
        if not got.requires_grad:
            fail(
                f"{where}: no gradient reaches h.",
                "the penalty must train the weights: no .detach(), .item(), .data or "
                "torch.no_grad() on the way.",
            )
        tracked = h.clone().requires_grad_()
        (want_grad,) = torch.autograd.grad(_pen.norm_stabiliser(tracked, h0, lam), tracked)
        (grad,) = torch.autograd.grad(got, given[0], allow_unused=True)
        if grad is None or not torch.allclose(grad.to(F64), want_grad, rtol=1e-4, atol=1e-6):
            fail(
                f"{where}: the gradient that reaches h is not right.",
                "some part of the penalty was cut from the graph (a detached norm?): every "
                "h_t gets gradient from both differences it takes part in.",
            )
    return passed(name, ["4 batches of sequences, the value", "the gradient that reaches h"])
