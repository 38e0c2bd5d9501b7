"""The Clockwork RNN and the Clockwork LSTM with its four skip targets (Chapter 5).

The hidden layer is split into M equal modules of k = H/M units with periods
T_1 <= ... <= T_M. Module m updates when its clock ticks, ``(t0 + t) mod T_m = 0``
(skip-clock), and otherwise keeps its state (skip-update), as a CWRNN step:

    h_t^(m) = f(W_x^(m) x_t + Σ_{l >= m} W_h^(m,l) h_{t−1}^(l) + b^(m))   if it ticks
    h_t^(m) = h_{t−1}^(m)                                                  otherwise   (cw-rnn)

With ``connectivity="uni"`` module m reads only modules l >= m (slower ones, and itself):
the recurrent matrix is block-upper-triangular in torch's layout ``W[destination, source]``
(cw-mask, :func:`rnnbook.skip.connectivity_mask`); ``"bi"`` keeps it dense. Parameters keep
torch's layout (``weight_ih`` (H, d_x), ``weight_hh`` (H, H)) with one bias vector; masked
weights are zero from the start and the mask is applied again in every forward pass, so
they get no gradient, and :meth:`CWRNN.n_parameters` does not count them (cw-params):
``k² M (M + 1) / 2 = H² (M + 1) / (2M)`` recurrent weights are kept.

**Real skipping** (``mode="sliced"``, the default). The clock is known before the step, so
a module that does not tick is not computed at all, neither its recurrent product nor its
input projection. At each step the ticking modules form runs of neighbouring modules
(:func:`module_runs`), and each run R is one slice of the rows of the recurrent matrix and
of the input projection ``x̂_t = W_x x_t + b``:

    h_t[R] = f(x̂_t[R] + h_{t−1}[S_R] W[R, S_R]ᵀ),   h_t[rest] = h_{t−1}[rest]     (cw-sliced)

The input projection of module m is one product for the whole window, over the steps at
which m ticks only, ``x̂_{t_1..t_n}[m] = x_{t_1..t_n} W_x[m]ᵀ + b[m]`` (modules with the same
ticks share it); the idle steps' entries are never computed and never read.

where S_R are the units the run's first module reads (all for "bi", its own and the slower
modules' for "uni"). When every period divides the next (1, 2, 4, ...) the ticking modules
are always the first few: one run, a prefix of the rows. Other period sets, such as
(1, 2, 3, 4, 5), give a few runs, still computing only the ticking modules.
``mode="masked"`` computes every module and then keeps the idle ones (skip-update): the
same numbers, none of the savings, the reference the tests and the benchmark compare with.

The sliced CWRNN runs its own backward pass, BPTT written out as in Chapter 1. With
``g_t = ∂Loss/∂h_t`` (from the output at t and from step t + 1), the unit clock k_t, and
``δ_t = g_t ⊙ f'(a_t)`` on the ticking units (0 on the idle ones),

    g_{t−1} = (1 − k_t) ⊙ g_t + δ_t W + (the output's gradient at t − 1)          (cw-bptt)
    ∂Loss/∂W[m, S_m] = Σ_{t: module m ticks} δ_t[m]ᵀ h_{t−1}[S_m]                   (cw-grad)

so the backward loop also touches only ticking rows, and each module's weight gradient is
added up in place in the module's own block, one term per tick (autograd would record a few
small operations per step and give every step its own weight gradient to allocate and add).
The CWLSTM's real skipping stays with autograd; see :class:`CWLSTM`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from rnnbook._validate import check_choice, check_positive_int, check_size, check_tensor
from rnnbook.skip import (
    check_periods,
    check_t0,
    clock,
    connectivity_mask,
    lcm,
    module_of_unit,
    skip_update,
    unit_clock,
)

ACTIVATIONS = {"tanh": torch.tanh, "linear": lambda a: a}
MODES = ("sliced", "masked")
SKIP_TARGETS = ("c", "h", "ch", "i")
GATES = {"i": 0, "f": 1, "g": 2, "o": 3}  # torch's gate order in the stacked weights
# (cwlstm-targets): the gates a module computes under real skipping, sigmoid gates first
TICKING_GATES = ("i", "f", "o", "g")
IDLE_GATES = {"c": ("o",), "h": ("i", "f", "g"), "ch": (), "i": ("f", "o")}


# --- the schedule of real skipping ----------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _runs(periods: tuple[int, ...], L: int, t0: int) -> tuple[tuple[tuple[int, int, bool], ...]]:
    ticks = clock(periods, L, t0).tolist()  # (L, M) booleans
    steps = []
    for row in ticks:
        runs, first = [], 0
        for m in range(1, len(row) + 1):
            if m == len(row) or row[m] != row[first]:
                runs.append((first, m, row[first]))
                first = m
        steps.append(tuple(runs))
    return tuple(steps)


def module_runs(
    periods: Sequence[int], L: int, t0: int = 0
) -> tuple[tuple[tuple[int, int, bool], ...], ...]:
    """The modules at each step of a window, as maximal runs of neighbours that tick or idle.

    Returns, for each of the ``L`` steps, a tuple of ``(first, end, ticks)``: modules
    ``first .. end − 1`` all tick (``ticks=True``) or all keep their state. Real skipping
    computes one slice of rows per ticking run (cw-sliced). With periods that divide each
    other there is at most one ticking run, and it starts at module 0 (a prefix). For
    periods (1, 2, 4), the first four steps are ``((0, 3, True),)``, then
    ``((0, 1, True), (1, 3, False))``, ``((0, 2, True), (2, 3, False))`` and
    ``((0, 1, True), (1, 3, False))`` again.
    """
    periods = check_periods(periods)
    check_positive_int(L, "L")
    check_t0(t0)
    return _runs(periods, L, t0 % lcm(periods))  # the schedule repeats after lcm(periods)


def recurrent_share(
    periods: Sequence[int], L: int, connectivity: str = "uni", t0: int = 0
) -> float:
    """The recurrent arithmetic of real skipping over a window, as a share of a dense SRN's.

    Counts the products of each ticking module's rows with the columns it reads (all H for
    ``"bi"``, those of modules m..M for ``"uni"``), over ``L`` steps from clock time t0,
    divided by the dense ``L · H²``. For ``"bi"`` this is the window's update rate
    (skip-u-window); the uni mask lowers it further, since slow modules read fewer columns.
    """
    check_choice(connectivity, "connectivity", ("uni", "bi"))
    periods = check_periods(periods)
    M = len(periods)
    ticks = clock(periods, L, t0).double()  # (L, M)
    columns = torch.tensor([M - m if connectivity == "uni" else M for m in range(M)])
    return float((ticks * columns).sum()) / (L * M * M)


# --- helpers shared by both models ----------------------------------------------------------


def _normal_init_(weight: torch.Tensor) -> None:
    """N(0, std = 1/sqrt(fan_in + fan_out)): the source's "normalized initialization",
    taken literally (PyTorch's xavier_normal_ is sqrt(2) wider)."""
    fan_out, fan_in = weight.shape
    nn.init.normal_(weight, 0.0, 1.0 / math.sqrt(fan_in + fan_out))


def _check_inputs(model, x: torch.Tensor, t0: int, mode: str) -> None:
    check_tensor(x, "x", ndim=3)
    check_size(x, "x", 2, model.input_size, "the input size d_x")
    if x.shape[1] == 0:
        raise ValueError(f"x must have at least one time step, got shape {tuple(x.shape)}")
    check_t0(t0)
    check_choice(mode, "mode", MODES)


def _check_state(part: torch.Tensor, name: str, B: int, H: int) -> None:
    check_tensor(part, name, ndim=2)
    if tuple(part.shape) != (B, H):
        raise ValueError(f"{name} must have shape (B, H) = ({B}, {H}), got {tuple(part.shape)}")


def _first_source(m: int, k: int, connectivity: str) -> int:
    """The first unit module m reads (cw-mask): its own first unit ("uni") or unit 0 ("bi");
    it reads every unit from there on."""
    return m * k if connectivity == "uni" else 0


def _read_out(readout: nn.Linear, states: torch.Tensor) -> torch.Tensor:
    """``y_t = W_hy h_t + b_y`` of every unit, (B, L, d_y) and contiguous, from the states
    (L, B, H), copying whichever side is smaller into batch-first order."""
    if readout.out_features <= readout.in_features:
        return readout(states).transpose(0, 1).contiguous()
    return readout(states.transpose(0, 1))


class _Clockwork(nn.Module):
    """What both models share: the modules, their periods, the mask and the clock."""

    def __init__(self, d_x: int, H: int, periods: Sequence[int], connectivity: str):
        super().__init__()
        check_positive_int(d_x, "d_x")
        self.periods = check_periods(periods)
        self.input_size, self.hidden_size, self.n_modules = d_x, H, len(self.periods)
        self.register_buffer("module", module_of_unit(H, self.n_modules), persistent=False)
        self.module_size = H // self.n_modules
        self.connectivity = connectivity
        self.register_buffer(
            "mask", connectivity_mask(H, self.n_modules, connectivity), persistent=False
        )

    def unit_clock(self, L: int, t0: int = 0) -> torch.Tensor:
        """(L, H): 1 where the unit's module ticks at step t of a window starting at t0."""
        return unit_clock(self.periods, self.hidden_size, L, t0)

    def update_decisions(self, B: int, L: int, t0: int = 0) -> torch.Tensor:
        """(B, L, H) update decisions of a batch, for :func:`rnnbook.skip.update_rate`."""
        return self.unit_clock(L, t0).expand(B, L, self.hidden_size)

    def _first_source(self, m: int) -> int:
        return _first_source(m, self.module_size, self.connectivity)


# --- the Clockwork RNN ----------------------------------------------------------------------


def _every(ticks_at: tuple[int, ...]) -> slice:
    """A clock's ticks as a slice of steps: a module ticks every T steps from its first tick
    (skip-clock), so the steps of a group of modules that tick together are evenly spaced."""
    first, last = ticks_at[0], ticks_at[-1]
    return slice(first, last + 1, ticks_at[1] - first if len(ticks_at) > 1 else 1)


class _ClockedRecurrence(torch.autograd.Function):
    """(cw-rnn) over a window, computing only the ticking runs of modules, with BPTT by hand.

    Inputs: ``x`` (B, L, d_x), the inputs batch-first; ``weight_ih`` (H, d_x) and ``bias``
    (H,), the input part ``W_x x_t + b``; ``h0`` (B, H); ``W`` (H, H), the masked recurrent
    matrix ``W[destination, source]``; ``weight_y`` (d_y, H) and ``bias_y`` (d_y,), the
    read-out, or None to leave it to the caller; ``plan``, the slices of every step;
    ``groups``, the modules that tick together and when (:func:`_projection_groups`);
    ``tanh``, the activation (else linear). Returns ``(y, states)``: the outputs (B, L, d_y)
    (None without a read-out) and the states (L, H, B).

    The states are stored unit-major, one (H, B) matrix per step: a unit's values for the
    batch are one row, so the rows of a run of neighbouring modules are one contiguous block
    ``h_t[R]`` (n, B). The run's product is added in place to that block, which already holds
    its input part (written there for all of the group's ticks at once); an idle run is one
    contiguous copy; in the backward pass ``δ_t[R]`` and ``g_t[S]`` are contiguous blocks
    too. With batch-major (B, H) storage each of these would be B strided pieces, and a
    product's result a temporary to copy into place.

    Real skipping (cw-sliced) on both sides of the recurrence: a module's input part is
    computed only at its ticks (one product per group of modules), its recurrent part only
    at its ticks, and in the backward pass each weight gradient only where the module ticked
    and the mask keeps weights: module m's block of ``W`` gets ``δ_t[m] h_{t−1}[S_m]ᵀ`` at
    each of its ticks (unit-major blocks, (k, B) and (|S_m|, B): the δᵀh of (cw-grad) in the
    module docstring's batch-major terms), added in place, whose sum over the ticks is
    (cw-grad).

    A read-out no wider than the batch (d_y <= B) is computed here as well, for all steps in
    one batched product, and its gradient is added to g_t at each step (the output's part of
    (cw-bptt)), so the states are never copied into batch-first order and their gradient
    never forms an (L, B, H) tensor. A wider read-out, such as a language model's vocabulary,
    is left to the caller: one product over a batch-first copy of the states.
    """

    @staticmethod
    def forward(ctx, x, weight_ih, bias, h0, W, weight_y, bias_y, plan, groups, tanh):
        ctx.set_materialize_grads(False)  # an output nobody uses gets None, not zeros
        steps, _, _ = plan
        B, L, _ = x.shape
        H = W.shape[0]
        s = x.new_empty(L + 1, H, B)  # s[t + 1] = h_t (H, B), unit-major; s[0] = h0
        s[0] = h0.T
        # x̂_t[R] = W_x[R] x_t + b[R] for each group at its ticks, written where h_t[R] goes
        x_columns = x.permute(1, 2, 0)  # (L, d_x, B): x_t with one column per sequence
        for rows, ticks_at in groups:
            if ticks_at:
                at = _every(ticks_at)
                x_hat = s[at.start + 1 : at.stop + 1 : at.step, rows]  # (ticks, n, B)
                x_hat.copy_(bias[rows, None].expand_as(x_hat))
                w_x = weight_ih[rows].expand(x_hat.shape[0], -1, -1)
                # in place, written with out= (rather than baddbmm_, addmm_) so that torch's
                # FlopCounterMode counts the product, as the tests do
                torch.baddbmm(x_hat, w_x, x_columns[at], out=x_hat)
        W_runs = {}  # W[R, S] of each ticking run, sliced once per call
        s_steps = s.unbind(0)
        for t in range(L):
            h_prev, h = s_steps[t], s_steps[t + 1]
            for rows, sources, ticks in steps[t]:
                if ticks:  # (cw-sliced): only these rows, against the columns they read
                    key = (rows.start, rows.stop, sources.start)
                    if key not in W_runs:
                        W_runs[key] = W[rows, sources]
                    a = h[rows]  # (n, B), holding x̂_t[R]
                    torch.addmm(a, W_runs[key], h_prev[sources], out=a)
                    if tanh:
                        a.tanh_()
                else:  # (skip-update) with b = 0: a copy
                    h[rows].copy_(h_prev[rows])
        y = None
        if weight_y is not None:  # y_t = W_y h_t + b_y of every step, one batched product
            d_y = weight_y.shape[0]
            y_columns = torch.baddbmm(bias_y[:, None], weight_y.expand(L, d_y, H), s[1:])
            y = y_columns.permute(2, 0, 1).contiguous()  # (B, L, d_y)
        ctx.save_for_backward(x, weight_ih, W, weight_y, s)
        ctx.plan, ctx.tanh = plan, tanh
        return y, s[1:]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y, grad_states):
        x, weight_ih, W, weight_y, s = ctx.saved_tensors
        steps, blocks, _ = ctx.plan
        B, L, _ = x.shape
        H = W.shape[0]
        need_x, need_h0, need_W = (ctx.needs_input_grad[i] for i in (0, 3, 4))
        grad_x = torch.zeros_like(x) if need_x else None
        grad_weight_ih = torch.zeros_like(weight_ih)
        grad_W = torch.zeros_like(W) if need_W else None
        grad_h = W.new_zeros(H, B)  # g_t = dLoss/dh_t, carried back in time
        delta = W.new_empty(H, B)  # δ_t = g_t ⊙ f'(a_t), written (and read) on ticking rows
        delta_sum = W.new_zeros(H, B)  # Σ_t δ_t: the bias's gradient, summed over the batch
        grad_weight_y = grad_bias_y = None
        if weight_y is not None and grad_y is not None:
            grad_weight_y = torch.zeros_like(weight_y)
            grad_bias_y = grad_y.sum((0, 1))
            grad_y_columns = grad_y.permute(1, 2, 0).unbind(0)  # (d_y, B) per step
            weight_y_T = weight_y.T
        s_steps, s_steps_T = s.unbind(0), s.transpose(1, 2).unbind(0)  # h_{t−1}, h_{t−1}ᵀ
        x_steps = x.unbind(1)  # x_t (B, d_x)
        run_views = {}

        def views_of(rows, sources):
            """The blocks a ticking run reads and writes, sliced once per call: its rows of
            g and δ, the columns it feeds back, its weights, and its blocks of W (cw-grad),
            one per module, or one for neighbouring modules that read the same columns."""
            modules = []
            for m_rows, m_sources, _ in blocks if need_W else ():
                if rows.start <= m_rows.start and m_rows.stop <= rows.stop:
                    if modules and modules[-1][1] == m_sources:
                        m_rows = slice(modules[-1][0].start, m_rows.stop)
                        modules.pop()
                    modules.append((m_rows, m_sources))
            modules = [(grad_W[r, c], delta[r], c) for r, c in modules]
            return (rows, grad_h[rows], delta[rows], grad_h[sources], W[rows, sources].T,
                    grad_weight_ih[rows], delta_sum[rows], weight_ih[rows], modules)  # fmt: skip

        for t in range(L - 1, -1, -1):
            if grad_states is not None:
                grad_h += grad_states[t]
            if grad_weight_y is not None:  # the output's gradient at t, and the read-out's
                g_y = grad_y_columns[t]  # (d_y, B)
                grad_h.addmm_(weight_y_T, g_y)
                grad_weight_y.addmm_(g_y, s_steps_T[t + 1])
            ticking = []
            for rows, sources, ticks in steps[t]:
                if ticks:
                    key = (rows.start, rows.stop, sources.start)
                    if key not in run_views:
                        run_views[key] = views_of(rows, sources)
                    ticking.append(run_views[key])
            if not ticking:
                continue  # every module copied: the gradient passes unchanged
            h = s_steps[t + 1]
            for rows, g, d, *_ in ticking:
                if ctx.tanh:  # δ = g ⊙ (1 − h²), torch's fused derivative of tanh
                    torch.ops.aten.tanh_backward.grad_input(g, h[rows], grad_input=d)
                else:
                    d.copy_(g)
                g.zero_()  # a ticking unit did not copy h_{t-1}
            h_prev_T, x_t = s_steps_T[t], x_steps[t]
            for _, _, d, g_sources, W_T, g_weight_ih, d_sum, w_x, modules in ticking:
                g_sources.addmm_(W_T, d)  # (cw-bptt): W[R, S]ᵀ δ_t[R] into g_{t-1}[S]
                g_weight_ih.addmm_(d, x_t)
                d_sum += d
                if grad_x is not None:
                    grad_x[:, t].addmm_(d.T, w_x)
                for g_W, d_m, m_sources in modules:  # (cw-grad): step t's term, in place
                    g_W.addmm_(d_m, h_prev_T[:, m_sources])
        grad_bias = delta_sum.sum(1)
        grad_h0 = grad_h.T if need_h0 else None
        return (grad_x, grad_weight_ih, grad_bias, grad_h0, grad_W, grad_weight_y, grad_bias_y,
                None, None, None)  # fmt: skip


@functools.lru_cache(maxsize=64)
def _rnn_plan(periods: tuple[int, ...], k: int, connectivity: str, L: int, t0: int):
    """Per step, ``(rows, sources, ticks)`` for every run of modules; per module, its rows,
    the columns it reads and the steps at which it ticks; and the module size k."""
    M = len(periods)
    H = M * k

    steps = tuple(
        tuple(
            (slice(first * k, end * k), slice(_first_source(first, k, connectivity), H), ticks)
            for first, end, ticks in runs
        )
        for runs in _runs(periods, L, t0)
    )
    ticks = clock(periods, L, t0)  # (L, M)
    blocks = tuple(
        (
            slice(m * k, (m + 1) * k),
            slice(_first_source(m, k, connectivity), H),
            tuple(ticks[:, m].nonzero().flatten().tolist()),
        )
        for m in range(M)
    )
    return steps, blocks, k


@functools.lru_cache(maxsize=64)
def _projection_groups(periods: tuple[int, ...], k: int, L: int, t0: int):
    """Runs of neighbouring modules that tick at the same steps of the window: for each,
    its rows and those steps (the input projection of real skipping, one product each)."""
    ticks = clock(periods, L, t0)  # (L, M)
    groups, first = [], 0
    for m in range(1, len(periods) + 1):
        if m == len(periods) or not torch.equal(ticks[:, m], ticks[:, first]):
            at = tuple(ticks[:, first].nonzero().flatten().tolist())
            groups.append((slice(first * k, m * k), at))
            first = m
    return tuple(groups)


class CWRNN(_Clockwork):
    """A Clockwork RNN (cw-rnn) with a linear read-out of every unit.

    Args:
        d_x, H, d_y: input, hidden and output sizes; H must split into equal modules.
        periods: one period per module, positive integers, non-decreasing, e.g. (1, 2, 4, 8).
        connectivity: ``"uni"`` (block-triangular, the original) or ``"bi"`` (dense).
        activation: ``"tanh"`` or ``"linear"``.

    ``forward(x, h0=None, t0=0, mode="sliced")`` takes x (B, L, d_x), an initial state h0
    (B, H) (zeros if None) and the clock time t0 of the first step, and returns
    ``(y, h_all, h_L)``: outputs (B, L, d_y), states (B, L, H) and the last state (B, H).
    ``mode="sliced"`` skips for real (cw-sliced), ``"masked"`` computes every module and
    keeps the idle ones (skip-update). ``h_all`` is a batch-first view of time-major
    storage; call ``.contiguous()`` before ``.view``.

    With every period 1 and ``"bi"`` it is the SRN given the same weights (the SRN's two
    biases summed into ``bias``); ``update_decisions()`` gives the clock for
    :func:`rnnbook.skip.update_rate`.
    """

    def __init__(
        self,
        d_x: int,
        H: int,
        d_y: int,
        periods: Sequence[int],
        connectivity: str = "uni",
        activation: str = "tanh",
    ):
        check_choice(connectivity, "connectivity", ("uni", "bi"))
        super().__init__(d_x, H, periods, connectivity)
        check_positive_int(d_y, "d_y")
        check_choice(activation, "activation", tuple(ACTIVATIONS))
        self.activation = activation
        self.weight_ih = nn.Parameter(torch.empty(H, d_x))  # W_x
        self.weight_hh = nn.Parameter(torch.empty(H, H))  # W_h, masked
        self.bias = nn.Parameter(torch.zeros(H))
        self.readout = nn.Linear(H, d_y)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal weights, std 1/sqrt(fan_in + fan_out); masked ones and the bias zero."""
        _normal_init_(self.weight_ih)
        _normal_init_(self.weight_hh)
        with torch.no_grad():
            self.weight_hh.mul_(self.mask)
            self.bias.zero_()

    def n_parameters(self) -> int:
        """Trainable numbers, masked recurrent weights left out (cw-params)."""
        total = sum(p.numel() for p in self.parameters())
        return total - int((self.mask == 0).sum())

    def forward(
        self,
        x: torch.Tensor,
        h0: torch.Tensor | None = None,
        t0: int = 0,
        mode="sliced",
    ):
        _check_inputs(self, x, t0, mode)
        B, L, _ = x.shape
        H = self.hidden_size
        if h0 is None:
            h0 = x.new_zeros(B, H)
        _check_state(h0, "h0", B, H)
        W = self.weight_hh * self.mask  # (H, H), W[destination, source]
        if mode == "masked":
            x = x.transpose(0, 1)  # (L, B, d_x)
            x_proj = nn.functional.linear(x, self.weight_ih, self.bias)  # (L, B, H), all units
            states = self._masked(x_proj, h0, W, t0)
            return _read_out(self.readout, states), states.transpose(0, 1), states[-1]
        plan = self._plan(L, t0)
        groups = _projection_groups(self.periods, self.module_size, L, t0 % lcm(self.periods))
        narrow = self.readout.out_features <= B  # the read-out runs inside (_ClockedRecurrence)
        readout = (self.readout.weight, self.readout.bias) if narrow else (None, None)
        y, states = _ClockedRecurrence.apply(
            x, self.weight_ih, self.bias, h0, W, *readout, plan, groups, self.activation == "tanh"
        )  # states (L, H, B), unit-major
        if y is None:
            y = _read_out(self.readout, states.transpose(1, 2))
        return y, states.permute(2, 0, 1), states[-1].T

    def _masked(self, x_proj, h, W, t0):
        """Compute every module, then keep the idle ones (skip-update): (L, B, H)."""
        act = ACTIVATIONS[self.activation]
        update = self.unit_clock(x_proj.shape[0], t0).to(x_proj)  # (L, H)
        states = []
        for x_t, b_t in zip(x_proj.unbind(0), update.unbind(0)):
            h = skip_update(act(x_t + h @ W.T), h, b_t)  # (cw-rnn)
            states.append(h)
        return torch.stack(states)  # (L, B, H)

    def _plan(self, L: int, t0: int):
        """The slices of real skipping (see :func:`_rnn_plan`)."""
        return _rnn_plan(
            self.periods, self.module_size, self.connectivity, L, t0 % lcm(self.periods)
        )

    def extra_repr(self) -> str:
        return (
            f"d_x={self.input_size}, H={self.hidden_size}, periods={self.periods}, "
            f"connectivity={self.connectivity!r}, activation={self.activation!r}"
        )


# --- the Clockwork LSTM ---------------------------------------------------------------------


class CWLSTM(_Clockwork):
    """A Clockwork LSTM: an LSTM split into clocked modules, with one skip target.

    The mask applies to all four recurrent matrices; on every step (all units)

        z_t = W x_t + (W_h ⊙ [C; C; C; C]) h_{t−1} + b,  (i, f, ĉ, o) from z_t,
        c̃_t = f ⊙ c_{t−1} + i ⊙ ĉ,                                              (cw-lstm)

    and the unit clock k_t decides what an idle module keeps (cwlstm-targets):

    * ``"c"``:  c_t = k ⊙ c̃_t + (1 − k) ⊙ c_{t−1},  h_t = o ⊙ tanh(c_t)
    * ``"h"``:  c_t = c̃_t,  h_t = k ⊙ o ⊙ tanh(c̃_t) + (1 − k) ⊙ h_{t−1}
    * ``"ch"``: both of the above: the idle module is frozen
    * ``"i"``:  c_t = f ⊙ c_{t−1} + (k ⊙ i) ⊙ ĉ,  h_t = o ⊙ tanh(c_t)  (the input gate closed,
      i_t := 0, not copied from t − 1)

    Real skipping (``mode="sliced"``, the default) computes, for an idle module, only the
    gates its target still needs: none for ``"ch"``, o for ``"c"``, f and o for ``"i"``,
    i, f and ĉ for ``"h"``; a ticking module computes all four. Both parts of a gate, the
    recurrent product and the input projection, are computed for those rows only (the
    input projection once per pattern of ticks, over all its steps). ``mode="masked"`` computes
    everything and then applies the equations above as written.

    Gate order and layout are torch's (i, f, g, o): ``weight_ih`` (4H, d_x), ``weight_hh``
    (4H, H), one ``bias`` (4H) whose forget part starts at ``forget_bias`` (2, as the
    source). With every period 1 and ``"bi"`` every target is the plain LSTM.
    ``forward(x, state=None, t0=0, mode="sliced")`` takes x (B, L, d_x) and a state
    ``(h0, c0)`` of (B, H) tensors, and returns ``(y, h_all, (h_L, c_L))``.
    """

    def __init__(
        self,
        d_x: int,
        H: int,
        d_y: int,
        periods: Sequence[int],
        skip_target: str = "c",
        connectivity: str = "uni",
        forget_bias: float = 2.0,
    ):
        check_choice(connectivity, "connectivity", ("uni", "bi"))
        super().__init__(d_x, H, periods, connectivity)
        check_positive_int(d_y, "d_y")
        check_choice(skip_target, "skip_target", SKIP_TARGETS)
        if isinstance(forget_bias, bool) or not isinstance(forget_bias, int | float):
            raise ValueError(f"forget_bias must be a number, got {forget_bias!r}")
        self.skip_target, self.forget_bias = skip_target, float(forget_bias)
        self.weight_ih = nn.Parameter(torch.empty(4 * H, d_x))  # [W_i; W_f; W_g; W_o]
        self.weight_hh = nn.Parameter(torch.empty(4 * H, H))  # [U_i; U_f; U_g; U_o], masked
        self.bias = nn.Parameter(torch.zeros(4 * H))
        self.register_buffer("mask4", self.mask.repeat(4, 1), persistent=False)
        self.readout = nn.Linear(H, d_y)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal weights per gate matrix, std 1/sqrt(fan_in + fan_out); masked ones zero;
        bias 0 but the forget gate's, ``forget_bias``."""
        H = self.hidden_size
        with torch.no_grad():
            for gate in range(4):  # per gate matrix (n_x × H, H × H), not the stacked one
                _normal_init_(self.weight_ih[gate * H : (gate + 1) * H])
                _normal_init_(self.weight_hh[gate * H : (gate + 1) * H])
            self.weight_hh.mul_(self.mask4)
            self.bias.zero_()
            self.bias[H : 2 * H] = self.forget_bias

    def n_parameters(self) -> int:
        """Trainable numbers, masked recurrent weights left out."""
        total = sum(p.numel() for p in self.parameters())
        return total - int((self.mask4 == 0).sum())

    def forward(self, x: torch.Tensor, state=None, t0: int = 0, mode="sliced"):
        _check_inputs(self, x, t0, mode)
        B, L, _ = x.shape
        H = self.hidden_size
        if state is None:
            h, c = x.new_zeros(B, H), x.new_zeros(B, H)
        else:
            if not isinstance(state, tuple | list) or len(state) != 2:
                raise ValueError(f"state must be a pair (h0, c0), got {type(state).__name__}")
            h, c = state
            _check_state(h, "h0", B, H)
            _check_state(c, "c0", B, H)
        W = self.weight_hh * self.mask4  # (4H, H)
        x = x.transpose(0, 1)  # (L, B, d_x)
        states = []
        if mode == "masked":
            x_proj = nn.functional.linear(x, self.weight_ih, self.bias)  # (L, B, 4H), all gates
            unit_clock = self.unit_clock(L, t0)  # (L, H)
            for t, x_t in enumerate(x_proj.unbind(0)):
                h, c = self._masked_step(x_t, h, c, W, unit_clock[t])
                states.append(h)
        else:
            for block, parts in self._sliced_context(x, W, t0):
                h, c = self._sliced_step(block, parts, h, c)
                states.append(h)
        h_all = torch.stack(states)  # (L, B, H)
        return _read_out(self.readout, h_all), h_all.transpose(0, 1), (h, c)

    # compute-then-mask: the equations as written

    def _masked_step(self, x_t, h, c, W, unit_clock):
        k = unit_clock.to(x_t)  # (H,)
        i, f, g, o = (x_t + h @ W.T).chunk(4, dim=-1)  # (cw-lstm)
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        if self.skip_target == "i":
            c = f * c + (k * i) * g
            return o * torch.tanh(c), c
        c_candidate = f * c + i * g
        if self.skip_target == "h":
            return skip_update(o * torch.tanh(c_candidate), h, k), c_candidate
        if self.skip_target == "c":
            c = skip_update(c_candidate, c, k)
            return o * torch.tanh(c), c
        return skip_update(o * torch.tanh(c_candidate), h, k), skip_update(c_candidate, c, k)

    # real skipping: per run of modules, only the gates it needs

    def _sliced_context(self, x, W, t0):
        """For each step of the window, the product it needs and how it splits into gates.

        Steps with the same pattern of runs need the same rows of ``W`` and of ``W_x`` (the
        gates of the ticking runs, and those of the idle runs that their target still
        needs): they are gathered once per pattern (one node for autograd each, so the
        gradients of all steps add up in these small blocks), and the input projection of
        those rows is one product over all the pattern's steps, ``x_t W_x[rows]ᵀ + b[rows]``.
        Returns, per step, ``(block, parts)`` with ``block = (x̂_t[rows], sources, W_block,
        pieces)`` (None when nothing is computed) and ``parts`` the runs' layout."""
        L, H = x.shape[0], self.hidden_size
        patterns: dict = {}
        order = []  # (pattern, position among the pattern's steps) per step
        for t, runs in enumerate(module_runs(self.periods, L, t0)):
            if runs not in patterns:
                patterns[runs] = self._pattern(runs, H) + ([],)
            at = patterns[runs][2]
            order.append((runs, len(at)))
            at.append(t)
        blocks = {}
        for runs, (rows, parts, at) in patterns.items():
            block = None
            if rows is not None:
                rows, sources, pieces = rows
                rows = rows.to(W.device)
                steps = torch.tensor(at, device=x.device)
                x_rows = nn.functional.linear(  # (n_steps, B, n_rows): only the needed rows
                    x.index_select(0, steps), self.weight_ih[rows], self.bias[rows]
                )
                block = (x_rows, sources, W[:, sources].index_select(0, rows), pieces)
            blocks[runs] = (block, parts)
        steps = []
        for runs, i in order:
            block, parts = blocks[runs]
            if block is not None:  # this step's row of the pattern's input projection
                x_rows, *rest = block
                block = (x_rows[i], *rest)
            steps.append((block, parts))
        return steps

    def _pattern(self, runs, H):
        """The gate rows one pattern of runs needs, the columns they read, the split of the
        product into sigmoid and tanh pieces, and each run's layout."""
        k = self.module_size
        rows, parts, pieces, first_source = [], [], [], H
        for first, end, ticks in runs:
            gates = TICKING_GATES if ticks else IDLE_GATES[self.skip_target]
            n = (end - first) * k
            for q in gates:
                rows.append(torch.arange(GATES[q] * H + first * k, GATES[q] * H + end * k))
            n_sigmoid = sum(q != "g" for q in gates)
            pieces += [n_sigmoid * n] if n_sigmoid else []
            pieces += [n] if "g" in gates else []
            if gates:
                first_source = min(first_source, self._first_source(first))
            parts.append((ticks, n, n_sigmoid, "g" in gates))
        if not rows:
            return None, tuple(parts)
        return (torch.cat(rows), slice(first_source, H), tuple(pieces)), tuple(parts)

    def _sliced_step(self, block, parts, h, c):
        if block is not None:  # one product for the gates of every run at this step
            x_rows, sources, W_block, pieces = block
            z = torch.addmm(x_rows, h[:, sources], W_block.T)
            z = iter(z.split(pieces, dim=1))
        if len(parts) == 1:
            h_runs, c_runs = (h,), (c,)
        else:
            widths = [n for _, n, _, _ in parts]
            h_runs, c_runs = h.split(widths, dim=1), c.split(widths, dim=1)
        h_parts, c_parts = [], []
        for (ticks, _, n_sigmoid, has_g), h_prev, c_prev in zip(parts, h_runs, c_runs):
            gates = torch.sigmoid(next(z)).chunk(n_sigmoid, dim=1) if n_sigmoid else ()
            g = torch.tanh(next(z)) if has_g else None
            if ticks:  # an ordinary LSTM step for these modules: gates (i, f, o), g
                i, f, o = gates
                c_new = torch.addcmul(f * c_prev, i, g)
                h_new = o * torch.tanh(c_new)
            elif self.skip_target == "c":  # the frozen cell, read through today's output gate
                (o,) = gates
                c_new, h_new = c_prev, o * torch.tanh(c_prev)
            elif self.skip_target == "i":  # input gate closed: the cell only decays
                f, o = gates
                c_new = f * c_prev
                h_new = o * torch.tanh(c_new)
            elif self.skip_target == "h":  # the cell integrates in the background
                i, f = gates
                c_new, h_new = torch.addcmul(f * c_prev, i, g), h_prev
            else:  # "ch": frozen, nothing computed
                h_new, c_new = h_prev, c_prev
            h_parts.append(h_new)
            c_parts.append(c_new)
        if len(h_parts) == 1:
            return h_parts[0], c_parts[0]
        return torch.cat(h_parts, dim=1), torch.cat(c_parts, dim=1)

    def extra_repr(self) -> str:
        return (
            f"d_x={self.input_size}, H={self.hidden_size}, periods={self.periods}, "
            f"skip_target={self.skip_target!r}, connectivity={self.connectivity!r}"
        )


class ClockworkLM(nn.Module):
    """A word-level language model: an embedding, a Clockwork core, its read-out over words.

    ``cell="rnn"`` takes a :class:`CWRNN`, ``cell="lstm"`` a :class:`CWLSTM` with
    ``skip_target``. ``forward(tokens, state=None)`` takes ids (B, L) and returns
    ``(logits, state_L)``, logits (B, L, V). The clock restarts at every call (t0 = 0: all
    modules tick at the window's first word), while the state is carried from window to
    window by the caller (``rnnbook.train.tbptt_loop``).
    """

    def __init__(
        self,
        vocab_size: int,
        H: int,
        periods: Sequence[int],
        connectivity: str = "uni",
        cell: str = "rnn",
        skip_target: str = "c",
        embedding: int | None = None,
    ):
        super().__init__()
        check_positive_int(vocab_size, "vocab_size")
        check_choice(cell, "cell", ("rnn", "lstm"))
        embedding = H if embedding is None else embedding
        self.embedding = nn.Embedding(vocab_size, embedding)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        if cell == "rnn":
            self.core = CWRNN(embedding, H, vocab_size, periods, connectivity=connectivity)
        else:
            self.core = CWLSTM(
                embedding,
                H,
                vocab_size,
                periods,
                skip_target,
                connectivity=connectivity,
            )

    def forward(self, tokens: torch.Tensor, state=None):
        check_tensor(tokens, "tokens", ndim=2)
        logits, _, state_L = self.core(self.embedding(tokens), state)
        return logits, state_L
