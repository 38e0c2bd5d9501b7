"""Checkers for the exercises of the chapter on the Clockwork RNN.

Each takes the student's answer, tests it against the book's ``rnnbook.skip`` and
``CWRNN`` (themselves tested against the source's numbers and against the SRN and LSTM),
prints what passed, and raises :class:`~rnnbook.checks.grading.CheckFailed` with a hint that
names the mistake it recognised, never the solution.
"""

from __future__ import annotations

import math
import numbers
import random

import numpy as np
import torch
import torch.utils._python_dispatch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from rnnbook.checks.dtypes import expect_dtype, reject_float32_inside
from rnnbook.checks.grading import (
    allclose,
    call,
    equal,
    expect_tensor,
    fail,
    gradient,
    own_random_state,
    passed,
    runs_beside_the_answer,
)
from rnnbook.skip import asymptotic_update_rate, connectivity_mask, window_update_rate

# the package's functions that answer this chapter's exercises: an answer may not call them
BOOK_REFERENCES = (window_update_rate, asymptotic_update_rate, connectivity_mask)


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.generic):
        fail(f"{what} should be a number, got {type(value).__name__}.", "return a plain number.")
    return float(value)


@own_random_state
def window_rate(fn) -> str:
    """Exercise: ``fn(periods, L, t0) -> u``, the update rate of one window of L steps."""
    cases = [((1, 2, 4, 8), 5, 0), ((1, 2, 4, 8), 5, 3), ((1, 2, 3, 4, 5), 35, 0),
             ((1, 3, 7), 10, 6), ((2, 2, 4), 3, 1), ((1, 1, 3), 7, 2), ((2, 2, 4), 1, 0),
             ((2, 2, 4), 1, 1)]  # fmt: skip
    g = random.Random(11)  # and a few windows no table of answers can hold
    for _ in range(4):
        periods = tuple(sorted(g.choice((1, 2, 3, 4, 6, 9)) for _ in range(g.randint(2, 5))))
        cases.append((periods, g.randint(2, 40), g.randint(0, 30)))
    for periods, L, t0 in cases:
        want = window_update_rate(periods, L, t0)
        got = _number(call(fn, periods, L, t0, name="window_rate"), "window_rate(...)")
        if math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9):
            continue
        where = f"window_rate({periods}, L={L}, t0={t0}) = {got:.4f}"
        if math.isclose(got, asymptotic_update_rate(periods), abs_tol=1e-12):
            fail(
                f"{where}: that is the rate of an endless sequence, not of this window.",
                "count the ticks of the window's own steps t0, t0 + 1, ..., t0 + L - 1.",
            )
        if t0 and math.isclose(got, window_update_rate(periods, L, 0), abs_tol=1e-12):
            fail(f"{where}: the offset t0 is ignored.", "a module ticks when (t0 + t) % T == 0.")
        if math.isclose(got, window_update_rate(periods, L, t0 + 1), abs_tol=1e-12):
            fail(
                f"{where}: the window is one step late.",
                "the window's first step is clock time t0 itself (t counts from 0).",
            )
        if math.isclose(got, window_update_rate(periods, L, max(t0 - 1, 0)), abs_tol=1e-12):
            fail(f"{where}: the window is one step early.", "its first step is clock time t0.")
        ticks = sum((t0 + t) % T == 0 for t in range(L) for T in periods)
        shares = (ticks / L, ticks, ticks / len(periods))
        if any(math.isclose(got, share, abs_tol=1e-9) for share in shares):
            fail(f"{where} is not a share of all module updates.", "divide by M * L.")
        if 0 < want < 1 and math.isclose(got, 1 - want, abs_tol=1e-12):
            fail(f"{where}: that is the skip rate.", "count the updates, not the skips.")
        unique = set(periods)
        ticks_unique = sum((t0 + t) % T == 0 for t in range(L) for T in unique)
        if math.isclose(got, ticks_unique / (len(unique) * L), abs_tol=1e-12):
            fail(f"{where}: modules with the same period were counted once.", "count every module.")
        outside = "" if 0 <= got <= 1 else " (a rate lies in [0, 1])"
        fail(f"{where} is not right{outside}.", "count the module ticks over the window's steps.")
    return passed("window_rate", [f"{len(cases)} windows, with and without a clock offset"])


@own_random_state
def cwrnn_parameters(fn) -> str:
    """Exercise: ``fn(d_x, H, d_y, M, connectivity) -> count`` of a Clockwork RNN."""
    # the first case tells the mistakes apart (d_y != 1, H != d_y, modules of 4 units)
    cases = [(7, 20, 7, 5, "uni"), (7, 15, 7, 5, "uni"), (1, 64, 1, 8, "uni"), (1, 64, 1, 4, "uni"),
             (3, 12, 2, 3, "bi"), (5, 30, 4, 6, "uni"), (2, 8, 3, 1, "uni")]  # fmt: skip
    g = random.Random(12)  # and a few sizes no table of answers can hold
    for _ in range(4):
        M = g.randint(1, 7)
        cases.append(
            (g.randint(1, 9), M * g.randint(1, 9), g.randint(1, 9), M, g.choice(("uni", "bi")))
        )
    for d_x, H, d_y, M, connectivity in cases:
        kept = int(connectivity_mask(H, M, connectivity).sum())
        want = d_x * H + kept + H + H * d_y + d_y
        args = (d_x, H, d_y, M, connectivity)
        got = _number(call(fn, *args, name="cwrnn_parameters"), "cwrnn_parameters(...)")
        if got == want:
            continue
        where = f"cwrnn_parameters{args} = {got:g}, not right"
        k = H // M
        if connectivity == "uni" and got == want - kept + H * H:
            fail(f"{where}: the masked weights were counted.", "the mask removes whole blocks.")
        if connectivity == "uni" and got == want - kept + k * k * M * (M - 1) // 2:
            fail(
                f"{where}: a module's connections to itself are missing.",
                "module m reads the modules l >= m, itself included.",
            )
        if connectivity == "uni" and got == want - kept + H * (H + 1) // 2:
            fail(
                f"{where}: the mask was taken unit by unit (a triangle of H(H + 1)/2).",
                "the mask works on whole modules: a module reads all units of the slower ones.",
            )
        if got in (want - H, want - d_y, want - H - d_y):
            fail(f"{where}: a bias vector is missing.", "count the hidden and the output bias.")
        if got == want - H * d_y - d_y:
            fail(f"{where}: the read-out is missing.", "count the linear read-out too.")
        fail(f"{where}.", "add up input weights, kept recurrent blocks, biases and read-out.")
    return passed(
        "cwrnn_parameters",
        ["uni and bi, 1 to 8 modules, the chapter's 2,497 and 367, random sizes"],
    )


# the products a multiply-add counter must see, in every variant (in place, out=): the two
# factors' positions in the arguments and the flops of one call from their shapes
_PRODUCTS = {
    "mm": (0, 1), "addmm": (1, 2), "_addmm_activation": (1, 2), "bmm": (0, 1),
    "baddbmm": (1, 2), "addbmm": (1, 2), "mv": (0, 1), "addmv": (1, 2), "dot": (0, 1),
    "vdot": (0, 1), "addr": (1, 2),
}  # fmt: skip
_REDUCTIONS = {"sum", "mean", "prod", "nansum", "amax", "amin", "logsumexp", "linalg_vector_norm"}


@runs_beside_the_answer
def _product_flops(name: str, args) -> int:
    a, b = (args[i] for i in _PRODUCTS[name])
    if name in ("dot", "vdot"):
        return 2 * a.numel()
    if name == "addr":
        return 2 * a.numel() * b.numel()
    return 2 * a.numel() * (b.shape[-1] if b.dim() > 1 else 1)  # (.., n, k) @ (.., k, m)


class _ArithmeticCounter(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts a step's arithmetic in flops (2 per multiply-add), whatever way it is written:
    matrix products in every variant (in place ``addmm_`` and ``out=`` included), and
    element-wise products and sums over more numbers than the state holds (a broadcast
    ``(h[:, None, :] * W).sum(-1)`` is a matrix product too: its product and its sum each
    count their size). Element-wise work on state-sized tensors (adding the input, tanh,
    copying idle units) is free: it cannot compute a module's recurrent sum."""

    def __init__(self, state_size: int):
        super().__init__()
        self.state_size, self.flops = state_size, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name.split("::")[-1].rstrip("_")
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        if name in _PRODUCTS:
            self.flops += _product_flops(name, args)
        elif not func.is_view and tensors:
            largest = max(t.numel() for t in tensors)
            counted = torch.Tag.pointwise in func.tags and len(tensors) >= 2
            if (counted or name in _REDUCTIONS) and largest > self.state_size:
                self.flops += largest
        return func(*args, **kwargs)


def _counted_call(fn, *args) -> tuple[object, int]:
    """Call ``fn`` and count the flops of its arithmetic (:class:`_ArithmeticCounter`)."""
    with _ArithmeticCounter(state_size=args[0].numel()) as counter:
        out = call(fn, *args, name="sliced_step")
    return out, counter.flops


def _reference(h, x_proj, W, ticking):
    """(cw-rnn) computed whole, then the idle units kept: the numbers, not the way."""
    return torch.where(ticking, torch.tanh(x_proj + h @ W.T), h)


# operations that only move numbers (no arithmetic): they may carry W's idle rows along
_MOVES = {
    "clone", "_to_copy", "copy", "contiguous", "detach", "alias", "lift_fresh",
    "lift_fresh_copy", "_unsafe_view", "index", "index_select", "gather", "take",
    "masked_select", "cat", "stack", "repeat", "tile", "flip", "roll", "narrow_copy",
    "slice_copy", "select_copy", "t_copy", "transpose_copy", "permute_copy", "expand_copy",
    "view_copy", "unsqueeze_copy", "squeeze_copy", "unbind_copy", "split_copy",
    "split_with_sizes_copy", "diagonal_copy", "unfold_copy", "_reshape_copy",
}  # fmt: skip


class _RowWatch(torch.Tensor):
    """W as the answer sees it in one more run of each case: a tensor that holds W's values
    and beside them a probe, W with the idle modules' rows set to NaN. Every operation on it
    runs on both. One that only moves numbers (a view, a copy, indexing, torch.cat) passes
    the probe on, so W[rows] of ticking modules is a plain tensor again; any other (a product,
    a sum, a comparison, torch.where, .item(), a write) on a tensor whose probe holds NaN is
    noted: it read a row of an idle module. The note is made by the tensor itself, so it is
    made in any thread and under any torch mode, whatever operation reads the row."""

    @staticmethod
    def __new__(cls, values: torch.Tensor, probe: torch.Tensor, reads: list):
        out = torch.Tensor._make_wrapper_subclass(
            cls, values.shape, strides=values.stride(), dtype=values.dtype, device=values.device
        )
        out.inner, out.probe, out.reads = values, probe, reads
        return out

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __repr__(self):
        return repr(self.inner)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        reads = next(a.reads for a in tree_flatten((args, kwargs))[0] if isinstance(a, cls))
        real_args, real_kwargs = tree_map(
            lambda a: a.inner if isinstance(a, cls) else a, (args, kwargs)
        )
        name = func._schema.name.split("::")[-1]
        if name.startswith("new_") or name.endswith("_like"):  # reads the shape, not W
            return func(*real_args, **real_kwargs)
        if func._schema.is_mutable or not (func.is_view or name in _MOVES):
            reads.append(name)
            out = func(*real_args, **real_kwargs)
            return args[0] if func._schema.is_mutable and args and out is real_args[0] else out
        probe_args, probe_kwargs = tree_map(
            lambda a: a.probe if isinstance(a, cls) else a, (args, kwargs)
        )
        out = func(*real_args, **real_kwargs)
        values, spec = tree_flatten(out)
        probes = tree_flatten(func(*probe_args, **probe_kwargs))[0]
        return tree_unflatten([cls.carry(v, p, reads) for v, p in zip(values, probes)], spec)

    @classmethod
    def carry(cls, value, probe, reads):
        """A moved tensor stays watched while it holds an idle row (NaN in its probe)."""
        if (
            isinstance(value, torch.Tensor)
            and probe.is_floating_point()
            and bool(torch.isnan(probe).any())
        ):
            return cls(value, probe, reads)
        return value


_IDLE_COMPUTED = (
    "multiply only the ticking modules' rows of W; computing everything and keeping the "
    "idle units afterwards (by a mask, torch.where, indexing, or a broadcast product summed "
    "by hand) is masking, not skipping."
)


def _check_idle_rows_unread(fn, h, x_proj, W, periods, t, ticking, want, where) -> None:
    """Run the step once more with W a :class:`_RowWatch` whose idle rows are watched: a step
    that reads them (to compute the idle modules by any route: a loop of rank-1 updates, a
    convolution, a sparse product, torch.where over W, another thread) is masking."""
    if ticking.all():
        return  # no module is idle at this step
    reads: list[str] = []
    probe = W.clone()
    probe[~ticking] = float("nan")
    watched = _RowWatch(W.clone(), probe, reads)
    out = call(
        fn, h.clone(), x_proj.clone(), watched, periods, t, name="sliced_step",
        crash_hint="the checker runs the step once more with W a tensor that notes which "
        "rows of W are read; work on W with torch operations only (indexing, slicing, "
        "matrix products), without .numpy(), .tolist() or its storage.",
    )  # fmt: skip
    if reads:
        fail(
            f"{where} the step read the rows of W that belong to idle modules (in "
            f"aten.{reads[0]}): the idle modules were computed too.",
            _IDLE_COMPUTED,
        )
    out = expect_tensor(out, tuple(want.shape), f"sliced_step(..., t={t})")
    if not allclose(out.detach(), want, rtol=0, atol=1e-12):
        fail(
            f"{where} the step gave other numbers when W was a tensor that notes which of its "
            "rows are read.",
            "compute the new state from h, x_proj and W with torch operations alone, the same "
            "way whatever kind of tensor W is.",
        )


@own_random_state
def sliced_step(fn) -> str:
    """Exercise: ``fn(h, x_proj, W, periods, t) -> h_new``, computing only ticking modules.

    dtype policy (the book's for every checker): the inputs are float64, and the answer
    must come back in the dtype it was given. ``W`` is the recurrent matrix with its mask
    applied: block-upper-triangular (one-way, "uni") in the first case, dense ("bi") in the
    second; an answer must be right for both, keep idle units bit for bit, pass the gradient
    through them, and multiply no idle module's row of ``W``."""
    tests, pending = [], []
    with _ArithmeticCounter(state_size=1):  # torch's first dispatch mode imports a lot: here,
        torch.zeros(1) + 1  # not inside the answer's first call, where it is watched
    g = torch.Generator().manual_seed(5)
    B, k = 3, 3
    cases = [((1, 2, 4, 8), "uni", (0, 1, 2, 4, 6, 8, 12)), ((1, 2, 3, 5), "bi", (3, 5, 6, 10, 15))]
    for periods, connectivity, times in cases:
        M = len(periods)
        H = M * k
        mask = connectivity_mask(H, M, connectivity).double()
        W = torch.randn(H, H, generator=g, dtype=torch.float64) / math.sqrt(H) * mask
        one_way = W * connectivity_mask(H, M, "uni").double()  # the columns a uni module reads
        module = torch.arange(H) // k
        for t in times:
            h = torch.randn(B, H, generator=g, dtype=torch.float64)
            x_proj = torch.randn(B, H, generator=g, dtype=torch.float64)
            ticking = torch.tensor([t % T == 0 for T in periods])[module]
            full = torch.tanh(x_proj + h @ W.T)
            want = torch.where(ticking, full, h)
            leaves = [v.clone().requires_grad_() for v in (h, x_proj, W)]
            given = [v * 1 for v in leaves]  # not leaves: an in-place change is reported below
            got, flops = _counted_call(fn, *given, periods, t)
            where = f"at t = {t} with periods {periods}"
            got = expect_tensor(got, (B, H), f"sliced_step(..., t={t})")
            if not equal(given[0], h):
                fail(
                    f"{where} the state h passed in was changed in place.",
                    "build the new state in a new tensor (e.g. h.clone()); the old one is still "
                    "needed, by the backward pass and by the caller.",
                )
            got = expect_dtype(got, h.dtype, f"{where} the new state")
            value = got.detach()
            if allclose(value, want, rtol=1e-12, atol=1e-12):
                if not equal(value[:, ~ticking], h[:, ~ticking]):
                    fail(f"{where} an idle module's state changed.", "copy the old units exactly.")
                allowed = 2 * B * H * int(ticking.sum())  # the ticking rows against every column
                if flops > 1.01 * allowed:
                    fail(
                        f"{where} the step did {flops // 2} multiply-adds' worth of work; the "
                        f"ticking modules need at most {allowed // 2}: the idle modules were "
                        "computed too.",
                        _IDLE_COMPUTED,
                    )
                _check_idle_rows_unread(fn, h, x_proj, W, periods, t, ticking, want, where)
                pending.append((got, leaves, (h, x_proj, W), ticking, mask, where))
                continue
            reject_float32_inside(value, want, f"{where} the new state")

            def same(a, b):  # a named mistake matches to rounding, not to float32's precision
                return allclose(a, b, rtol=0, atol=1e-10)

            if same(value, full):
                fail(f"{where} every module was updated.", "a module ticks only when t % T == 0.")
            if same(value[:, ticking], want[:, ticking]) and (value[:, ~ticking] == 0).all():
                fail(f"{where} the idle modules were set to zero.", "an idle module keeps its h.")
            if connectivity == "bi" and same(value, _reference(h, x_proj, one_way, ticking)):
                fail(
                    f"{where} each module read only its own and the slower modules' columns of "
                    "W; here W is dense (bidirectional connectivity), and a module reads every "
                    "module it is connected to, faster ones too.",
                    "let W say what is connected: the one-way mask is already in W's zeros.",
                )
            n_ticking = int(ticking.sum()) // k
            prefix = module < n_ticking
            if not equal(prefix, ticking) and same(value, torch.where(prefix, full, h)):
                fail(
                    f"{where} the first {n_ticking} modules were updated, not the ones that tick.",
                    "the ticking modules form a prefix only when every period divides the next; "
                    "test each module's own period.",
                )
            later, earlier = (
                torch.tensor([(t + shift) % T == 0 for T in periods])[module] for shift in (1, -1)
            )
            for other, name in ((earlier, "t - 1"), (later, "t + 1")):
                if equal(later, earlier):
                    name = "t - 1 or t + 1"  # at t = 0 they cannot be told apart
                if not equal(other, ticking) and same(value, torch.where(other, full, h)):
                    fail(
                        f"{where} the modules of step {name} ticked.", "step t ticks if t % T == 0."
                    )
            if same(value, torch.where(ticking, torch.tanh(x_proj + h @ W), h)):
                fail(f"{where} W was used transposed.", "torch's layout: h_new = h @ W.T.")
            fail(
                f"{where} the new state is not right.",
                "compute (cw-rnn) for the ticking modules' rows, each against the old state h "
                "as it was before the step (not one already partly updated), and check the "
                "ticks against the periods.",
            )
    for case in pending:  # the values and the work are right everywhere: now the gradients
        _check_gradient(*case)
    tests.append("twelve clock times, a one-way and a dense W, periods that are not powers of 2")
    tests.append(
        "no idle module computed (counted multiply-adds, and no idle row of W read by any "
        "operation), the given h left unchanged"
    )
    tests.append("the gradient reaches h, the input and W, through the idle units too")
    return passed("sliced_step", tests)


def _check_gradient(got, leaves, originals, ticking, mask, where) -> None:
    """The step must be differentiable like (cw-rnn): the same gradient to h, x_proj and W
    (W where the mask keeps weights) as the reference, for a random weighting of the units."""
    if not got.requires_grad:
        fail(
            f"{where} the result carries no gradient: it was cut from the graph.",
            "compute it from h, x_proj and W with torch operations, without .detach(), "
            ".data, .numpy() or torch.no_grad().",
        )
    weights = torch.randn(got.shape, generator=torch.Generator().manual_seed(7), dtype=got.dtype)
    grads = gradient(
        (got * weights).sum(),
        leaves,
        f"{where}, backward",
        "keep every operation of the step differentiable.",
        inplace_hint="a value autograd saved was overwritten (e.g. writing into the result of "
        "tanh); write the new state into a fresh tensor, such as a clone of h.",
    )
    reference = [v.clone().requires_grad_() for v in originals]
    expected = torch.autograd.grad((_reference(*reference, ticking) * weights).sum(), reference)
    names = ("h", "x_proj", "W")
    for name, grad, want, keep in zip(names, grads, expected, (None, None, mask.bool())):
        grad = torch.zeros_like(want) if grad is None else grad
        if keep is not None:
            grad, want = grad[keep], want[keep]
        if allclose(grad, want, rtol=1e-10, atol=1e-12):
            continue
        if name == "h" and not allclose(grad[:, ~ticking], want[:, ~ticking], atol=1e-12):
            fail(
                f"{where} the gradient does not pass through the idle units to h: the copy of an "
                "idle module was cut from the graph.",
                "an idle unit is h itself, and its gradient must reach h unchanged; copy it "
                "without .detach(), .data or torch.no_grad().",
            )
        fail(
            f"{where} the gradient to {name} is not the gradient of (cw-rnn).",
            "keep every operation of the step differentiable (no .detach(), .data or "
            "torch.no_grad()).",
        )
