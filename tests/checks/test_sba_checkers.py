"""Chapter 6's checkers accept right answers and reject the classic wrong ones, each with a
hint that names the mistake."""

import pytest
import torch

from rnnbook.checks import sba
from rnnbook.checks.grading import CheckFailed


def right_surprisal(v, M, pooling):
    B, H = v.shape
    modules = v.view(B, M, H // M)
    p = modules.amax(-1) if pooling == "max" else modules.mean(-1)
    return -torch.log_softmax(p, dim=-1)


def right_select(v_hat, v_prev, s, s_prev, theta):
    b = (s > s_prev + theta).to(v_hat.dtype)
    units = b.repeat_interleave(v_hat.shape[1] // b.shape[1], dim=1)
    return torch.where(units.bool(), v_hat, v_prev)


def right_s_ic(i, f, g, o, c_prev, B):
    c = f * c_prev + B * i * g
    return o * torch.tanh(c), c


def s_ic_where(i, f, g, o, c_prev, B):
    """Another right formulation: the input gate replaced with torch.where."""
    c = f * c_prev + torch.where(B == 1, i, torch.zeros_like(i)) * g
    return o * torch.tanh(c), c


def test_right_answers_pass(capsys):
    sba.module_surprisal(right_surprisal)
    sba.sba_select(right_select)
    sba.s_ic_cell(right_s_ic)
    assert capsys.readouterr().out.count("✓") == 3


def test_right_answers_in_other_forms_pass(capsys):
    sba.module_surprisal(
        lambda v, M, pooling: -torch.log(torch.softmax(_pool(v, M, pooling), -1))  # no log_softmax
    )
    sba.sba_select(_select_with(lambda s, sp, th: s - sp > th))
    sba.s_ic_cell(s_ic_where)
    sba.s_ic_cell(lambda *args: list(right_s_ic(*args)))  # a list is a pair too
    assert capsys.readouterr().out.count("✓") == 4


# the dtype rule (checks.dtypes): float64 in, float64 out; a float32 answer is refused by name
FLOAT32_ANSWERS = {
    "module_surprisal": (sba.module_surprisal,
                         lambda v, M, pooling: right_surprisal(v.float(), M, pooling)),
    "sba_select": (sba.sba_select,
                   lambda *args: right_select(*(a.float() for a in args[:4]), args[4])),
    "s_ic_cell": (sba.s_ic_cell, lambda *args: right_s_ic(*(a.float() for a in args))),
}  # fmt: skip


@pytest.mark.parametrize("name", FLOAT32_ANSWERS)
def test_a_float32_answer_is_refused_by_the_dtype_rule(name):
    checker, fn = FLOAT32_ANSWERS[name]
    with pytest.raises(CheckFailed, match="(?s)float32, but the inputs are float64.*dtype=x.dtype"):
        checker(fn)


def _pool(v, M, pooling):
    B, H = v.shape
    modules = v.view(B, M, H // M)
    return modules.amax(-1) if pooling == "max" else modules.mean(-1)


SURPRISAL_MISTAKES = {
    "per unit": (lambda v, M, pooling: -torch.log_softmax(v, -1), "pool each module"),
    "no minus": (lambda v, M, pooling: torch.log_softmax(_pool(v, M, pooling), -1), "<= 0"),
    "bits": (
        lambda v, M, pooling: (
            -torch.log_softmax(_pool(v, M, pooling), -1)
            / torch.log(torch.tensor(2.0, dtype=v.dtype))
        ),
        "natural logarithm",
    ),
    "other pooling": (
        lambda v, M, pooling: right_surprisal(v, M, "mean" if pooling == "max" else "max"),
        "pooled with the",
    ),
    "interleaved": (
        lambda v, M, pooling: right_surprisal(
            v.view(v.shape[0], v.shape[1] // M, M).transpose(1, 2).reshape(v.shape), M, pooling
        ),
        "every M-th unit",
    ),
    "batch softmax": (
        lambda v, M, pooling: -torch.log_softmax(_pool(v, M, pooling), 0),
        "over the batch",
    ),
    "log of pooled": (lambda v, M, pooling: -torch.log(_pool(v, M, pooling)), "log of the pooled"),
    "log10": (lambda v, M, pooling: right_surprisal(v, M, pooling) / 2.302585, "another base"),
    "sum pooling": (
        lambda v, M, pooling: -torch.log_softmax(v.view(v.shape[0], M, -1).sum(-1), -1),
        "pooled with the sum",
    ),
    "shares": (lambda v, M, pooling: torch.softmax(_pool(v, M, pooling), -1), "the shares"),
    "softmax over units, then pool": (
        lambda v, M, pooling: _pool(-torch.log_softmax(v, -1), M, pooling),
        "pool each module first",
    ),
    "M as module size": (
        lambda v, M, pooling: right_surprisal(v, v.shape[1] // M, pooling),
        "number of modules",
    ),
    "keepdim": (lambda v, M, pooling: right_surprisal(v, M, pooling)[..., None], "keepdim"),
    "summed": (lambda v, M, pooling: right_surprisal(v, M, pooling).sum(-1), "one surprisal per"),
    "the package's": (sba._sba.module_surprisal, "book's own function"),
    "detached": (lambda v, M, pooling: right_surprisal(v.detach(), M, pooling), "no gradient"),
    "through a number": (
        lambda v, M, pooling: torch.tensor(right_surprisal(v, M, pooling).tolist(), dtype=v.dtype),
        "no gradient reaches v",
    ),
}


@pytest.mark.parametrize("name", SURPRISAL_MISTAKES)
def test_surprisal_mistakes_are_named(name):
    fn, hint = SURPRISAL_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        sba.module_surprisal(fn)


def _select_with(decide, tiled=False, swapped=False):
    def select(v_hat, v_prev, s, s_prev, theta):
        b = decide(s, s_prev, theta).to(v_hat.dtype)
        K = v_hat.shape[1] // b.shape[1]
        units = b.repeat(1, K) if tiled else b.repeat_interleave(K, dim=1)
        if swapped:
            units = 1 - units
        return units * v_hat + (1 - units) * v_prev

    return select


def _in_place(v_hat, v_prev, s, s_prev, theta):
    out = right_select(v_hat, v_prev, s, s_prev, theta)
    v_prev.copy_(out)
    return out


def _straight_through(v_hat, v_prev, s, s_prev, theta):
    """Hard decisions forward, a sigmoid's gradient backward: the surprisals get one."""
    soft = torch.sigmoid(s - s_prev - theta)
    b = (s > s_prev + theta).to(v_hat.dtype) + soft - soft.detach()
    units = b.repeat_interleave(v_hat.shape[1] // b.shape[1], dim=1)
    return units * v_hat + (1 - units) * v_prev


SELECT_MISTAKES = {
    "reversed": (_select_with(lambda s, sp, th: s < sp + th), "wrong way round"),
    "threshold sign": (_select_with(lambda s, sp, th: s > sp - th), "works against"),
    "no threshold": (_select_with(lambda s, sp, th: s > sp), "left out"),
    "ties": (_select_with(lambda s, sp, th: s >= sp + th), ">= instead of >"),
    "swapped": (_select_with(lambda s, sp, th: s > sp + th, swapped=True), "wrong way round"),
    "tiled": (_select_with(lambda s, sp, th: s > sp + th, tiled=True), "wrong order"),
    "in place": (_in_place, "in place"),
    "twice theta": (_select_with(lambda s, sp, th: s > sp + 2 * th), "too large"),
    "relative": (_select_with(lambda s, sp, th: s > sp * (1 + th)), "too large"),
    "constant": (_select_with(lambda s, sp, th: s > sp + 0.12), "threshold"),
    "falls too": (_select_with(lambda s, sp, th: (s - sp).abs() > th), "fell updated"),
    "one per module": (lambda v, vp, s, sp, th: (s > sp + th).double(), "one value per module"),
    "detached candidate": (
        lambda v, vp, s, sp, th: right_select(v.detach(), vp, s, sp, th),
        "gradient that reaches v_hat",
    ),
    "straight through": (_straight_through, "a gradient reaches s"),
    "mixes units": (lambda v, vp, s, sp, th: 0.5 * (v + vp), "neither the candidate"),
}


@pytest.mark.parametrize("name", SELECT_MISTAKES)
def test_select_mistakes_are_named(name):
    fn, hint = SELECT_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        sba.sba_select(fn)


def _cell(c_of, h_from_plain=False):
    def cell(i, f, g, o, c_prev, B):
        c = c_of(i, f, g, c_prev, B)
        plain = f * c_prev + i * g
        return o * torch.tanh(plain if h_from_plain else c), c

    return cell


def _h_from_detached_cell(i, f, g, o, c_prev, B):
    c = f * c_prev + B * i * g
    return o * torch.tanh(c.detach()), c


def _zeroed_through_data(i, f, g, o, c_prev, B):
    """The kept modules' input gate set to 0 in a copy's data: the value is right, but
    the copy still passes the plain LSTM's gradient to i in the kept modules."""
    blocked = i * 1.0
    blocked.data[B == 0] = 0.0
    c = f * c_prev + blocked * g
    return o * torch.tanh(c), c


def _under_no_grad(*args):
    with torch.no_grad():
        return right_s_ic(*args)


S_IC_MISTAKES = {
    "nothing kept": (_cell(lambda i, f, g, c, B: f * c + i * g), "changed nothing"),
    "forget gate": (
        _cell(lambda i, f, g, c, B: B * (f * c + i * g) + (1 - B) * (c + i * g)),
        "S_f",
    ),
    "frozen cell": (_cell(lambda i, f, g, c, B: B * (f * c + i * g) + (1 - B) * c), "S_c"),
    "input to one": (_cell(lambda i, f, g, c, B: f * c + (B * i + (1 - B)) * g), "forced to 1"),
    "inverted": (_cell(lambda i, f, g, c, B: f * c + (1 - B) * i * g), "b_units = 1 means update"),
    "h from plain cell": (_cell(lambda i, f, g, c, B: f * c + B * i * g, True), "plain step"),
    "forget gate masked": (_cell(lambda i, f, g, c, B: B * f * c + i * g), "forget gate"),
    "reset to zero": (
        _cell(lambda i, f, g, c, B: torch.where(B == 0, 0 * c, f * c + i * g)),
        "set to zero",
    ),
    "order": (lambda *args: right_s_ic(*args)[::-1], r"returned \(c, h\)(?s:.*)output first"),
    "in place": (
        lambda i, f, g, o, c_prev, B: right_s_ic(
            i, f, g, o, c_prev.mul_(1.0) + 0 * c_prev.add_(0.1), B
        ),
        "in place",
    ),
    "detached input gate": (
        lambda i, f, g, o, c, B: right_s_ic(i.detach(), f, g, o, c, B),
        "no gradient reaches i from c",
    ),
    "detached previous cell": (
        lambda i, f, g, o, c, B: right_s_ic(i, f, g, o, c.detach(), B),
        "no gradient reaches c_prev from c",
    ),
    "detached forget gate": (
        lambda i, f, g, o, c, B: right_s_ic(i, f.detach(), g, o, c, B),
        "no gradient reaches f from c",
    ),
    "detached candidate": (
        lambda i, f, g, o, c, B: right_s_ic(i, f, g.detach(), o, c, B),
        "no gradient reaches g from c",
    ),
    "detached output gate": (
        lambda i, f, g, o, c, B: right_s_ic(i, f, g, o.detach(), c, B),
        "no gradient reaches o from h",
    ),
    "h from a detached cell": (_h_from_detached_cell, "from c: was c detached before h"),
    "input gate zeroed by data": (_zeroed_through_data, "reaches the kept modules"),
    "no_grad": (_under_no_grad, "left the graph"),
}


def _float32_zeros(i, f, g, o, c_prev, B):
    """The input gate copied into torch.zeros without a dtype: float32 values, which type
    promotion turns back into a float64 result."""
    blocked = torch.zeros(i.shape)
    blocked += B * i  # written into float32
    c = f * c_prev + blocked * g
    return o * torch.tanh(c), c


S_IC_MISTAKES["float32 zeros"] = (_float32_zeros, "(?s)only to float32 precision.*torch.zeros")


@pytest.mark.parametrize("name", S_IC_MISTAKES)
def test_s_ic_mistakes_are_named(name):
    fn, hint = S_IC_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        sba.s_ic_cell(fn)


def test_checkers_leave_the_global_random_state_alone():
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    sba.module_surprisal(right_surprisal)
    assert torch.equal(torch.rand(1), before)


def test_the_s_ic_reference_is_the_package_cell():
    from rnnbook.models import LSTMCell
    from rnnbook.models.sba import SBALSTMCell

    torch.manual_seed(0)
    cell = SBALSTMCell(3, 8, "ic", M=8).double()
    state = (torch.randn(4, 8, dtype=torch.float64), torch.randn(4, 8, dtype=torch.float64))
    s_ref = torch.randn(4, 8, dtype=torch.float64)
    x_proj = cell.project_inputs(torch.randn(4, 3, dtype=torch.float64))
    cell.trace = []
    h, c, _, _ = cell.step(x_proj, (*state, s_ref, s_ref))
    gates = LSTMCell.step_gates(cell, x_proj, state)
    units = cell.trace[0]  # M = H: one unit per module
    h_ref, c_ref = sba._s_ic(gates.input_gate, gates.forget_gate, gates.candidate,
                             gates.output_gate, state[1], units)  # fmt: skip
    assert torch.equal(c, c_ref) and torch.equal(h, h_ref)
