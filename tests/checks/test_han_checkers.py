"""Chapter 8's checkers accept right answers and reject the classic wrong ones, each with a
hint that names the mistake."""

import pytest
import torch

from rnnbook.checks import han
from rnnbook.checks.grading import CheckFailed

# --- right answers: the model solutions of the chapter ---------------------------------------


def right_pointer_sum(alpha_doc, doc, cands):
    B = doc.shape[0]
    tokens, alpha = doc.reshape(B, -1), alpha_doc.reshape(B, -1)  # (B, S·W)
    hit = tokens[:, :, None] == cands[:, None, :]  # (B, S·W, K): position n holds c_k
    hit = hit & (tokens != 0)[:, :, None]  # PAD never counts
    return (alpha[:, :, None] * hit).sum(1)  # (B, K)


def right_masked_softmax(scores, mask):
    very_negative = torch.finfo(scores.dtype).min
    alpha = torch.softmax(scores.masked_fill(~mask, very_negative), dim=-1)
    return alpha.masked_fill(~mask, 0.0)


def right_effective_update_rate(u, u_min):
    return 100 * (u_min - u) / (u_min - 100)


def right_sens_step(h_hat, h_prev, s, s_prev, theta):
    d = s - s_prev - theta  # (B, M)
    vote = (d > 0).to(d.dtype) + (d - d.detach())  # (9.14) with the STE (9.17)
    p = vote.mean(-1, keepdim=True)  # (9.15): (B, 1)
    b = (p.detach() >= 0.5).to(p.dtype) + (p - p.detach())  # (9.16): a tie updates
    return b * h_hat + (1 - b) * h_prev


def test_right_answers_pass(capsys):
    han.pointer_sum(right_pointer_sum)
    han.masked_softmax(right_masked_softmax)
    han.effective_update_rate(right_effective_update_rate)
    han.sens_step(right_sens_step)
    assert capsys.readouterr().out.count("✓") == 4


def _einsum_pointer(alpha_doc, doc, cands):
    hit = (doc[..., None] == cands[:, None, None, :]) & (doc != 0)[..., None]
    return torch.einsum("bsw,bswk->bk", alpha_doc, hit.to(alpha_doc.dtype))


def _loop_pointer(alpha_doc, doc, cands):
    rows = []
    for a, d, c in zip(alpha_doc, doc, cands):
        rows.append(torch.stack([a[(d == k) & (d != 0)].sum() for k in c]))
    return torch.stack(rows)


def _scatter_pointer(alpha_doc, doc, cands):
    """A vocabulary-wide scatter_add sized by the largest id of doc and cands: right."""
    B, V = doc.shape[0], int(max(doc.max(), cands.max())) + 1
    bins = alpha_doc.new_zeros(B, V).scatter_add(1, doc.flatten(1), alpha_doc.flatten(1))
    return bins.gather(1, cands) * (cands != 0)


def _where_softmax(scores, mask):
    filled = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    return torch.where(mask, torch.softmax(filled, -1), 0.0)


def _shifted_softmax(scores, mask):
    """exp(x - max) over the real positions, divided by a sum guarded for empty rows."""
    top = scores.masked_fill(~mask, torch.finfo(scores.dtype).min).amax(-1, keepdim=True)
    e = torch.exp((scores - top).masked_fill(~mask, 0.0)) * mask
    return e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)


def _sens_where_votes(h_hat, h_prev, s, s_prev, theta):
    """Votes counted apart, p by the STE, the mix written as h_prev + b (h_hat - h_prev)."""
    d = s - s_prev - theta
    hard = (s > s_prev + theta).to(s.dtype)
    vote = hard + (d - d.detach())
    p = vote.mean(-1, keepdim=True)
    b = (2 * hard.sum(-1, keepdim=True) >= s.shape[1]).to(p.dtype) + (p - p.detach())
    return h_prev + b * (h_hat - h_prev)


def test_right_answers_in_other_forms_pass(capsys):
    han.pointer_sum(_einsum_pointer)
    han.pointer_sum(_loop_pointer)
    han.pointer_sum(_scatter_pointer)
    han.masked_softmax(_where_softmax)
    han.masked_softmax(_shifted_softmax)
    han.effective_update_rate(lambda u, m: torch.tensor(right_effective_update_rate(u, m)))
    han.effective_update_rate(lambda u, m: 100 - (100 - u) / (1 - m / 100))
    han.sens_step(_sens_where_votes)
    assert capsys.readouterr().out.count("✓") == 8


def test_a_float32_answer_of_float64_inputs_is_refused_by_the_dtype_rule():
    with pytest.raises(CheckFailed, match="(?s)float32, but the inputs are float64.*dtype=x.dtype"):
        han.pointer_sum(lambda a, d, c: right_pointer_sum(a.float(), d, c))


# --- pointer sum ------------------------------------------------------------------------------


def _first_only(alpha_doc, doc, cands):
    B = doc.shape[0]
    tokens, alpha = doc.reshape(B, -1), alpha_doc.reshape(B, -1)
    hit = (tokens[:, :, None] == cands[:, None, :]) & (tokens != 0)[:, :, None]
    first = hit.long().argmax(1)
    return alpha.gather(1, first) * hit.any(1)


def _index_put(alpha_doc, doc, cands):
    """P[b, doc] = alpha: a repeated index keeps one value."""
    B = doc.shape[0]
    scores = torch.zeros(B, 100, dtype=alpha_doc.dtype)
    rows = torch.arange(B)[:, None].expand(-1, doc[0].numel())
    scores[rows, doc.reshape(B, -1)] = alpha_doc.reshape(B, -1)
    scores[:, 0] = 0
    return scores.gather(1, cands)


def _with_pad(alpha_doc, doc, cands):
    hit = doc[..., None] == cands[:, None, None, :]
    return torch.einsum("bsw,bswk->bk", alpha_doc, hit.to(alpha_doc.dtype))


def _scatter_vocab(alpha_doc, doc, cands):
    """A vocabulary-wide scatter_add: PAD's mass lands on id 0."""
    B = doc.shape[0]
    scores = torch.zeros(B, 100, dtype=alpha_doc.dtype)
    scores = scores.scatter_add(1, doc.reshape(B, -1), alpha_doc.reshape(B, -1))
    return scores.gather(1, cands)


def _max_pointer(alpha_doc, doc, cands):
    hit = (doc[..., None] == cands[:, None, None, :]) & (doc != 0)[..., None]
    return torch.where(hit, alpha_doc[..., None], 0.0).flatten(1, 2).amax(1)


def _pointer_in_place(alpha_doc, doc, cands):
    alpha_doc.mul_(1.0).add_(0.0)
    alpha_doc[doc == 0] = 0.0
    return right_pointer_sum(alpha_doc, doc, cands)


def _detached_pointer(alpha_doc, doc, cands):
    return right_pointer_sum(alpha_doc.detach(), doc, cands)


def _vocab_from_cands(alpha_doc, doc, cands):
    """The vocabulary taken as the largest candidate id: crashes on a document whose other
    tokens have larger ids, as SynCloze's do."""
    V = int(cands.max()) + 1
    bins = alpha_doc.new_zeros(doc.shape[0], V).scatter_add(1, doc.flatten(1), alpha_doc.flatten(1))
    return bins.gather(1, cands) * (cands != 0)


def _vocab_clipped(alpha_doc, doc, cands):
    """The same with the ids clipped to it: the largest candidate gets the others' mass."""
    V = int(cands.max()) + 1
    index = doc.flatten(1).clamp(max=V - 1)
    bins = alpha_doc.new_zeros(doc.shape[0], V).scatter_add(1, index, alpha_doc.flatten(1))
    return bins.gather(1, cands) * (cands != 0)


POINTER_MISTAKES = {
    "first occurrence": (_first_only, "only one occurrence"),
    "indexed assignment": (_index_put, "only one occurrence"),
    "PAD counted": (_with_pad, "PAD positions"),
    "vocabulary scatter": (_scatter_vocab, "PAD positions"),
    "vocabulary from the candidates": (
        _vocab_from_cands,
        r"like SynCloze's, whose other tokens have ids above every candidate's raised "
        r"RuntimeError(.|\n)*Hint: call it yourself",
    ),
    "vocabulary clipped to the candidates": (
        _vocab_clipped,
        "a non-candidate token may have any id",
    ),
    "normalised": (
        lambda a, d, c: right_pointer_sum(a, d, c) / right_pointer_sum(a, d, c).sum(-1, True),
        "renormalised over the candidates",
    ),
    "softmax": (lambda a, d, c: torch.softmax(right_pointer_sum(a, d, c), -1), "a softmax"),
    "transposed": (lambda a, d, c: right_pointer_sum(a, d, c).T, "transposed"),
    "per sentence": (
        lambda a, d, c: (a[..., None] * (d[..., None] == c[:, None, None, :])).sum(2),
        "sum over the sentences",
    ),
    "max": (_max_pointer, "the largest attention"),
    "count": (
        lambda a, d, c: right_pointer_sum(torch.ones_like(a), d, c),
        "counted the occurrences",
    ),
    "in place": (_pointer_in_place, "in place"),
    "detached": (_detached_pointer, "no gradient"),
    "crash": (lambda a, d, c: a @ c, "raised"),
    "None": (lambda a, d, c: None, "should be a torch.Tensor"),
    "the package's": (han._han.pointer_sum, "book's own function"),
}


@pytest.mark.parametrize("name", POINTER_MISTAKES)
def test_pointer_mistakes_are_named(name):
    fn, hint = POINTER_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        han.pointer_sum(fn)


# --- masked softmax ---------------------------------------------------------------------------


def _filled(value, zero_after=True):
    def masked_softmax(scores, mask):
        alpha = torch.softmax(scores.masked_fill(~mask, value), dim=-1)
        return alpha.masked_fill(~mask, 0.0) if zero_after else alpha

    return masked_softmax


def _ratio_softmax(scores, mask):
    """exp * mask / sum, without the max: overflows for large scores, 0/0 on empty rows."""
    e = torch.exp(scores) * mask
    return e / e.sum(-1, keepdim=True)


def _ratio_softmax_guarded(scores, mask):
    e = torch.exp(scores) * mask
    return e / e.sum(-1, keepdim=True).clamp_min(1e-30)


def _ratio_where(scores, mask):
    """Right values on order-1 scores, but e / 0 on the empty row is only discarded by
    torch.where, so its NaN reaches the gradient."""
    e = torch.exp(scores) * mask
    total = e.sum(-1, keepdim=True)
    return torch.where(total > 0, e / total, 0.0)


def _softmax_in_place(scores, mask):
    scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, -1).masked_fill(~mask, 0.0)


def _epsilon_softmax(scores, mask):
    """A stable exp, divided by its sum plus an epsilon: every row sums to a little less
    than 1."""
    top = scores.masked_fill(~mask, float("-inf")).amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = (scores - top).exp() * mask
    return e / (e.sum(-1, keepdim=True) + 1e-6)


SOFTMAX_MISTAKES = {
    "zeroed, not renormalised": (
        lambda x, m: torch.softmax(x, -1).masked_fill(~m, 0.0),
        "zeroed afterwards",
    ),
    "-inf": (_filled(float("-inf"), zero_after=False), "NaN on the row with no real position"),
    "exp ratio": (_ratio_softmax, "NaN on the row with no real position"),
    "exp ratio, guarded": (_ratio_softmax_guarded, "magnitude 1e6"),
    "0/0 behind torch.where": (_ratio_where, "gradient has NaN"),
    "wrong dim": (
        lambda x, m: han._han.masked_softmax(x, m, dim=0),
        "over dimension 0",
    ),
    "-1e4": (_filled(-1e4), "magnitude 1e6"),
    "-1e4, not zeroed": (_filled(-1e4, zero_after=False), "row with no real position got"),
    "ignores the mask": (lambda x, m: torch.softmax(x, -1), "ignores the mask"),
    "inverted mask": (lambda x, m: right_masked_softmax(x, ~m), "wrong way round"),
    "multiplied mask": (
        lambda x, m: torch.softmax(x * m, -1) * m,
        "zeroed afterwards|not right|sum to 1",
    ),
    "in place": (_softmax_in_place, "in place"),
    "epsilon in the denominator": (
        _epsilon_softmax,
        r"sum to slightly less than 1(.|\n)*constant added to the denominator",
    ),
    "detached": (lambda x, m: right_masked_softmax(x.detach(), m), "no gradient"),
    "crash": (lambda x, m: x @ m, "raised"),
    "the package's": (han._han.masked_softmax, "book's own function"),
}


@pytest.mark.parametrize("name", SOFTMAX_MISTAKES)
def test_softmax_mistakes_are_named(name):
    fn, hint = SOFTMAX_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        han.masked_softmax(fn)


# --- effective update rate --------------------------------------------------------------------

RATE_MISTAKES = {
    "fractions": (lambda u, m: (m - u) / (m - 1), r"\[0, 1\] scale"),
    "1 for 100": (lambda u, m: 100 * (m - u) / (m - 1), "not 1"),
    "sign": (lambda u, m: 100 * (u - m) / (m - 100), "sign is flipped"),
    "swapped": (lambda u, m: 100 * (u - m) / (u - 100), "swapped"),
    "divided by u_min": (lambda u, m: 100 * (m - u) / m, "divides by u_min"),
    "relative excess": (lambda u, m: 100 * (u - m) / m, "divides by u_min"),
    "fraction": (lambda u, m: (m - u) / (m - 100), "a fraction"),
    "shift": (lambda u, m: u - m, "only shifted"),
    "clamped at 0": (lambda u, m: max(0.0, right_effective_update_rate(u, m)), "may be negative"),
    "absolute value": (lambda u, m: abs(right_effective_update_rate(u, m)), "may be negative"),
    "rounded": (lambda u, m: round(right_effective_update_rate(u, m), 2), "do not round"),
    "floor division": (lambda u, m: 100 * (m - u) // (m - 100), "do not round"),
    "int()": (lambda u, m: int(right_effective_update_rate(u, m)), "do not round"),
    "None": (lambda u, m: None, "should be a number"),
    "the package's": (han._skip.effective_update_rate, "book's own function"),
}


@pytest.mark.parametrize("name", RATE_MISTAKES)
def test_rate_mistakes_are_named(name):
    fn, hint = RATE_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        han.effective_update_rate(fn)


# --- SENS step --------------------------------------------------------------------------------


def _sens(vote_of, rule=lambda p: p >= 0.5, ste=True, per_module=False):
    def sens_step(h_hat, h_prev, s, s_prev, theta):
        d = s - s_prev - theta
        hard = vote_of(s, s_prev, theta).to(s.dtype)
        vote = hard + (d - d.detach()) if ste else hard
        p = vote.mean(-1, keepdim=True)
        if per_module:
            b = vote.repeat_interleave(h_hat.shape[1] // s.shape[1], dim=1)
        else:
            b = rule(p.detach()).to(p.dtype) + ((p - p.detach()) if ste else 0)
        return b * h_hat + (1 - b) * h_prev

    return sens_step


def _right_votes(s, s_prev, theta):
    return s > s_prev + theta


def _float32_pitfall(h_hat, h_prev, s, s_prev, theta):
    d = s - s_prev - theta
    vote = (d > 0).to(d.dtype) + d - d.detach()  # 1 + 1e9 rounds to 1e9 in float32
    p = vote.mean(-1, keepdim=True)
    b = (p.detach() >= 0.5).to(p.dtype) + (p - p.detach())
    return b * h_hat + (1 - b) * h_prev


def _soft_mix(h_hat, h_prev, s, s_prev, theta):
    d = s - s_prev - theta
    p = ((d > 0).to(d.dtype) + (d - d.detach())).mean(-1, keepdim=True)
    return p * h_hat + (1 - p) * h_prev


def _sigmoid_ste(h_hat, h_prev, s, s_prev, theta):
    d = s - s_prev - theta
    soft = torch.sigmoid(d)
    vote = (d > 0).to(d.dtype) + (soft - soft.detach())
    p = vote.mean(-1, keepdim=True)
    b = (p.detach() >= 0.5).to(p.dtype) + (p - p.detach())
    return b * h_hat + (1 - b) * h_prev


def _where_select(h_hat, h_prev, s, s_prev, theta):
    p = (s > s_prev + theta).to(s.dtype).mean(-1, keepdim=True)
    return torch.where(p >= 0.5, h_hat, h_prev)


def _count_not_mean(h_hat, h_prev, s, s_prev, theta):
    d = s - s_prev - theta
    vote = (d > 0).to(d.dtype) + (d - d.detach())
    count = vote.sum(-1, keepdim=True)
    M = s.shape[1]
    b = (count.detach() >= M / 2).to(d.dtype) + (count - count.detach())
    return b * h_hat + (1 - b) * h_prev


def _detached_prev(h_hat, h_prev, s, s_prev, theta):
    return right_sens_step(h_hat, h_prev, s, s_prev.detach(), theta)


def _sens_in_place(h_hat, h_prev, s, s_prev, theta):
    out = right_sens_step(h_hat, h_prev, s, s_prev, theta)
    with torch.no_grad():
        s_prev.copy_(s)
    return out


def _half_detached(which):
    """The decision's gradient kept in one of the two terms only."""

    def sens_step(h_hat, h_prev, s, s_prev, theta):
        d = s - s_prev - theta
        vote = (d > 0).to(d.dtype) + (d - d.detach())
        p = vote.mean(-1, keepdim=True)
        b = (p.detach() >= 0.5).to(p.dtype) + (p - p.detach())
        if which == "h_prev":
            return b * h_hat + (1 - b.detach()) * h_prev
        return b.detach() * h_hat + (1 - b) * h_prev

    return sens_step


SENS_MISTAKES = {
    "strict p > 0.5": (_sens(_right_votes, rule=lambda p: p > 0.5), "a tie kept"),
    "round": (_sens(_right_votes, rule=torch.round), "a tie kept"),
    ">= votes": (_sens(lambda s, sp, th: s >= sp + th), ">= instead of >"),
    "per module": (_sens(_right_votes, per_module=True), "some units updated and others kept"),
    "no STE": (_sens(_right_votes, ste=False), "no gradient reaches s"),
    "torch.where": (_where_select, "no gradient"),
    "float32 pitfall": (_float32_pitfall, "float32 rounding"),
    "soft mix": (_soft_mix, "neither h_hat nor h_prev"),
    "inverted": (_sens(_right_votes, rule=lambda p: p < 0.5), "wrong way round"),
    "no threshold": (_sens(lambda s, sp, th: s > sp), "threshold is left out"),
    "relative threshold": (
        _sens(lambda s, sp, th: s > sp * (1 + th)),
        "added to the previous surprisal, not multiplied",
    ),
    "b detached with h_prev": (_half_detached("h_prev"), "missing from one of the two terms"),
    "b detached with h_hat": (_half_detached("h_hat"), "missing from one of the two terms"),
    "any vote": (_sens(_right_votes, rule=lambda p: p > 0), "a single vote"),
    "unanimous": (_sens(_right_votes, rule=lambda p: p == 1), "unanimous"),
    "sigmoid STE": (_sigmoid_ste, "not the identity straight-through"),
    "count": (_count_not_mean, "M times too large"),
    "detached s_prev": (_detached_prev, "no gradient reaches s_prev, though one reaches s"),
    "decision only": (lambda hh, hp, s, sp, th: (s > sp + th).double(), "not the new state"),
    "in place": (_sens_in_place, "in place"),
    "crash": (lambda hh, hp, s, sp, th: hh @ s, "raised"),
}


@pytest.mark.parametrize("name", SENS_MISTAKES)
def test_sens_mistakes_are_named(name):
    fn, hint = SENS_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        han.sens_step(fn)


def test_the_sens_reference_is_the_package_cell():
    """The checker's SENS decision selects as SBAGRUCell(mode="ensemble") does."""
    from rnnbook.models.gru import GRUCell
    from rnnbook.models.sba import SBAGRUCell, module_surprisal

    torch.manual_seed(0)
    for theta in (-0.05, 0.0, 0.05, -1e9):
        cell = SBAGRUCell(3, 8, M=4, theta=theta, mode="ensemble").double()
        h_prev = torch.randn(6, 8, dtype=torch.float64)
        s_ref = torch.randn(6, 4, dtype=torch.float64).abs()
        x_proj = cell.project_inputs(torch.randn(6, 3, dtype=torch.float64))
        h, _ = cell.step(x_proj, (h_prev, s_ref))
        h_hat = GRUCell.step(cell, x_proj, h_prev)  # the proposal of Eqs. 9.1-9.4
        s = module_surprisal(h_hat, 4, "max")
        assert torch.equal(han._sens_step(h_hat, h_prev, s, s_ref, theta), h)


def test_checkers_leave_the_global_random_state_alone():
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    han.pointer_sum(right_pointer_sum)
    han.sens_step(right_sens_step)
    assert torch.equal(torch.rand(1), before)


def test_hints_do_not_give_the_reference_values(capsys):
    """A wrong rate prints the student's value, never the reference's."""
    with pytest.raises(CheckFailed) as info:
        han.effective_update_rate(lambda u, m: u - m)
    assert "34.21" not in str(info.value)  # ũ(37.5, 5) = 34.2105...


def test_hints_agree_with_the_statements():
    """The exercises say: padding never counts, even in a padded candidate list; the
    straight-through gradient reaches s and s_prev."""
    with pytest.raises(CheckFailed, match="even if a candidate list is itself padded with 0"):
        han.pointer_sum(_with_pad)
    with pytest.raises(CheckFailed, match="reaches s and s_prev"):
        han.sens_step(_sens(_right_votes, ste=False))
