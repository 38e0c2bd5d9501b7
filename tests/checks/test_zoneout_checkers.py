"""Chapter 7's checkers accept right answers and reject the classic wrong ones, each with a
hint that names the mistake."""

import pytest
import torch

from rnnbook import penalties
from rnnbook.checks import zoneout
from rnnbook.checks.grading import CheckFailed


def _stub(*args):
    raise NotImplementedError


def right_zoneout(c_prev, h_prev, c_tilde, o, d_c, d_h):
    c = torch.where(d_c.bool(), c_prev, c_tilde)
    h = torch.where(d_h.bool(), h_prev, o * torch.tanh(c_tilde))
    return h, c


def right_msure(margins, u_target, lam):
    hard = (margins > 0).to(margins.dtype)
    b = hard + margins - margins.detach()
    return lam * (u_target - b.mean()) ** 2


def right_ns(h, h0, lam):
    norms = torch.cat([h0[:, None], h], dim=1).norm(dim=-1)
    return lam * (norms.diff(dim=1) ** 2).mean()


def test_right_answers_pass(capsys):
    zoneout.zoneout_step(right_zoneout)
    zoneout.msure_ste(right_msure)
    zoneout.norm_stabiliser(right_ns)
    assert capsys.readouterr().out.count("✓") == 3


def test_right_answers_in_float32_and_other_forms_pass(capsys):
    zoneout.zoneout_step(lambda *args: right_zoneout(*(a.float() for a in args)))
    zoneout.zoneout_step(lambda *args: list(right_zoneout(*args)))  # a list is a pair too
    zoneout.msure_ste(lambda m, u, lam: right_msure(m.float(), u, lam))
    zoneout.msure_ste(lambda m, u, lam: lam * (right_msure(m, u, 1.0) ** 0.5 * -1) ** 2)
    zoneout.msure_ste(  # the sign inside the square does not matter
        lambda m, u, lam: lam * (penalties.straight_through(m).mean() - u) ** 2
    )
    zoneout.msure_ste(
        lambda m, u, lam: penalties.msure_penalty(penalties.straight_through(m), u, lam)
    )
    zoneout.norm_stabiliser(lambda h, h0, lam: right_ns(h.float(), h0.float(), lam))
    zoneout.norm_stabiliser(lambda h, h0, lam: right_ns(h, h0, lam).reshape(1))
    assert capsys.readouterr().out.count("✓") == 8


def _step(c_mask=None, h_mask=None, c_keep=None, h_keep=None, h_from_zoned=False):
    """A zoneout step with a mistake: which mask zones c and h (``"c"``, ``"h"``, or
    ``"inverted"``), what a kept unit becomes, and whether h comes from the zoned cell."""

    def step(c_prev, h_prev, c_tilde, o, d_c, d_h):
        masks = {"c": d_c, "h": d_h}
        dc = masks.get(c_mask, d_c)
        dh = masks.get(h_mask, d_h)
        if c_mask == "inverted":
            dc = 1 - d_c
        if h_mask == "inverted":
            dh = 1 - d_h
        kept_c = c_prev if c_keep is None else c_keep(c_prev)
        kept_h = h_prev if h_keep is None else h_keep(h_prev)
        c = dc * kept_c + (1 - dc) * c_tilde
        h = dh * kept_h + (1 - dh) * (o * torch.tanh(c if h_from_zoned else c_tilde))
        return h, c

    return step


def _in_place_step(c_prev, h_prev, c_tilde, o, d_c, d_h):
    h, c = right_zoneout(c_prev, h_prev, c_tilde, o, d_c, d_h)
    c_prev.copy_(c)
    return h, c


ZONEOUT_MISTAKES = {
    "h from the zoned cell": (_step(h_from_zoned=True), "zoned cell"),
    "inverted masks": (_step(c_mask="inverted", h_mask="inverted"), r"inverted \(1 = update\)"),
    "inverted cell mask": (_step(c_mask="inverted"), "inverted"),
    "dropout": (_step(c_keep=torch.zeros_like, h_keep=torch.zeros_like), "dropout"),
    "dropout of the cell": (_step(c_keep=torch.zeros_like), "dropout"),
    "shared mask": (_step(h_mask="c"), "shared mask"),
    "shared output mask": (_step(c_mask="h"), "shared mask"),
    "swapped masks": (_step(c_mask="h", h_mask="c"), "swapped"),
    "order": (lambda *args: right_zoneout(*args)[::-1], r"returned \(c, h\)"),
    "one tensor": (lambda *args: torch.stack(right_zoneout(*args)), "not a pair"),
    "wrong shape": (lambda *args: tuple(t.T for t in right_zoneout(*args)), "should have shape"),
    "in place": (_in_place_step, "in place"),
    "h not zoned": (
        lambda cp, hp, ct, o, dc, dh: (o * torch.tanh(ct), right_zoneout(cp, hp, ct, o, dc, dh)[1]),
        "h ignores its mask",
    ),
    "h wrong otherwise": (
        lambda cp, hp, ct, o, dc, dh: (dh * hp + (1 - dh) * o * ct, dc * cp + (1 - dc) * ct),
        "c is right, h is not",
    ),
    "c wrong otherwise": (
        lambda cp, hp, ct, o, dc, dh: (
            right_zoneout(cp, hp, ct, o, dc, dh)[0],
            dc * cp + (1 - dc) * torch.tanh(ct),
        ),
        "c is not right",
    ),
    "stub": (_stub, "not implemented"),
    "the checker's own": (zoneout._zoneout, "book's own function"),
}


@pytest.mark.parametrize("name", ZONEOUT_MISTAKES)
def test_zoneout_mistakes_are_named(name):
    fn, hint = ZONEOUT_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        zoneout.zoneout_step(fn)


def _msure_of(u_of, weight=True, square=True):
    def penalty(margins, u_target, lam):
        diff = u_target - u_of(margins)
        value = diff**2 if square else diff
        return lam * value if weight else value

    return penalty


def _soft_backward(margins, u_target, lam):
    soft = torch.sigmoid(margins)
    b = (margins > 0).to(margins.dtype) + soft - soft.detach()
    return lam * (u_target - b.mean()) ** 2


def _no_grad_msure(m, u, lam):
    with torch.no_grad():
        return right_msure(m, u, lam)


MSURE_MISTAKES = {
    "literal bracket": (
        _msure_of(lambda m: penalties.literal_decision(m).mean()),
        "literal bracket",
    ),
    "literal bracket via sign": (
        _msure_of(lambda m: ((torch.sign(m) + 1) / 2).mean()),
        "literal bracket",
    ),
    "sigmoid forward": (
        _msure_of(lambda m: torch.sigmoid(m).mean()),
        "forward value uses a sigmoid",
    ),
    "hard sigmoid forward": (
        _msure_of(lambda m: torch.clamp(m + 0.5, 0, 1).mean()),
        "soft surrogate",
    ),
    "sum": (_msure_of(lambda m: penalties.straight_through(m).sum()), "sum of the decisions"),
    "no square": (
        _msure_of(lambda m: penalties.straight_through(m).mean(), square=False),
        "not squared",
    ),
    "lam missing": (
        _msure_of(lambda m: penalties.straight_through(m).mean(), weight=False),
        "lam is missing",
    ),
    "detached margins": (
        _msure_of(lambda m: penalties.straight_through(m.detach()).mean()),
        "detached",
    ),
    "margins via data": (
        _msure_of(lambda m: penalties.straight_through(m.data).mean()),
        "detached",
    ),
    "under no_grad": (_no_grad_msure, "detached"),
    "mean of the margins": (_msure_of(lambda m: m.mean()), "margins themselves"),
    "reversed decisions": (_msure_of(lambda m: (m < 0).to(m.dtype).mean()), r"\[m < 0\]"),
    "wrong gradient sign": (
        _msure_of(lambda m: ((m > 0).to(m.dtype) + m.detach() - m).mean()),
        "wrong sign",
    ),
    "sigmoid backward": (_soft_backward, "soft surrogate's slope"),
    "scaled surrogate": (
        _msure_of(lambda m: ((m > 0).to(m.dtype) + 2 * (m - m.detach())).mean()),
        "exactly 1",
    ),
    "one value per step": (
        lambda m, u, lam: lam * (u - penalties.straight_through(m).flatten(1).mean(1)) ** 2,
        "not one number",
    ),
    "a float": (lambda m, u, lam: right_msure(m, u, lam).item(), "torch.Tensor"),
    "in place": (lambda m, u, lam: right_msure(m.data.mul_(1.5), u, lam), "in place"),
    "stub": (_stub, "not implemented"),
    "the package's": (penalties.msure_penalty, "book's own function"),
}


@pytest.mark.parametrize("name", MSURE_MISTAKES)
def test_msure_mistakes_are_named(name):
    fn, hint = MSURE_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        zoneout.msure_ste(fn)


def _states(h, h0):
    return torch.cat([h0[:, None], h], dim=1)


NS_MISTAKES = {
    "norm of the difference": (
        lambda h, h0, lam: lam * (_states(h, h0).diff(dim=1).norm(dim=-1) ** 2).mean(),
        "norm of the difference",
    ),
    "h0 left out": (
        lambda h, h0, lam: lam * (h.norm(dim=-1).diff(dim=1) ** 2).mean(),
        "h0 is left out",
    ),
    "squared norms": (
        lambda h, h0, lam: lam * (_states(h, h0).pow(2).sum(-1).diff(dim=1) ** 2).mean(),
        "squared norms",
    ),
    "sum over steps": (
        lambda h, h0, lam: lam * (_states(h, h0).norm(dim=-1).diff(dim=1) ** 2).sum(1).mean(),
        "sums over the steps",
    ),
    "sum over batch": (
        lambda h, h0, lam: lam * (_states(h, h0).norm(dim=-1).diff(dim=1) ** 2).mean(1).sum(),
        "sums over the batch",
    ),
    "norm over time": (
        lambda h, h0, lam: lam * (_states(h, h0).norm(dim=1).diff(dim=1) ** 2).mean(),
        "norm is taken over time",
    ),
    "norm over the batch": (
        lambda h, h0, lam: lam * (_states(h, h0).norm(dim=0).diff(dim=0) ** 2).mean(),
        "norm is taken over the batch",
    ),
    "lam missing": (lambda h, h0, lam: right_ns(h, h0, 1.0), "lam is missing"),
    "detached": (lambda h, h0, lam: right_ns(h.detach(), h0, lam), "no gradient reaches h"),
    "detached previous norm": (
        lambda h, h0, lam: (
            lam * ((h.norm(dim=-1) - _states(h, h0).norm(dim=-1)[:, :-1].detach()) ** 2).mean()
        ),
        "gradient that reaches h",
    ),
    "per sequence": (
        lambda h, h0, lam: lam * (_states(h, h0).norm(dim=-1).diff(dim=1) ** 2).mean(1),
        "not one number",
    ),
    "in place": (lambda h, h0, lam: right_ns(h, h0.mul_(2), lam), "in place"),
    "stub": (_stub, "not implemented"),
    "the package's": (penalties.norm_stabiliser, "book's own function"),
}


@pytest.mark.parametrize("name", NS_MISTAKES)
def test_norm_stabiliser_mistakes_are_named(name):
    fn, hint = NS_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        zoneout.norm_stabiliser(fn)


def test_checkers_leave_the_global_random_state_alone():
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    zoneout.zoneout_step(right_zoneout)
    zoneout.msure_ste(right_msure)
    zoneout.norm_stabiliser(right_ns)
    assert torch.equal(torch.rand(1), before)


def test_the_references_are_the_package_cell_and_penalty():
    from rnnbook.models import LSTMCell
    from rnnbook.models.zoneout import ZoneoutLSTMCell

    torch.manual_seed(0)
    cell = ZoneoutLSTMCell(3, 8, z_c=0.5, z_h=0.3).double()
    state = (torch.randn(4, 8, dtype=torch.float64), torch.randn(4, 8, dtype=torch.float64))
    d_c, d_h = (torch.rand(4, 8) < 0.5).double(), (torch.rand(4, 8) < 0.5).double()
    cell.masks = lambda like: (d_c, d_h)
    x_proj = cell.project_inputs(torch.randn(4, 3, dtype=torch.float64))
    h, c = cell.step(x_proj, state)
    plain = LSTMCell.step_gates(cell, x_proj, state)
    h_ref, c_ref = zoneout._zoneout(state[1], state[0], plain.c, plain.output_gate, d_c, d_h)
    assert torch.equal(h, h_ref) and torch.equal(c, c_ref)

    m = torch.randn(4, 3, 2, dtype=torch.float64, requires_grad=True)
    R = zoneout._msure(m, 0.3, 2.0)
    u = (m > 0).double().mean()
    assert torch.allclose(R, 2.0 * (0.3 - u) ** 2)
    (grad,) = torch.autograd.grad(R, m)
    assert torch.allclose(grad, torch.full_like(m, -2 * 2.0 * (0.3 - u) / m.numel()))
