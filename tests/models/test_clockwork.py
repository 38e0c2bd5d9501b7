"""The Clockwork RNN and LSTM: the clock, idle modules, real skipping, and their limits.

Sliced (real skipping) and masked paths are different computations of the same numbers,
so they are compared within a few ulp; an idle module's state is a copy, compared bitwise.
"""

import pytest
import torch
from torch import nn

from rnnbook.models.clockwork import CWLSTM, CWRNN
from rnnbook.models.lstm import LSTMCell
from rnnbook.models.recurrent import Recurrent
from rnnbook.models.srn import SRNCell
from rnnbook.skip import clock, lcm
from rnnbook.testing import assert_close_ulps

F64 = torch.float64


def _x(B=3, L=40, d_x=2, seed=0):
    return torch.randn(B, L, d_x, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _cwrnn(periods, H=16, connectivity="uni", seed=0, **kw):
    torch.manual_seed(seed)
    return CWRNN(2, H, 3, periods, connectivity=connectivity, **kw).double()


@pytest.mark.parametrize("t0", [0, 3])
def test_a_module_updates_exactly_when_its_clock_ticks_and_is_copied_otherwise(t0):
    periods = (1, 2, 4, 8)
    model = _cwrnn(periods)
    _, h, _ = model(_x(), t0=t0)
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


@pytest.mark.parametrize("periods", [(1, 2, 4, 8), (1, 2, 3, 4), (1, 1, 2, 4), (2, 2, 4, 4)])
@pytest.mark.parametrize("connectivity", ["uni", "bi"])
def test_real_skipping_computes_what_compute_then_mask_computes(periods, connectivity):
    model = _cwrnn(periods, connectivity=connectivity)
    x = _x()
    y_sliced, h_sliced, _ = model(x, mode="sliced")
    y_masked, h_masked, _ = model(x, mode="masked")
    assert_close_ulps(h_sliced, h_masked)
    assert_close_ulps(y_sliced, y_masked)
    g_sliced = torch.autograd.grad(y_sliced.sum(), model.weight_hh)[0]
    g_masked = torch.autograd.grad(model(x, mode="masked")[0].sum(), model.weight_hh)[0]
    assert_close_ulps(g_sliced, g_masked, ulps=64)  # a sum over 40 steps of 3 sequences


def test_masked_weights_stay_zero_and_get_no_gradient():
    model = _cwrnn((1, 2, 4, 8))
    y, _, _ = model(_x())
    y.sum().backward()
    assert (model.weight_hh[model.mask == 0] == 0).all()
    assert (model.weight_hh.grad[model.mask == 0] == 0).all()


def test_all_periods_one_and_dense_connections_is_the_srn():
    model = _cwrnn((1, 1, 1, 1), connectivity="bi")
    cell = SRNCell(2, 16).double()
    with torch.no_grad():
        cell.weight_ih.copy_(model.weight_ih)
        cell.weight_hh.copy_(model.weight_hh)
        cell.bias_ih.copy_(model.bias)
        cell.bias_hh.zero_()
    x = _x()
    assert_close_ulps(model(x)[1], Recurrent(cell)(x)[0])


def test_a_clock_started_at_the_lcm_is_a_clock_started_at_zero():
    periods = (1, 2, 3, 4)
    model = _cwrnn(periods)
    x = _x()
    assert torch.equal(model(x, t0=lcm(periods))[0], model(x, t0=0)[0])  # the same computation
    assert not torch.equal(model(x, t0=1)[0], model(x, t0=0)[0])


@pytest.mark.parametrize(
    "build, count",
    [
        (lambda: CWRNN(1, 64, 1, (1, 2, 4, 8, 16, 32, 64, 128)), 2_497),
        (lambda: CWRNN(1, 64, 1, (1, 4, 16, 64)), 2_753),
        (lambda: CWRNN(7, 15, 7, (1, 2, 4, 8, 12)), 367),
        (lambda: CWRNN(1, 64, 1, (1,) * 8, connectivity="bi"), 4_289),  # = the SRN's
        (lambda: CWLSTM(1, 64, 1, (1,) * 4, connectivity="bi"), 16_961),  # = the LSTM's
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


@pytest.mark.parametrize("skip_target", ["c", "h", "ch", "i"])
def test_every_skip_target_with_periods_one_is_the_lstm(skip_target):
    model, cell = _lstm_pair(skip_target)
    x = _x()
    _, h, (h_L, c_L) = model(x)
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


def test_the_four_targets_agree_with_periods_one_and_the_uni_mask():
    outputs = {t: _lstm_pair(t, "uni")[0](_x())[1] for t in ("c", "h", "ch", "i")}
    for target in ("h", "ch", "i"):
        assert_close_ulps(outputs[target], outputs["c"])


@pytest.mark.parametrize("skip_target", ["c", "h", "ch", "i"])
def test_what_an_idle_module_keeps(skip_target):
    periods = (1, 4)
    torch.manual_seed(1)
    model = CWLSTM(2, 8, 3, periods, skip_target=skip_target).double()
    x = _x(L=6)
    hs, cs, state = [], [], None
    for t in range(6):  # one step at a time, with the clock's time as t0
        _, h, state = model(x[:, t : t + 1], state, t0=t)
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
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_the_language_model_carries_its_state_across_windows(cell):
    from rnnbook.models.clockwork import ClockworkLM

    torch.manual_seed(0)
    model = ClockworkLM(50, 10, (1, 2), cell=cell).double()
    tokens = torch.randint(0, 50, (2, 7))
    logits, state = model(tokens)
    assert logits.shape == (2, 7, 50)
    again, _ = model(tokens, state)
    assert not torch.equal(again, logits)  # the carried state matters
