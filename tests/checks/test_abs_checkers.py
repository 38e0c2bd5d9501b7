"""Chapter 9's checkers accept right answers and reject the classic wrong ones, each with a
hint that names the mistake."""

import math
import time
from fractions import Fraction

import numpy as np
import pytest
import torch

from rnnbook.checks import abs as checks
from rnnbook.checks.grading import CheckFailed
from rnnbook.models import abs as abs_model

# --- right answers: the model solutions of the chapter ---------------------------------------


def right_forward_fill(h_hat, b):
    B, T, D = h_hat.shape
    h = h_hat.new_zeros(B, D)  # h_0 = 0
    rows = []
    for t in range(T):
        b_t = b[:, t].unsqueeze(-1)  # (B, 1): one decision for all D features
        h = b_t * h_hat[:, t] + (1 - b_t) * h
        rows.append(h)
    return torch.stack(rows, dim=1)


def right_predicted_update_rate(mask):
    sequences = mask.any(dim=-1).sum()  # one expected update per non-empty sentence
    tokens = mask.sum()  # the real positions
    return float(sequences / tokens)


def right_ranked_decisions(alpha, mask, rate):
    N, T = alpha.shape
    b = torch.zeros(N, T)
    for i in range(N):
        real = mask[i].nonzero().flatten().tolist()
        if not real:
            continue  # an empty row keeps nothing
        k = max(1, math.floor(rate * len(real) + 0.5))
        ranked = sorted(real, key=lambda t: -alpha[i, t].item())  # stable: ties keep order
        for t in ranked[:k]:
            b[i, t] = 1.0
    return b


def right_bidirectional_fill(h_hat, b):
    H = h_hat.shape[-1] // 2
    forward = right_forward_fill(h_hat[..., :H], b)
    backward = right_forward_fill(h_hat[..., H:].flip(1), b.flip(1)).flip(1)
    return torch.cat([forward, backward], dim=-1)


def test_right_answers_pass(capsys):
    checks.forward_fill(right_forward_fill)
    checks.predicted_update_rate(right_predicted_update_rate)
    checks.ranked_decisions(right_ranked_decisions)
    checks.bidirectional_fill(right_bidirectional_fill)
    assert capsys.readouterr().out.count("✓") == 4


def _fill_into(h_hat, b):
    """A new tensor written row by row (in place, but not into the arguments)."""
    out = torch.zeros_like(h_hat)
    for t in range(h_hat.shape[1]):
        previous = out[:, t - 1].clone() if t > 0 else torch.zeros_like(h_hat[:, 0])
        out[:, t] = b[:, t, None] * h_hat[:, t] + (1 - b[:, t, None]) * previous
    return out


def _fill_into_no_clone(h_hat, b):
    """The same without the clone: autograd's saved h_{t-1} is overwritten."""
    out = torch.zeros_like(h_hat)
    for t in range(h_hat.shape[1]):
        previous = out[:, t - 1] if t > 0 else torch.zeros_like(h_hat[:, 0])
        out[:, t] = b[:, t, None] * h_hat[:, t] + (1 - b[:, t, None]) * previous
    return out


def _fill_closed_form(h_hat, b):
    """h_t = sum_s b_s prod_{s<r<=t} (1 - b_r) h_hat_s, without a loop over the output."""
    T = h_hat.shape[1]
    keep = 1 - b  # (B, T)
    weights = []
    for t in range(T):
        w = torch.stack(
            [b[:, s] * torch.prod(keep[:, s + 1 : t + 1], dim=1) for s in range(T)], dim=1
        ) * (torch.arange(T) <= t)
        weights.append(w)
    return torch.einsum("bts,bsd->btd", torch.stack(weights, 1), h_hat)


def _ranked_vectorised(alpha, mask, rate):
    n = mask.sum(-1)
    k = torch.floor(rate * n + 0.5).clamp_min(1).long().minimum(n)
    order = alpha.masked_fill(~mask, -float("inf")).argsort(dim=-1, descending=True, stable=True)
    rank = order.argsort(-1)
    return (rank < k[:, None]) & mask  # booleans are accepted


def test_right_answers_in_other_forms_pass(capsys):
    checks.forward_fill(_fill_into)
    checks.forward_fill(_fill_closed_form)
    checks.predicted_update_rate(lambda m: m.any(-1).sum() / m.sum())  # a tensor
    checks.predicted_update_rate(lambda m: np.float32(m.any(-1).sum() / m.sum()))
    checks.predicted_update_rate(lambda m: m.any(-1).float().sum() / m.float().sum())
    checks.ranked_decisions(_ranked_vectorised)
    checks.ranked_decisions(lambda a, m, r: _ranked_vectorised(a.float(), m, r).long())
    checks.ranked_decisions(lambda a, m, r: right_ranked_decisions(a, m, r).double())
    checks.bidirectional_fill(
        lambda h, b: torch.cat(
            [_fill_into(h[..., : h.shape[-1] // 2], b),
             _fill_into(h[..., h.shape[-1] // 2 :].flip(1), b.flip(1)).flip(1)], -1
        )
    )  # fmt: skip
    assert capsys.readouterr().out.count("✓") == 9


@pytest.mark.parametrize(
    ("checker", "fn"),
    [(checks.forward_fill, lambda h, b: right_forward_fill(h.float(), b.float())),
     (checks.bidirectional_fill, lambda h, b: right_bidirectional_fill(h.float(), b.float()))],
    ids=["forward_fill", "bidirectional_fill"],
)  # fmt: skip
def test_a_float32_fill_of_float64_inputs_is_refused_by_the_dtype_rule(checker, fn):
    with pytest.raises(CheckFailed, match="(?s)float32, but the inputs are float64.*dtype=x.dtype"):
        checker(fn)


def _fill_lerp(h_hat, b):
    """h + b (h_hat - h), by torch.lerp, from a (B, 1) start that broadcasts."""
    h, rows = h_hat.new_zeros(h_hat.shape[0], 1), []
    for t in range(h_hat.shape[1]):
        h = torch.lerp(h, h_hat[:, t], b[:, t : t + 1])
        rows.append(h)
    return torch.stack(rows, 1)


def _fill_time_major(h_hat, b):
    h, rows = torch.zeros_like(h_hat[:, 0]), []
    for x, d in zip(h_hat.transpose(0, 1), b.t()):
        h = torch.addcmul(h, d[:, None], x - h)
        rows.append(h)
    return torch.stack(rows).transpose(0, 1)


def _fill_triangular(h_hat, b, forward=True):
    """w[s, t] = b_s prod_{r strictly between s and t, t included} (1 - b_r), by a cumprod of a
    masked (B, T, T) tensor: the closed form without a division."""
    B, T, _ = h_hat.shape
    s = torch.arange(T)
    between = s[None, :] > s[:, None] if forward else s[None, :] < s[:, None]
    keep = (1 - b)[:, None, :].expand(B, T, T)
    factors = torch.where(between, keep, torch.ones_like(keep))  # the 1 - b_r as numbers
    prods = factors.cumprod(2) if forward else factors.flip(2).cumprod(2).flip(2)
    reach = s[None, :] >= s[:, None] if forward else s[None, :] <= s[:, None]
    return torch.einsum("bst,bsd->btd", b[:, :, None] * prods * reach, h_hat)


def _rate_exact(mask):
    return Fraction(int(mask.any(-1).sum()), int(mask.sum()))


def _rate_python(mask):
    sentences = tokens = 0
    for row in mask.tolist():
        tokens += sum(row)
        sentences += any(row)
    return sentences / tokens


def _ranked_sorted_reverse(alpha, mask, rate):
    """sorted(..., reverse=True) keeps equal keys in their order; booleans."""
    b = torch.zeros(alpha.shape, dtype=torch.bool)
    for i in range(alpha.shape[0]):
        real = mask[i].nonzero().flatten().tolist()
        ranked = sorted(real, key=lambda t: alpha[i, t].item(), reverse=True)
        b[i, ranked[: max(1, math.floor(rate * len(real) + 0.5)) if real else 0]] = True
    return b


def _ranked_lexsort(alpha, mask, rate):
    """np.lexsort on (position, -alpha): an explicit tie-break, an int8 result."""
    a, m = alpha.double().numpy(), mask.numpy()
    b = np.zeros(a.shape, dtype=np.int8)
    for i in range(len(a)):
        real = np.flatnonzero(m[i])
        order = real[np.lexsort((real, -a[i, real]))]
        b[i, order[: max(1, math.floor(rate * len(real) + 0.5)) if len(real) else 0]] = 1
    return torch.from_numpy(b)


def _ranked_pairwise(alpha, mask, rate):
    """The rank of t counted as the positions before it: higher, or equal and earlier."""
    a = alpha.double().masked_fill(~mask, -math.inf)
    T = a.shape[1]
    earlier = torch.arange(T)[None, :] < torch.arange(T)[:, None]
    beats = (a[:, None, :] > a[:, :, None]) | ((a[:, None, :] == a[:, :, None]) & earlier)
    n = mask.sum(-1)
    k = torch.where(n > 0, torch.floor(rate * n.double() + 0.5).clamp_min(1), 0)
    return ((beats.sum(-1) < k[:, None]) & mask).long()


def _ranked_ties_filled(alpha, mask, rate):
    """Everything strictly above the k-th value, then the earliest of its ties."""
    b = torch.zeros(alpha.shape)
    for i in range(alpha.shape[0]):
        real, n = mask[i], int(mask[i].sum())
        if n == 0:
            continue
        k = max(1, math.floor(rate * n + 0.5))
        kth = alpha[i, real].sort(descending=True).values[k - 1]
        b[i] = ((alpha[i] > kth) & real).float()
        ties = ((alpha[i] == kth) & real).nonzero().flatten().tolist()
        b[i, ties[: k - int(b[i].sum())]] = 1.0
    return b


def _bidirectional_insert_front(h_hat, b):
    """The backward half by a loop from the right that inserts each row at the front."""
    H = h_hat.shape[-1] // 2
    x, h, rows = h_hat[..., H:], torch.zeros_like(h_hat[:, 0, H:]), []
    for t in reversed(range(x.shape[1])):
        h = b[:, t, None] * x[:, t] + (1 - b[:, t, None]) * h
        rows.insert(0, h)
    return torch.cat([right_forward_fill(h_hat[..., :H], b), torch.stack(rows, 1)], -1)


def _bidirectional_one_loop(h_hat, b):
    """tensor_split, and one loop that steps both directions at once."""
    first, second = h_hat.tensor_split(2, dim=-1)
    T = h_hat.shape[1]
    f, g = torch.zeros_like(first[:, 0]), torch.zeros_like(second[:, 0])
    fs, gs = [None] * T, [None] * T
    for t in range(T):
        s = T - 1 - t
        f = b[:, t, None] * first[:, t] + (1 - b[:, t, None]) * f
        g = b[:, s, None] * second[:, s] + (1 - b[:, s, None]) * g
        fs[t], gs[s] = f, g
    return torch.cat([torch.stack(fs, 1), torch.stack(gs, 1)], -1)


UNUSUAL_RIGHT_ANSWERS = {
    "fill, torch.lerp from a (B, 1) start": (checks.forward_fill, _fill_lerp),
    "fill, time-major loop with addcmul": (checks.forward_fill, _fill_time_major),
    "fill, b clamped to [0, 1]": (checks.forward_fill, lambda h, b: _fill_into(h, b.clamp(0, 1))),
    "fill, triangular closed form": (checks.forward_fill, _fill_triangular),
    "rate, a Fraction": (checks.predicted_update_rate, _rate_exact),
    "rate, a Python loop": (checks.predicted_update_rate, _rate_python),
    "rate, 1 / mean length of the non-empty": (
        checks.predicted_update_rate,
        lambda m: 1 / m.sum(-1)[m.any(-1)].double().mean(),
    ),
    "ranked, sorted(reverse=True), booleans": (checks.ranked_decisions, _ranked_sorted_reverse),
    "ranked, np.lexsort, int8": (checks.ranked_decisions, _ranked_lexsort),
    "ranked, pairwise ranks, int64": (checks.ranked_decisions, _ranked_pairwise),
    "ranked, ties filled after a threshold": (checks.ranked_decisions, _ranked_ties_filled),
    "ranked, k in float32": (
        checks.ranked_decisions,
        lambda a, m, r: _ranked(
            lambda n, r, T: (
                torch.floor(torch.tensor(r) * n.float() + 0.5).clamp_min(1).minimum(n.float())
            )
        )(a, m, r),
    ),  # fmt: skip
    "ranked, alpha renormalised by a softmax": (
        checks.ranked_decisions,
        lambda a, m, r: right_ranked_decisions(
            torch.softmax(a.masked_fill(~m, -math.inf), -1).nan_to_num(), m, r
        ),
    ),
    "bidirectional, rows inserted at the front": (
        checks.bidirectional_fill,
        _bidirectional_insert_front,
    ),
    "bidirectional, one loop for both": (checks.bidirectional_fill, _bidirectional_one_loop),
    "bidirectional, torch.fliplr": (
        checks.bidirectional_fill,
        lambda h, b: torch.cat(
            [
                right_forward_fill(h[..., : h.shape[-1] // 2], b),
                torch.fliplr(
                    right_forward_fill(torch.fliplr(h[..., h.shape[-1] // 2 :]), torch.fliplr(b))
                ),
            ],
            -1,
        ),
    ),  # fmt: skip
    "bidirectional, two triangular closed forms": (
        checks.bidirectional_fill,
        lambda h, b: torch.cat(
            [
                _fill_triangular(h[..., : h.shape[-1] // 2], b),
                _fill_triangular(h[..., h.shape[-1] // 2 :], b, forward=False),
            ],
            -1,
        ),
    ),  # fmt: skip
}


@pytest.mark.parametrize("name", UNUSUAL_RIGHT_ANSWERS)
def test_unusual_right_answers_pass(name, capsys):
    checker, answer = UNUSUAL_RIGHT_ANSWERS[name]
    checker(answer)
    assert "✓" in capsys.readouterr().out


# --- the forward fill -------------------------------------------------------------------------


def _fill(seed_first=False):
    def forward_fill(h_hat, b):
        h = h_hat[:, 0] if seed_first else torch.zeros_like(h_hat[:, 0])
        rows = []
        for t in range(h_hat.shape[1]):
            h = b[:, t, None] * h_hat[:, t] + (1 - b[:, t, None]) * h
            rows.append(h)
        return torch.stack(rows, 1)

    return forward_fill


def _backward(h_hat, b):
    return right_forward_fill(h_hat.flip(1), b.flip(1)).flip(1)


def _across_rows(h_hat, b):
    B, T, D = h_hat.shape
    return right_forward_fill(h_hat.reshape(1, B * T, D), b.reshape(1, B * T)).view(B, T, D)


def _fill_in_place(h_hat, b):
    for t in range(1, h_hat.shape[1]):
        h_hat[:, t] = b[:, t, None] * h_hat[:, t] + (1 - b[:, t, None]) * h_hat[:, t - 1]
    h_hat[:, 0] *= b[:, 0, None]
    return h_hat


def _where_fill(h_hat, b):
    h, rows = torch.zeros_like(h_hat[:, 0]), []
    for t in range(h_hat.shape[1]):
        h = torch.where(b[:, t, None].bool(), h_hat[:, t], h)
        rows.append(h)
    return torch.stack(rows, 1)


def _boolean_index_fill(h_hat, b):
    out = torch.zeros_like(h_hat)
    keep = b.bool()
    for t in range(h_hat.shape[1]):
        if t > 0:
            out[:, t] = out[:, t - 1]
        out[keep[:, t], t] = h_hat[keep[:, t], t]
    return out


def _cummax_fill(h_hat, b):
    """The index of the last kept position, gathered: right values, no gradient to b."""
    T = h_hat.shape[1]
    positions = torch.where(b.bool(), torch.arange(T), -1)
    last = positions.cummax(1).values  # (B, T), -1 before the first kept
    gathered = h_hat.gather(1, last.clamp_min(0)[..., None].expand_as(h_hat))
    return gathered * (last >= 0)[..., None]


def _one_step(h_hat, b):
    previous = torch.cat([torch.zeros_like(h_hat[:, :1]), h_hat[:, :-1]], 1)
    return b[..., None] * h_hat + (1 - b[..., None]) * previous


def _half_detached(which):
    def forward_fill(h_hat, b):
        h, rows = torch.zeros_like(h_hat[:, 0]), []
        for t in range(h_hat.shape[1]):
            b_t = b[:, t, None]
            if which == "hat":
                h = b_t.detach() * h_hat[:, t] + (1 - b_t) * h
            else:
                h = b_t * h_hat[:, t] + (1 - b_t.detach()) * h
            rows.append(h)
        return torch.stack(rows, 1)

    return forward_fill


def _detached_h_hat(h_hat, b):
    return right_forward_fill(h_hat.detach(), b)


def _detached_state(h_hat, b):
    """The carried state detached, as in truncated backpropagation."""
    h, rows = torch.zeros_like(h_hat[:, 0]), []
    for t in range(h_hat.shape[1]):
        h = b[:, t, None] * h_hat[:, t] + (1 - b[:, t, None]) * h.detach()
        rows.append(h)
    return torch.stack(rows, 1)


def _lagged(h_hat, b):
    """Each row stored before its own update."""
    h, rows = torch.zeros_like(h_hat[:, 0]), []
    for t in range(h_hat.shape[1]):
        rows.append(h)
        h = b[:, t, None] * h_hat[:, t] + (1 - b[:, t, None]) * h
    return torch.stack(rows, 1)


def _over_the_batch(h_hat, b):
    """The unbatched habit: the loop runs over dim 0."""
    h, rows = torch.zeros_like(h_hat[0]), []
    for t in range(h_hat.shape[0]):
        h = b[t, :, None] * h_hat[t] + (1 - b[t, :, None]) * h
        rows.append(h)
    return torch.stack(rows, 0)


def _python_if(h_hat, b):
    B, T, D = h_hat.shape
    out = []
    for i in range(B):
        h, row = torch.zeros(D, dtype=h_hat.dtype), []
        for t in range(T):
            if b[i, t] == 1:
                h = h_hat[i, t]
            row.append(h)
        out.append(torch.stack(row))
    return torch.stack(out)


def _where_mixed(h_hat, b):
    """torch.where that still multiplies by b in each branch: each term has half the gradient."""
    h, rows = torch.zeros_like(h_hat[:, 0]), []
    for t in range(h_hat.shape[1]):
        b_t = b[:, t, None]
        h = torch.where(b_t > 0, b_t * h_hat[:, t], (1 - b_t) * h)
        rows.append(h)
    return torch.stack(rows, 1)


def _gather_kept(h_hat, b):
    """b * h_hat gathered at the last kept position: the values, not the gradient of (abs-fill)."""
    positions = torch.where(b.bool(), torch.arange(h_hat.shape[1]), -1).cummax(1).values
    gathered = (b[..., None] * h_hat).gather(1, positions.clamp_min(0)[..., None].expand_as(h_hat))
    return gathered * (positions >= 0)[..., None]


def _cumprod_division(h_hat, b):
    """w[t, s] = b_s P_t / P_s with P the cumulative product of 1 - b: 0 / 0."""
    P = torch.cumprod(1 - b, 1)
    w = b[:, None, :] * P[:, :, None] / P[:, None, :]
    return torch.einsum("bts,bsd->btd", w * torch.ones(b.shape[1], b.shape[1]).tril(), h_hat)


def _b_squared(h_hat, b):
    h, rows = torch.zeros_like(h_hat[:, 0]), []
    for t in range(h_hat.shape[1]):
        b_t = b[:, t, None]
        h = b_t * b_t * h_hat[:, t] + (1 - b_t) * h  # the same for 0/1, not for the gradient
        rows.append(h)
    return torch.stack(rows, 1)


def _in_place_unsqueeze(h_hat, b):
    b.unsqueeze_(-1)
    return right_forward_fill(h_hat, b[..., 0])


def _hard_coded_T(h_hat, b):
    h, rows = torch.zeros_like(h_hat[:, 0]), []
    for t in range(6):  # the chapter's toy sentence
        h = b[:, t, None] * h_hat[:, t] + (1 - b[:, t, None]) * h
        rows.append(h)
    return torch.stack(rows, 1)


def _numpy_detached(h_hat, b):
    x, d = h_hat.detach().numpy(), b.detach().numpy()
    out, h = np.zeros_like(x), np.zeros_like(x[:, 0])
    for t in range(x.shape[1]):
        h = d[:, t, None] * x[:, t] + (1 - d[:, t, None]) * h
        out[:, t] = h
    return torch.from_numpy(out)


def _into_long(h_hat, b):
    out = torch.zeros(h_hat.shape, dtype=torch.long)
    out[:] = right_forward_fill(h_hat, b).detach()
    return out


FILL_MISTAKES = {
    "zeros, not copies": (lambda h, b: h * b[..., None], "zeros instead of copies"),
    "h_hat unchanged": (lambda h, b: h, "came back unchanged"),
    "h_hat unchanged, a copy": (lambda h, b: h.clone(), "came back unchanged"),
    "backward fill": (_backward, "ran from the right"),
    "seeded with h_hat_1": (_fill(seed_first=True), "before the first kept one copied h_hat_1"),
    "across the batch": (_across_rows, "across the rows of the batch"),
    "in place": (_fill_in_place, "changed an argument in place"),
    "torch.where": (_where_fill, r"no gradient reaches b(.|\n)*torch.where"),
    "boolean index": (_boolean_index_fill, r"no gradient reaches b(.|\n)*boolean mask"),
    "cummax and gather": (_cummax_fill, r"no gradient reaches b(.|\n)*cummax"),
    "b detached": (lambda h, b: right_forward_fill(h, b.detach()), "no gradient reaches b"),
    "b detached with h_hat": (_half_detached("hat"), "only one of the two terms"),
    "b detached with h_prev": (_half_detached("prev"), "only one of the two terms"),
    "h_hat detached": (_detached_h_hat, "gradient that reaches h_hat"),
    "saved value overwritten": (_fill_into_no_clone, "changed a value that autograd had saved"),
    "numpy": (
        lambda h, b: right_forward_fill(h, torch.from_numpy(b.numpy())),
        r"raised RuntimeError when h_hat and b require grad(.|\n)*no\s+\.numpy\(\)",
    ),
    "one-step copy": (_one_step, "not the previous filled state"),
    "stored before the update": (_lagged, "holds the state of the position before it"),
    "loop over the batch": (_over_the_batch, r"ran over the batch \(dim 0\)"),
    "kept outputs added up": (lambda h, b: (b[..., None] * h).cumsum(1), "were added up"),
    "b rounded": (lambda h, b: right_forward_fill(h, b.round()), r"no gradient(.|\n)*b\.round"),
    "b cast to long": (lambda h, b: right_forward_fill(h, b.long()), r"no gradient(.|\n)*\.long"),
    "python if": (_python_if, r"no gradient reaches b(.|\n)*A comparison"),
    "carried state detached": (_detached_state, "gradient that reaches h_hat"),
    "torch.where with b in both branches": (_where_mixed, "b enters the computation in another"),
    "b * h_hat gathered": (_gather_kept, "b enters the computation in another"),
    "b squared": (_b_squared, "b enters the computation in another"),
    "division by a cumulative product": (_cumprod_division, "has NaN"),
    "squeezed": (lambda h, b: right_forward_fill(h, b).squeeze(), "time dimension has length 1"),
    "hard-coded T": (_hard_coded_T, r"returned shape \(4, 6, 3\)"),
    "numpy after detach": (_numpy_detached, "no gradient flows through the result"),
    "integer result": (_into_long, "torch.int64, which does not hold"),
    "half precision": (lambda h, b: right_forward_fill(h.half(), b.half()), "torch.float16"),
    "b unsqueezed in place": (_in_place_unsqueeze, "changed an argument in place"),
    "inverted decisions": (lambda h, b: right_forward_fill(h, 1 - b), "wrong way round"),
    "last state only": (lambda h, b: right_forward_fill(h, b)[:, -1], "not only the last state"),
    "time-major": (lambda h, b: right_forward_fill(h, b).transpose(0, 1), "time-major"),
    "other shape": (lambda h, b: right_forward_fill(h, b).sum(-1), "returned shape"),
    "list of rows": (lambda h, b: list(right_forward_fill(h, b).unbind(1)), "stack the filled"),
    "None": (lambda h, b: None, "should be a torch.Tensor"),
    "crash": (lambda h, b: h @ b, "raised RuntimeError"),
    "the package's": (abs_model.forward_fill, "book's own function"),
}


@pytest.mark.parametrize("name", FILL_MISTAKES)
def test_fill_mistakes_are_named(name):
    fn, hint = FILL_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        checks.forward_fill(fn)


def test_the_fill_reference_is_the_package_function():
    gen = torch.Generator().manual_seed(0)
    for h_hat, b, _ in checks._fill_cases(gen, lambda n: n + 2):
        assert torch.equal(checks._forward_fill(h_hat, b), abs_model.forward_fill(h_hat, b))


def test_the_first_fill_case_tells_the_mistakes_apart():
    """On the hand-made batch every classic mistake gives its own result, so the first failing
    case names it whatever the order of the checks."""
    h_hat, b, _ = checks._fill_cases(torch.Generator().manual_seed(91), lambda n: n + 1)[0]
    results = [checks._forward_fill(h_hat, b)]
    results += [wrong for wrong, _, _ in checks._fill_mistakes(h_hat, b)]
    for i, x in enumerate(results):
        for y in results[i + 1 :]:
            assert not torch.allclose(x, y, atol=1e-6)


# --- the predicted update rate ----------------------------------------------------------------


def _mean_of_rates(mask):
    n = mask.sum(-1).double()
    return (1 / n[n > 0]).mean().item()


RATE_MISTAKES = {
    "1/T": (lambda m: 1 / m.shape[1], "PAD positions were counted"),
    "over N*T": (lambda m: m.any(-1).sum().item() / m.numel(), "PAD positions were counted"),
    "mean of 1/n_i": (_mean_of_rates, "per-sentence rates 1/n_i were averaged"),
    "empty rows counted": (lambda m: m.shape[0] / m.sum().item(), "empty sentence was counted"),
    "per sequence": (lambda m: 1.0, "expected number of updates per sentence, not a rate"),
    "expected updates": (lambda m: m.any(-1).sum(), "expected number of updates, not a rate"),
    "percentage": (lambda m: 100 * right_predicted_update_rate(m), "a percentage"),
    "upside down": (lambda m: m.sum() / m.any(-1).sum(), "upside down"),
    "a tensor of rates": (lambda m: 1 / m.sum(-1), r"should be a number, got Tensor of shape"),
    "text": (lambda m: str(right_predicted_update_rate(m)), "should be a number, got str"),
    "None": (lambda m: None, "should be a number"),
    "in place": (lambda m: right_predicted_update_rate(m.fill_(True)), "in place"),
    "integer division": (
        lambda m: m.any(-1).sum().item() // m.sum().item(),
        "integer division",
    ),
    "skip rate": (lambda m: 1 - right_predicted_update_rate(m), "the skip rate"),
    "longest sentence": (lambda m: 1 / m.sum(-1).max().item(), "longest sentence alone"),
    "sentences along dim 0": (lambda m: (m.any(0).sum() / m.sum()).item(), "wrong dimension"),
    "first column": (lambda m: float(m[:, 0].sum() / m.sum()), "padded on the left(.|\n)*first"),
    "last column": (lambda m: float(m[:, -1].sum() / m.sum()), "by their last position"),
    "1/0 in a mean": (lambda m: (1 / m.sum(-1).float()).mean().item(), "division by zero"),
    "NaN-mean of rates": (lambda m: (m.any(-1) / m.sum(-1)).nanmean().item(), "averaged"),
    "rounded": (lambda m: round(right_predicted_update_rate(m), 2), "was rounded"),
    "1 / median": (lambda m: 1 / m.sum(-1)[m.any(-1)].median().item(), "is not right"),
    "other": (lambda m: 0.5, "is not right"),
    "crash": (lambda m: m @ m, "raised"),
}


@pytest.mark.parametrize("name", RATE_MISTAKES)
def test_rate_mistakes_are_named(name):
    fn, hint = RATE_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        checks.predicted_update_rate(fn)


def test_the_predicted_rate_matches_bernoulli_abs():
    """(abs-expected): the mean of many Bernoulli draws of abs_decisions agrees."""
    gen = torch.Generator().manual_seed(1)
    mask = checks._mask([8, 5, 3, 0, 6], 8)
    scores = torch.randn(5, 8, generator=gen, dtype=torch.float64)
    alpha = torch.softmax(scores.masked_fill(~mask, -1e30), -1) * mask
    draws = torch.stack(
        [abs_model.abs_decisions(alpha, mask, ste=False, generator=gen) for _ in range(4000)]
    )
    rate = draws.sum() / (4000 * mask.sum())
    assert abs(rate.item() - checks._predicted_rate(mask)) < 0.01


# --- ranked attention -------------------------------------------------------------------------


def _ranked(k_of, later_first=False, lowest=False, strict=False, use_mask=True):
    """A vectorised ranked selection with the rule for k as a function of (n, rate)."""

    def ranked_decisions(alpha, mask, rate):
        n = mask.sum(-1)
        k = k_of(n.double(), rate, mask.shape[1]).long()
        score = -alpha if lowest else alpha
        score = score.masked_fill(~mask, -float("inf")) if use_mask else score
        if later_first:
            score = score.flip(-1)
        order = score.argsort(dim=-1, descending=True, stable=True)
        rank = order.argsort(-1)
        if later_first:
            rank = rank.flip(-1)
        b = rank < k[:, None]
        if strict:
            ranked = score.sort(-1, descending=True).values
            kth = ranked.gather(-1, (k - 1).clamp_min(0)[:, None])
            b = (alpha > kth) & (k[:, None] > 0)
        return (b & mask if use_mask else b).float()

    return ranked_decisions


def _nearest(n, rate, T):
    return torch.floor(rate * n + 0.5).clamp_min(1).minimum(n)


def _pad_by_multiplying(alpha, mask, rate):
    """Right, for attention that is 0 on PAD: masking by multiplication."""
    return _ranked(_nearest, use_mask=False)(alpha * mask, mask, rate) * mask


def _python_round(alpha, mask, rate):
    n = mask.sum(-1).tolist()
    k = torch.tensor([min(max(1, round(rate * m)), m) for m in n])
    return _ranked(lambda *_: k)(alpha, mask, rate)


def _unstable(alpha, mask, rate):
    """argsort without stable=True: stable on CPU up to 16 positions, not beyond."""
    k = _nearest(mask.sum(-1), rate, None)
    order = alpha.masked_fill(~mask, -math.inf).argsort(dim=-1, descending=True)
    return ((order.argsort(-1) < k[:, None]) & mask).float()


def _order_as_rank(alpha, mask, rate):
    k = _nearest(mask.sum(-1), rate, None)
    order = alpha.masked_fill(~mask, -math.inf).argsort(dim=-1, descending=True, stable=True)
    return ((order < k[:, None]) & mask).float()


def _per_row(rank_row, k_of=lambda n, r: max(1, math.floor(r * n + 0.5))):
    """A loop over the rows: ``rank_row(alpha_i, mask_i, k)`` gives the row's decisions."""

    def ranked_decisions(alpha, mask, rate):
        b = torch.zeros(alpha.shape, dtype=torch.float64)
        for i in range(alpha.shape[0]):
            n = int(mask[i].sum())
            if n:
                b[i] = rank_row(alpha[i].double(), mask[i], k_of(n, rate))
        return b

    return ranked_decisions


def _topk_row(a, m, k):
    b = torch.zeros_like(a)
    b[a.masked_fill(~m, -math.inf).topk(k).indices] = 1.0
    return b


def _threshold_row(a, m, k):
    kth = a[m].sort(descending=True).values[k - 1]
    return ((a >= kth) & m).double()


def _prefix_row(a, m, k):
    """The real positions taken to be the first n."""
    n = int(m.sum())
    b = torch.zeros_like(a)
    b[sorted(range(n), key=lambda t: -a[t].item())[:k]] = 1.0
    return b


def _quicksort_row(a, m, k):
    real = np.flatnonzero(m.numpy())
    b = torch.zeros_like(a)
    b[real[np.argsort(-a.numpy()[real])][:k]] = 1.0
    return b


RANK_MISTAKES = {
    "strict >": (_ranked(_nearest, strict=True), "source's strict alpha_t > alpha_theta"),
    "floor": (_ranked(lambda n, r, T: torch.floor(r * n).clamp_min(1).minimum(n)), "rounded down"),
    "ceil": (_ranked(lambda n, r, T: torch.ceil(r * n).clamp_min(1).minimum(n)), "rounded up"),
    "torch.round": (
        _ranked(lambda n, r, T: torch.round(r * n).clamp_min(1).minimum(n)),
        "rounded to the even",
    ),
    "round()": (_python_round, "rounded to the even"),
    "no max(1, .)": (_ranked(lambda n, r, T: torch.floor(r * n + 0.5)), "kept none"),
    "k from T, PAD masked": (
        _ranked(lambda n, r, T: torch.floor(r * T + 0.5 + 0 * n).clamp_min(1)),
        "k was computed from T",
    ),
    "k from T, PAD kept": (
        _ranked(lambda n, r, T: torch.floor(r * T + 0.5 + 0 * n).clamp_min(1), use_mask=False),
        "PAD positions were kept, and k was computed from T",
    ),
    "lowest": (_ranked(_nearest, lowest=True), "lowest attentions"),
    "mask ignored in the ranking": (
        lambda a, m, r: _ranked(_nearest, use_mask=False)(a, m, r) * (m.sum(-1, True) > 0),
        "a PAD position was kept",
    ),
    "empty row keeps one": (
        _ranked(lambda n, r, T: torch.floor(r * n + 0.5).clamp_min(1), use_mask=False),
        "a row with no real position kept one",
    ),
    "ties to the later": (_ranked(_nearest, later_first=True), "went to a later position"),
    "topk per row": (_per_row(_topk_row), "went to a later position"),
    "argsort without stable=True": (_unstable, r"up to 24 tokens(.|\n)*without stable=True"),
    "numpy's default argsort": (_per_row(_quicksort_row), "went to a later position"),
    "threshold >=": (_per_row(_threshold_row), "tied with the k-th highest attention was kept"),
    "half rounded down": (
        _ranked(lambda n, r, T: torch.ceil(r * n - 0.5).clamp_min(1).minimum(n)),
        "a half was rounded down",
    ),
    "real positions taken as a prefix": (_per_row(_prefix_row), "padding comes first"),
    "sort indices as ranks": (_order_as_rank, "indices were used as ranks"),
    "inverted": (lambda a, m, r: 1 - _nearest_ranked(a, m, r), "decisions are inverted"),
    "inverted on real positions": (
        lambda a, m, r: (1 - _nearest_ranked(a, m, r)) * m,
        "decisions are inverted",
    ),
    "the attention itself": (lambda a, m, r: a * _nearest_ranked(a, m, r), "neither 0 nor 1"),
    "indices": (lambda a, m, r: a.topk(2, -1).indices, "not the indices"),
    "other shape": (lambda a, m, r: _nearest_ranked(a, m, r).T, "returned shape"),
    "in place": (
        lambda a, m, r: _nearest_ranked(a.masked_fill_(~m, 0), m, r),
        "in place",
    ),
    "crash": (lambda a, m, r: a @ m, "raised"),
    "the package's": (abs_model.abs_decisions, "book's own function"),
}


def _nearest_ranked(alpha, mask, rate):
    return _ranked(_nearest)(alpha, mask, rate)


@pytest.mark.parametrize("name", RANK_MISTAKES)
def test_rank_mistakes_are_named(name):
    fn, hint = RANK_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        checks.ranked_decisions(fn)


def test_a_multiplied_mask_is_right_for_attention_zero_on_pad():
    """Attention from a masked softmax is 0 on PAD: rank alpha * mask, then keep real ones."""
    checks.ranked_decisions(_pad_by_multiplying)


def test_the_rank_reference_is_the_package_function():
    for alpha, mask, rate, _ in checks._rank_cases(torch.Generator().manual_seed(94)):
        want = abs_model.abs_decisions(alpha.double(), mask, "rank", rate=rate, ste=False)
        assert torch.equal(checks._ranked_decisions(alpha, mask, rate), want)


def test_the_count_mistakes_are_told_apart():
    """Over all the cases, each wrong rule for k gives its own counts."""
    cases = checks._rank_cases(torch.Generator().manual_seed(94))

    def counts(rule):
        return torch.cat([rule(a, m, r) for a, m, r, _ in cases])

    rules = [lambda a, m, r: checks._keep(m.sum(-1), r)]
    rules += [rule for rule, _, _ in checks._COUNT_MISTAKES]
    results = [counts(rule) for rule in rules]
    for i, x in enumerate(results):
        for y in results[i + 1 :]:
            assert not torch.equal(x, y)


# --- the per-direction fill -------------------------------------------------------------------


def _halves(first, second, split=None):
    """A per-direction fill from two fills of (h, b), split at ``split`` (default H)."""

    def bidirectional_fill(h_hat, b):
        s = h_hat.shape[-1] // 2 if split is None else split(h_hat.shape[-1])
        return torch.cat([first(h_hat[..., :s], b), second(h_hat[..., s:], b)], -1)

    return bidirectional_fill


def _seeded_backward(seed):
    def fill(h_hat, b):
        flipped, bf = h_hat.flip(1), b.flip(1)
        h = seed(flipped, bf)
        rows = []
        for t in range(flipped.shape[1]):
            h = bf[:, t, None] * flipped[:, t] + (1 - bf[:, t, None]) * h
            rows.append(h)
        return torch.stack(rows, 1).flip(1)

    return fill


def _first_kept(flipped, b):
    """The first kept output in the backward reading order (zeros if none)."""
    index = b.argmax(1)
    row = flipped[torch.arange(len(b)), index]
    return row * b.any(1, keepdim=True)


def _flat(h_hat, b):
    """The batch as one sequence of B*T positions."""
    return h_hat.reshape(1, -1, h_hat.shape[-1]), b.reshape(1, -1)


def _interleaved(h_hat, b):
    out = torch.empty_like(h_hat)
    out[..., 0::2] = right_forward_fill(h_hat[..., 0::2], b)
    out[..., 1::2] = _backward(h_hat[..., 1::2], b)
    return out


def _backward_lagged(h_hat, b):
    """The backward half stored before each position's own update."""
    return _lagged(h_hat.flip(1), b.flip(1)).flip(1)


def _both_halves(h_hat, b):
    H = h_hat.shape[-1] // 2
    return right_forward_fill(h_hat[..., :H], b), _backward(h_hat[..., H:], b)


def _where_bidirectional(h_hat, b):
    H = h_hat.shape[-1] // 2
    backward = _where_fill(h_hat[..., H:].flip(1), b.flip(1)).flip(1)
    return torch.cat([_where_fill(h_hat[..., :H], b), backward], -1)


BIDIRECTIONAL_MISTAKES = {
    "both forward": (right_forward_fill, "both halves were forward-filled"),
    "swapped": (_halves(_backward, right_forward_fill), "halves are swapped"),
    "both backward": (_backward, "both halves were filled from the right"),
    "split at D // 4": (_halves(right_forward_fill, _backward, lambda D: D // 4), "split at"),
    "split at 3D // 4": (_halves(right_forward_fill, _backward, lambda D: 3 * D // 4), "split at"),
    "forward only": (_halves(right_forward_fill, lambda h, b: h), "only the forward half"),
    "zeros": (lambda h, b: h * b[..., None], "zeros instead of copies"),
    "zeros in the backward half": (
        _halves(right_forward_fill, lambda h, b: h * b[..., None]),
        "backward half has zeros instead of copies",
    ),
    "backward seeded with h_hat_T": (
        _halves(right_forward_fill, _seeded_backward(lambda f, b: f[:, 0])),
        "copied h_hat_T",
    ),
    "backward seeded with the first kept": (
        _halves(right_forward_fill, _seeded_backward(_first_kept)),
        "copied the last kept output",
    ),
    "not flipped back": (
        _halves(right_forward_fill, lambda h, b: right_forward_fill(h.flip(1), b.flip(1))),
        "reversed time order",
    ),
    "b not flipped": (
        _halves(right_forward_fill, lambda h, b: right_forward_fill(h.flip(1), b).flip(1)),
        "decisions were not",
    ),
    "forward half seeded with h_hat_1": (
        _halves(_fill(seed_first=True), _backward),
        "in the forward half, the positions before the first kept one copied h_hat_1",
    ),
    "backward half across the batch, flat": (
        _halves(right_forward_fill, lambda h, b: _backward(*_flat(h, b)).view_as(h)),
        "in the backward half, the fill ran across the rows",
    ),
    "backward half across the batch": (
        _halves(right_forward_fill, lambda h, b: _across_rows(h.flip(1), b.flip(1)).flip(1)),
        "in the backward half, the fill ran across the rows",
    ),
    "backward one-step copy": (
        _halves(right_forward_fill, lambda h, b: _one_step(h.flip(1), b.flip(1)).flip(1)),
        "copied the next output h_hat_",
    ),
    "torch.where": (_where_bidirectional, r"no gradient reaches b(.|\n)*torch.where"),
    "b detached": (
        lambda h, b: right_bidirectional_fill(h, b.detach()),
        "no gradient reaches b",
    ),
    "one half only": (lambda h, b: right_forward_fill(h[..., : h.shape[-1] // 2], b), "2H"),
    "time-major": (lambda h, b: right_bidirectional_fill(h, b).transpose(0, 1), "time-major"),
    "interleaved": (_interleaved, "taken alternately"),
    "backward stored before the update": (
        _halves(right_forward_fill, _backward_lagged),
        "holds the state of the position after it",
    ),
    "features flipped": (
        _halves(right_forward_fill, lambda h, b: right_forward_fill(h.flip(-1), b).flip(-1)),
        r"flip\(-1\), changes nothing",
    ),
    "halves joined in time": (lambda h, b: torch.cat(_both_halves(h, b), 1), "in time"),
    "halves stacked": (lambda h, b: torch.stack(_both_halves(h, b), -1), r"\(torch\.stack\)"),
    "a tuple of halves": (_both_halves, "concatenate the two filled halves"),
    "backward under no_grad": (
        lambda h, b: torch.cat(
            [
                right_forward_fill(h[..., : h.shape[-1] // 2], b),
                torch.no_grad()(_backward)(h[..., h.shape[-1] // 2 :], b),
            ],
            -1,
        ),
        "gradient that reaches h_hat",
    ),  # fmt: skip
    "integer result": (lambda h, b: right_bidirectional_fill(h, b).long(), "torch.int64"),
    "in place": (lambda h, b: right_bidirectional_fill(h.mul_(1.0).add_(0.5), b), "in place"),
    "crash": (lambda h, b: h @ b, "raised"),
    "the package's": (abs_model.forward_fill, "book's own function"),
}


@pytest.mark.parametrize("name", BIDIRECTIONAL_MISTAKES)
def test_bidirectional_mistakes_are_named(name):
    fn, hint = BIDIRECTIONAL_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        checks.bidirectional_fill(fn)


def test_the_first_bidirectional_case_tells_the_mistakes_apart():
    h_hat, b, _ = checks._fill_cases(torch.Generator().manual_seed(95), lambda n: 2 * (n + 1))[0]
    results = [checks._bidirectional_fill(h_hat, b)]
    results += [wrong for wrong, _, _ in checks._bidirectional_mistakes(h_hat, b)]
    for i, x in enumerate(results):
        for y in results[i + 1 :]:
            assert not torch.allclose(x, y, atol=1e-6)


# --- all checkers -----------------------------------------------------------------------------


def test_checkers_leave_the_global_random_state_alone():
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    checks.forward_fill(right_forward_fill)
    checks.predicted_update_rate(right_predicted_update_rate)
    checks.ranked_decisions(right_ranked_decisions)
    checks.bidirectional_fill(right_bidirectional_fill)
    assert torch.equal(torch.rand(1), before)


def test_checkers_are_deterministic():
    """The same answer gets the same message, whatever the global random state."""
    messages = set()
    for seed in (0, 1):
        torch.manual_seed(seed)
        with pytest.raises(CheckFailed) as info:
            checks.ranked_decisions(_ranked(_nearest, later_first=True))
        messages.add(str(info.value))
        with pytest.raises(CheckFailed) as info:
            checks.forward_fill(_one_step)
        messages.add(str(info.value))
    assert len(messages) == 2


@pytest.mark.parametrize(
    ("checker", "answer"),
    [
        (checks.forward_fill, right_forward_fill),
        (checks.predicted_update_rate, right_predicted_update_rate),
        (checks.ranked_decisions, right_ranked_decisions),
        (checks.bidirectional_fill, right_bidirectional_fill),
    ],
)
def test_checkers_are_fast(checker, answer):
    start = time.perf_counter()
    checker(answer)
    assert time.perf_counter() - start < 1.0


def test_hints_do_not_give_the_reference_values():
    """A wrong rate prints the student's value, never the reference's."""
    with pytest.raises(CheckFailed) as info:
        checks.predicted_update_rate(lambda m: 1 / m.shape[1])
    assert "0.181818" not in str(info.value)  # 4 / 22, the first case's rate
