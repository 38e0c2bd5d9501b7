"""rnnbook.models.lstm: parity with nn.LSTM (spec lstm-gru §5.3 tests 1, 4-7), the peephole
LSTM, the DCM, forget_bias, record_gates and bad input."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from rnnbook.models.lstm import DCMCell, LSTMCell, record_gates
from rnnbook.models.recurrent import Recurrent
from rnnbook.testing import assert_close_ulps

# Spec lstm-gru §5.3: outputs and gradients agree to 1e-12 in float64 and 1e-6 in float32.
TOL = {torch.float64: 1e-12, torch.float32: 1e-6}
DTYPES = pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
# (d_x, d_h, T): the spec's sizes, a scalar input with a single step, and a wider cell.
SHAPES = pytest.mark.parametrize(
    "d_x, d_h, T", [(5, 4, 7), (1, 3, 1), (3, 8, 4)], ids=["spec", "scalar-T1", "wide"]
)
BATCHES = pytest.mark.parametrize("B", [1, 3])
GATES = ("input_gate", "forget_gate", "output_gate")


def _pair(d_x, d_h, dtype, seed=0, batch_first=True):
    """An nn.LSTM (torch's default init) and an LSTMCell holding the same weights."""
    torch.manual_seed(seed)
    ref = nn.LSTM(d_x, d_h, batch_first=batch_first).to(dtype)
    torch.manual_seed(seed + 100)  # a different init, so the copy is what makes them agree
    cell = LSTMCell(d_x, d_h).to(dtype).load_from_torch(ref)
    return ref, cell


def _inputs(B, T, d_x, d_h, dtype=torch.float64, seed=1):
    """A random input (B, T, d_x) and a random initial state h0, c0 (each (B, d_h))."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, d_x, generator=g, dtype=dtype)
    h0 = torch.randn(B, d_h, generator=g, dtype=dtype) * 0.5
    c0 = torch.randn(B, d_h, generator=g, dtype=dtype)
    return x, h0, c0


def _close(actual, expected, tol, msg=None):
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol, msg=msg)


def _same(actual, expected, msg=None):
    """Bitwise: only for a computation repeated or a copy (see rnnbook.testing)."""
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=msg)


@torch.no_grad()
def _randomise(cell, names, scale=0.5, seed=3):
    """Give the named (zero-initialised) parameters random values."""
    g = torch.Generator().manual_seed(seed)
    params = dict(cell.named_parameters())
    for name in names:
        p = params[name]
        p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * scale)


def _split4(w):
    """Torch's (i, f, g, o) row blocks of a (4H, ...) tensor as a dict."""
    return dict(zip("ifgo", w.detach().chunk(4, dim=0)))


# --- parity with nn.LSTM (spec test 1) -------------------------------------------------------


@DTYPES
@SHAPES
@BATCHES
def test_outputs_and_final_state_match_nn_lstm(d_x, d_h, T, B, dtype):
    ref, cell = _pair(d_x, d_h, dtype)
    x, _, _ = _inputs(B, T, d_x, d_h, dtype)
    want, (want_h, want_c) = ref(x)
    out, (h_n, c_n) = Recurrent(cell)(x)
    assert out.shape == (B, T, d_h) and h_n.shape == c_n.shape == (1, B, d_h)
    tol = TOL[dtype]
    _close(out, want, tol)
    _close(h_n, want_h, tol)
    _close(c_n, want_c, tol)


@DTYPES
@SHAPES
@BATCHES
def test_gradients_match_nn_lstm(d_x, d_h, T, B, dtype):
    """d sum(outputs**2) / d(x, weight_ih, weight_hh, bias_ih, bias_hh)."""
    ref, cell = _pair(d_x, d_h, dtype)
    x, _, _ = _inputs(B, T, d_x, d_h, dtype)
    x_ours, x_theirs = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    (Recurrent(cell)(x_ours)[0] ** 2).sum().backward()
    (ref(x_theirs)[0] ** 2).sum().backward()
    tol = TOL[dtype]
    _close(x_ours.grad, x_theirs.grad, tol)
    ours = dict(cell.named_parameters())
    for name, theirs in ref.named_parameters():
        _close(ours[name.removesuffix("_l0")].grad, theirs.grad, tol, msg=name)


@DTYPES
@pytest.mark.parametrize("layer_axis", [True, False], ids=["(1,B,H)", "(B,H)"])
def test_given_initial_state_matches_nn_lstm(layer_axis, dtype):
    ref, cell = _pair(5, 4, dtype)
    x, h0, c0 = _inputs(3, 7, 5, 4, dtype)
    want, (want_h, want_c) = ref(x, (h0.unsqueeze(0), c0.unsqueeze(0)))
    state = (h0.unsqueeze(0), c0.unsqueeze(0)) if layer_axis else (h0, c0)
    out, (h_n, c_n) = Recurrent(cell)(x, state)
    tol = TOL[dtype]
    _close(out, want, tol)
    _close(h_n, want_h, tol)
    _close(c_n, want_c, tol)


def test_gradients_wrt_initial_state_match_nn_lstm():
    ref, cell = _pair(5, 4, torch.float64)
    x, h0, c0 = _inputs(3, 7, 5, 4)
    ours = [h0.clone().requires_grad_(True), c0.clone().requires_grad_(True)]
    theirs = [h0.unsqueeze(0).requires_grad_(True), c0.unsqueeze(0).requires_grad_(True)]
    (Recurrent(cell)(x, tuple(ours))[0] ** 2).sum().backward()
    (ref(x, tuple(theirs))[0] ** 2).sum().backward()
    for a, b in zip(ours, theirs):
        _close(a.grad, b.grad[0], 1e-12)


@DTYPES
def test_sequence_first_layout_matches_nn_lstm(dtype):
    ref, cell = _pair(5, 4, dtype, batch_first=False)
    x, h0, c0 = _inputs(7, 3, 5, 4, dtype)  # read as (T, B, d_x) = (7, 3, 5)
    h0, c0 = h0[:3], c0[:3]
    want, (want_h, want_c) = ref(x, (h0.unsqueeze(0), c0.unsqueeze(0)))
    out, (h_n, c_n) = Recurrent(cell, batch_first=False)(x, (h0, c0))
    assert out.shape == (7, 3, 4)
    tol = TOL[dtype]
    _close(out, want, tol)
    _close(h_n, want_h, tol)
    _close(c_n, want_c, tol)


def test_cell_step_matches_nn_lstm_cell():
    torch.manual_seed(0)
    ref = nn.LSTMCell(5, 4).double()
    cell = LSTMCell(5, 4).double()
    cell.load_state_dict(ref.state_dict())  # same parameter names as nn.LSTMCell
    x, h0, c0 = _inputs(3, 1, 5, 4)
    for a, b in zip(cell(x[:, 0], (h0, c0)), ref(x[:, 0], (h0, c0))):
        _close(a, b, 1e-12)


@pytest.mark.parametrize("forget_bias", [0.0, 1.0])
def test_to_torch_round_trip(forget_bias):
    torch.manual_seed(0)
    cell = LSTMCell(5, 4, forget_bias=forget_bias).double()
    ref = cell.to_torch()
    assert isinstance(ref, nn.LSTM) and ref.batch_first
    assert (ref.input_size, ref.hidden_size, ref.num_layers) == (5, 4, 1)
    assert ref.weight_hh_l0.dtype == torch.float64
    x, h0, c0 = _inputs(3, 7, 5, 4)
    want, (want_h, want_c) = ref(x, (h0.unsqueeze(0), c0.unsqueeze(0)))
    out, (h_n, c_n) = Recurrent(cell)(x, (h0, c0))
    _close(out, want, 1e-12)
    _close(c_n, want_c, 1e-12)
    torch.manual_seed(1)
    copy = LSTMCell(5, 4).double().load_from_torch(ref)
    for (name, p), q in zip(cell.named_parameters(), copy.parameters(), strict=True):
        _same(p, q, msg=name)


def test_load_from_torch_returns_the_cell_and_copies_values_not_tensors():
    torch.manual_seed(0)
    ref = nn.LSTM(5, 4, batch_first=True)
    cell = LSTMCell(5, 4)
    assert cell.load_from_torch(ref) is cell
    _same(cell.weight_ih, ref.weight_ih_l0)
    with torch.no_grad():
        ref.weight_ih_l0.add_(1.0)
    assert not torch.equal(cell.weight_ih, ref.weight_ih_l0)


# --- peephole LSTM (spec test 4) -------------------------------------------------------------


def test_zero_peepholes_equal_the_plain_lstm():
    torch.manual_seed(0)
    plain = LSTMCell(5, 4).double()
    torch.manual_seed(0)
    peep = LSTMCell(5, 4, peephole=True).double()
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        _same(getattr(peep, name), getattr(plain, name), msg=name)
    for name in ("peephole_i", "peephole_f", "peephole_o"):
        _same(getattr(peep, name), torch.zeros(4, dtype=torch.float64), msg=name)
    x, h0, c0 = _inputs(3, 7, 5, 4)
    out_plain, state_plain = Recurrent(plain)(x, (h0, c0))
    out_peep, state_peep = Recurrent(peep)(x, (h0, c0))
    assert_close_ulps(out_peep, out_plain)
    assert_close_ulps(state_peep[1], state_plain[1])


@pytest.mark.parametrize("name", ["peephole_i", "peephole_f", "peephole_o"])
def test_each_nonzero_peephole_changes_the_output(name):
    torch.manual_seed(0)
    plain = LSTMCell(5, 4).double()
    torch.manual_seed(0)
    peep = LSTMCell(5, 4, peephole=True).double()
    _randomise(peep, [name], scale=1.0)
    x, _, _ = _inputs(3, 4, 5, 4)  # T > 1: from c_0 = 0, p_i and p_f only act from t = 2
    diff = (Recurrent(peep)(x)[0] - Recurrent(plain)(x)[0]).abs().max()
    assert diff > 1e-3


@pytest.mark.parametrize("peephole", [False, True], ids=["plain", "peephole"])
def test_identity_output_activation_one_step_by_hand(peephole):
    """(P1)-(P5) with sigma_h = identity: h = o * c, p_o reading the current c_t."""
    torch.manual_seed(0)
    cell = LSTMCell(5, 4, peephole=peephole, output_activation="identity").double()
    if peephole:
        _randomise(cell, ["peephole_i", "peephole_f", "peephole_o"])
    x, h_prev, c_prev = _inputs(3, 1, 5, 4)
    x = x[:, 0]
    W, U = _split4(cell.weight_ih), _split4(cell.weight_hh)
    b = _split4(cell.bias_ih + cell.bias_hh)
    zero = torch.zeros(4, dtype=torch.float64)
    p_i = cell.peephole_i.detach() if peephole else zero
    p_f = cell.peephole_f.detach() if peephole else zero
    p_o = cell.peephole_o.detach() if peephole else zero

    def pre(k):
        return x @ W[k].T + h_prev @ U[k].T + b[k]

    f = torch.sigmoid(pre("f") + p_f * c_prev)
    i = torch.sigmoid(pre("i") + p_i * c_prev)
    c = f * c_prev + i * torch.tanh(pre("g"))
    o = torch.sigmoid(pre("o") + p_o * c)
    with torch.no_grad():
        h_cell, c_cell = cell(x, (h_prev, c_prev))
    _close(c_cell, c, 1e-12)
    _close(h_cell, o * c, 1e-12)
    assert not torch.allclose(h_cell, o * torch.tanh(c))


def test_tanh_output_activation_one_step_by_hand():
    """(L1)-(L6) written out from the gate slices."""
    torch.manual_seed(0)
    cell = LSTMCell(5, 4, forget_bias=1.0).double()
    x, h_prev, c_prev = _inputs(3, 1, 5, 4)
    x = x[:, 0]
    W, U = _split4(cell.weight_ih), _split4(cell.weight_hh)
    b = _split4(cell.bias_ih + cell.bias_hh)
    a = {k: x @ W[k].T + h_prev @ U[k].T + b[k] for k in "ifgo"}
    c = torch.sigmoid(a["f"]) * c_prev + torch.sigmoid(a["i"]) * torch.tanh(a["g"])
    h = torch.sigmoid(a["o"]) * torch.tanh(c)
    with torch.no_grad():
        h_cell, c_cell = cell(x, (h_prev, c_prev))
    _close(c_cell, c, 1e-12)
    _close(h_cell, h, 1e-12)


# --- DCM (spec test 5) -----------------------------------------------------------------------

DCM_EXTRAS = ["peephole_i", "peephole_f", "peephole_o"] + [
    f"v_{a}{b}" for a in "ifo" for b in "ifo"
]
FLAGS = pytest.mark.parametrize("flag", ["current", "previous"])


@FLAGS
def test_dcm_with_zero_extras_equals_the_lstm(flag):
    torch.manual_seed(0)
    lstm = LSTMCell(5, 4).double()
    torch.manual_seed(0)
    dcm = DCMCell(5, 4, out_peephole_state=flag).double()
    params = dict(dcm.named_parameters())
    for name in DCM_EXTRAS:
        _same(params[name], torch.zeros(4, dtype=torch.float64), msg=name)
    for name, p in lstm.named_parameters():
        _same(params[name], p, msg=name)
    x, _, _ = _inputs(3, 7, 5, 4)
    out_dcm, state_dcm = Recurrent(dcm)(x)
    out_lstm, (_, c_lstm) = Recurrent(lstm)(x)
    assert_close_ulps(out_dcm, out_lstm)
    assert_close_ulps(state_dcm[1], c_lstm)


def test_dcm_without_gate_links_equals_the_peephole_lstm():
    """v_* = 0 and the default out_peephole_state: the DCM is (P1)-(P5) with tanh."""
    torch.manual_seed(0)
    peep = LSTMCell(5, 4, peephole=True).double()
    torch.manual_seed(0)
    dcm = DCMCell(5, 4).double()
    _randomise(peep, ["peephole_i", "peephole_f", "peephole_o"])
    _randomise(dcm, ["peephole_i", "peephole_f", "peephole_o"])
    x, _, _ = _inputs(3, 7, 5, 4)
    _close(Recurrent(dcm)(x)[0], Recurrent(peep)(x)[0], 1e-12)


@FLAGS
def test_dcm_gradcheck(flag):
    """Finite differences in float64, T=3, with every p_* and v_* random so all terms act."""
    torch.manual_seed(0)
    dcm = DCMCell(2, 3, out_peephole_state=flag).double()
    _randomise(dcm, DCM_EXTRAS)
    model = Recurrent(dcm)
    x, _, _ = _inputs(2, 3, 2, 3)
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
    assert len(params) == 4 + 12

    def run(x, *values):
        out, state = torch.func.functional_call(model, dict(zip(names, values)), (x,))
        return out, *state  # h_1..h_T and the final (h, c, i, f, o)

    assert torch.autograd.gradcheck(run, (x.requires_grad_(True), *params), eps=1e-6, atol=1e-8)


def test_dcm_gate_links_receive_gradient():
    torch.manual_seed(0)
    dcm = DCMCell(5, 4).double()
    _randomise(dcm, DCM_EXTRAS)
    x, _, _ = _inputs(3, 4, 5, 4)
    (Recurrent(dcm)(x)[0] ** 2).sum().backward()
    for name, p in dcm.named_parameters():
        assert p.grad is not None and p.grad.abs().max() > 0, name


def test_dcm_out_peephole_state_matters_when_p_o_is_nonzero():
    x, _, _ = _inputs(3, 4, 5, 4)
    outputs = {}
    for flag in ("current", "previous"):
        torch.manual_seed(0)
        dcm = DCMCell(5, 4, out_peephole_state=flag).double()
        _randomise(dcm, DCM_EXTRAS)
        outputs[flag] = Recurrent(dcm)(x)[0]
    assert (outputs["current"] - outputs["previous"]).abs().max() > 1e-3


def test_dcm_out_peephole_state_is_irrelevant_when_p_o_is_zero():
    x, _, _ = _inputs(3, 4, 5, 4)
    outputs = {}
    for flag in ("current", "previous"):
        torch.manual_seed(0)
        dcm = DCMCell(5, 4, out_peephole_state=flag).double()
        _randomise(dcm, [name for name in DCM_EXTRAS if name != "peephole_o"])
        outputs[flag] = Recurrent(dcm)(x)[0]
    assert_close_ulps(outputs["current"], outputs["previous"])


def _dcm_step_by_hand(P, x, h, c, i, f, o, flag):
    """(D1)-(D5) of the spec, one step, from a dict P of the maths' parameters."""
    i_t = torch.sigmoid(
        x @ P["W_i"].T + h @ P["U_i"].T + P["p_i"] * c
        + P["v_ii"] * i + P["v_if"] * f + P["v_io"] * o + P["b_i"]
    )  # fmt: skip
    f_t = torch.sigmoid(
        x @ P["W_f"].T + h @ P["U_f"].T + P["p_f"] * c
        + P["v_fi"] * i + P["v_ff"] * f + P["v_fo"] * o + P["b_f"]
    )  # fmt: skip
    c_t = f_t * c + i_t * torch.tanh(x @ P["W_g"].T + h @ P["U_g"].T + P["b_g"])
    c_seen = c_t if flag == "current" else c
    o_t = torch.sigmoid(
        x @ P["W_o"].T + h @ P["U_o"].T + P["p_o"] * c_seen
        + P["v_oi"] * i_t + P["v_of"] * f_t + P["v_oo"] * o + P["b_o"]
    )  # fmt: skip
    h_t = o_t * torch.tanh(c_t)
    return h_t, c_t, i_t, f_t, o_t


@FLAGS
def test_dcm_one_step_by_hand(flag):
    """The cell against (D1)-(D5) from a random, nonzero state (h, c, i, f, o)."""
    torch.manual_seed(0)
    dcm = DCMCell(5, 4, out_peephole_state=flag).double()
    _randomise(dcm, DCM_EXTRAS)
    params = {name: p.detach() for name, p in dcm.named_parameters()}
    W, U = _split4(dcm.weight_ih), _split4(dcm.weight_hh)
    b = _split4(dcm.bias_ih + dcm.bias_hh)
    P = {f"{m}_{k}": M[k] for m, M in (("W", W), ("U", U), ("b", b)) for k in "ifgo"}
    P |= {f"p_{k}": params[f"peephole_{k}"] for k in "ifo"}
    P |= {name: params[name] for name in DCM_EXTRAS if name.startswith("v_")}
    g = torch.Generator().manual_seed(5)
    x, h, c = (torch.randn(3, n, generator=g, dtype=torch.float64) for n in (5, 4, 4))
    i, f, o = (torch.rand(3, 4, generator=g, dtype=torch.float64) for _ in range(3))
    want = _dcm_step_by_hand(P, x, h, c, i, f, o, flag)
    with torch.no_grad():
        got = dcm(x, (h, c, i, f, o))
    assert len(got) == 5
    for name, a, e in zip(("h", "c", "i", "f", "o"), got, want):
        _close(a, e, 1e-12, msg=name)


def test_dcm_two_steps_by_hand_carry_the_gates():
    """Through Recurrent, the gates of step 1 feed (D1), (D2), (D4) of step 2."""
    torch.manual_seed(0)
    dcm = DCMCell(5, 4).double()
    _randomise(dcm, DCM_EXTRAS)
    x, _, _ = _inputs(3, 2, 5, 4)
    state = dcm.initial_state(3, dtype=torch.float64)
    assert len(state) == 5 and all(s.abs().max() == 0 for s in state)
    with torch.no_grad():
        for t in range(2):
            state = dcm(x[:, t], state)
        out, final = Recurrent(dcm)(x)
    _close(out[:, -1], state[0], 1e-12)
    for a, e in zip(final, state):
        _close(a[0], e, 1e-12)


# --- forget bias (spec test 6) ---------------------------------------------------------------


@pytest.mark.parametrize("peephole", [False, True], ids=["plain", "peephole"])
def test_forget_bias_shifts_only_the_forget_slice_of_bias_ih(peephole):
    torch.manual_seed(0)
    base = LSTMCell(5, 4, peephole=peephole)
    torch.manual_seed(0)
    shifted = LSTMCell(5, 4, peephole=peephole, forget_bias=1.0)
    H = 4
    theirs = dict(base.named_parameters())
    for name, p in shifted.named_parameters():
        if name != "bias_ih":
            _same(p, theirs[name], msg=name)
    want = theirs["bias_ih"].detach().clone()
    want[H : 2 * H] += 1.0
    _same(shifted.bias_ih, want)
    assert shifted.forget_bias == 1.0 and base.forget_bias == 0.0


def test_forget_bias_is_reapplied_by_reset_parameters():
    cell = LSTMCell(5, 4, forget_bias=1.0)
    cell.reset_parameters()
    f_slice = cell.bias_ih.detach()[4:8]
    assert f_slice.min() >= 1 - 0.5 and f_slice.max() <= 1 + 0.5  # 1 + U(-1/2, 1/2)


def test_forget_bias_changes_the_output():
    torch.manual_seed(0)
    base = LSTMCell(5, 4).double()
    torch.manual_seed(0)
    shifted = LSTMCell(5, 4, forget_bias=1.0).double()
    x, _, _ = _inputs(3, 7, 5, 4)
    assert (Recurrent(shifted)(x)[0] - Recurrent(base)(x)[0]).abs().max() > 1e-3
    gates = record_gates(shifted, x)["forget_gate"].mean()
    assert gates > record_gates(base, x)["forget_gate"].mean()


# --- parameter counts (spec test 7) ----------------------------------------------------------


def _count(module):
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("d_x, d_h", [(5, 4), (1, 40), (3, 8)])
def test_parameter_counts(d_x, d_h):
    H = d_h
    lstm = 4 * H * (d_x + H) + 8 * H
    assert _count(LSTMCell(d_x, d_h)) == lstm == _count(nn.LSTM(d_x, d_h))
    assert _count(LSTMCell(d_x, d_h, peephole=True)) == lstm + 3 * H
    assert _count(LSTMCell(d_x, d_h, forget_bias=1.0, output_activation="identity")) == lstm
    assert _count(DCMCell(d_x, d_h)) == lstm + 12 * H


def test_parameter_names_and_shapes():
    shapes = {name: tuple(p.shape) for name, p in DCMCell(5, 4).named_parameters()}
    assert shapes == {
        "weight_ih": (16, 5),
        "weight_hh": (16, 4),
        "bias_ih": (16,),
        "bias_hh": (16,),
        **{name: (4,) for name in DCM_EXTRAS},
    }


# --- record_gates ----------------------------------------------------------------------------


@pytest.mark.parametrize("make", [LSTMCell, DCMCell], ids=["lstm", "dcm"])
def test_record_gates_shapes_and_ranges(make):
    torch.manual_seed(0)
    cell = make(5, 4)
    if isinstance(cell, DCMCell):
        _randomise(cell, DCM_EXTRAS)
    x, _, _ = _inputs(3, 7, 5, 4, torch.float32)
    gates = record_gates(cell, x)
    assert set(gates) == {*GATES, "candidate", "c", "h"}
    for name, values in gates.items():
        assert values.shape == (3, 7, 4), name
        assert not values.requires_grad, name
    for name in GATES:
        assert gates[name].min() > 0 and gates[name].max() < 1, name
    assert gates["candidate"].abs().max() < 1


@pytest.mark.parametrize("make", [LSTMCell, DCMCell], ids=["lstm", "dcm"])
def test_record_gates_agrees_with_recurrent(make):
    torch.manual_seed(0)
    cell = make(5, 4, peephole=True) if make is LSTMCell else make(5, 4)
    _randomise(cell, [n for n, _ in cell.named_parameters() if n.startswith(("peep", "v_"))])
    x, _, _ = _inputs(3, 7, 5, 4, torch.float32)
    gates = record_gates(cell, x)
    with torch.no_grad():
        out, state = Recurrent(cell)(x)
    assert_close_ulps(gates["h"], out)
    assert_close_ulps(gates["c"][:, -1], state[1][0])
    # the cell state follows (L4) from the recorded gates
    c_prev = torch.cat([torch.zeros(3, 1, 4), gates["c"][:, :-1]], dim=1)
    c = gates["forget_gate"] * c_prev + gates["input_gate"] * gates["candidate"]
    _close(gates["c"], c, 1e-6)


@pytest.mark.parametrize(
    "shape, match",
    [
        ((3, 0, 5), r"at least one time step, got shape \(3, 0, 5\)"),
        ((3, 7, 6), r"x must have the input size d_x = 5 in dimension 2, got shape \(3, 7, 6\)"),
        ((7, 5), r"x must have 3 dimensions, got shape \(7, 5\)"),
    ],
    ids=["T=0", "d_x", "2-D"],
)
def test_record_gates_rejects_bad_input(shape, match):
    with pytest.raises(ValueError, match=match):
        record_gates(LSTMCell(5, 4), torch.zeros(shape))


# --- determinism -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: LSTMCell(5, 4),
        lambda: LSTMCell(5, 4, peephole=True, forget_bias=1.0),
        lambda: DCMCell(5, 4, out_peephole_state="previous"),
    ],
    ids=["lstm", "peephole", "dcm"],
)
def test_same_seed_same_cell(make):
    torch.manual_seed(7)
    first = make()
    torch.manual_seed(7)
    second = make()
    for (name, p), q in zip(first.named_parameters(), second.parameters(), strict=True):
        _same(p, q, msg=name)
    torch.manual_seed(8)
    assert not torch.equal(make().weight_hh, first.weight_hh)


def test_default_init_is_torchs_uniform():
    torch.manual_seed(0)
    cell = LSTMCell(3, 16)
    for name, p in cell.named_parameters():
        assert float(p.detach().abs().max()) <= 16**-0.5, name


def test_extra_repr_names_the_options():
    assert repr(LSTMCell(5, 4)) == "LSTMCell(d_x=5, d_h=4)"
    text = repr(LSTMCell(5, 4, peephole=True, output_activation="identity", forget_bias=1.0))
    assert "peephole" in text and "output_activation=identity" in text
    assert "forget_bias=1" in text
    assert "out_peephole_state=previous" in repr(DCMCell(5, 4, out_peephole_state="previous"))


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((5, 0), {}, "d_h must be a positive integer, got 0"),
        ((0, 4), {}, "d_x must be a positive integer, got 0"),
        ((5, 4.0), {}, "d_h must be a positive integer, got 4.0"),
        ((5, True), {}, "d_h must be a positive integer, got True"),
        (
            (5, 4),
            {"output_activation": "relu"},
            r"output_activation must be one of \('tanh', 'identity'\), got 'relu'",
        ),
        ((5, 4), {"forget_bias": math.nan}, "forget_bias must be a finite number, got nan"),
        ((5, 4), {"forget_bias": math.inf}, "forget_bias must be a finite number, got inf"),
        ((5, 4), {"forget_bias": "1"}, "forget_bias must be a finite number, got '1'"),
    ],
)
def test_lstm_constructor_rejects_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        LSTMCell(*args, **kwargs)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (
            (5, 4),
            {"out_peephole_state": "x"},
            r"out_peephole_state must be one of \('current', 'previous'\), got 'x'",
        ),
        ((5, 0), {}, "d_h must be a positive integer, got 0"),
    ],
)
def test_dcm_constructor_rejects_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        DCMCell(*args, **kwargs)


@pytest.mark.parametrize(
    "module, match",
    [
        (
            nn.LSTM(5, 3, batch_first=True),
            r"weight_ih_l0 has shape \(12, 5\), the cell expects \(16, 5\)",
        ),
        (
            nn.LSTM(6, 4, batch_first=True),
            r"weight_ih_l0 has shape \(16, 6\), the cell expects \(16, 5\)",
        ),
        (nn.LSTM(5, 4, num_layers=2), "only a one-layer, unidirectional nn.LSTM with biases"),
        (nn.LSTM(5, 4, bidirectional=True), "only a one-layer, unidirectional nn.LSTM"),
        (nn.LSTM(5, 4, bias=False), "nn.LSTM with biases can be copied"),
        (nn.LSTM(5, 4, proj_size=2), "nn.LSTM with proj_size > 0 has no counterpart"),
        (nn.GRU(5, 4), r"weight_ih_l0 has shape \(12, 5\), the cell expects \(16, 5\)"),
    ],
    ids=["d_h", "d_x", "2 layers", "bidirectional", "no bias", "proj_size", "a GRU"],
)
def test_load_from_torch_rejects_a_different_module(module, match):
    cell = LSTMCell(5, 4)
    before = [p.detach().clone() for p in cell.parameters()]
    with pytest.raises(ValueError, match=match):
        cell.load_from_torch(module)
    for p, q in zip(cell.parameters(), before):
        _same(p, q)


@pytest.mark.parametrize(
    "module, match",
    [
        (nn.LSTM(5, 4, num_layers=2), "num_layers.*2|2 layers"),
        (nn.LSTM(5, 4, bidirectional=True), r"bidirectional(=| is )True|got.*\bbidirectional"),
        (nn.LSTM(5, 4, bias=False), "bias=False|without bias|no bias"),
    ],
    ids=["2 layers", "bidirectional", "no bias"],
)
def test_load_from_torch_message_names_what_came(module, match):
    with pytest.raises(ValueError, match=match):
        LSTMCell(5, 4).load_from_torch(module)


@pytest.mark.parametrize(
    "kwargs",
    [{"peephole": True}, {"output_activation": "identity"}],
    ids=["peephole", "identity"],
)
def test_to_torch_rejects_what_nn_lstm_cannot_compute(kwargs):
    with pytest.raises(ValueError, match="nn.LSTM has no peepholes and always applies tanh"):
        LSTMCell(5, 4, **kwargs).to_torch()


def test_dcm_to_torch_is_rejected():
    with pytest.raises(ValueError, match="nn.LSTM has no peepholes"):
        DCMCell(5, 4).to_torch()


@pytest.mark.parametrize(
    "x_shape, state_shapes, match",
    [
        ((3, 6), [(3, 4), (3, 4)], r"x_t must have the input size d_x = 5 in dimension 1"),
        ((5,), [(3, 4), (3, 4)], r"x_t must have 2 dimensions, got shape \(5,\)"),
        (
            (3, 5),
            [(2, 4), (2, 4)],
            r"each state tensor must have shape \(B, H\) = \(3, 4\), got \(2, 4\)",
        ),
        (
            (3, 5),
            [(3, 4), (3, 5)],
            r"each state tensor must have shape \(B, H\) = \(3, 4\), got \(3, 5\)",
        ),
        ((3, 5), [(3, 4), (1, 3, 4)], r"each state tensor must have 2 dimensions"),
    ],
    ids=["d_x", "1-D x", "batch", "H of c", "3-D c"],
)
def test_cell_step_rejects_bad_input(x_shape, state_shapes, match):
    state = tuple(torch.zeros(s) for s in state_shapes)
    with pytest.raises(ValueError, match=match):
        LSTMCell(5, 4)(torch.zeros(x_shape), state)


def test_cell_step_rejects_a_non_tensor():
    with pytest.raises(TypeError, match="x_t must be a torch.Tensor, got list"):
        LSTMCell(5, 4)([[0.0] * 5], (torch.zeros(1, 4), torch.zeros(1, 4)))


def test_cell_step_rejects_a_single_tensor_state():
    with pytest.raises((ValueError, TypeError), match=r"\(h, c\)|2 tensors|tuple"):
        LSTMCell(5, 4)(torch.zeros(2, 5), torch.zeros(2, 4))
