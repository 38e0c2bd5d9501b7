"""Hierarchical attention networks (Chapter 8) and their skipping encoders (Chapter 9):
pointer-sum against a brute-force loop, masked attention sums, the biGRU over padded and
empty sequences against per-sequence references, parameter counts of spec han 1.9, frozen
embeddings, the loss, update rates over real tokens, the untrained-model structure of spec
han 5.6 and bad input."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from rnnbook.models import (
    HAN,
    RAN,
    BiGRU,
    GRUCell,
    cloze_loss,
    count_parameters,
    masked_softmax,
    pointer_sum,
)
from rnnbook.testing import assert_close_ulps

F64 = torch.float64
V, E, H = 40, 6, 8


def _batch(B=4, S=5, W=7, L_q=6, K=4, seed=0, empty=True):
    """Random padded cloze samples; sentence lengths 0..W (so some sentences are empty),
    candidates drawn from each document, one of them repeated in the document."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0 if empty else 1, W + 1, (B, S), generator=g)
    lengths[:, 0] = W  # every document has one full sentence
    doc = torch.randint(1, V, (B, S, W), generator=g) * (torch.arange(W) < lengths[..., None])
    query = torch.randint(1, V, (B, L_q), generator=g) * (torch.arange(L_q) < L_q - 2)
    cands = doc[:, 0, :K].clone()
    doc[:, 0, -1] = cands[:, 0]  # a candidate repeated in the passage
    answer = torch.randint(0, K, (B,), generator=g)
    return doc, query, cands, answer


def _embedding(seed=0):
    return torch.randn(V, E, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _models():
    emb = _embedding()
    torch.manual_seed(0)
    return {
        "ptr": HAN(emb, H).double(),
        "docvec": HAN(emb, H, head="docvec").double(),
        "ran": RAN(emb, H).double(),
        "sgru-qws": HAN(emb, H, skip=dict(where="qws", M=4, theta=0.01)).double(),
        "sens-w": HAN(emb, H, skip=dict(where="w", M=2, theta=0.0, mode="ensemble")).double(),
    }


# --- pointer-sum -----------------------------------------------------------------------------


def test_pointer_sum_equals_a_brute_force_loop():
    doc, query, cands, _ = _batch(B=4)
    cands[1, 2] = 0  # a PAD candidate gets nothing
    cands[2, 3] = int(query[2, 0])  # a token of the query, absent from the document
    doc[2][doc[2] == cands[2, 3]] = 1 if int(cands[2, 3]) != 1 else 2
    cands[3, 1] = cands[3, 0]  # the same candidate twice
    alpha = torch.rand(doc.shape, dtype=F64) * (doc != 0)
    alpha = alpha / alpha.sum((1, 2), keepdim=True)
    P = pointer_sum(alpha, doc, cands)
    B, S, W = doc.shape
    brute = torch.zeros(cands.shape, dtype=F64)
    for b, k in itertools.product(range(B), range(cands.shape[1])):
        for i, j in itertools.product(range(S), range(W)):
            if doc[b, i, j] != 0 and doc[b, i, j] == cands[b, k]:
                brute[b, k] += alpha[b, i, j]
    assert_close_ulps(P, brute)
    assert P[1, 2] == 0 and P[2, 3] == 0
    assert P[0, 0] > alpha[0, 0, 0]  # the repeated candidate collects both positions
    assert bool((P[[0, 1, 2]].sum(-1) <= 1 + 1e-12).all())


def test_pointer_sum_hand_example():
    doc = torch.tensor([[[5, 7, 5], [9, 0, 0]]])  # (1, 2, 3)
    alpha = torch.tensor([[[0.1, 0.2, 0.3], [0.4, 0.0, 0.0]]], dtype=F64)
    P = pointer_sum(alpha, doc, torch.tensor([[5, 9, 3, 0]]))
    assert_close_ulps(P, torch.tensor([[0.4, 0.4, 0.0, 0.0]], dtype=F64))


# --- attention ---------------------------------------------------------------------------------


def test_masked_softmax_is_zero_on_masked_and_empty_rows():
    scores = torch.randn(3, 4, dtype=F64, requires_grad=True)
    mask = torch.tensor([[True, True, False, True], [False] * 4, [True, False, False, False]])
    alpha = masked_softmax(scores, mask)
    assert torch.equal(alpha[~mask], torch.zeros(int((~mask).sum()), dtype=F64))
    assert_close_ulps(alpha[0, mask[0]], torch.softmax(scores[0, mask[0]], 0))
    assert alpha[2, 0] == 1
    alpha.pow(2).sum().backward()
    assert torch.isfinite(scores.grad).all() and torch.equal(
        scores.grad[1], torch.zeros(4, dtype=F64)
    )


@pytest.mark.parametrize("name", ["ptr", "docvec", "ran", "sgru-qws", "sens-w"])
def test_attention_sums_to_one_over_real_tokens_and_is_zero_on_pad(name):
    model = _models()[name]
    doc, query, cands, _ = _batch()
    out = model(doc, query, cands)
    real, nonempty = doc != 0, (doc != 0).any(-1)
    assert (~nonempty).any()  # the batch has empty sentences
    ones = torch.ones(doc.shape[0], dtype=F64)
    assert torch.equal(out.alpha_doc[~real], torch.zeros(int((~real).sum()), dtype=F64))
    assert_close_ulps(out.alpha_doc.sum((1, 2)), ones)
    if name == "ran":
        assert out.alpha_word is None and out.alpha_sent is None
        return
    rows = out.alpha_word.sum(-1)
    assert_close_ulps(rows[nonempty], torch.ones(int(nonempty.sum()), dtype=F64))
    assert torch.equal(out.alpha_word[~real], torch.zeros(int((~real).sum()), dtype=F64))
    assert torch.equal(out.alpha_sent[~nonempty], torch.zeros(int((~nonempty).sum()), dtype=F64))
    assert_close_ulps(out.alpha_sent.sum(-1), ones)
    assert_close_ulps(out.alpha_doc, out.alpha_sent.unsqueeze(-1) * out.alpha_word, ulps=0)


@pytest.mark.parametrize("name", ["ptr", "docvec", "ran", "sgru-qws"])
def test_more_padding_changes_nothing(name):
    model = _models()[name]
    doc, query, cands, _ = _batch(seed=1)
    out = model(doc, query, cands)
    wider = model(F.pad(doc, (0, 3, 0, 2)), F.pad(query, (0, 4)), cands)  # W+3, S+2, L_q+4
    assert_close_ulps(wider.scores, out.scores)
    assert_close_ulps(wider.alpha_doc[:, :5, :7], out.alpha_doc)


def test_the_pointer_head_ignores_query_tokens_and_swaps_onto_any_model():
    doc, query, cands, _ = _batch(seed=2)
    only_in_query = int(query[0, 0])
    doc[0][doc[0] == only_in_query] = 1 if only_in_query != 1 else 2
    cands[0, 1] = only_in_query
    models = _models()
    assert models["ptr"](doc, query, cands).scores[0, 1] == 0
    for name in ("docvec", "ran"):  # spec han 1.8: the pointer on a doc-vec model's attention
        out = models[name](doc, query, cands)
        P = pointer_sum(out.alpha_doc, doc, cands)
        assert P.shape == cands.shape and bool((P.sum(-1) <= 1 + 1e-12).all())


# --- the bidirectional encoder -----------------------------------------------------------------


def _ragged(N=6, T=7, d=5, seed=3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, T, d, generator=g, dtype=F64)
    mask = torch.rand(N, T, generator=g) < 0.7
    mask[0] = False  # an empty row
    mask[1] = True  # a full row
    mask[2, 3:] = False  # an ordinary padded row
    return x, mask


def test_bigru_reads_each_row_over_its_real_tokens_only():
    x, mask = _ragged()
    torch.manual_seed(0)
    encoder = BiGRU(5, 4).double()
    out, last = encoder(x, mask)
    assert torch.equal(out[0], torch.zeros(7, 8, dtype=F64))
    assert torch.equal(last[0], torch.zeros(8, dtype=F64))
    for n in range(1, x.shape[0]):
        real = x[n][mask[n]].unsqueeze(0)  # PAD dropped, order kept: (1, T_n, d)
        reference, h_n = encoder.gru(real)
        assert_close_ulps(out[n][mask[n]], reference[0])
        assert torch.equal(out[n][~mask[n]], torch.zeros(int((~mask[n]).sum()), 8, dtype=F64))
        assert_close_ulps(last[n], torch.cat([h_n[0, 0], h_n[1, 0]]))


@pytest.mark.parametrize("mode", ["module", "ensemble"])
def test_skipping_bigru_that_always_updates_is_two_seed_grus(mode):
    x, mask = _ragged(seed=4)
    torch.manual_seed(0)
    encoder = BiGRU(5, 4, dict(M=2, theta=-1e9, mode=mode)).double()
    out, last = encoder(x, mask)
    gru_f, gru_b = GRUCell(5, 4, "seed").double(), GRUCell(5, 4, "seed").double()
    gru_f.load_state_dict(encoder.forward_cell.state_dict())
    gru_b.load_state_dict(encoder.backward_cell.state_dict())
    for n in range(1, x.shape[0]):
        real = x[n][mask[n]]  # (T_n, d)
        h_f, h_b, fwd, bwd = torch.zeros(1, 4, dtype=F64), torch.zeros(1, 4, dtype=F64), [], []
        for t in range(real.shape[0]):
            h_f = gru_f(real[t : t + 1], h_f)
            fwd.append(h_f[0])
            h_b = gru_b(real[real.shape[0] - 1 - t : real.shape[0] - t], h_b)
            bwd.insert(0, h_b[0])
        assert_close_ulps(out[n][mask[n]], torch.cat([torch.stack(fwd), torch.stack(bwd)], -1))
        assert_close_ulps(last[n], torch.cat([h_f[0], h_b[0]]))
    assert torch.equal(out[~mask], torch.zeros(int((~mask).sum()), 8, dtype=F64))
    assert encoder.update_rates() == (1.0, 1.0)
    n_real = int(mask.sum())
    assert encoder.forward_cell.possible == n_real * 4  # padding is never counted


def test_recorded_decisions_sit_on_the_tokens_and_give_the_update_rate():
    x, mask = _ragged(seed=5)
    encoder = BiGRU(5, 8, dict(M=4, theta=0.01)).double()
    encoder.record = True
    encoder(x, mask)
    assert encoder.decisions.shape == (6, 7, 2, 4) and encoder.updates.shape == (6, 7, 2)
    assert torch.equal(encoder.decisions[~mask], torch.zeros(int((~mask).sum()), 2, 4, dtype=F64))
    fwd, bwd = encoder.update_rates()
    assert abs(float(encoder.updates[mask][:, 0].mean()) - fwd) < 1e-12
    assert abs(float(encoder.updates[mask][:, 1].mean()) - bwd) < 1e-12


# --- parameters ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "E_, H_, word, sentence, ptr, docvec, ran",
    [
        (100, 256, 549_888, 1_182_720, 2_282_496, 2_333_796, 1_151_076),
        (100, 512, 1_886_208, 4_724_736, 8_497_152, 8_599_652, 3_874_916),
        (300, 512, 2_500_608, 4_724_736, 9_725_952, 10_033_452, 5_308_716),
    ],
)
def test_parameter_counts_of_spec_table(E_, H_, word, sentence, ptr, docvec, ran):
    emb = torch.zeros(3, E_)
    E_c = 3 * E_  # the candidate embedding, |vocabulary| x E
    han_ptr = HAN(emb, H_)
    assert count_parameters(han_ptr.word_encoder) == word
    assert count_parameters(han_ptr.sentence_encoder) == sentence
    assert count_parameters(han_ptr.query_encoder) == word
    assert count_parameters(han_ptr) == ptr
    assert count_parameters(HAN(emb, H_, head="docvec")) - E_c == docvec
    assert count_parameters(RAN(emb, H_)) - E_c == ran
    if H_ == 256:  # the skipping cells have the same parameters as nn.GRU
        sgru = HAN(emb, H_, skip=dict(where="qws", M=8, theta=0.1))
        assert count_parameters(sgru) == ptr


def test_han_ptr_has_no_parameters_after_the_sentence_level():
    model = _models()["ptr"]
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    encoders = ("query_encoder.", "word_encoder.", "sentence_encoder.")
    assert trainable and all(name.startswith(encoders) for name in trainable)


@pytest.mark.parametrize("name", ["ptr", "docvec", "ran", "sens-w"])
def test_frozen_embeddings_get_no_gradient(name):
    model = _models()[name]
    doc, query, cands, answer = _batch()
    head = "ptr" if name in ("ptr", "sens-w") else "docvec"
    cloze_loss(model(doc, query, cands).scores, answer, head).backward()
    assert model.embedding.weight.grad is None
    if head == "docvec":
        assert model.candidate_embedding.weight.grad is not None
        assert model.candidate_embedding.weight.data_ptr() != model.embedding.weight.data_ptr()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


# --- loss ----------------------------------------------------------------------------------------


def test_cloze_loss_hand_values():
    P = torch.tensor([[0.2, 0.3, 0.0], [0.1, 0.1, 0.3]], dtype=F64)
    answer = torch.tensor([1, 2])
    expected_renorm = -(torch.log(P[0, 1] / 0.5) + torch.log(P[1, 2] / 0.5)) / 2
    assert_close_ulps(cloze_loss(P, answer, "ptr"), expected_renorm)
    expected_raw = -(torch.log(P[0, 1]) + torch.log(P[1, 2])) / 2
    assert_close_ulps(cloze_loss(P, answer, "ptr", renorm=False), expected_raw)
    gamma = torch.randn(2, 3, dtype=F64)
    assert_close_ulps(cloze_loss(gamma, answer, "docvec"), F.cross_entropy(gamma, answer))
    zero = torch.zeros(2, 3, dtype=F64, requires_grad=True)  # no mass anywhere: clamped, finite
    loss = cloze_loss(zero, answer, "ptr")
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(zero.grad).all()


# --- update rates ------------------------------------------------------------------------------


def test_update_rates_count_real_tokens_per_encoder():
    model = _models()["sgru-qws"]
    doc, query, cands, _ = _batch()
    model(doc, query, cands)
    rates = model.update_rates()
    assert set(rates) == {p + s for p in "qws" for s in ("", "_fwd", "_bwd")}
    for p in "qws":
        assert rates[p] == (rates[p + "_fwd"] + rates[p + "_bwd"]) / 2
    assert model.word_encoder.forward_cell.possible == int((doc != 0).sum()) * H
    assert model.sentence_encoder.forward_cell.possible == int((doc != 0).any(-1).sum()) * H
    assert model.query_encoder.forward_cell.possible == int((query != 0).sum()) * H
    model.reset_tally()
    with pytest.raises(ValueError, match="no step"):
        model.update_rates()
    assert _models()["ptr"].update_rates() == {}


@pytest.mark.parametrize("mode", ["module", "ensemble"])
def test_thresholds_at_the_limits_give_u_one_and_zero(mode):
    emb = _embedding()
    doc, query, cands, _ = _batch()
    for theta, u in ((-1e9, 1.0), (1e9, 0.0)):
        model = HAN(emb, H, skip=dict(where="ws", M=4, theta=theta, mode=mode)).double()
        model(doc, query, cands)
        assert all(rate == u for rate in model.update_rates().values())


def _untrained_rate(mode, M, theta):
    """u of the word encoder of an untrained HAN on a fixed batch of 64 padded samples (spec
    han 5.6: S = 10, W = 12, E = H = 32)."""
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(2, 13, (64, 10), generator=g)
    doc = torch.randint(1, 200, (64, 10, 12), generator=g) * (torch.arange(12) < lengths[..., None])
    query = torch.randint(1, 200, (64, 12), generator=g) * (torch.arange(12) < 8)
    emb = torch.randn(200, 32, generator=g)
    torch.manual_seed(0)
    model = HAN(emb, 32, skip=dict(where="w", M=M, theta=theta, mode=mode))
    with torch.no_grad():
        model(doc, query, doc[:, 0, :10])
    return model.update_rates()["w"]


def test_untrained_update_rates_have_the_structure_of_spec_5_6():
    assert _untrained_rate("ensemble", 2, 1e-7) >= 0.99
    sens = [_untrained_rate("ensemble", M, 0.1) for M in (2, 8, 32)]
    sgru = [_untrained_rate("module", M, 0.1) for M in (2, 8, 32)]
    assert sens[0] > sens[1] > sens[2]  # SENS: more modules, fewer majorities
    assert sgru[0] < sgru[1] < sgru[2]  # SGRU: more modules, more updates
    assert sgru[0] <= 0.5 and _untrained_rate("module", 2, 0.01) <= 0.5


# --- bad input ----------------------------------------------------------------------------------


def test_forward_refuses_bad_inputs_with_clear_messages():
    model = _models()["ptr"]
    doc, query, cands, _ = _batch()
    with pytest.raises(ValueError, match=r"doc must be a non-empty \(B, S, W\)"):
        model(doc[:, 0], query, cands)
    with pytest.raises(TypeError, match="int64 token ids, got torch.int32"):
        model(doc, query.int(), cands)
    with pytest.raises(ValueError, match="share the batch size B"):
        model(doc, query[:2], cands)
    with pytest.raises(ValueError, match=r"\[0, 40\), got ids from 0 to 40"):
        model(doc, query, cands.clamp_max(39) + (cands == cands.max()).long())
    with pytest.raises(ValueError, match="d_x = 5"):
        BiGRU(5, 4)(torch.randn(2, 3, 6), torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must be booleans"):
        masked_softmax(torch.randn(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="same B"):
        pointer_sum(
            torch.rand(2, 3, 4), torch.ones(2, 3, 4, dtype=torch.long), torch.ones(3, 2).long()
        )
    with pytest.raises(ValueError, match="answer must be int64"):
        cloze_loss(torch.rand(2, 3), torch.tensor([0.0, 1.0]), "ptr")


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(head="pointer"), ValueError, "head must be one of"),
        (dict(skip=dict(where="w", M=3, theta=0.1)), ValueError, "must divide"),
        (
            dict(skip=dict(where="w", M=4, theta=0.1, mode="sens")),
            ValueError,
            "mode must be one of",
        ),
        (dict(skip=dict(where="x", M=4, theta=0.1)), ValueError, "skip\\['where'\\]"),
        (dict(skip=dict(where="", M=4, theta=0.1)), ValueError, "skip\\['where'\\]"),
        (dict(skip=dict(where="w", theta=0.1)), ValueError, "missing \\['M'\\]"),
        (dict(skip=dict(where="w", M=4, theta=0.1, decay="const")), ValueError, "unknown"),
        (dict(skip="w"), TypeError, "skip must be None or a dict"),
        (dict(H=0), ValueError, "H must be a positive integer"),
    ],
)
def test_bad_constructor_arguments_are_refused(kwargs, error, message):
    arguments = dict(embedding=_embedding(), H=H) | kwargs
    with pytest.raises(error, match=message):
        HAN(**arguments)
    with pytest.raises(TypeError, match="float"):
        RAN(torch.zeros(3, 4, dtype=torch.long), 4)
