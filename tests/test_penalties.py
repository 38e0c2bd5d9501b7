"""Update penalties (Chapter 7): values by hand, the literal decision's zero gradient against
the straight-through one's, the margins an SBA layer records, RI, and bad input."""

import math

import pytest
import torch

from rnnbook.models import Recurrent
from rnnbook.models.sba import SBALSTMCell
from rnnbook.penalties import (
    budget_penalty,
    literal_decision,
    msure_penalty,
    norm_stabiliser,
    regularisation_influence,
    straight_through,
)

F32, F64 = torch.float32, torch.float64


def test_values_by_hand():
    b = torch.tensor([[[1.0, 0.0], [1.0, 1.0]], [[0.0, 0.0], [1.0, 0.0]]])  # (T=2, B=2, 2)
    assert float(budget_penalty(b, 0.5)) == 0.5 * (0.75 + 0.25)
    assert float(msure_penalty(b, 0.2, 10.0)) == pytest.approx(10 * (0.2 - 0.5) ** 2)
    h0 = torch.tensor([[3.0, 4.0]])  # norm 5
    h = torch.tensor([[[0.0, 2.0], [6.0, 8.0]]])  # norms 2, 10
    assert float(norm_stabiliser(h, h0, 2.0)) == 2.0 * ((2 - 5) ** 2 + (10 - 2) ** 2) / 2
    assert regularisation_influence([1.0, 3.0], [1.0, 1.0]) == pytest.approx((0.5 + 0.75) / 2)


def test_straight_through_has_the_literal_values_and_a_unit_derivative():
    margin = torch.tensor([-0.3, 0.0, 0.2, 1.5], requires_grad=True)
    assert torch.equal(straight_through(margin).detach(), literal_decision(margin))
    (grad,) = torch.autograd.grad(straight_through(margin).sum(), margin)
    assert torch.equal(grad, torch.ones(4))
    assert not literal_decision(margin).requires_grad  # a step function: nothing to follow


def _every_kind_of_margin(dtype):
    """0, -0, and +-10^k for k = -30 .. 30, with +-0.3 and +-3e7 (the margins at which the
    literal formula rounds in float32), in ``dtype``."""
    powers = [10.0**k for k in range(-30, 31)] + [0.3, 3e7, 1e-45 if dtype == F32 else 5e-324]
    values = [0.0, -0.0] + powers + [-p for p in powers]
    return torch.tensor(values, dtype=dtype)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["float32", "float64"])
def test_straight_through_is_exactly_zero_or_one_for_every_margin(dtype):
    margin = _every_kind_of_margin(dtype).requires_grad_()
    b = straight_through(margin)
    assert b.dtype == dtype
    assert torch.equal(b.detach(), (margin.detach() > 0).to(dtype))  # bitwise: 0 or 1 exactly
    assert set(b.detach().tolist()) == {0.0, 1.0}
    upstream = torch.linspace(-2.0, 3.0, margin.numel(), dtype=dtype)
    (grad,) = torch.autograd.grad(b, margin, upstream)
    assert torch.equal(grad, upstream)  # derivative 1: the gradient passes unchanged


def test_the_literal_formula_rounds_where_straight_through_does_not():
    # the control: written as hard + m - m.detach(), the forward value is not 0/1 in float32
    m = torch.tensor([0.3, 3e7], dtype=F32)
    literal = (m > 0).to(F32) + m - m.detach()
    assert literal.tolist() != [1.0, 1.0]  # 0.99999994 and 0.0
    assert straight_through(m).tolist() == [1.0, 1.0]


def test_straight_through_rejects_what_is_no_float_tensor():
    with pytest.raises(TypeError, match="floating-point"):
        straight_through(torch.tensor([1, -1]))
    with pytest.raises(TypeError, match="torch.Tensor"):
        straight_through([0.3])


def _margins_of_an_sba_layer():
    torch.manual_seed(0)
    cell = SBALSTMCell(5, 16, variant="ic", M=16).double()
    cell.margins = []
    Recurrent(cell)(torch.randn(4, 10, 5, dtype=F64))
    return cell, torch.stack(cell.margins)  # (T, B, M)


def test_the_literal_penalty_gives_no_gradient_and_the_surrogate_does():
    cell, margins = _margins_of_an_sba_layer()
    weights = list(cell.parameters())
    literal = msure_penalty(literal_decision(margins), 0.2, 10.0)
    assert not literal.requires_grad  # added to a loss it would change no weight
    surrogate = msure_penalty(straight_through(margins), 0.2, 10.0)
    assert float(surrogate.detach()) == float(literal)
    grads = torch.autograd.grad(surrogate, weights, allow_unused=True)
    assert sum(float(g.abs().sum()) for g in grads if g is not None) > 0


def test_recorded_margins_decide_as_the_layer_did():
    cell, margins = _margins_of_an_sba_layer()
    cell.trace, cell.margins = [], None
    torch.manual_seed(0)
    again = SBALSTMCell(5, 16, variant="ic", M=16).double()
    again.trace = []
    Recurrent(again)(torch.randn(4, 10, 5, dtype=F64))
    assert torch.equal(literal_decision(margins.detach()), torch.stack(again.trace))


def test_regularisation_influence_lies_in_zero_one():
    ri = regularisation_influence([0.0, 2.0, 1e9], [1.0, 2.0, 1.0])
    assert 0 <= ri <= 1 and math.isclose(ri, (0 + 0.5 + 1e9 / (1e9 + 1)) / 3)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: budget_penalty(torch.ones(3), 1.0), r"\(T, B, ...\)"),
        (lambda: budget_penalty(torch.ones(2, 2), -1.0), "lambda"),
        (lambda: msure_penalty(torch.ones(2, 2), 1.5, 1.0), "u_target"),
        (lambda: norm_stabiliser(torch.ones(2, 3, 4), torch.ones(2, 5), 1.0), "h0 must be"),
        (lambda: regularisation_influence([1.0], [1.0, 2.0]), "equally long"),
        (lambda: regularisation_influence([-1.0], [1.0]), ">= 0"),
    ],
)
def test_bad_input_is_rejected(call, match):
    with pytest.raises(ValueError, match=match):
        call()
