"""rnnbook.models.gru: parity with nn.GRU (spec lstm-gru §5.3 test 2), the three conventions
of §4 (test 3), parameter counts and bad input."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rnnbook.models.gru import GRUCell
from rnnbook.models.recurrent import Recurrent

TOL = {torch.float64: 1e-12, torch.float32: 1e-6}
DTYPES = pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
SHAPES = pytest.mark.parametrize(
    "d_x, d_h, T", [(5, 4, 7), (1, 3, 1), (3, 8, 4)], ids=["spec", "scalar-T1", "wide"]
)
BATCHES = pytest.mark.parametrize("B", [1, 3])
VARIANTS = pytest.mark.parametrize("variant", ["torch", "seed", "cho"])


def _pair(d_x, d_h, dtype, seed=0, batch_first=True):
    """An nn.GRU (torch's default init) and a GRUCell holding the same weights."""
    torch.manual_seed(seed)
    ref = nn.GRU(d_x, d_h, batch_first=batch_first).to(dtype)
    torch.manual_seed(seed + 100)
    cell = GRUCell(d_x, d_h).to(dtype).load_from_torch(ref)
    return ref, cell


def _inputs(B, T, d_x, d_h, dtype=torch.float64, seed=1):
    """A random input (B, T, d_x) and a random initial state h0 (B, d_h)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, d_x, generator=g, dtype=dtype)
    h0 = torch.randn(B, d_h, generator=g, dtype=dtype) * 0.5
    return x, h0


def _close(actual, expected, tol, msg=None):
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol, msg=msg)


def _same(actual, expected, msg=None):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=msg)


def _cells(*variants, seed=0):
    """One float64 GRUCell per variant, all with the same weights."""
    cells = []
    for variant in variants:
        torch.manual_seed(seed)
        cells.append(GRUCell(5, 4, variant=variant).double())
    return cells


def _run(cell, x, h0=None):
    with torch.no_grad():
        return Recurrent(cell)(x, h0)[0]


# --- parity with nn.GRU (spec test 2) --------------------------------------------------------


@DTYPES
@SHAPES
@BATCHES
def test_outputs_and_final_state_match_nn_gru(d_x, d_h, T, B, dtype):
    ref, cell = _pair(d_x, d_h, dtype)
    x, _ = _inputs(B, T, d_x, d_h, dtype)
    want, want_h = ref(x)
    out, h_n = Recurrent(cell)(x)
    assert out.shape == (B, T, d_h) and h_n.shape == (1, B, d_h)
    _close(out, want, TOL[dtype])
    _close(h_n, want_h, TOL[dtype])


@DTYPES
@SHAPES
@BATCHES
def test_gradients_match_nn_gru(d_x, d_h, T, B, dtype):
    """d sum(outputs**2) / d(x, weight_ih, weight_hh, bias_ih, bias_hh)."""
    ref, cell = _pair(d_x, d_h, dtype)
    x, _ = _inputs(B, T, d_x, d_h, dtype)
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
def test_given_initial_state_matches_nn_gru(layer_axis, dtype):
    ref, cell = _pair(5, 4, dtype)
    x, h0 = _inputs(3, 7, 5, 4, dtype)
    want, want_h = ref(x, h0.unsqueeze(0))
    out, h_n = Recurrent(cell)(x, h0.unsqueeze(0) if layer_axis else h0)
    _close(out, want, TOL[dtype])
    _close(h_n, want_h, TOL[dtype])


def test_gradient_wrt_initial_state_matches_nn_gru():
    ref, cell = _pair(5, 4, torch.float64)
    x, h0 = _inputs(3, 7, 5, 4)
    ours, theirs = h0.clone().requires_grad_(True), h0.unsqueeze(0).requires_grad_(True)
    (Recurrent(cell)(x, ours)[0] ** 2).sum().backward()
    (ref(x, theirs)[0] ** 2).sum().backward()
    _close(ours.grad, theirs.grad[0], 1e-12)


@DTYPES
def test_sequence_first_layout_matches_nn_gru(dtype):
    ref, cell = _pair(5, 4, dtype, batch_first=False)
    x, h0 = _inputs(7, 3, 5, 4, dtype)  # read as (T, B, d_x) = (7, 3, 5)
    h0 = h0[:3]
    want, want_h = ref(x, h0.unsqueeze(0))
    out, h_n = Recurrent(cell, batch_first=False)(x, h0)
    assert out.shape == (7, 3, 4)
    _close(out, want, TOL[dtype])
    _close(h_n, want_h, TOL[dtype])


def test_cell_step_matches_nn_gru_cell():
    torch.manual_seed(0)
    ref = nn.GRUCell(5, 4).double()
    cell = GRUCell(5, 4).double()
    cell.load_state_dict(ref.state_dict())  # same parameter names as nn.GRUCell
    x, h0 = _inputs(3, 1, 5, 4)
    _close(cell(x[:, 0], h0), ref(x[:, 0], h0), 1e-12)


def test_to_torch_round_trip():
    torch.manual_seed(0)
    cell = GRUCell(5, 4).double()
    ref = cell.to_torch()
    assert isinstance(ref, nn.GRU) and ref.batch_first
    assert (ref.input_size, ref.hidden_size, ref.num_layers) == (5, 4, 1)
    assert ref.weight_hh_l0.dtype == torch.float64
    x, h0 = _inputs(3, 7, 5, 4)
    want, want_h = ref(x, h0.unsqueeze(0))
    out, h_n = Recurrent(cell)(x, h0)
    _close(out, want, 1e-12)
    _close(h_n, want_h, 1e-12)
    torch.manual_seed(1)
    copy = GRUCell(5, 4).double().load_from_torch(ref)
    for (name, p), q in zip(cell.named_parameters(), copy.parameters(), strict=True):
        _same(p, q, msg=name)


# --- the three conventions (spec test 3) -----------------------------------------------------


@torch.no_grad()
def _negate_z(cell):
    """sigma(-a) = 1 - sigma(a): negate W_z, U_z, b_iz and b_hz (rows H:2H)."""
    H = cell.hidden_size
    for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh):
        p[H : 2 * H] *= -1


def test_seed_with_negated_update_gate_equals_cho():
    seed, cho = _cells("seed", "cho")
    _negate_z(seed)
    x, h0 = _inputs(3, 7, 5, 4)
    _close(_run(seed, x, h0), _run(cho, x, h0), 1e-12)


def test_seed_without_negation_differs_from_cho():
    seed, cho = _cells("seed", "cho")
    x, h0 = _inputs(3, 7, 5, 4)
    assert (_run(seed, x, h0) - _run(cho, x, h0)).abs().max() > 1e-3


@torch.no_grad()
def _force_reset_gate_open(cell):
    """W_r = U_r = 0, b_r = +50 (so r = sigma(50) = 1 in float64), and b_hn = 0."""
    H = cell.hidden_size
    cell.weight_ih[:H] = 0
    cell.weight_hh[:H] = 0
    cell.bias_ih[:H] = 50.0
    cell.bias_hh[:H] = 0
    cell.bias_hh[2 * H :] = 0


def test_cho_equals_torch_when_the_reset_gate_is_open_and_b_hn_is_zero():
    cho, torch_gru = _cells("cho", "torch")
    x, h0 = _inputs(3, 7, 5, 4)
    for cell in (cho, torch_gru):
        _force_reset_gate_open(cell)
        with torch.no_grad():
            reset_gate = cell.gates(cell.project_inputs(x[:, 0]), h0)[0]
        _same(reset_gate, torch.ones_like(reset_gate))
    _close(_run(cho, x, h0), _run(torch_gru, x, h0), 1e-12)


def test_cho_equals_torch_when_b_hn_is_zero_and_u_n_is_diagonal():
    """Spec §4: r (U_n h) = U_n (r h) for a diagonal U_n; the update conventions agree."""
    cho, torch_gru = _cells("cho", "torch")
    diagonal = torch.diag(torch.tensor([0.9, -0.7, 0.5, 1.2], dtype=torch.float64))
    for cell in (cho, torch_gru):
        with torch.no_grad():
            cell.weight_hh[8:] = diagonal
            cell.bias_hh[8:] = 0
    x, h0 = _inputs(3, 7, 5, 4)
    _close(_run(cho, x, h0), _run(torch_gru, x, h0), 1e-12)


def test_cho_differs_from_torch_for_random_weights():
    """The reset placement is a real difference (spec §4: 0.27 on a random sequence)."""
    cho, torch_gru = _cells("cho", "torch")
    x, h0 = _inputs(3, 7, 5, 4)
    assert (_run(cho, x, h0) - _run(torch_gru, x, h0)).abs().max() > 1e-3


def _split3(w):
    return dict(zip("rzn", w.detach().chunk(3, dim=0)))


@VARIANTS
def test_one_step_by_hand(variant):
    """The §4 table written out from the (r, z, n) slices, from a nonzero h_prev."""
    (cell,) = _cells(variant)
    x, h = _inputs(3, 1, 5, 4)
    x = x[:, 0]
    W, U = _split3(cell.weight_ih), _split3(cell.weight_hh)
    b_i, b_h = _split3(cell.bias_ih), _split3(cell.bias_hh)
    r = torch.sigmoid(x @ W["r"].T + b_i["r"] + h @ U["r"].T + b_h["r"])
    z = torch.sigmoid(x @ W["z"].T + b_i["z"] + h @ U["z"].T + b_h["z"])
    if variant == "torch":
        n = torch.tanh(x @ W["n"].T + b_i["n"] + r * (h @ U["n"].T + b_h["n"]))
        want = (1 - z) * n + z * h
    else:
        n = torch.tanh(x @ W["n"].T + (r * h) @ U["n"].T + b_i["n"] + b_h["n"])  # (G3)
        want = (1 - z) * h + z * n if variant == "seed" else z * h + (1 - z) * n
    with torch.no_grad():
        got = cell(x, h)
    _close(got, want, 1e-12)


@VARIANTS
def test_every_variant_is_differentiable(variant):
    """gradcheck of a short sequence, float64, through inputs and all four weights."""
    torch.manual_seed(0)
    model = Recurrent(GRUCell(2, 3, variant=variant).double())
    x, h0 = _inputs(2, 3, 2, 3)
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]

    def run(x, h0, *values):
        return torch.func.functional_call(model, dict(zip(names, values)), (x, h0))

    inputs = (x.requires_grad_(True), h0.requires_grad_(True), *params)
    assert torch.autograd.gradcheck(run, inputs, eps=1e-6, atol=1e-8)


# --- parameter counts, determinism -----------------------------------------------------------


@VARIANTS
@pytest.mark.parametrize("d_x, d_h", [(5, 4), (1, 40), (3, 8)])
def test_parameter_count_matches_nn_gru(d_x, d_h, variant):
    count = sum(p.numel() for p in GRUCell(d_x, d_h, variant=variant).parameters())
    assert count == 3 * d_h * (d_x + d_h) + 6 * d_h
    assert count == sum(p.numel() for p in nn.GRU(d_x, d_h).parameters())


@VARIANTS
def test_same_seed_same_cell(variant):
    first, second = _cells(variant, variant, seed=7)
    for (name, p), q in zip(first.named_parameters(), second.parameters(), strict=True):
        _same(p, q, msg=name)


def test_variant_does_not_change_the_initialisation():
    cells = _cells("torch", "seed", "cho")
    for cell in cells[1:]:
        for (name, p), q in zip(cells[0].named_parameters(), cell.parameters(), strict=True):
            _same(p, q, msg=name)


def test_default_init_is_torchs_uniform():
    torch.manual_seed(0)
    for name, p in GRUCell(3, 16).named_parameters():
        assert float(p.detach().abs().max()) <= 16**-0.5, name


def test_extra_repr_names_the_variant():
    assert repr(GRUCell(5, 4, variant="cho")) == "GRUCell(d_x=5, d_h=4, variant=cho)"


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((5, 0), {}, "d_h must be a positive integer, got 0"),
        ((0, 4), {}, "d_x must be a positive integer, got 0"),
        ((5, -2), {}, "d_h must be a positive integer, got -2"),
        (
            (5, 4),
            {"variant": "foo"},
            r"variant must be one of \('torch', 'seed', 'cho'\), got 'foo'",
        ),
        ((5, 4), {"variant": "Torch"}, "variant must be one of .*, got 'Torch'"),
    ],
)
def test_constructor_rejects_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        GRUCell(*args, **kwargs)


@pytest.mark.parametrize(
    "module, match",
    [
        (nn.GRU(5, 3), r"weight_ih_l0 has shape \(9, 5\), the cell expects \(12, 5\)"),
        (nn.GRU(6, 4), r"weight_ih_l0 has shape \(12, 6\), the cell expects \(12, 5\)"),
        (nn.GRU(5, 4, num_layers=2), "only a one-layer, unidirectional nn.GRU with biases"),
        (nn.GRU(5, 4, bidirectional=True), "only a one-layer, unidirectional nn.GRU"),
        (nn.GRU(5, 4, bias=False), "nn.GRU with biases can be copied"),
        (nn.LSTM(5, 4), r"weight_ih_l0 has shape \(16, 5\), the cell expects \(12, 5\)"),
    ],
    ids=["d_h", "d_x", "2 layers", "bidirectional", "no bias", "an LSTM"],
)
def test_load_from_torch_rejects_a_different_module(module, match):
    cell = GRUCell(5, 4)
    before = [p.detach().clone() for p in cell.parameters()]
    with pytest.raises(ValueError, match=match):
        cell.load_from_torch(module)
    for p, q in zip(cell.parameters(), before):
        _same(p, q)


@pytest.mark.parametrize("variant", ["seed", "cho"])
def test_to_torch_rejects_the_other_variants(variant):
    match = f"nn.GRU computes the 'torch' variant, this cell is '{variant}'"
    with pytest.raises(ValueError, match=match):
        GRUCell(5, 4, variant=variant).to_torch()


@pytest.mark.parametrize(
    "x_shape, h_shape, match",
    [
        ((3, 6), (3, 4), r"x_t must have the input size d_x = 5 in dimension 1"),
        ((5,), (3, 4), r"x_t must have 2 dimensions, got shape \(5,\)"),
        ((3, 5), (2, 4), r"each state tensor must have shape \(B, H\) = \(3, 4\), got \(2, 4\)"),
        ((3, 5), (3, 5), r"each state tensor must have shape \(B, H\) = \(3, 4\), got \(3, 5\)"),
        ((3, 5), (1, 3, 4), r"each state tensor must have 2 dimensions, got shape \(1, 3, 4\)"),
    ],
    ids=["d_x", "1-D x", "batch", "H", "3-D h"],
)
def test_cell_step_rejects_bad_input(x_shape, h_shape, match):
    with pytest.raises(ValueError, match=match):
        GRUCell(5, 4)(torch.zeros(x_shape), torch.zeros(h_shape))


@pytest.mark.parametrize(
    "shape, match",
    [
        ((3, 0, 5), r"at least one time step, got shape \(3, 0, 5\)"),
        ((3, 7, 4), r"x must have the input size d_x = 5 in dimension 2, got shape \(3, 7, 4\)"),
        ((3, 5), r"x must have 3 dimensions, got shape \(3, 5\)"),
    ],
    ids=["T=0", "d_x", "2-D"],
)
def test_recurrent_gru_rejects_bad_input(shape, match):
    with pytest.raises(ValueError, match=match):
        Recurrent(GRUCell(5, 4))(torch.zeros(shape))
