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


def _ste(m):
    """A student's own straight-through decisions (pen-ste)."""
    return (m > 0).to(m.dtype) + (m - m.detach())


def right_msure(margins, u_target, lam):
    hard = (margins > 0).to(margins.dtype)
    b = hard + (margins - margins.detach())
    return lam * (u_target - b.mean()) ** 2


def right_ns(h, h0, lam):
    norms = torch.cat([h0[:, None], h], dim=1).norm(dim=-1)
    return lam * (norms.diff(dim=1) ** 2).mean()


def test_right_answers_pass(capsys):
    zoneout.zoneout_step(right_zoneout)
    zoneout.msure_ste(right_msure)
    zoneout.norm_stabiliser(right_ns)
    assert capsys.readouterr().out.count("✓") == 3


def test_right_answers_in_other_forms_pass(capsys):
    zoneout.zoneout_step(lambda *args: list(right_zoneout(*args)))  # a list is a pair too
    zoneout.msure_ste(lambda m, u, lam: lam * (right_msure(m, u, 1.0) ** 0.5 * -1) ** 2)
    zoneout.msure_ste(  # the sign inside the square does not matter
        lambda m, u, lam: lam * (_ste(m).mean() - u) ** 2
    )
    zoneout.msure_ste(_custom_ste_msure)
    zoneout.msure_ste(_hard_part_under_no_grad)
    zoneout.msure_ste(lambda m, u, lam: right_msure(m, u, lam).reshape(1, 1))
    zoneout.msure_ste(  # the surrogate's zero term averaged apart
        lambda m, u, lam: lam * (u - (m > 0).to(m.dtype).mean() - (m - m.detach()).mean()) ** 2
    )
    zoneout.norm_stabiliser(lambda h, h0, lam: right_ns(h, h0, lam).reshape(1))
    zoneout.norm_stabiliser(lambda h, h0, lam: right_ns(h, h0.detach(), lam))
    assert capsys.readouterr().out.count("✓") == 9


# the dtype rule (checks.dtypes): float64 in, float64 out; a float32 answer is refused by name
FLOAT32_ANSWERS = {
    "zoneout_step": (zoneout.zoneout_step,
                     lambda *args: right_zoneout(*(a.float() for a in args))),
    "msure_ste": (zoneout.msure_ste, lambda m, u, lam: right_msure(m.float(), u, lam)),
    "norm_stabiliser": (zoneout.norm_stabiliser,
                        lambda h, h0, lam: right_ns(h.float(), h0.float(), lam)),
}  # fmt: skip


@pytest.mark.parametrize("name", FLOAT32_ANSWERS)
def test_a_float32_answer_is_refused_by_the_dtype_rule(name):
    checker, fn = FLOAT32_ANSWERS[name]
    with pytest.raises(CheckFailed, match="(?s)float32, but the inputs are float64.*dtype=x.dtype"):
        checker(fn)


def _zoneout_through_float32_zeros(c_prev, h_prev, c_tilde, o, d_c, d_h):
    squashed = torch.zeros(c_prev.shape)  # float32: the values written into it are rounded
    squashed += torch.tanh(c_tilde)
    c = d_c * c_prev + (1 - d_c) * c_tilde
    return d_h * h_prev + (1 - d_h) * (o * squashed), c  # promoted back to float64


def _ns_through_float32_norms(h, h0, lam):
    norms = torch.zeros(h.shape[0], h.shape[1] + 1)  # float32
    norms += torch.cat([h0[:, None], h], dim=1).norm(dim=-1)
    return lam * (norms.diff(dim=1) ** 2).mean() * torch.ones((), dtype=h.dtype)


def _msure_through_a_float32_target(margins, u_target, lam):
    target = torch.tensor(u_target)  # float32: u_target = 0.8 is rounded to 0.800000011920929
    return lam * (target - _ste(margins).mean()) ** 2  # promoted back to float64


@pytest.mark.parametrize(
    ("checker", "fn"),
    [(zoneout.zoneout_step, _zoneout_through_float32_zeros),
     (zoneout.norm_stabiliser, _ns_through_float32_norms),
     # was told its decisions "lost their 0/1 values to rounding" (a diagnosis within 1e-5)
     (zoneout.msure_ste, _msure_through_a_float32_target)],
    ids=["zoneout_step", "norm_stabiliser", "msure_ste"],
)  # fmt: skip
def test_float32_on_the_way_is_named(checker, fn):
    with pytest.raises(CheckFailed, match="(?s)only to float32 precision.*torch.zeros"):
        checker(fn)


def _msure_ge(margins, u_target, lam):
    b = (margins >= 0).to(margins.dtype) + (margins - margins.detach())
    return lam * (u_target - b.mean()) ** 2


def _msure_rounding(margins, u_target, lam):
    b = (margins > 0).to(margins.dtype) + margins - margins.detach()  # 1 + 1e17 rounds
    return lam * (u_target - b.mean()) ** 2


def test_msure_at_a_zero_margin_and_at_huge_margins():
    with pytest.raises(CheckFailed, match=r"(?s)exactly 0 counted as an update \(\[m >= 0\]\)"
                       ".*strict bracket"):  # fmt: skip
        zoneout.msure_ste(_msure_ge)
    with pytest.raises(CheckFailed, match="(?s)1e17 to 1e20.*lost their 0/1 values to rounding"):
        zoneout.msure_ste(_msure_rounding)


class _STE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, m):
        return (m > 0).to(m.dtype)

    @staticmethod
    def backward(ctx, g):
        return g


def _custom_ste_msure(margins, u_target, lam):
    return lam * (u_target - _STE.apply(margins).mean()) ** 2


def _hard_part_under_no_grad(margins, u_target, lam):
    with torch.no_grad():
        hard = (margins > 0).to(margins.dtype)
    return lam * (u_target - (hard + (margins - margins.detach())).mean()) ** 2


def test_the_notebook_solutions_and_other_forms_pass(capsys):
    def zoneout_step(c_prev, h_prev, c_tilde, o, d_c, d_h):
        c = d_c * c_prev + (1 - d_c) * c_tilde
        h = d_h * h_prev + (1 - d_h) * (o * torch.tanh(c_tilde))
        return h, c

    def msure_ste(margins, u_target, lam):
        b = (margins > 0).to(margins.dtype) + (margins - margins.detach())
        return lam * (u_target - b.mean()) ** 2

    def norm_stabiliser(h, h0, lam):
        norms = torch.cat([h0.norm(dim=-1, keepdim=True), h.norm(dim=-1)], dim=1)
        return lam * (norms[:, 1:] - norms[:, :-1]).pow(2).mean()

    zoneout.zoneout_step(zoneout_step)
    zoneout.zoneout_step(
        lambda cp, hp, ct, o, dc, dh: (
            torch.lerp(o * torch.tanh(ct), hp, dh),
            torch.lerp(ct, cp, dc),
        )
    )
    zoneout.zoneout_step(
        lambda cp, hp, ct, o, dc, dh: (
            torch.where(dh > 0.5, hp, o * torch.tanh(ct)),
            torch.where(dc > 0.5, cp, ct),
        )
    )
    zoneout.msure_ste(msure_ste)
    zoneout.norm_stabiliser(norm_stabiliser)
    zoneout.norm_stabiliser(
        lambda h, h0, lam: (
            lam
            * torch.linalg.vector_norm(torch.cat([h0[:, None], h], dim=1), dim=-1)
            .diff(dim=1)
            .square()
            .sum()
            / (h.shape[0] * h.shape[1])
        )
    )
    assert capsys.readouterr().out.count("✓") == 6


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


def _mixed(c_prev, h_prev, c_tilde, o, d_c, d_h):
    """(zo-lstm-c), (zo-lstm-h) written out, for masks of any shape."""
    c = d_c * c_prev + (1 - d_c) * c_tilde
    h = d_h * h_prev + (1 - d_h) * (o * torch.tanh(c_tilde))
    return h, c


def _book_cell_step(c_prev, h_prev, c_tilde, o, d_c, d_h):
    from rnnbook.models.zoneout import ZoneoutLSTMCell

    ZoneoutLSTMCell.step(None, None, (h_prev, c_prev))


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
    "the checker's own": (zoneout._zoneout, "book's own function"),
    "one mask per sequence": (
        lambda cp, hp, ct, o, dc, dh: right_zoneout(cp, hp, ct, o, dc[:, :1], dh[:, :1]),
        r"in both c and h, the mask of each state is one coin per sequence, \(B, 1\)",
    ),
    "one mask per sequence for c": (
        lambda cp, hp, ct, o, dc, dh: right_zoneout(cp, hp, ct, o, dc[:, :1], dh),
        r"c is not right: the mask of c is one coin per sequence",
    ),
    "the mask's mean as a probability": (
        lambda cp, hp, ct, o, dc, dh: _mixed(cp, hp, ct, o, dc.mean(), dh.mean()),
        "the mean of the mask of each state is used as a probability",
    ),
    "dropout rescaling": (
        lambda cp, hp, ct, o, dc, dh: (
            dh * hp + (1 - dh) * o * torch.tanh(ct) / (1 - dh.mean()),
            dc * cp + (1 - dc) * ct / (1 - dc.mean()),
        ),
        "rescaled by .*as in dropout",
    ),
    "d * new": (
        lambda cp, hp, ct, o, dc, dh: (dh * o * torch.tanh(ct), dc * ct),
        "each state keeps the new value where d = 1 and zeroes the rest",
    ),
    "h from c_prev": (
        lambda cp, hp, ct, o, dc, dh: (
            dh * hp + (1 - dh) * o * torch.tanh(cp),
            right_zoneout(cp, hp, ct, o, dc, dh)[1],
        ),
        "h's candidate is built from c_prev",
    ),
    "kept h recomputed": (
        lambda cp, hp, ct, o, dc, dh: (
            dh * o * torch.tanh(cp) + (1 - dh) * o * torch.tanh(ct),
            right_zoneout(cp, hp, ct, o, dc, dh)[1],
        ),
        "kept unit's output is recomputed from c_prev",
    ),
    "o missing": (
        lambda cp, hp, ct, o, dc, dh: right_zoneout(cp, hp, ct, torch.ones_like(o), dc, dh),
        "output gate o is missing",
    ),
    "o outside the mixture": (
        lambda cp, hp, ct, o, dc, dh: (
            o * (dh * hp + (1 - dh) * torch.tanh(ct)),
            right_zoneout(cp, hp, ct, o, dc, dh)[1],
        ),
        "o multiplies the whole mixture",
    ),
    "nothing updates": (lambda cp, hp, ct, o, dc, dh: (hp.clone(), cp.clone()), "nothing updates"),
    "swapped masks and h from the zoned cell": (
        _step(c_mask="h", h_mask="c", h_from_zoned=True),
        "masks of c and h are swapped, and h is built from the zoned cell",
    ),
    "both wrong, differently": (
        lambda cp, hp, ct, o, dc, dh: (
            dh * hp + (1 - dh) * torch.tanh(ct),
            dc * cp + (1 - dc) * torch.tanh(ct),
        ),
        "both c and h are wrong: the cell's candidate .*; the output gate o is missing",
    ),
    "the book's cell step": (_book_cell_step, "book's own rnnbook.models.zoneout"),
}


def _zoneout_no_grad(*args):
    with torch.no_grad():
        return right_zoneout(*args)


ZONEOUT_MISTAKES |= {
    "previous states detached": (
        lambda cp, hp, ct, o, dc, dh: right_zoneout(cp.detach(), hp.detach(), ct, o, dc, dh),
        "no gradient reaches c_prev from the kept units of c",
    ),
    "previous output detached": (
        lambda cp, hp, ct, o, dc, dh: right_zoneout(cp, hp.detach(), ct, o, dc, dh),
        "no gradient reaches h_prev from the kept units of h",
    ),
    "candidate and gate detached": (
        lambda cp, hp, ct, o, dc, dh: right_zoneout(cp, hp, ct.detach(), o.detach(), dc, dh),
        "no gradient reaches c_tilde from the updating units of c",
    ),
    "gate detached": (
        lambda cp, hp, ct, o, dc, dh: right_zoneout(cp, hp, ct, o.detach(), dc, dh),
        "no gradient reaches o from the updating units of h",
    ),
    "under no_grad": (_zoneout_no_grad, "no gradient flows through c"),
    "result detached": (
        lambda *args: tuple(t.detach() for t in right_zoneout(*args)),
        "a kept unit passes its gradient unchanged",
    ),
    "previous cell scaled in the backward pass": (
        lambda cp, hp, ct, o, dc, dh: right_zoneout(
            cp + 0.5 * (cp - cp.detach()), hp, ct, o, dc, dh
        ),
        "gradient of c with respect to c_prev is not the mask d_c",
    ),
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
    "sum": (_msure_of(lambda m: _ste(m).sum()), "sum of the decisions"),
    "no square": (
        _msure_of(lambda m: _ste(m).mean(), square=False),
        "not squared",
    ),
    "lam missing": (
        _msure_of(lambda m: _ste(m).mean(), weight=False),
        "lam is missing",
    ),
    "detached margins": (
        _msure_of(lambda m: _ste(m.detach()).mean()),
        "detached",
    ),
    "margins via data": (
        _msure_of(lambda m: _ste(m.data).mean()),
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
        lambda m, u, lam: lam * (u - _ste(m).flatten(1).mean(1)) ** 2,
        "not one number",
    ),
    "a float": (lambda m, u, lam: right_msure(m, u, lam).item(), "torch.Tensor"),
    "in place": (lambda m, u, lam: right_msure(m.data.mul_(1.5), u, lam), "in place"),
    "the package's": (penalties.msure_penalty, "book's own function"),
}


def _from_ste(decide):
    """An MSURE answer whose decisions b come from ``decide(margins)``."""
    return lambda m, u, lam: lam * (u - decide(m).mean()) ** 2


def _heaviside(m, u, lam):
    b = torch.heaviside(m, torch.zeros((), dtype=m.dtype))
    return lam * (u - b.mean()) ** 2


def _through(surrogate):
    """Forward [m > 0], backward the slope of ``surrogate``."""

    def decide(m):
        s = surrogate(m)
        return s + ((m > 0).to(m.dtype) - s).detach()

    return _from_ste(decide)


def _wrapped_imported_names(m, u, lam):
    from rnnbook.penalties import msure_penalty, straight_through

    return msure_penalty(straight_through(m), u_target=u, lam=lam)


MSURE_MISTAKES |= {
    "heaviside": (
        _heaviside,
        "(?s)gradient could not be computed.*step function has no derivative",
    ),
    "lam squared": (lambda m, u, lam: (lam * (u - _ste(m).mean())) ** 2, "lam is squared"),
    "a factor 1/2": (lambda m, u, lam: 0.5 * right_msure(m, u, lam), "factor 1/2"),
    "per step": (
        lambda m, u, lam: lam * ((u - _ste(m).mean(dim=(1, 2))) ** 2).mean(),
        "computed per step and then averaged",
    ),
    "per sequence": (
        lambda m, u, lam: lam * ((u - _ste(m).mean(dim=(0, 2))) ** 2).mean(),
        "computed per sequence and then averaged",
    ),
    "summed over time": (
        lambda m, u, lam: lam * (u - _ste(m).sum(0).mean()) ** 2,
        r"summed over time",
    ),
    "per-decision squared error": (
        lambda m, u, lam: lam * ((u - _ste(m)) ** 2).mean(),
        "squared error of each decision",
    ),
    "difference of squares": (
        lambda m, u, lam: lam * (u**2 - _ste(m).mean() ** 2),
        "difference of the squares",
    ),
    "sign decisions": (
        _from_ste(lambda m: torch.sign(m) + m - m.detach()),
        r"sign\(m\), -1 or 1",
    ),
    "item then tensor": (
        lambda m, u, lam: torch.tensor(lam * (u - _ste(m).mean().item()) ** 2, dtype=m.dtype),
        r"left the graph through \.item\(\)",
    ),
    "result detached after a right estimator": (
        lambda m, u, lam: right_msure(m, u, lam).detach(),
        "graph was cut .*on the way to the penalty",
    ),
    "relu over abs": (
        _from_ste(lambda m: torch.relu(m) / m.abs()),
        "gradient to the margins is zero",
    ),
    "clipped estimator": (
        _through(lambda m: torch.clamp(m, -1, 1)),
        "(?s)0 in the other .*one-sided or clipped.*1 on every margin",
    ),
    "relu estimator": (
        _through(torch.relu),
        "(?s)one-sided or clipped.*1 on every margin",
    ),
    "estimator on the positive margins only": (
        _from_ste(lambda m: (m > 0).to(m.dtype) * (1 + m - m.detach())),
        "one-sided or clipped",
    ),
    "tanh estimator": (_through(torch.tanh), "soft surrogate's slope"),
    "the package's, wrapped": (
        lambda m, u, lam: penalties.msure_penalty(penalties.straight_through(m), u, lam),
        "book's own rnnbook.penalties.straight_through",
    ),
    "the package's msure, wrapped": (
        lambda m, u, lam: penalties.msure_penalty(_ste(m), u, lam),
        "book's own rnnbook.penalties.msure_penalty",
    ),
    "the package's, imported by name": (
        _wrapped_imported_names,
        "book's own rnnbook.penalties.straight_through",
    ),
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
    "the package's": (penalties.norm_stabiliser, "book's own function"),
}


def _norms(h, h0, p=2):
    return _states(h, h0).norm(p=p, dim=-1)


def _ns_of(norms):
    """lam times the mean squared step-to-step change of ``norms(h, h0)`` (B, T + 1)."""
    return lambda h, h0, lam: lam * (norms(h, h0).diff(dim=1) ** 2).mean()


def _ns_imported_by_name(h, h0, lam):
    from rnnbook.penalties import norm_stabiliser

    return norm_stabiliser(h, h0, lam)


NS_MISTAKES |= {
    "h0 at the end": (
        _ns_of(lambda h, h0: torch.cat([h, h0[:, None]], dim=1).norm(dim=-1)),
        "h0 is put at the end",
    ),
    "abs instead of square": (
        lambda h, h0, lam: lam * _norms(h, h0).diff(dim=1).abs().mean(),
        "absolute difference replaces the square",
    ),
    "mean over the units": (
        _ns_of(lambda h, h0: _states(h, h0).mean(dim=-1)),
        "mean over the units, not the norm",
    ),
    "RMS over the units": (
        _ns_of(lambda h, h0: _states(h, h0).pow(2).mean(dim=-1).sqrt()),
        "RMS over the units",
    ),
    "L1 norm": (_ns_of(lambda h, h0: _norms(h, h0, p=1)), "L1 norm"),
    "diff over the batch": (
        lambda h, h0, lam: lam * (_norms(h, h0).diff(dim=0) ** 2).mean(),
        "differences are taken over the batch",
    ),
    "every step against h0": (
        lambda h, h0, lam: lam * (h.norm(dim=-1) - h0.norm(dim=-1, keepdim=True)).pow(2).mean(),
        "every step is compared with h0",
    ),
    "a zero h0": (
        lambda h, h0, lam: right_ns(h, torch.zeros_like(h0), lam),
        "zero state is used instead of h0",
    ),
    "sqrt of the mean": (
        lambda h, h0, lam: lam * (_norms(h, h0).diff(dim=1) ** 2).mean().sqrt(),
        "square root of the mean",
    ),
    "variance over time": (
        lambda h, h0, lam: lam * _norms(h, h0).var(dim=1).mean(),
        "variance of the norms",
    ),
    "divided by T + 1": (
        lambda h, h0, lam: (
            lam * (_norms(h, h0).diff(dim=1) ** 2).sum() / (h.shape[0] * (h.shape[1] + 1))
        ),
        r"divides by T \+ 1",
    ),
    "diff over the units": (
        lambda h, h0, lam: lam * _states(h, h0).diff().norm(dim=-1).pow(2).mean(),
        "differences are taken over the units",
    ),
    "no derivative": (
        lambda h, h0, lam: (
            lam
            * (
                torch.heaviside(_norms(h, h0), torch.ones((), dtype=h.dtype)).diff(dim=1) ** 2
                + right_ns(h, h0, 1.0)
            ).mean()
        ),
        "gradient could not be computed",
    ),
    "the package's, wrapped": (
        lambda h, h0, lam: penalties.norm_stabiliser(h, h0, lam),
        "book's own rnnbook.penalties.norm_stabiliser",
    ),
    "the package's, imported by name": (
        _ns_imported_by_name,
        "book's own rnnbook.penalties.norm_stabiliser",
    ),
}


def test_a_wrong_value_gets_a_hint_that_is_no_recipe():
    with pytest.raises(CheckFailed) as failed:
        zoneout.norm_stabiliser(lambda h, h0, lam: lam * (_norms(h, h0).diff(dim=1) ** 4).mean())
    assert "by hand on a tiny case" in str(failed.value)
    assert "(B, T + 1)" not in str(failed.value)


def test_the_book_is_back_after_a_check():
    from rnnbook.models.zoneout import ZoneoutLSTMCell

    book = (penalties.msure_penalty, penalties.straight_through, penalties.norm_stabiliser)
    step = ZoneoutLSTMCell.__dict__["step"]
    zoneout.msure_ste(right_msure)
    with pytest.raises(CheckFailed):
        zoneout.norm_stabiliser(lambda h, h0, lam: penalties.norm_stabiliser(h, h0, lam))
    with pytest.raises(CheckFailed):
        zoneout.zoneout_step(_book_cell_step)
    after = (penalties.msure_penalty, penalties.straight_through, penalties.norm_stabiliser)
    assert after == book and ZoneoutLSTMCell.__dict__["step"] is step
    h, h0 = torch.randn(2, 3, 4), torch.randn(2, 4)
    assert torch.allclose(penalties.norm_stabiliser(h, h0, 1.0), right_ns(h, h0, 1.0))


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
    assert torch.equal(R, penalties.msure_penalty(penalties.straight_through(m), 0.3, 2.0))

    h, h0 = torch.randn(3, 5, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    assert torch.equal(zoneout._ns(h, h0, 0.7), penalties.norm_stabiliser(h, h0, 0.7))
