"""The Clockwork RNN and LSTM: the clock, idle modules, real skipping, and their limits.

Sliced (real skipping) and masked paths are different computations of the same numbers,
so they are compared within a few ulp; an idle module's state is a copy, compared bitwise.
"""

import pytest
import torch
from torch import nn
from torch.autograd.function import once_differentiable

from rnnbook.models.clockwork import (
    CWLSTM,
    CWRNN,
    GATES,
    IDLE_GATES,
    ClockworkLM,
    _projection_groups,
    _read_out,
    module_runs,
    recurrent_share,
)
from rnnbook.models.lstm import LSTMCell
from rnnbook.models.recurrent import Recurrent
from rnnbook.models.srn import SRNCell
from rnnbook.skip import clock, lcm, update_rate, window_update_rate
from rnnbook.testing import assert_close_ulps

F64 = torch.float64


def _x(B=3, L=40, d_x=2, seed=0):
    return torch.randn(B, L, d_x, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _cwrnn(periods, H=16, connectivity="uni", seed=0, **kw):
    torch.manual_seed(seed)
    return CWRNN(2, H, 3, periods, connectivity=connectivity, **kw).double()


@pytest.mark.parametrize("mode", ["sliced", "masked"])
@pytest.mark.parametrize("periods, t0", [((1, 2, 4, 8), 0), ((1, 2, 4, 8), 3), ((1, 2, 3, 5), 7)])
def test_a_module_updates_exactly_when_its_clock_ticks_and_is_copied_otherwise(periods, t0, mode):
    model = _cwrnn(periods)
    _, h, _ = model(_x(), t0=t0, mode=mode)
    ticks = clock(periods, 40, t0)
    k = model.module_size
    for t in range(1, 40):
        for m in range(4):
            units = slice(m * k, (m + 1) * k)
            same = torch.equal(h[:, t, units], h[:, t - 1, units])
            if ticks[t, m]:
                assert not same, (t, m)  # it updated
            else:
                assert same, (t, m)  # a copy, bit for bit


PERIOD_SETS = [(1, 2, 4, 8), (1, 2, 3, 4), (1, 1, 2, 4), (2, 2, 4, 4), (3, 5, 5, 7)]


@pytest.mark.parametrize("periods", PERIOD_SETS)
@pytest.mark.parametrize("connectivity", ["uni", "bi"])
@pytest.mark.parametrize("activation", ["tanh", "linear"])
def test_real_skipping_computes_what_compute_then_mask_computes(periods, connectivity, activation):
    model = _cwrnn(periods, connectivity=connectivity, activation=activation)
    with torch.no_grad():
        model.bias.uniform_(-1, 1)
    x = _x().requires_grad_()
    h0 = torch.randn(3, 16, dtype=F64, generator=torch.Generator().manual_seed(1))
    h0.requires_grad_()
    results = {}
    for mode in ("sliced", "masked"):
        y, h, h_L = model(x, h0, t0=2, mode=mode)
        loss = (y**2).sum() + h_L.sum()  # gradients from every output and from the last state
        results[mode] = (y, h, h_L, *torch.autograd.grad(loss, [x, h0, *model.parameters()]))
    for k, (sliced, masked) in enumerate(zip(results["sliced"], results["masked"])):
        assert_close_ulps(sliced, masked, ulps=8 if k < 3 else 64)  # gradients: sums over steps


@pytest.mark.parametrize(
    "periods, connectivity", [((1, 2, 4), "uni"), ((1, 2, 3), "bi"), ((2, 3, 3), "uni")]
)
def test_the_hand_written_backward_of_real_skipping_passes_gradcheck(periods, connectivity):
    model = _cwrnn(periods, H=6, connectivity=connectivity)
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in model.parameters()]
    x = _x(B=2, L=7).requires_grad_()
    h0 = torch.randn(2, 6, dtype=F64, requires_grad=True)

    def outputs(x, h0, *params):
        state = dict(zip(names, params))
        return torch.func.functional_call(model, state, (x, h0), {"t0": 1})[0]

    assert torch.autograd.gradcheck(outputs, (x, h0, *params))


def test_an_idle_module_is_not_computed_at_all():
    """Poison the slowest module's rows: it never ticks in this window, so real skipping
    never reads them, while compute-then-mask multiplies them and 0 · NaN is NaN."""
    model = _cwrnn((1, 2, 4, 8))
    with torch.no_grad():
        model.weight_hh[12:16] = float("nan")  # the rows (destinations) of module 3, T = 8
        model.weight_ih[12:16] = float("nan")  # and its input projection
        model.bias[12:16] = float("nan")
    x = _x(L=7)
    assert torch.isfinite(model(x, t0=1, mode="sliced")[0]).all()  # steps 1..7: no tick
    assert torch.isnan(model(x, t0=1, mode="masked")[0]).any()
    assert torch.isnan(model(x, t0=0, mode="sliced")[0]).any()  # t = 0: it ticks


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_idle_input_projections_are_not_computed(cell):
    """Count the forward pass's multiply-adds with the input as wide as the state: real
    skipping does the ticking modules' share of the input projection too, not all of it."""
    from torch.utils.flop_counter import FlopCounterMode

    periods, H, L, B = (1, 2, 4, 8), 32, 16, 2
    torch.manual_seed(0)
    if cell == "rnn":
        model = CWRNN(H, H, 1, periods).double()
        gates = {"tick": 1, "idle": 0}
    else:
        model = CWLSTM(H, H, 1, periods, skip_target="ch").double()
        gates = {"tick": 4, "idle": 0}
    x = _x(B=B, L=L, d_x=H)
    ticks = int(clock(periods, L).sum()) * (H // 4)  # unit updates in the window
    input_macs = B * H * ticks * gates["tick"]  # each ticking unit's gates read all d_x = H
    recurrent_macs = B * H * ticks * gates["tick"]  # at most every column
    readout_macs = B * L * H
    counted = {}
    for mode in ("sliced", "masked"):
        with FlopCounterMode(display=False) as counter:
            model(x, mode=mode)
        counted[mode] = counter.get_total_flops() // 2  # multiply-adds
    assert counted["sliced"] <= input_macs + recurrent_macs + readout_macs
    dense_input = B * L * H * H * gates["tick"]
    assert counted["masked"] >= dense_input + readout_macs  # compute-then-mask: all of it
    assert counted["sliced"] < 0.6 * counted["masked"]


def test_masked_weights_stay_zero_and_get_no_gradient():
    model = _cwrnn((1, 2, 4, 8))
    y, _, _ = model(_x())
    y.sum().backward()
    assert (model.weight_hh[model.mask == 0] == 0).all()
    assert (model.weight_hh.grad[model.mask == 0] == 0).all()


@pytest.mark.parametrize("mode", ["sliced", "masked"])
def test_all_periods_one_and_dense_connections_is_the_srn(mode):
    model = _cwrnn((1, 1, 1, 1), connectivity="bi")
    with torch.no_grad():
        model.bias.uniform_(-1, 1)
    cell = SRNCell(2, 16).double()
    with torch.no_grad():
        cell.weight_ih.copy_(model.weight_ih)
        cell.weight_hh.copy_(model.weight_hh)
        cell.bias_ih.copy_(model.bias)
        cell.bias_hh.zero_()
    x = _x()
    h, _ = Recurrent(cell)(x)
    h_cw = model(x, mode=mode)[1]
    assert_close_ulps(h_cw, h)
    weights = lambda net: [net.weight_ih, net.weight_hh]  # noqa: E731
    ours = torch.autograd.grad((h_cw**2).sum(), weights(model))
    theirs = torch.autograd.grad((h**2).sum(), weights(cell))
    for a, b in zip(ours, theirs):
        assert_close_ulps(a, b, ulps=64)
    rnn = nn.RNN(2, 16, batch_first=True).double()  # and torch's
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(model.weight_ih)
        rnn.weight_hh_l0.copy_(model.weight_hh)
        rnn.bias_ih_l0.copy_(model.bias)
        rnn.bias_hh_l0.zero_()
    torch.testing.assert_close(h_cw, rnn(x)[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["sliced", "masked"])
def test_a_clock_started_at_the_lcm_is_a_clock_started_at_zero(mode):
    periods = (1, 2, 3, 4)
    model = _cwrnn(periods)
    lstm = CWLSTM(2, 16, 3, periods).double()
    x = _x()
    for net in (model, lstm):  # the same schedule, so the same computation: bitwise
        assert torch.equal(net(x, t0=lcm(periods), mode=mode)[0], net(x, t0=0, mode=mode)[0])
        assert not torch.equal(net(x, t0=1, mode=mode)[0], net(x, t0=0, mode=mode)[0])


def test_the_update_rate_of_a_clockwork_model_is_its_window_rate():
    model = _cwrnn((1, 2, 4, 8))
    decisions = model.update_decisions(B=3, L=35, t0=5)
    assert decisions.shape == (3, 35, 16)
    assert update_rate(decisions) == pytest.approx(window_update_rate((1, 2, 4, 8), 35, 5))


def test_module_runs_are_a_prefix_when_periods_divide_each_other():
    for runs in module_runs((1, 2, 4, 8, 16, 32, 64, 128), 256, t0=3):
        ticking = [(first, end) for first, end, ticks in runs if ticks]
        assert len(ticking) == 1 and ticking[0][0] == 0
    assert module_runs((1, 2, 4), 2) == (((0, 3, True),), ((0, 1, True), (1, 3, False)))
    # (1, 2, 3, 4, 5) at t = 10: modules T = 1, 2, 5 tick, two runs
    assert module_runs((1, 2, 3, 4, 5), 11)[10] == ((0, 2, True), (2, 4, False), (4, 5, True))
    assert module_runs((2, 4), 2, t0=1)[0] == ((0, 2, False),)  # nobody ticks
    assert module_runs((1, 2, 3), 20, t0=6) == module_runs((1, 2, 3), 20, t0=0)


def test_recurrent_share_of_real_skipping():
    periods = (1, 2, 4, 8, 16, 32, 64, 128)
    # with dense connections a ticking module reads every column: the update rate
    assert recurrent_share(periods, 256, "bi") == pytest.approx(window_update_rate(periods, 256))
    # uni: module m reads M - m of the M modules; 1..128 over 256 steps is 0.219 of the SRN's
    expected = sum((256 // T) * (8 - m) for m, T in enumerate(periods)) / (256 * 64)
    assert recurrent_share(periods, 256, "uni") == pytest.approx(expected)
    assert round(expected, 3) == 0.219


@pytest.mark.parametrize(
    "build, count",
    [
        (lambda: CWRNN(1, 64, 1, (1, 2, 4, 8, 16, 32, 64, 128)), 2_497),
        (lambda: CWRNN(1, 64, 1, (1, 4, 16, 64)), 2_753),
        (lambda: CWRNN(7, 15, 7, (1, 2, 4, 8, 12)), 367),
        (lambda: CWRNN(1, 64, 1, (1,) * 8, connectivity="bi"), 4_289),  # = the SRN's
        (lambda: CWLSTM(1, 64, 1, (1,) * 4, connectivity="bi"), 16_961),  # = the LSTM's
        (lambda: CWRNN(7, 15, 7, (1,) * 5, connectivity="bi"), 457),  # the Reber SRN
        (lambda: CWLSTM(7, 15, 7, (1,) * 5, connectivity="bi"), 1_492),  # the Reber LSTM
    ],
)
def test_parameter_counts_of_the_source(build, count):
    assert build().n_parameters() == count


def _lstm_pair(skip_target, connectivity="bi", periods=(1, 1, 1, 1)):
    torch.manual_seed(0)
    model = CWLSTM(2, 16, 3, periods, skip_target=skip_target, connectivity=connectivity).double()
    with torch.no_grad():  # random biases, so that every gate matters
        model.bias.uniform_(-1, 1)
    cell = LSTMCell(2, 16).double()
    with torch.no_grad():
        cell.weight_ih.copy_(model.weight_ih)
        cell.weight_hh.copy_(model.weight_hh * model.mask4)
        cell.bias_ih.copy_(model.bias)
        cell.bias_hh.zero_()
    return model, cell


@pytest.mark.parametrize("mode", ["sliced", "masked"])
@pytest.mark.parametrize("skip_target", ["c", "h", "ch", "i"])
def test_every_skip_target_with_periods_one_is_the_lstm(skip_target, mode):
    model, cell = _lstm_pair(skip_target)
    x = _x()
    _, h, (h_L, c_L) = model(x, mode=mode)
    h_ref, (h_n, c_n) = Recurrent(cell)(x)
    assert_close_ulps(h, h_ref)
    assert_close_ulps(c_L, c_n[0])
    torch_lstm = nn.LSTM(2, 16, batch_first=True).double()
    with torch.no_grad():
        torch_lstm.weight_ih_l0.copy_(cell.weight_ih)
        torch_lstm.weight_hh_l0.copy_(cell.weight_hh)
        torch_lstm.bias_ih_l0.copy_(cell.bias_ih)
        torch_lstm.bias_hh_l0.zero_()
    torch.testing.assert_close(h, torch_lstm(x)[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["sliced", "masked"])
def test_the_four_targets_agree_with_periods_one_and_the_uni_mask(mode):
    outputs = {t: _lstm_pair(t, "uni")[0](_x(), mode=mode)[1] for t in ("c", "h", "ch", "i")}
    for target in ("h", "ch", "i"):
        assert_close_ulps(outputs[target], outputs["c"])


@pytest.mark.parametrize("mode", ["sliced", "masked"])
@pytest.mark.parametrize("skip_target", ["c", "h", "ch", "i"])
def test_what_an_idle_module_keeps(skip_target, mode):
    periods = (1, 4)
    torch.manual_seed(1)
    model = CWLSTM(2, 8, 3, periods, skip_target=skip_target).double()
    x = _x(L=6)
    hs, cs, state = [], [], None
    for t in range(6):  # one step at a time, with the clock's time as t0
        _, h, state = model(x[:, t : t + 1], state, t0=t, mode=mode)
        hs.append(state[0])
        cs.append(state[1])
    slow = slice(4, 8)  # module 1 (period 4) is idle at t = 1, 2, 3, 5
    for t in (1, 2, 3, 5):
        h_same = torch.equal(hs[t][:, slow], hs[t - 1][:, slow])
        c_same = torch.equal(cs[t][:, slow], cs[t - 1][:, slow])
        assert h_same == (skip_target in ("h", "ch")), t
        assert c_same == (skip_target in ("c", "ch")), t
    if skip_target == "i":  # the cell only decays: c_t = f_t ⊙ c_{t-1} on an idle step
        W = model.weight_hh * model.mask4
        z = x[:, 1] @ model.weight_ih.T + model.bias + hs[0] @ W.T
        f = torch.sigmoid(z[:, 8:16])
        assert_close_ulps(cs[1][:, slow], (f * cs[0])[:, slow])


@pytest.mark.parametrize("periods", PERIOD_SETS)
@pytest.mark.parametrize("connectivity", ["uni", "bi"])
@pytest.mark.parametrize("skip_target", ["c", "h", "ch", "i"])
def test_real_skipping_in_the_lstm_computes_what_compute_then_mask_computes(
    periods, connectivity, skip_target
):
    torch.manual_seed(0)
    model = CWLSTM(2, 16, 3, periods, skip_target, connectivity).double()
    with torch.no_grad():
        model.bias.uniform_(-1, 1)
    x = _x(L=30).requires_grad_()
    g = torch.Generator().manual_seed(1)
    state = tuple(torch.randn(3, 16, dtype=F64, generator=g) for _ in range(2))
    results = {}
    for mode in ("sliced", "masked"):
        y, h, (h_L, c_L) = model(x, state, t0=1, mode=mode)
        loss = (y**2).sum() + c_L.sum()
        results[mode] = (y, h, h_L, c_L, *torch.autograd.grad(loss, [x, *model.parameters()]))
    for k, (sliced, masked) in enumerate(zip(results["sliced"], results["masked"])):
        assert_close_ulps(sliced, masked, ulps=8 if k < 4 else 64)  # gradients: sums over steps


@pytest.mark.parametrize("skip_target", ["c", "h", "ch", "i"])
def test_an_idle_lstm_module_computes_only_the_gates_its_target_needs(skip_target):
    """Poison the rows of the gates the target does not need, in the slowest module: real
    skipping never reads them while the module is idle; compute-then-mask does."""
    model = CWLSTM(2, 16, 3, (1, 2, 4, 8), skip_target).double()
    H, slow = 16, torch.arange(12, 16)
    with torch.no_grad():
        for gate, q in GATES.items():
            if gate not in IDLE_GATES[skip_target]:
                model.weight_hh[q * H + slow] = float("nan")
                model.weight_ih[q * H + slow] = float("nan")  # and the input projection
                model.bias[q * H + slow] = float("nan")
    x = _x(L=7)
    assert torch.isfinite(model(x, t0=1, mode="sliced")[0]).all()  # module 3 idle throughout
    assert torch.isnan(model(x, t0=1, mode="masked")[0]).any()


def test_the_forget_bias_starts_at_two():
    model = CWLSTM(3, 8, 2, (1, 2))
    assert (model.bias[8:16] == 2).all() and (model.bias[:8] == 0).all()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: CWRNN(2, 10, 1, (1, 2, 4)), "equal modules"),
        (lambda: CWRNN(2, 8, 1, (4, 2)), "not decrease"),
        (lambda: CWRNN(2, 8, 1, (1, 2), connectivity="dense"), "connectivity"),
        (lambda: CWRNN(2, 8, 1, (1, 2), activation="relu"), "activation"),
        (lambda: CWLSTM(2, 8, 1, (1, 2), skip_target="o"), "skip_target"),
        (lambda: CWRNN(2, 8, 1, (1, 2))(torch.zeros(3, 5, 4)), "input size"),
        (lambda: CWRNN(2, 8, 1, (1, 2))(torch.zeros(3, 5)), "x"),
        (lambda: CWRNN(2, 8, 1, (1, 2))(torch.zeros(3, 5, 2), t0=-2), "t0"),
        (lambda: CWRNN(2, 8, 1, (1, 2))(torch.zeros(3, 5, 2), mode="fast"), "mode"),
        (lambda: CWRNN(2, 8, 1, (1, 2))(torch.zeros(3, 5, 2), torch.zeros(2, 8)), "h0"),
        (lambda: CWRNN(2, 8, 1, (1, 2.0)), "positive integer"),
        (lambda: CWRNN(2, 8, 1, (0, 2)), "positive integer"),
        (lambda: CWRNN(2, 8, 1, (True, 2)), "positive integer"),
        (lambda: CWRNN(2, 8, 1, ()), "at least one module"),
        (lambda: CWRNN(2, 8, 1, (1, 2))(torch.zeros(3, 0, 2)), "at least one time step"),
        (lambda: CWLSTM(2, 10, 1, (1, 2, 4)), "equal modules"),
        (lambda: CWLSTM(2, 8, 1, (1, 2), connectivity="full"), "connectivity"),
        (lambda: CWLSTM(2, 8, 1, (1, 2), forget_bias="2"), "forget_bias"),
        (lambda: CWLSTM(2, 8, 1, (1, 2))(torch.zeros(3, 5, 3)), "input size"),
        (lambda: CWLSTM(2, 8, 1, (1, 2))(torch.zeros(3, 5, 2), mode="fast"), "mode"),
        (lambda: CWLSTM(2, 8, 1, (1, 2))(torch.zeros(3, 5, 2), torch.zeros(3, 8)), "pair"),
        (
            lambda: CWLSTM(2, 8, 1, (1, 2))(torch.zeros(3, 5, 2), (torch.zeros(3, 8),) * 2, t0=0.5),
            "t0",
        ),
        (
            lambda: CWLSTM(2, 8, 1, (1, 2))(
                torch.zeros(3, 5, 2), (torch.zeros(3, 8), torch.zeros(3, 4))
            ),
            "c0",
        ),
        (lambda: module_runs((1, 2), 0), "L"),
        (lambda: recurrent_share((1, 2), 5, "dense"), "connectivity"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_the_language_model_carries_its_state_across_windows(cell):
    torch.manual_seed(0)
    model = ClockworkLM(50, 10, (1, 2), cell=cell).double()
    tokens = torch.randint(0, 50, (2, 7))
    logits, state = model(tokens)
    assert logits.shape == (2, 7, 50)
    again, _ = model(tokens, state)
    assert not torch.equal(again, logits)  # the carried state matters


# --- the unit-major rewrite (issue #32) against a frozen copy of the code it replaced -----------
# FROZEN REFERENCE: the sliced path's autograd Function and its call as they were before the
# states became unit-major and the narrow read-out moved inside. Not used by the package;
# edit it only to follow an intended change of behaviour, never to make the test below pass.


class _FrozenClockedRecurrence(torch.autograd.Function):
    """FROZEN REFERENCE (not the package's code): ``_ClockedRecurrence`` as it was before
    issue #32, batch-major states, kept verbatim to check the unit-major rewrite against.

    (cw-rnn) over a window, computing only the ticking runs of modules, with BPTT by hand.

    Inputs: ``x`` (L, B, d_x), the inputs in time-major order; ``weight_ih`` (H, d_x) and
    ``bias`` (H,), the input part ``W_x x_t + b``; ``h0`` (B, H); ``W`` (H, H), the masked
    recurrent matrix ``W[destination, source]``; ``plan``, the slices of every step;
    ``groups``, the modules that tick together and when (:func:`_projection_groups`);
    ``tanh``, the activation (else linear). Returns the states (L, B, H).

    Real skipping (cw-sliced) on both sides of the recurrence: a module's input part is
    computed only at its ticks (one product per group of modules), its recurrent part only
    at its ticks, and in the backward pass each weight gradient only where the module ticked
    and the mask keeps weights. The input part lives inside the function so that autograd
    never sees a partly filled (L, B, H) tensor (assigning into one would make the backward
    pass copy the whole gradient once per group).
    """

    @staticmethod
    def forward(ctx, x, weight_ih, bias, h0, W, plan, groups, tanh):
        steps, _, _ = plan
        L, B, _ = x.shape
        # W_x x_t + b for every module at its ticks; entries of idle steps are never read
        x_proj = x.new_empty(L, B, W.shape[0])
        for rows, ticks_at in groups:
            if len(ticks_at) == L:  # ticks at every step
                x_proj[:, :, rows] = nn.functional.linear(x, weight_ih[rows], bias[rows])
            elif ticks_at:
                at = torch.tensor(ticks_at, device=x.device)
                x_at = x.index_select(0, at)
                x_proj[at, :, rows] = nn.functional.linear(x_at, weight_ih[rows], bias[rows])
        states = torch.empty_like(x_proj)  # (L, B, H)
        h_prev = h0
        for t, x_t in enumerate(x_proj):
            h = states[t]  # (B, H), filled in place: no autograd inside
            for rows, sources, ticks in steps[t]:
                if ticks:  # (cw-sliced): only these rows, against the columns they read
                    a = torch.addmm(x_t[:, rows], h_prev[:, sources], W[rows, sources].T)
                    h[:, rows] = a.tanh_() if tanh else a  # (B, n)
                else:  # (skip-update) with b = 0: a copy
                    h[:, rows] = h_prev[:, rows]
            h_prev = h
        ctx.save_for_backward(x, weight_ih, h0, W, states)
        ctx.plan, ctx.groups, ctx.tanh = plan, groups, tanh
        return states

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_states):
        x, weight_ih, h0, W, states = ctx.saved_tensors
        steps, blocks, k = ctx.plan
        L = states.shape[0]
        # δ_t = dLoss/da_t, written (and read) only where a module ticks: 0 elsewhere
        grad_a = torch.empty_like(states)  # (L, B, H)
        grad_h = torch.zeros_like(h0)  # (B, H) g_t = dLoss/dh_t, carried back in time
        for t in range(L - 1, -1, -1):
            grad_h += grad_states[t]
            ticking = [(rows, sources) for rows, sources, ticks in steps[t] if ticks]
            if not ticking:
                continue  # every module copied: the gradient passes unchanged
            for rows, _ in ticking:
                if ctx.tanh:
                    h = states[t, :, rows]
                    grad_a[t, :, rows] = grad_h[:, rows] * (1 - h * h)
                else:
                    grad_a[t, :, rows] = grad_h[:, rows]
                grad_h[:, rows] = 0  # a ticking unit did not copy h_{t-1}
            for rows, sources in ticking:  # (cw-bptt)
                grad_h[:, sources].addmm_(grad_a[t, :, rows], W[rows, sources])
        grad_W = None
        if ctx.needs_input_grad[4]:
            # (cw-grad): module m's rows, the columns it reads, summed over its ticks at once
            grad_W = torch.zeros_like(W)
            for rows, sources, ticks_at in blocks:
                g, h_prev = grad_a[:, :, rows], states[:, :, sources]
                if ticks_at and ticks_at[0] == 0:  # h_{-1} is h0
                    grad_W[rows, sources] += g[0].T @ h0[:, sources]
                    ticks_at = ticks_at[1:]
                if not ticks_at:
                    continue
                if len(ticks_at) == L - 1:  # ticks at every step: no gather needed
                    g, h_prev = g[1:], h_prev[:-1]
                else:
                    at = torch.tensor(ticks_at, device=W.device)
                    g, h_prev = g.index_select(0, at), h_prev.index_select(0, at - 1)
                grad_W[rows, sources] += g.reshape(-1, k).T @ h_prev.reshape(-1, h_prev.shape[-1])
        # the input part: each group's rows, only at its ticks
        grad_x = torch.zeros_like(x) if ctx.needs_input_grad[0] else None
        grad_weight_ih = torch.zeros_like(weight_ih)
        grad_bias = grad_weight_ih.new_zeros(weight_ih.shape[0])
        for rows, ticks_at in ctx.groups:
            if not ticks_at:
                continue
            g, x_at = grad_a[:, :, rows], x  # (L, B, n), (L, B, d_x)
            if len(ticks_at) < L:
                at = torch.tensor(ticks_at, device=x.device)
                g, x_at = g.index_select(0, at), x.index_select(0, at)
            g2 = g.reshape(-1, g.shape[-1])  # (ticks * B, n)
            grad_weight_ih[rows] = g2.T @ x_at.reshape(-1, x.shape[-1])
            grad_bias[rows] = g2.sum(0)
            if grad_x is not None:
                gx = g @ weight_ih[rows]  # (ticks, B, d_x)
                if len(ticks_at) < L:
                    grad_x.index_add_(0, at, gx)
                else:
                    grad_x += gx
        return grad_x, grad_weight_ih, grad_bias, grad_h, grad_W, None, None, None


def _frozen_sliced_forward(model, x, h0, t0):
    """FROZEN REFERENCE: CWRNN.forward(mode="sliced") before issue #32, (y, h_all, h_L)."""
    L = x.shape[1]
    W = model.weight_hh * model.mask
    plan = model._plan(L, t0)
    groups = _projection_groups(model.periods, model.module_size, L, t0 % lcm(model.periods))
    states = _FrozenClockedRecurrence.apply(
        x.transpose(0, 1), model.weight_ih, model.bias, h0, W, plan, groups,
        model.activation == "tanh",
    )  # fmt: skip
    return _read_out(model.readout, states), states.transpose(0, 1), states[-1]


REWRITE_CASES = [((1, 2, 4, 8), 0), ((1, 2, 3, 4), 5), ((2, 2, 4, 4), 1), ((3, 5, 5, 7), 9)]


@pytest.mark.parametrize("periods, t0", [*REWRITE_CASES, ((1, 2, 3, 4, 5), 2)])
@pytest.mark.parametrize("connectivity", ["uni", "bi"])
@pytest.mark.parametrize("activation", ["tanh", "linear"])
@pytest.mark.parametrize("d_x", [1, "H"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("d_y", [2, 5])  # B = 3: the read-out inside the recurrence, and not
def test_the_unit_major_rewrite_computes_what_the_frozen_batch_major_code_computed(
    periods, t0, connectivity, activation, d_x, dtype, d_y
):
    H = 3 * len(periods)
    d_x = H if d_x == "H" else d_x
    torch.manual_seed(0)
    model = CWRNN(d_x, H, d_y, periods, connectivity=connectivity, activation=activation)
    model = model.to(dtype)
    with torch.no_grad():
        model.bias.uniform_(-1, 1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 30, d_x, generator=g, dtype=dtype).requires_grad_()
    h0 = torch.randn(3, H, generator=g, dtype=dtype).requires_grad_()
    results = {}
    for name, run in (
        ("new", lambda: model(x, h0, t0=t0)),
        ("frozen", lambda: _frozen_sliced_forward(model, x, h0, t0)),
    ):
        y, h, h_L = run()
        loss = (y**2).sum() + h_L.sum() + (h[:, 4] ** 2).sum()  # every output gets a gradient
        results[name] = (y, h, h_L, *torch.autograd.grad(loss, [x, h0, *model.parameters()]))
    for k, (new, frozen) in enumerate(zip(results["new"], results["frozen"])):
        assert new.shape == frozen.shape
        assert_close_ulps(new, frozen, ulps=8 if k < 3 else 64)  # gradients: sums over steps


@pytest.mark.parametrize("uses", ["y", "h_all", "h_L"])
def test_the_rewrite_agrees_when_only_one_output_is_used(uses):
    """The hand-written backward skips the parts of an output nobody uses (its gradient is
    None): each output alone, with an input that needs no gradient, still agrees."""
    torch.manual_seed(0)
    model = CWRNN(2, 12, 2, (1, 2, 3, 4)).double()
    x = _x(L=25)  # no gradient wanted
    h0 = torch.randn(3, 12, dtype=F64, generator=torch.Generator().manual_seed(1))
    grads = {}
    for name, run in (
        ("new", lambda: model(x, h0, t0=3)),
        ("frozen", lambda: _frozen_sliced_forward(model, x, h0, 3)),
    ):
        y, h, h_L = run()
        loss = {"y": (y**2).sum(), "h_all": (h**2).sum(), "h_L": h_L.sum()}[uses]
        grads[name] = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
    for new, frozen in zip(grads["new"], grads["frozen"]):
        if frozen is None or not frozen.any():  # the read-out, when only states are used
            assert new is None or not new.any()
        else:
            assert_close_ulps(new, frozen, ulps=64)
