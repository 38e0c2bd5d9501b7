"""Attention-based skipping (Chapter 9): one expected update per sequence (abs-expected) for
fixed attention rows and on an untrained reader (spec abs 1.6, 5.5), the forward fill and its
gradient, PAD that never updates, top-k and ranked selection, the straight-through estimator,
ABS-AS against ABS-ASA, HAN-ptr recovered at rate 1, and bad input."""

import math

import pytest
import torch

from rnnbook.data.syncloze import make_syncloze, syncloze_embeddings
from rnnbook.models import HAN, cloze_loss, masked_softmax
from rnnbook.models.abs import ABSHAN, abs_decisions, forward_fill, keep_count
from rnnbook.testing import assert_close_ulps

F64 = torch.float64
E, H = 12, 8
SIGMAS = 5  # statistical checks allow 5 standard errors (and use a fixed generator)


def _rows():
    """Fixed attention rows (R = 5, T = 6) and their mask: a full row, a short padded one, a
    single token (α = 1), an empty row, and a row with PAD inside; α sums to 1 over the real
    positions of every non-empty row and is 0 on PAD."""
    mask = torch.tensor(
        [
            [True] * 6,
            [True, True, True, False, False, False],
            [True, False, False, False, False, False],
            [False] * 6,
            [True, False, True, True, False, True],
        ]
    )
    scores = torch.randn(5, 6, generator=torch.Generator().manual_seed(0), dtype=F64)
    scores[1] = torch.tensor([3.0, 0.0, 0.0, 9.0, 9.0, 9.0], dtype=F64)  # peaked, PAD ignored
    return masked_softmax(scores, mask), mask


def _syncloze(B=64, seed=0):
    data = make_syncloze(B, seed, S=10)
    emb = syncloze_embeddings(len(data.vocab), E, seed, n_types=4)
    return data, emb


def _abshan(emb, seed=0, dtype=F64, **kwargs):
    torch.manual_seed(seed)
    model = ABSHAN(emb, H, **kwargs).to(dtype)
    model.generator = torch.Generator().manual_seed(seed)
    return model


def _padded_batch(B=4, S=5, W=7, L_q=6, K=4, V=40, seed=0):
    """Random cloze samples with empty sentences, also between non-empty ones."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, W + 1, (B, S), generator=g)
    lengths[:, 0] = W
    lengths[:, 2] = 0  # an empty sentence inside every document
    doc = torch.randint(1, V, (B, S, W), generator=g) * (torch.arange(W) < lengths[..., None])
    query = torch.randint(1, V, (B, L_q), generator=g) * (torch.arange(L_q) < L_q - 2)
    cands = doc[:, 0, :K].clone()
    emb = torch.randn(V, E, generator=g, dtype=F64)
    return doc, query, cands, emb


def _top_positions(alpha_row, mask_row, count):
    """The reference selection: the ``count`` real positions of highest α, ties to the
    earlier position."""
    real = [j for j in range(alpha_row.shape[0]) if mask_row[j]]
    return sorted(real, key=lambda j: (-float(alpha_row[j]), j))[:count]


def _rank_count(rate, n):
    return min(max(1, math.floor(rate * n + 0.5)), n) if n else 0


# --- (abs-expected): one update per sequence ---------------------------------------------------


def test_bernoulli_decisions_give_one_expected_update_per_sequence():
    alpha, mask = _rows()
    N = 20_000
    g = torch.Generator().manual_seed(1)
    b = abs_decisions(alpha.expand(N, -1, -1), mask.expand(N, -1, -1), generator=g)  # (N, R, T)
    assert b.shape == (N, 5, 6)
    assert torch.equal(b[:, ~mask], torch.zeros(N, int((~mask).sum()), dtype=F64))  # PAD
    counts = b.sum(-1)  # (N, R): updates per sequence
    assert torch.equal(counts[:, 3], torch.zeros(N, dtype=F64))  # the empty row never updates
    assert torch.equal(counts[:, 2], torch.ones(N, dtype=F64))  # α = 1: always exactly one
    nonempty = mask.any(-1)
    variance = (alpha * (1 - alpha)).sum(-1)  # Poisson-binomial: Var Σ b = Σ α (1 − α)
    mean = counts.mean(0)
    for r in nonempty.nonzero().flatten().tolist():
        se = math.sqrt(float(variance[r]) / N)
        assert abs(float(mean[r]) - 1) <= SIGMAS * se + 1e-12, (r, float(mean[r]), se)
    pooled = float(counts[:, nonempty].mean())
    pooled_se = math.sqrt(float(variance[nonempty].sum()) / N) / int(nonempty.sum())
    assert abs(pooled - 1) <= SIGMAS * pooled_se
    # every position updates with probability α (exactly, where α is 0 or 1)
    frequency = b.mean(0)
    allowance = SIGMAS * torch.sqrt(alpha * (1 - alpha) / N)
    assert bool(((frequency - alpha).abs() <= allowance + 1e-12).all())


def test_an_untrained_abs_reader_updates_once_per_sentence_and_document():
    """Spec abs 5.5 (1): Bernoulli ABS-ASA (ws) on an untrained model, batch 64, S = 10."""
    data, emb = _syncloze()
    model = _abshan(emb, dtype=torch.float32, mode="asa", levels="ws")
    with torch.no_grad():
        model(data.doc, data.query, data.cands)
    mask_w = data.doc != 0
    nonempty = mask_w.any(-1)
    b_word, b_sent = model.last["b_word"], model.last["b_sent"]
    per_sentence = float(b_word.sum(-1)[nonempty].mean())
    assert 0.85 <= per_sentence <= 1.15
    structural = int(nonempty.sum()) / int(mask_w.sum())  # #sentences / #tokens
    rates = model.update_rates()
    assert abs(rates["w"] - structural) <= 0.2 * structural
    per_document = float(b_sent.sum(-1).mean())
    assert 0.8 <= per_document <= 1.3
    assert rates["s"] == float(b_sent[nonempty].sum()) / int(nonempty.sum())


# --- (abs-fill): the forward fill ---------------------------------------------------------------


def test_forward_fill_with_all_ones_and_all_zeros():
    h_hat = torch.randn(3, 5, 4, dtype=F64)
    # b = 1: 1·ĥ + 0·h_prev = ĥ + 0 = ĥ exactly in IEEE arithmetic (finite values), so
    # bitwise equality is the right check, not a tolerance
    assert torch.equal(forward_fill(h_hat, torch.ones(3, 5, dtype=F64)), h_hat)
    # b = 0: every row copies h_0 = 0
    assert torch.equal(forward_fill(h_hat, torch.zeros(3, 5, dtype=F64)), torch.zeros_like(h_hat))


def test_forward_fill_hand_examples():
    h_hat = torch.arange(1.0, 16.0, dtype=F64).view(5, 3)  # rows h1 .. h5
    filled = forward_fill(h_hat, torch.tensor([1.0, 0, 0, 1, 0], dtype=F64))
    assert torch.equal(filled, h_hat[[0, 0, 0, 3, 3]])  # [h1, h1, h1, h4, h4]
    leading = forward_fill(h_hat, torch.tensor([0.0, 0, 1, 0, 1], dtype=F64))
    zero = torch.zeros(3, dtype=F64)
    assert torch.equal(leading, torch.stack([zero, zero, h_hat[2], h_hat[2], h_hat[4]]))


def test_forward_fill_over_leading_dimensions_fills_each_sequence_on_its_own():
    g = torch.Generator().manual_seed(2)
    h_hat = torch.randn(2, 3, 6, 4, generator=g, dtype=F64)  # (B, S, W, D)
    b = (torch.rand(2, 3, 6, generator=g) < 0.4).to(F64)
    filled = forward_fill(h_hat, b)
    assert filled.shape == h_hat.shape
    for i in range(2):
        for s in range(3):
            previous, rows = torch.zeros(4, dtype=F64), []
            for t in range(6):  # a copy or the new output: exact, so torch.equal below
                previous = h_hat[i, s, t] if b[i, s, t] == 1 else previous
                rows.append(previous)
            assert torch.equal(filled[i, s], torch.stack(rows))


def test_forward_fill_gradient_with_respect_to_the_decisions():
    """∂L/∂b_t = g_t · (ĥ_t − h_{t−1}) with g_t = ∂L/∂h_t through the recurrence
    g_t = w_t + (1 − b_{t+1}) g_{t+1}; through the STE the same reaches α (∂b/∂α = 1)."""
    g = torch.Generator().manual_seed(3)
    T, D = 5, 3
    h_hat = torch.randn(T, D, generator=g, dtype=F64)
    w = torch.randn(T, D, generator=g, dtype=F64)
    b_value = torch.tensor([0.0, 1, 0, 0, 1], dtype=F64)

    b = b_value.clone().requires_grad_(True)
    filled = forward_fill(h_hat, b)
    (w * filled).sum().backward()

    previous = torch.cat([torch.zeros(1, D, dtype=F64), filled.detach()[:-1]])  # h_{t−1}
    upstream, expected = torch.zeros(D, dtype=F64), torch.zeros(T, dtype=F64)
    for t in reversed(range(T)):
        carry = (1 - b_value[t + 1]) * upstream if t + 1 < T else 0
        upstream = w[t] + carry
        expected[t] = upstream @ (h_hat[t] - previous[t])
    assert_close_ulps(b.grad, expected)

    # the STE path: top-2 of this α is positions 1 and 4, the same decisions
    alpha = torch.tensor([0.1, 0.3, 0.15, 0.2, 0.25], dtype=F64, requires_grad=True)
    decisions = abs_decisions(alpha, torch.ones(T, dtype=torch.bool), "topk", k=2)
    assert torch.equal(decisions.detach(), b_value)
    (w * forward_fill(h_hat, decisions)).sum().backward()
    assert_close_ulps(alpha.grad, expected)


# --- PAD never updates --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "how, kwargs", [("bernoulli", {}), ("topk", dict(k=3)), ("rank", dict(rate=0.5))]
)
def test_pad_never_updates(how, kwargs):
    g = torch.Generator().manual_seed(4)
    mask = torch.rand(50, 8, generator=g) < 0.6
    mask[0], mask[1] = False, True
    # attention that is NOT masked: PAD gets the largest weights, and still never updates
    alpha = torch.softmax(torch.randn(50, 8, generator=g, dtype=F64) + 5.0 * ~mask, -1)
    b = abs_decisions(alpha, mask, how, generator=g, **kwargs)
    assert torch.equal(b[~mask], torch.zeros(int((~mask).sum()), dtype=F64))
    assert bool(((b == 0) | (b == 1)).all())
    assert torch.equal(b[0], torch.zeros(8, dtype=F64))


@pytest.mark.parametrize("levels", ["w", "ws", "s"])
def test_abshan_tallies_count_real_tokens_only(levels):
    doc, query, cands, emb = _padded_batch(seed=5)
    model = _abshan(emb, mode="asa", levels=levels)
    mask_w = doc != 0
    mask_s = mask_w.any(-1)
    updates, possible = {"w": 0.0, "s": 0.0}, {"w": 0, "s": 0}
    for _ in range(2):  # the tally adds up over forward passes
        with torch.no_grad():
            model(doc, query, cands)
        b_word, b_sent = model.last["b_word"], model.last["b_sent"]
        assert torch.equal(b_word[~mask_w], torch.zeros(int((~mask_w).sum()), dtype=F64))
        assert torch.equal(b_sent[~mask_s], torch.zeros(int((~mask_s).sum()), dtype=F64))
        updates["w"] += float(b_word[mask_w].sum())
        updates["s"] += float(b_sent[mask_s].sum())
        possible["w"] += int(mask_w.sum())
        possible["s"] += int(mask_s.sum())
    rates = model.update_rates()
    assert set(rates) == set(levels)
    for level in levels:
        assert rates[level] == updates[level] / possible[level]
    if "w" not in levels:  # a level that does not skip reports its real tokens as kept
        assert torch.equal(model.last["b_word"], mask_w.to(F64))


# --- (abs-topk), (abs-rank) ---------------------------------------------------------------------


def test_topk_hand_example_breaks_ties_by_position():
    alpha = torch.tensor([[0.1, 0.3, 0.3, 0.2, 0.1, 0.0]], dtype=F64)
    mask = torch.tensor([[True] * 5 + [False]])
    for k, kept in ((1, [1]), (2, [1, 2]), (3, [1, 2, 3]), (4, [0, 1, 2, 3]), (9, [0, 1, 2, 3, 4])):
        b = abs_decisions(alpha, mask, "topk", k=k)
        assert b[0].nonzero().flatten().tolist() == kept, k
    uniform = torch.full((1, 6), 1 / 6, dtype=F64)  # all tied: the earliest positions
    b = abs_decisions(uniform, torch.ones(1, 6, dtype=torch.bool), "rank", rate=0.5)
    assert b[0].tolist() == [1, 1, 1, 0, 0, 0]


@pytest.mark.parametrize("k", [1, 2, 5])
def test_topk_keeps_min_k_n_on_the_top_positions(k):
    g = torch.Generator().manual_seed(6)
    lengths = torch.randint(0, 9, (40,), generator=g)
    mask = torch.arange(8) < lengths[:, None]
    scores = torch.randint(0, 4, (40, 8), generator=g).to(F64)  # small integers: many ties
    alpha = masked_softmax(scores, mask)
    b = abs_decisions(alpha, mask, "topk", k=k)
    assert torch.equal(b.sum(-1), torch.clamp(lengths, max=k).to(F64))
    for r in range(40):
        expected = _top_positions(alpha[r], mask[r], min(k, int(lengths[r])))
        assert b[r].nonzero().flatten().tolist() == sorted(expected), r


@pytest.mark.parametrize("rate", [0.1, 0.25, 0.5, 0.7, 1.0])
def test_rank_keeps_the_nearest_rank_count_on_the_top_positions(rate):
    g = torch.Generator().manual_seed(7)
    lengths = torch.randint(0, 12, (40,), generator=g)
    mask = torch.arange(11) < lengths[:, None]
    alpha = masked_softmax(torch.randint(0, 5, (40, 11), generator=g).to(F64), mask)
    b = abs_decisions(alpha, mask, "rank", rate=rate)
    for r in range(40):
        n = int(lengths[r])
        count = _rank_count(rate, n)
        assert int(b[r].sum()) == count, (r, n)
        assert b[r].nonzero().flatten().tolist() == sorted(_top_positions(alpha[r], mask[r], count))
    if rate == 1.0:  # every real token is kept
        assert torch.equal(b, mask.to(F64))


def test_keep_count_of_empty_short_and_long_sequences():
    n = torch.tensor([0, 1, 2, 3, 5, 10, 11])
    assert keep_count(n, "topk", k=3).tolist() == [0, 1, 2, 3, 3, 3, 3]
    assert keep_count(n, "rank", rate=0.25).tolist() == [0, 1, 1, 1, 1, 3, 3]  # 2.5 -> 3
    assert keep_count(n, "rank", rate=1.0).tolist() == n.tolist()
    for rate in (0.1, 0.35, 0.5, 0.9):
        assert keep_count(n, "rank", rate=rate).tolist() == [
            _rank_count(rate, m) for m in n.tolist()
        ]


@pytest.mark.parametrize(
    "how, kwargs, levels",
    [("topk", dict(k=2), "w"), ("rank", dict(rate=0.3), "ws"), ("rank", dict(rate=1.0), "ws")],
)
def test_deterministic_selection_realises_the_analytic_update_rate(how, kwargs, levels):
    data, emb = _syncloze(B=16, seed=1)
    model = _abshan(emb, mode="asa", levels=levels, how=how, **kwargs)
    with torch.no_grad():
        model(data.doc, data.query, data.cands)
    mask_w = data.doc != 0
    mask_s = mask_w.any(-1)
    b_word, alpha_before = model.last["b_word"], model.last["alpha_word_before"]

    def count(n):
        return min(kwargs["k"], n) if how == "topk" else _rank_count(kwargs["rate"], n)

    lengths = mask_w.sum(-1)  # (B, S)
    kept = [count(n) for n in lengths.flatten().tolist()]
    assert b_word.sum(-1).flatten().tolist() == kept
    rates = model.update_rates()
    assert rates["w"] == sum(kept) / int(lengths.sum())
    for i, s in ((0, 0), (3, 4), (15, 9)):
        top = _top_positions(alpha_before[i, s], mask_w[i, s], kept[i * 10 + s])
        assert b_word[i, s].nonzero().flatten().tolist() == sorted(top)
    if "s" in levels:
        documents = mask_s.sum(-1).tolist()
        kept_s = [count(n) for n in documents]
        assert model.last["b_sent"].sum(-1).tolist() == kept_s
        assert rates["s"] == sum(kept_s) / sum(documents)
    if kwargs.get("rate") == 1.0:
        assert rates == {"w": 1.0, "s": 1.0} and torch.equal(b_word, mask_w.to(F64))


# --- (abs-ste) ----------------------------------------------------------------------------------


@pytest.mark.parametrize("how, kwargs", [("bernoulli", {}), ("topk", dict(k=2))])
def test_ste_changes_the_gradient_and_not_the_values(how, kwargs):
    alpha_value, mask = _rows()
    g = torch.Generator().manual_seed(8)
    h_hat = torch.randn(5, 6, 4, generator=g, dtype=F64)
    weight = torch.randn(5, 6, 4, generator=g, dtype=F64)
    values, grads = {}, {}
    for ste in (True, False):
        alpha = alpha_value.clone().requires_grad_(True)
        b = abs_decisions(
            alpha, mask, how, ste=ste, generator=torch.Generator().manual_seed(9), **kwargs
        )
        assert b.requires_grad == ste  # without the STE the decisions are detached
        values[ste] = b.detach()
        loss = (weight * forward_fill(h_hat, b)).sum() + (alpha * weight[..., 0]).sum()
        loss.backward()
        grads[ste] = alpha.grad
    assert torch.equal(values[True], values[False])
    assert torch.equal(grads[False], weight[..., 0])  # only the direct term
    assert not torch.equal(grads[True], grads[False])
    # the identity estimator: ∂(Σ c·b)/∂α = c
    alpha = alpha_value.clone().requires_grad_(True)
    c = torch.randn(5, 6, generator=g, dtype=F64)
    (c * abs_decisions(alpha, mask, how, generator=g, **kwargs)).sum().backward()
    assert torch.equal(alpha.grad, c)


@pytest.mark.parametrize("mode, levels", [("as", "w"), ("asa", "ws")])
def test_ste_in_abshan_changes_gradients_and_not_outputs(mode, levels):
    data, emb = _syncloze(B=8, seed=2)
    outputs, alpha_grads, encoder_grads = {}, {}, {}
    for ste in (True, False):
        model = _abshan(emb, mode=mode, levels=levels, ste=ste)
        seen = {}
        skip_words = model.skip_words

        def spy(D_word, alpha_word, mask_w, q, seen=seen, skip_words=skip_words):
            alpha_word.retain_grad()  # the pre-skip attention, to read its gradient
            seen["alpha"] = alpha_word
            return skip_words(D_word, alpha_word, mask_w, q)

        model.skip_words = spy
        out = model(data.doc, data.query, data.cands)
        cloze_loss(out.scores, data.answer, "ptr").backward()
        outputs[ste] = out
        alpha_grads[ste] = seen["alpha"].grad
        encoder_grads[ste] = model.word_encoder.gru.weight_hh_l0.grad
    for name in ("scores", "alpha_word", "alpha_sent", "alpha_doc"):
        assert torch.equal(getattr(outputs[True], name), getattr(outputs[False], name)), name
    assert alpha_grads[True] is not None and bool(alpha_grads[True].abs().sum() > 0)
    if mode == "asa":  # the pre-skip attention reaches the loss only through the decisions
        assert alpha_grads[False] is None
    else:  # ABS-AS also blends and points with it
        assert not torch.equal(alpha_grads[True], alpha_grads[False])
    assert not torch.equal(encoder_grads[True], encoder_grads[False])


# --- ABS-AS against ABS-ASA ---------------------------------------------------------------------


def test_abs_as_points_with_the_pre_skip_attention():
    data, emb = _syncloze(B=16, seed=3)
    model = _abshan(emb, mode="as", levels="w")
    with torch.no_grad():
        out = model(data.doc, data.query, data.cands)
    assert torch.equal(out.alpha_word, model.last["alpha_word_before"])
    assert bool((model.last["b_word"].sum(-1) < (data.doc != 0).sum(-1)).any())  # it skipped


def test_abs_asa_attends_again_over_the_filled_encodings():
    data, emb = _syncloze(B=16, seed=4)
    model = _abshan(emb, mode="asa", levels="w")
    with torch.no_grad():
        out = model(data.doc, data.query, data.cands)
        doc = data.doc
        B, S, W = doc.shape
        mask_w = doc != 0
        _, q = model.query_encoder(model.embedding(data.query), data.query != 0)
        D_word, _ = model.word_encoder(
            model.embedding(doc).view(B * S, W, E), mask_w.view(B * S, W)
        )
        D_word = D_word.view(B, S, W, -1)
    b = model.last["b_word"]
    filled, previous = torch.empty_like(D_word), torch.zeros_like(D_word[:, :, 0])
    for t in range(W):  # (abs-fill) by hand
        previous = torch.where(b[:, :, t, None] == 1, D_word[:, :, t], previous)
        filled[:, :, t] = previous
    beta = (filled * q[:, None, None, :]).sum(-1)
    assert_close_ulps(out.alpha_word, masked_softmax(beta, mask_w))
    assert not torch.equal(out.alpha_word, model.last["alpha_word_before"])

    # tokens that share a copied state (a kept token and the skipped ones after it, or the
    # zeros before the first kept token) get the same post-skip attention; equal inputs, but
    # different lanes of one product, so a few ulp rather than the bit
    shared = 0
    for i in range(B):
        for s in range(S):
            n = int(mask_w[i, s].sum())
            last_kept = None
            for t in range(n):
                if b[i, s, t] == 1:
                    last_kept = t
                elif last_kept is not None:
                    assert_close_ulps(
                        out.alpha_word[i, s, t], out.alpha_word[i, s, last_kept], ulps=8
                    )
                    shared += 1
                else:
                    assert_close_ulps(out.alpha_word[i, s, t], out.alpha_word[i, s, 0], ulps=8)
    assert shared > 100


# --- HAN-ptr at rate 1 --------------------------------------------------------------------------


@pytest.mark.parametrize("batch", ["syncloze", "padded"])
@pytest.mark.parametrize("mode, levels", [("as", "w"), ("asa", "w"), ("asa", "s"), ("asa", "ws")])
def test_ranked_abs_at_rate_one_is_han_ptr(mode, levels, batch):
    if batch == "syncloze":
        data, emb = _syncloze(B=16, seed=5)
        doc, query, cands, emb = data.doc, data.query, data.cands, emb.double()
    else:  # empty sentences, some between non-empty ones
        doc, query, cands, emb = _padded_batch(seed=6)
    torch.manual_seed(0)
    han = HAN(emb, H).double()
    model = _abshan(emb, seed=1, mode=mode, levels=levels, how="rank", rate=1.0)
    model.load_state_dict(han.state_dict())
    with torch.no_grad():
        expected, out = han(doc, query, cands), model(doc, query, cands)
    for name in ("scores", "alpha_word", "alpha_sent", "alpha_doc"):
        assert_close_ulps(getattr(out, name), getattr(expected, name), msg=name)


# --- bad input ----------------------------------------------------------------------------------


def test_abs_decisions_refuse_bad_arguments():
    alpha, mask = _rows()
    cases = [
        (dict(how="topk"), ValueError, "k must be a positive integer, got None"),
        (dict(how="topk", k=0), ValueError, "k must be a positive integer, got 0"),
        (dict(how="topk", k=2, rate=0.5), ValueError, "how='topk' takes k, not rate"),
        (dict(how="rank", rate=0), ValueError, r"rate must be a number in \(0, 1\].*got 0"),
        (dict(how="rank", rate=1.5), ValueError, r"in \(0, 1\].*got 1.5"),
        (dict(how="rank", rate=True), ValueError, r"in \(0, 1\].*got True"),
        (dict(how="rank"), ValueError, r"in \(0, 1\].*got None"),
        (dict(how="rank", rate=0.5, k=2), ValueError, "how='rank' takes rate, not k"),
        (dict(how="bernoulli", k=2), ValueError, "takes neither k nor rate"),
        (dict(how="bernoulli", rate=0.5), ValueError, "takes neither k nor rate"),
        (dict(how="greedy"), ValueError, r"how must be one of \('bernoulli', 'topk', 'rank'\)"),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            abs_decisions(alpha, mask, **kwargs)
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
        abs_decisions(alpha * 2, mask)
    with pytest.raises(
        ValueError, match=r"booleans of the shape of alpha \(5, 6\), got torch.float64"
    ):
        abs_decisions(alpha, mask.to(F64))
    with pytest.raises(
        ValueError, match=r"shape of alpha \(5, 6\), got torch.bool of shape \(5, 5\)"
    ):
        abs_decisions(alpha, mask[:, :5])
    with pytest.raises(TypeError, match="alpha must be a torch.Tensor, got list"):
        abs_decisions(alpha.tolist(), mask)


def test_forward_fill_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match=r"got h_hat \(2, 5, 3\) and b \(2, 4\)"):
        forward_fill(torch.zeros(2, 5, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"h_hat \(\.\.\., T, D\).*got h_hat \(5,\) and b \(5,\)"):
        forward_fill(torch.zeros(5), torch.zeros(5))
    with pytest.raises(TypeError, match="b must be a torch.Tensor"):
        forward_fill(torch.zeros(2, 5, 3), [[1] * 5] * 2)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(mode="as", levels="s"), ValueError, "levels='w'.*got 's'"),
        (dict(mode="as", levels="ws"), ValueError, "levels='w'.*got 'ws'"),
        (dict(mode="skim"), ValueError, r"mode must be one of \('as', 'asa'\), got 'skim'"),
        (dict(mode="asa", levels="q"), ValueError, "levels must be one of"),
        (dict(how="topk"), ValueError, "k must be a positive integer, got None"),
        (dict(how="topk", k=0), ValueError, "k must be a positive integer, got 0"),
        (dict(how="topk", k=1, rate=0.5), ValueError, "takes k, not rate"),
        (dict(how="rank", rate=0), ValueError, r"in \(0, 1\].*got 0"),
        (dict(how="rank", rate=1.5), ValueError, r"in \(0, 1\].*got 1.5"),
        (dict(how="rank", rate=True), ValueError, r"in \(0, 1\].*got True"),
        (dict(how="rank", rate=0.5, k=3), ValueError, "takes rate, not k"),
        (dict(k=3), ValueError, "takes neither k nor rate"),
        (dict(H=0), ValueError, "H must be a positive integer"),
    ],
)
def test_abshan_refuses_bad_constructor_arguments(kwargs, error, message):
    arguments = dict(embedding=torch.randn(10, E), H=H) | kwargs
    with pytest.raises(error, match=message):
        ABSHAN(**arguments)


# --- the tally ----------------------------------------------------------------------------------


def test_update_rates_need_a_forward_pass_and_reset_tally_starts_afresh():
    doc, query, cands, emb = _padded_batch(seed=7)
    model = _abshan(emb, mode="asa", levels="ws")
    with pytest.raises(ValueError, match="no step was counted"):
        model.update_rates()
    with torch.no_grad():
        model(doc, query, cands)
    model.update_rates()
    model.reset_tally()
    with pytest.raises(ValueError, match="no step was counted"):
        model.update_rates()
    with torch.no_grad():  # after a reset only the new pass counts
        model(doc, query, cands)
    mask_w = doc != 0
    b_word = model.last["b_word"]
    assert model.update_rates()["w"] == float(b_word[mask_w].sum()) / int(mask_w.sum())
    assert "k=" not in repr(model) and "mode=asa, levels=ws, how=bernoulli" in repr(model)
