"""rnnbook.models.recurrent: unroll, Recurrent (torch's return types) and RecurrentModel."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rnnbook.models.gru import GRUCell
from rnnbook.models.lstm import DCMCell, LSTMCell
from rnnbook.models.recurrent import Recurrent, RecurrentModel, hidden_of, unroll
from rnnbook.models.srn import SRNCell

D_X, D_H = 5, 4
# our cell and the torch module it mirrors, both with the same weights
KINDS = {"srn": (SRNCell, nn.RNN), "lstm": (LSTMCell, nn.LSTM), "gru": (GRUCell, nn.GRU)}


def _pair(kind, batch_first=True, seed=0):
    """A torch module and a Recurrent over our cell holding the same weights (float64)."""
    make_cell, make_module = KINDS[kind]
    torch.manual_seed(seed)
    module = make_module(D_X, D_H, batch_first=batch_first).double()
    cell = make_cell(D_X, D_H).double()
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name).copy_(getattr(module, f"{name}_l0"))
    return module, Recurrent(cell, batch_first=batch_first)


def _x(B=3, T=7, d_x=D_X, seed=1):
    return torch.randn(
        B, T, d_x, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )


def _state(kind, B, seed=2, layer_axis=True):
    """A random initial state in torch's form: h0, or (h0, c0) for the LSTM."""
    g = torch.Generator().manual_seed(seed)
    shape = (1, B, D_H) if layer_axis else (B, D_H)
    h0 = torch.randn(shape, generator=g, dtype=torch.float64) * 0.5
    if kind != "lstm":
        return h0
    return h0, torch.randn(shape, generator=g, dtype=torch.float64)


def _assert_same_structure(ours, theirs):
    """Same nesting (tensor vs tuple), same lengths, same shapes, values to 1e-12."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, torch.Tensor), type(ours)
        assert ours.shape == theirs.shape
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
        return
    assert type(ours) is type(theirs) and len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        _assert_same_structure(a, b)


# --- Recurrent mirrors nn.RNN / nn.LSTM / nn.GRU ---------------------------------------------


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch-first", "seq-first"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_return_types_and_values_match_torch(kind, batch_first):
    module, ours = _pair(kind, batch_first)
    x = _x() if batch_first else _x().transpose(0, 1)
    theirs = module(x)
    got = ours(x)
    assert isinstance(got, tuple) and len(got) == 2
    _assert_same_structure(got, theirs)
    if kind == "lstm":
        assert isinstance(got[1], tuple) and len(got[1]) == 2
        assert all(s.shape == (1, 3, D_H) for s in got[1])
    else:
        assert isinstance(got[1], torch.Tensor) and got[1].shape == (1, 3, D_H)
    assert got[0].shape == ((3, 7, D_H) if batch_first else (7, 3, D_H))


@pytest.mark.parametrize("layer_axis", [True, False], ids=["(1,B,H)", "(B,H)"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_given_state_matches_torch(kind, layer_axis):
    module, ours = _pair(kind)
    x = _x()
    theirs = module(x, _state(kind, 3))
    _assert_same_structure(ours(x, _state(kind, 3, layer_axis=layer_axis)), theirs)


def test_lstm_state_may_be_a_list_or_mix_the_two_forms():
    module, ours = _pair("lstm")
    x = _x()
    h0, c0 = _state("lstm", 3)
    theirs = module(x, (h0, c0))
    _assert_same_structure(ours(x, [h0, c0]), theirs)
    _assert_same_structure(ours(x, (h0, c0[0])), theirs)


def test_final_state_is_the_last_output():
    _, ours = _pair("lstm", batch_first=False)
    out, (h_n, _) = ours(_x().transpose(0, 1))
    torch.testing.assert_close(out[-1], h_n[0], rtol=0, atol=0)


@pytest.mark.parametrize("flag", ["current", "previous"])
def test_dcm_returns_all_five_state_tensors(flag):
    out, state = Recurrent(DCMCell(D_X, D_H, out_peephole_state=flag))(_x().float())
    assert out.shape == (3, 7, D_H)
    assert isinstance(state, tuple) and len(state) == 5
    assert all(s.shape == (1, 3, D_H) for s in state)
    torch.testing.assert_close(state[0][0], out[:, -1], rtol=0, atol=0)


def test_extra_repr():
    assert "batch_first=False" in repr(Recurrent(SRNCell(2, 3), batch_first=False))


# --- unroll ----------------------------------------------------------------------------------


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("B, T", [(1, 1), (3, 7)])
def test_unroll_with_srn_cell_equals_the_step_by_step_loop(nonlinearity, B, T):
    """The projected-input loop computes what calling cell(x_t, h) T times computes."""
    torch.manual_seed(0)
    cell = SRNCell(D_X, D_H, nonlinearity=nonlinearity).double()
    x = _x(B, T)
    h = torch.randn(B, D_H, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    h_all, h_T = unroll(cell, x, h)
    steps = []
    for t in range(T):
        h = cell(x[:, t], h)
        steps.append(h)
    torch.testing.assert_close(h_all, torch.stack(steps, dim=1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(h_T, h, rtol=1e-12, atol=1e-12)


def test_unroll_with_srn_cell_without_bias():
    torch.manual_seed(0)
    cell = SRNCell(D_X, D_H, bias=False).double()
    x, h = _x(), torch.zeros(3, D_H, dtype=torch.float64)
    want = []
    for t in range(7):
        h = cell(x[:, t], h)
        want.append(h)
    torch.testing.assert_close(unroll(cell, x)[0], torch.stack(want, 1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_unroll_equals_the_step_by_step_loop_of_gated_cells(kind):
    torch.manual_seed(0)
    cell = KINDS[kind][0](D_X, D_H).double()
    x = _x()
    state = cell.initial_state(3, dtype=torch.float64)
    outputs = []
    for t in range(7):
        state = cell(x[:, t], state)
        outputs.append(hidden_of(state))
    h_all, state_T = unroll(cell, x)
    torch.testing.assert_close(h_all, torch.stack(outputs, 1), rtol=1e-12, atol=1e-12)
    for a, b in zip(
        state_T if kind == "lstm" else (state_T,), state if kind == "lstm" else (state,)
    ):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_unroll_returns_the_state_without_a_layer_axis():
    h_all, (h, c) = unroll(LSTMCell(D_X, D_H), _x().float())
    assert h_all.shape == (3, 7, D_H) and h.shape == c.shape == (3, D_H)
    h_all, h = unroll(GRUCell(D_X, D_H), _x().float())
    assert h.shape == (3, D_H)


def test_unroll_default_state_is_zero_with_the_inputs_dtype():
    torch.manual_seed(0)
    cell = LSTMCell(D_X, D_H).double()
    x = _x()
    zeros = torch.zeros(3, D_H, dtype=torch.float64)
    default, _ = unroll(cell, x)
    assert default.dtype == torch.float64
    torch.testing.assert_close(default, unroll(cell, x, (zeros, zeros))[0], rtol=0, atol=0)


def test_hidden_of():
    h, c = torch.zeros(2, 3), torch.ones(2, 3)
    assert hidden_of(h) is h
    assert hidden_of((h, c)) is h
    assert hidden_of([h, c]) is h


# --- RecurrentModel --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: SRNCell(D_X, D_H),
        lambda: LSTMCell(D_X, D_H),
        lambda: GRUCell(D_X, D_H, variant="cho"),
        lambda: DCMCell(D_X, D_H),
    ],
    ids=["srn", "lstm", "gru", "dcm"],
)
@pytest.mark.parametrize("B, T", [(1, 1), (3, 7)])
def test_recurrent_model_returns_readout_and_hidden_states(make, B, T):
    torch.manual_seed(0)
    model = RecurrentModel(make(), d_y=2)
    x = _x(B, T).float()
    y, h = model(x)
    assert y.shape == (B, T, 2) and h.shape == (B, T, D_H)
    torch.testing.assert_close(h, Recurrent(model.cell)(x)[0], rtol=0, atol=0)
    torch.testing.assert_close(y, model.readout(h), rtol=0, atol=0)
    y.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_recurrent_model_rejects_a_bad_output_size():
    with pytest.raises(ValueError, match="d_y must be a positive integer, got 0"):
        RecurrentModel(LSTMCell(D_X, D_H), d_y=0)


def test_recurrent_model_rejects_bad_input():
    with pytest.raises(ValueError, match=r"x must have the input size d_x = 5 in dimension 2"):
        RecurrentModel(GRUCell(D_X, D_H), d_y=2)(torch.zeros(3, 7, 6))


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(
    "shape, match",
    [
        ((3, 0, 5), r"x must have at least one time step, got shape \(3, 0, 5\)"),
        ((3, 7, 6), r"x must have the input size d_x = 5 in dimension 2, got shape \(3, 7, 6\)"),
        ((7, 5), r"x must have 3 dimensions, got shape \(7, 5\)"),
        ((1, 3, 7, 5), r"x must have 3 dimensions, got shape \(1, 3, 7, 5\)"),
    ],
    ids=["T=0", "d_x", "2-D", "4-D"],
)
def test_recurrent_rejects_bad_input(kind, shape, match):
    with pytest.raises(ValueError, match=match):
        Recurrent(KINDS[kind][0](D_X, D_H))(torch.zeros(shape))


@pytest.mark.parametrize(
    "shape, match",
    [((0, 3, 5), r"at least one time step"), ((7, 3, 6), r"input size d_x = 5 in dimension 2")],
    ids=["T=0", "d_x"],
)
def test_sequence_first_recurrent_rejects_bad_input(shape, match):
    with pytest.raises(ValueError, match=match):
        Recurrent(LSTMCell(D_X, D_H), batch_first=False)(torch.zeros(shape))


@pytest.mark.parametrize(
    "shape, match",
    [((0, 3, 5), r"got shape \(0, 3, 5\)"), ((7, 3, 6), r"got shape \(7, 3, 6\)")],
    ids=["T=0", "d_x"],
)
def test_sequence_first_message_reports_the_shape_that_came(shape, match):
    with pytest.raises(ValueError, match=match):
        Recurrent(LSTMCell(D_X, D_H), batch_first=False)(torch.zeros(shape))


@pytest.mark.parametrize("kind", list(KINDS))
def test_recurrent_rejects_a_non_tensor(kind):
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        Recurrent(KINDS[kind][0](D_X, D_H))([[[0.0] * D_X]])


def test_unroll_rejects_bad_input():
    with pytest.raises(ValueError, match=r"x must have at least one time step"):
        unroll(SRNCell(D_X, D_H), torch.zeros(3, 0, D_X))
    with pytest.raises(ValueError, match=r"x must have 3 dimensions"):
        unroll(SRNCell(D_X, D_H), torch.zeros(3, D_X))
    with pytest.raises(ValueError, match=r"must have shape \(B, H\) = \(3, 4\), got \(3, 5\)"):
        unroll(SRNCell(D_X, D_H), torch.zeros(3, 7, D_X), torch.zeros(3, 5))


STATE_CASES = pytest.mark.parametrize(
    "shape, match",
    [
        ((1, 2, 4), r"each state tensor must have shape \(B, H\) = \(3, 4\), got \(2, 4\)"),
        ((2, 4), r"each state tensor must have shape \(B, H\) = \(3, 4\), got \(2, 4\)"),
        ((3, 5), r"each state tensor must have shape \(B, H\) = \(3, 4\), got \(3, 5\)"),
        ((2, 3, 4), r"a state with a layer axis must have shape \(1, B, H\), got \(2, 3, 4\)"),
        ((4,), r"each initial state tensor must have 2 or 3 dimensions, got shape \(4,\)"),
        ((1, 1, 3, 4), r"must have 2 or 3 dimensions, got shape \(1, 1, 3, 4\)"),
    ],
    ids=["batch (1,B,H)", "batch (B,H)", "H", "2 layers", "1-D", "4-D"],
)


@STATE_CASES
@pytest.mark.parametrize("kind", ["srn", "gru"])
def test_recurrent_rejects_a_bad_state(kind, shape, match):
    with pytest.raises(ValueError, match=match):
        Recurrent(KINDS[kind][0](D_X, D_H))(torch.zeros(3, 7, D_X), torch.zeros(shape))


@STATE_CASES
@pytest.mark.parametrize("bad", ["h0", "c0"])
def test_recurrent_lstm_rejects_a_bad_state(bad, shape, match):
    good = torch.zeros(1, 3, D_H)
    state = (torch.zeros(shape), good) if bad == "h0" else (good, torch.zeros(shape))
    with pytest.raises(ValueError, match=match):
        Recurrent(LSTMCell(D_X, D_H))(torch.zeros(3, 7, D_X), state)


def test_recurrent_rejects_a_non_tensor_state():
    with pytest.raises(TypeError, match="each initial state tensor must be a torch.Tensor"):
        Recurrent(GRUCell(D_X, D_H))(torch.zeros(3, 7, D_X), [[0.0] * D_H] * 3)


@pytest.mark.parametrize("B", [2, 3])
def test_recurrent_lstm_rejects_a_single_tensor_state(B):
    with pytest.raises((ValueError, TypeError), match=r"\(h0?, c0?\)|2 tensors|tuple"):
        Recurrent(LSTMCell(D_X, D_H))(torch.zeros(B, 7, D_X), torch.zeros(1, B, D_H))


@pytest.mark.parametrize(
    "module, cell",
    [(nn.RNN, SRNCell), (nn.LSTM, LSTMCell), (nn.GRU, GRUCell)],
    ids=["rnn", "lstm", "gru"],
)
def test_recurrent_model_with_a_torch_core_equals_the_same_weights_in_our_cell(module, cell):
    """Train with the fused module, inspect with the cell: both cores compute the same model."""
    torch.manual_seed(0)
    fused = RecurrentModel(module(D_X, D_H, batch_first=True), d_y=2).double()
    ours = RecurrentModel(cell(D_X, D_H), d_y=2).double()
    ours.cell.load_from_torch(fused.core)
    ours.readout.load_state_dict(fused.readout.state_dict())
    x = _x(3, 7)
    y_fused, h_fused = fused(x)
    y_ours, h_ours = ours(x)
    torch.testing.assert_close(y_ours, y_fused, rtol=0, atol=1e-12)
    torch.testing.assert_close(h_ours, h_fused, rtol=0, atol=1e-12)
    assert fused.cell is fused.core and isinstance(ours.cell, cell)


@pytest.mark.parametrize(
    "core, error, match",
    [
        (nn.LSTM(D_X, D_H), ValueError, "must be batch-first, one-layer and unidirectional"),
        (nn.LSTM(D_X, D_H, num_layers=2, batch_first=True), ValueError, "one-layer"),
        (nn.GRU(D_X, D_H, bidirectional=True, batch_first=True), ValueError, "unidirectional"),
        (nn.Linear(D_X, D_H), TypeError, "core must be a cell with project_inputs/step"),
    ],
    ids=["sequence-first", "two-layers", "bidirectional", "not-recurrent"],
)
def test_recurrent_model_rejects_cores_it_cannot_use(core, error, match):
    with pytest.raises(error, match=match):
        RecurrentModel(core, d_y=2)
