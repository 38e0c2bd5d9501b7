"""rnnbook.models.srn: parity with nn.RNN (spec test 3), gradcheck (test 1), init and errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rnnbook.models.srn import SRN, SRNCell, math_parameters

# Spec rnn-bptt §6: outputs agree to 1e-12 in float64 and 1e-6 in float32.
TOL = {torch.float64: 1e-12, torch.float32: 1e-6}


def _pair(d_x, d_h, nonlinearity, bias, dtype, seed=0):
    """An nn.RNN and an SRN holding the same recurrent weights."""
    torch.manual_seed(seed)
    rnn = nn.RNN(d_x, d_h, nonlinearity=nonlinearity, bias=bias, batch_first=True).to(dtype)
    srn = SRN(d_x, d_h, 2, nonlinearity=nonlinearity, bias=bias).to(dtype).load_from_torch(rnn)
    return rnn, srn


def _inputs(B, T, d_x, d_h, dtype, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, d_x, generator=g, dtype=dtype)
    h0 = torch.randn(B, d_h, generator=g, dtype=dtype) * 0.5
    return x, h0


CASES = pytest.mark.parametrize(
    "nonlinearity, bias, B, T",
    [
        (n, bias, B, T)
        for n in ("tanh", "relu")
        for bias in (True, False)
        for B in (1, 3)
        for T in (1, 7)
    ],
)
DTYPES = pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])


# --- parity with nn.RNN ----------------------------------------------------------------------


@DTYPES
@CASES
def test_outputs_and_final_state_match_nn_rnn(nonlinearity, bias, B, T, dtype):
    d_x, d_h = 4, 5
    rnn, srn = _pair(d_x, d_h, nonlinearity, bias, dtype)
    x, h0 = _inputs(B, T, d_x, d_h, dtype)
    want_h, want_last = rnn(x, h0.unsqueeze(0))  # (B, T, d_h), (1, B, d_h)
    y, h = srn(x, h0)
    tol = TOL[dtype]
    assert y.shape == (B, T, 2) and h.shape == (B, T, d_h)
    torch.testing.assert_close(h, want_h, rtol=tol, atol=tol)
    torch.testing.assert_close(h[:, -1], want_last[0], rtol=tol, atol=tol)
    torch.testing.assert_close(y, srn.readout(want_h), rtol=tol, atol=tol)


@DTYPES
@CASES
def test_recurrent_gradients_match_nn_rnn(nonlinearity, bias, B, T, dtype):
    d_x, d_h = 4, 5
    rnn, srn = _pair(d_x, d_h, nonlinearity, bias, dtype)
    x, h0 = _inputs(B, T, d_x, d_h, dtype)
    weights = torch.randn(B, T, d_h, generator=torch.Generator().manual_seed(2), dtype=dtype)
    x_ours, x_theirs = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    h0_ours, h0_theirs = h0.clone().requires_grad_(True), h0.clone().requires_grad_(True)
    (srn(x_ours, h0_ours)[1] * weights).sum().backward()
    (rnn(x_theirs, h0_theirs.unsqueeze(0))[0] * weights).sum().backward()
    tol = 10 * TOL[dtype]  # a backward pass adds a few roundings
    ours = dict(srn.cell.named_parameters())
    for name, theirs in rnn.named_parameters():
        torch.testing.assert_close(
            ours[name.removesuffix("_l0")].grad, theirs.grad, rtol=tol, atol=tol
        )
    torch.testing.assert_close(x_ours.grad, x_theirs.grad, rtol=tol, atol=tol)
    torch.testing.assert_close(h0_ours.grad, h0_theirs.grad, rtol=tol, atol=tol)


def test_default_h0_is_zero_like_nn_rnn():
    rnn, srn = _pair(3, 4, "tanh", True, torch.float64)
    x, _ = _inputs(2, 5, 3, 4, torch.float64)
    torch.testing.assert_close(srn(x)[1], rnn(x)[0], rtol=0, atol=1e-12)


def test_cell_step_matches_nn_rnn_cell():
    torch.manual_seed(0)
    ref = nn.RNNCell(3, 4).double()
    cell = SRNCell(3, 4).double()
    cell.load_state_dict(ref.state_dict())  # same parameter names as nn.RNNCell
    x, h = _inputs(2, 1, 3, 4, torch.float64)
    torch.testing.assert_close(cell(x[:, 0], h), ref(x[:, 0], h), rtol=0, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
def test_to_torch_round_trip(bias):
    torch.manual_seed(0)
    srn = SRN(3, 4, 2, nonlinearity="relu", bias=bias).double()
    rnn = srn.to_torch()
    assert rnn.batch_first and rnn.nonlinearity == "relu" and rnn.bias == bias
    assert rnn.weight_hh_l0.dtype == torch.float64
    x, h0 = _inputs(2, 6, 3, 4, torch.float64)
    torch.testing.assert_close(rnn(x, h0.unsqueeze(0))[0], srn(x, h0)[1], rtol=0, atol=1e-12)
    torch.manual_seed(1)
    copy = SRN(3, 4, 2, nonlinearity="relu", bias=bias).double().load_from_torch(rnn)
    for (name, p), q in zip(srn.cell.named_parameters(), copy.cell.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize(
    "rnn, match",
    [
        (nn.RNN(3, 4, bias=False, batch_first=True), "do not match the cell's"),
        (nn.RNN(3, 4, num_layers=2, batch_first=True), "do not match the cell's"),
        (nn.RNN(3, 4, nonlinearity="relu", batch_first=True), "nn.RNN uses relu, the cell tanh"),
        (nn.RNN(3, 5, batch_first=True), r"weight_ih_l0: shape \(5, 3\) != \(4, 3\)"),
    ],
    ids=["bias", "layers", "nonlinearity", "shape"],
)
def test_load_from_torch_rejects_a_different_rnn(rnn, match):
    with pytest.raises(ValueError, match=match):
        SRN(3, 4, 2).load_from_torch(rnn)


# --- gradcheck (spec test 1) -----------------------------------------------------------------


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_gradcheck_inputs_state_and_parameters(nonlinearity):
    torch.manual_seed(0)
    model = SRN(2, 3, 2, nonlinearity=nonlinearity).double()  # T=3, d_x=2, d_h=3, B=2
    x, h0 = _inputs(2, 3, 2, 3, torch.float64)
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]

    def run(x, h0, *values):
        return torch.func.functional_call(model, dict(zip(names, values)), (x, h0))

    inputs = (x.requires_grad_(True), h0.requires_grad_(True), *params)
    assert torch.autograd.gradcheck(run, inputs, eps=1e-6, atol=1e-8)


# --- shapes, learn_h0 and math_parameters ----------------------------------------------------


@pytest.mark.parametrize("B, T", [(1, 1), (1, 6), (4, 1), (4, 6)])
def test_output_shapes(B, T):
    y, h = SRN(3, 5, 2)(torch.randn(B, T, 3))
    assert y.shape == (B, T, 2) and h.shape == (B, T, 5)


def test_learn_h0_adds_a_trainable_initial_state():
    torch.manual_seed(0)
    plain, learned = SRN(3, 4, 2), SRN(3, 4, 2, learn_h0=True)
    names = {name for name, _ in learned.named_parameters()}
    assert names - {name for name, _ in plain.named_parameters()} == {"h0"}
    assert learned.h0.shape == (4,)
    assert plain.h0 is None


def test_learned_h0_is_used_and_receives_gradient():
    torch.manual_seed(0)
    model = SRN(3, 4, 2, learn_h0=True).double()
    with torch.no_grad():
        model.h0.copy_(torch.tensor([0.5, -0.5, 0.25, 0.0]))
    x, _ = _inputs(3, 5, 3, 4, torch.float64)
    y, h = model(x)
    torch.testing.assert_close(h, model(x, model.h0.expand(3, 4))[1], rtol=0, atol=0)
    assert not torch.allclose(h, model(x, torch.zeros(3, 4, dtype=torch.float64))[1])
    y.sum().backward()
    assert model.h0.grad is not None and model.h0.grad.abs().sum() > 0


def test_math_parameters_are_the_maths_names():
    torch.manual_seed(0)
    model = SRN(3, 4, 2)
    params = math_parameters(model)
    assert list(params) == ["W_xh", "W_hh", "b_h", "W_hy", "b_y"]
    assert params["W_xh"] is model.cell.weight_ih and params["W_hh"] is model.cell.weight_hh
    torch.testing.assert_close(params["b_h"], model.cell.bias_ih + model.cell.bias_hh)
    assert params["W_hy"] is model.readout.weight and params["b_y"] is model.readout.bias


def test_math_parameters_without_bias_are_zeros():
    params = math_parameters(SRN(3, 4, 2, bias=False).double())
    torch.testing.assert_close(params["b_h"], torch.zeros(4, dtype=torch.float64), rtol=0, atol=0)
    torch.testing.assert_close(params["b_y"], torch.zeros(2, dtype=torch.float64), rtol=0, atol=0)


# --- initialisation --------------------------------------------------------------------------


def _singular_values(model: SRN) -> torch.Tensor:
    return torch.linalg.svdvals(model.cell.weight_hh.detach().double())


def test_default_init_is_torchs_uniform():
    torch.manual_seed(0)
    model = SRN(3, 16, 2)
    bound = 16**-0.5
    for p in model.cell.parameters():
        assert float(p.detach().abs().max()) <= bound


def test_orthogonal_init_has_unit_singular_values():
    torch.manual_seed(0)
    s = _singular_values(SRN(3, 8, 2, init="orthogonal"))
    torch.testing.assert_close(s, torch.ones(8, dtype=torch.float64), rtol=0, atol=1e-5)


@pytest.mark.parametrize("rho", [0.5, 1.1, 3])
def test_scaled_orthogonal_init_has_singular_values_rho(rho):
    torch.manual_seed(0)
    s = _singular_values(SRN(3, 8, 2, init=("scaled_orthogonal", rho)))
    torch.testing.assert_close(
        s, torch.full((8,), float(rho), dtype=torch.float64), rtol=1e-5, atol=0
    )


def test_identity_init_is_the_irnn():
    torch.manual_seed(0)
    cell = SRN(3, 6, 2, nonlinearity="relu", init="identity").cell
    torch.testing.assert_close(cell.weight_hh.detach(), torch.eye(6), rtol=0, atol=0)
    torch.testing.assert_close(cell.bias_ih.detach(), torch.zeros(6), rtol=0, atol=0)
    torch.testing.assert_close(cell.bias_hh.detach(), torch.zeros(6), rtol=0, atol=0)


def test_identity_init_without_bias():
    cell = SRN(3, 6, 2, bias=False, init="identity").cell
    torch.testing.assert_close(cell.weight_hh.detach(), torch.eye(6), rtol=0, atol=0)


@pytest.mark.parametrize(
    "init, match",
    [
        ("xavier", "init must be 'default', 'orthogonal', 'identity' or"),
        (("scaled_orthogonal",), "init must be"),
        (("orthogonal", 0.5), "init must be"),
        (("scaled_orthogonal", 0), "positive scale rho, got 0"),
        (("scaled_orthogonal", -1.0), "positive scale rho, got -1.0"),
        (("scaled_orthogonal", "1"), "positive scale rho, got '1'"),
    ],
)
def test_bad_init_is_rejected(init, match):
    with pytest.raises(ValueError, match=match):
        SRN(3, 4, 2, init=init)


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x_shape, h0_shape, error, match",
    [
        (
            (2, 5, 4),
            None,
            ValueError,
            r"x must have the input size d_x = 3 in dimension 2, got shape \(2, 5, 4\)",
        ),
        ((5, 3), None, ValueError, r"x must have 3 dimensions, got shape \(5, 3\)"),
        ((1, 2, 5, 3), None, ValueError, "x must have 3 dimensions"),
        ((2, 0, 3), None, ValueError, r"at least one time step, got shape \(2, 0, 3\)"),
        ((2, 5, 3), (3, 4), ValueError, r"h0 must have shape \(B, d_h\) = \(2, 4\), got \(3, 4\)"),
        ((2, 5, 3), (2, 5), ValueError, r"h0 must have shape \(B, d_h\) = \(2, 4\), got \(2, 5\)"),
        ((2, 5, 3), (4,), ValueError, r"h0 must have 2 dimensions, got shape \(4,\)"),
    ],
    ids=["d_x", "2-D x", "4-D x", "T=0", "h0 batch", "h0 d_h", "1-D h0"],
)
def test_srn_rejects_bad_input(x_shape, h0_shape, error, match):
    model = SRN(3, 4, 2)
    h0 = None if h0_shape is None else torch.zeros(h0_shape)
    with pytest.raises(error, match=match):
        model(torch.zeros(x_shape), h0)


def test_srn_rejects_a_non_tensor():
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        SRN(3, 4, 2)([[[0.0, 0.0, 0.0]]])


@pytest.mark.parametrize(
    "x_shape, h_shape, match",
    [
        ((2, 3), (3, 4), "same batch size, got 2 and 3"),
        ((2, 5), (2, 4), "x_t must have the input size d_x = 3"),
        ((2, 3), (2, 6), "h_prev must have the hidden size d_h = 4"),
        ((3,), (2, 4), "x_t must have 2 dimensions"),
        ((2, 3), (4,), "h_prev must have 2 dimensions"),
    ],
)
def test_cell_rejects_bad_input(x_shape, h_shape, match):
    with pytest.raises(ValueError, match=match):
        SRNCell(3, 4)(torch.zeros(x_shape), torch.zeros(h_shape))


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((3, 0, 2), {}, "d_h must be a positive integer, got 0"),
        ((0, 4, 2), {}, "d_x must be a positive integer, got 0"),
        ((3, 4, 0), {}, "d_y must be a positive integer, got 0"),
        ((3, 4.0, 2), {}, "d_h must be a positive integer, got 4.0"),
        ((3, True, 2), {}, "d_h must be a positive integer, got True"),
        (
            (3, 4, 2),
            {"nonlinearity": "sigmoid"},
            r"nonlinearity must be one of \('tanh', 'relu'\), got 'sigmoid'",
        ),
    ],
)
def test_constructor_rejects_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        SRN(*args, **kwargs)


def test_cell_constructor_rejects_unknown_nonlinearity():
    with pytest.raises(ValueError, match="nonlinearity must be one of"):
        SRNCell(3, 4, nonlinearity="gelu")
