"""rnnbook.bptt.manual_bptt, the hand-written (R4)-(R8), equals autograd (spec test 2)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rnnbook.bptt import PARAMETER_NAMES, manual_bptt
from rnnbook.models.srn import SRN, math_parameters

B, T, D_X, D_H, D_Y = 3, 6, 2, 4, 3
EXACT = dict(rtol=0, atol=1e-10)  # spec: max abs diff < 1e-10


def _model(nonlinearity: str, bias: bool = True) -> SRN:
    torch.manual_seed(0)
    model = SRN(D_X, D_H, D_Y, nonlinearity=nonlinearity, bias=bias).double()
    with torch.no_grad():  # larger weights than the default, so every term matters
        for p in model.parameters():
            p.mul_(2.0)
    return model


def _data(loss: str):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, T, D_X, generator=g, dtype=torch.float64)
    if loss == "mse":
        y = torch.randn(B, T, D_Y, generator=g, dtype=torch.float64)
    else:
        y = torch.randint(0, D_Y, (B, T), generator=g)
    h0 = torch.randn(B, D_H, generator=g, dtype=torch.float64) * 0.5
    return x, y, h0


def _masks():
    last_only = torch.zeros(B, T, dtype=torch.bool)
    last_only[:, -1] = True
    return {"all steps": None, "many-to-one": last_only}


def _autograd_loss(model, x, y, h0, loss, mask):
    """The loss manual_bptt computes: a sum over batch and time (1/2 for the MSE)."""
    out, _ = model(x, h0)  # (B, T, d_y)
    if loss == "mse":
        per_step = 0.5 * ((out - y) ** 2).sum(-1)  # (B, T)
    else:
        per_step = nn.functional.cross_entropy(out.transpose(1, 2), y, reduction="none")
    weight = torch.ones(B, T, dtype=x.dtype) if mask is None else mask.to(x.dtype)
    return (weight * per_step).sum()


@pytest.mark.parametrize("mask_name", list(_masks()))
@pytest.mark.parametrize("loss", ["mse", "ce"])
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_manual_bptt_equals_autograd(nonlinearity, loss, mask_name):
    mask = _masks()[mask_name]
    model = _model(nonlinearity)
    x, y, h0 = _data(loss)
    h0 = h0.requires_grad_(True)

    manual = manual_bptt(
        math_parameters(model), x, y, loss, nonlinearity=nonlinearity, h0=h0, mask=mask
    )
    total = _autograd_loss(model, x, y, h0, loss, mask)
    total.backward()

    cell = model.cell
    torch.testing.assert_close(manual["loss"], total.detach(), **EXACT)
    torch.testing.assert_close(manual["W_xh"], cell.weight_ih.grad, **EXACT)
    torch.testing.assert_close(manual["W_hh"], cell.weight_hh.grad, **EXACT)
    torch.testing.assert_close(manual["b_h"], cell.bias_ih.grad, **EXACT)  # dL/db_h is the
    torch.testing.assert_close(manual["b_h"], cell.bias_hh.grad, **EXACT)  # grad of either bias
    torch.testing.assert_close(manual["W_hy"], model.readout.weight.grad, **EXACT)
    torch.testing.assert_close(manual["b_y"], model.readout.bias.grad, **EXACT)
    torch.testing.assert_close(manual["h0"], h0.grad, **EXACT)


@pytest.mark.parametrize("loss", ["mse", "ce"])
def test_manual_bptt_default_h0_is_zero(loss):
    model = _model("tanh")
    x, y, _ = _data(loss)
    h0 = torch.zeros(B, D_H, dtype=torch.float64, requires_grad=True)
    manual = manual_bptt(math_parameters(model), x, y, loss)
    _autograd_loss(model, x, y, h0, loss, None).backward()
    torch.testing.assert_close(manual["h0"], h0.grad, **EXACT)
    torch.testing.assert_close(manual["W_hh"], model.cell.weight_hh.grad, **EXACT)


def test_manual_bptt_without_bias():
    model = _model("tanh", bias=False)
    x, y, h0 = _data("mse")
    manual = manual_bptt(math_parameters(model), x, y, "mse", h0=h0)
    _autograd_loss(model, x, y, h0, "mse", None).backward()
    torch.testing.assert_close(manual["W_hh"], model.cell.weight_hh.grad, **EXACT)
    torch.testing.assert_close(manual["W_hy"], model.readout.weight.grad, **EXACT)


def test_manual_bptt_returns_every_gradient_with_its_parameters_shape():
    model = _model("tanh")
    x, y, _ = _data("mse")
    params = math_parameters(model)
    grads = manual_bptt(params, x, y)
    assert set(grads) == {*PARAMETER_NAMES, "h0", "loss"}
    for name in PARAMETER_NAMES:
        assert grads[name].shape == params[name].shape
    assert grads["h0"].shape == (B, D_H)
    assert grads["loss"].dim() == 0


def test_manual_bptt_does_not_touch_autograd():
    model = _model("tanh")
    x, y, _ = _data("mse")
    grads = manual_bptt(math_parameters(model), x, y)
    assert not any(g.requires_grad for g in grads.values())
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("name", PARAMETER_NAMES)
def test_missing_parameter_raises_key_error_naming_it(name):
    params = dict(math_parameters(_model("tanh")))
    del params[name]
    x, y, _ = _data("mse")
    with pytest.raises(KeyError, match=rf"params lacks \['{name}'\]"):
        manual_bptt(params, x, y)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(loss="nll"), r"loss must be one of \('mse', 'ce'\)"),
        (dict(nonlinearity="sigmoid"), r"nonlinearity must be one of \('tanh', 'relu'\)"),
    ],
)
def test_manual_bptt_rejects_unknown_choices(kwargs, match):
    x, y, _ = _data("mse")
    with pytest.raises(ValueError, match=match):
        manual_bptt(math_parameters(_model("tanh")), x, y, **kwargs)


def test_manual_bptt_rejects_2d_input():
    x, y, _ = _data("mse")
    with pytest.raises(ValueError, match="x must have 3 dimensions"):
        manual_bptt(math_parameters(_model("tanh")), x[0], y)
