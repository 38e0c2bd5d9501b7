"""rnnbook.data.syncloze: the structure spec han §5.1 promises, the baselines of §5.6, and
argument checks."""

from __future__ import annotations

import re

import pytest
import torch

from rnnbook.data.syncloze import (
    BLANK_ID,
    PAD_ID,
    TOKEN_CLASSES,
    SynCloze,
    make_syncloze,
    max_frequency_baseline,
    syncloze_embeddings,
    type_oracle_baseline,
)

ENTITY, RELATION, OBJECT = (TOKEN_CLASSES.index(c) for c in ("entity", "relation", "object"))
FILLER, PUNCT = TOKEN_CLASSES.index("filler"), TOKEN_CLASSES.index("punct")


@pytest.fixture(scope="module")
def data() -> SynCloze:
    return make_syncloze(300, seed=0)


def _key(data: SynCloze) -> tuple[torch.Tensor, torch.Tensor]:
    """r* and o*, the two query tokens after xxxxx: (n,) each."""
    blank = (data.query == BLANK_ID).int().argmax(dim=1)
    rows = torch.arange(len(data))
    return data.query[rows, blank + 1], data.query[rows, blank + 2]


def _facts(data: SynCloze, i: int) -> list[tuple[int, int, int, int, int]]:
    """Every ``(sentence, position, e, r, o)`` fact of document i (an entity and the next two)."""
    classes = data.token_class(data.doc[i])
    facts = []
    for s, p in (classes == ENTITY).nonzero().tolist():
        e, r, o = data.doc[i, s, p : p + 3].tolist()
        facts.append((s, p, e, r, o))
    return facts


# --- shapes and layout -----------------------------------------------------------------------


def test_shapes_and_dtypes(data):
    n, S, K = 300, 10, 10
    assert data.doc.shape == (n, S, 5 + 3 * 2 + 1)  # W = fill_hi + 3 max_facts + 1 = 12
    assert data.query.shape == (n, 5 + 4)  # Lq = fill_hi + 4 = 9
    assert data.cands.shape == (n, K)
    for t in (data.answer, data.key_sent, data.key_pos):
        assert t.shape == (n,)
    for t in (data.doc, data.query, data.cands, data.answer, data.key_sent, data.key_pos):
        assert t.dtype == torch.int64
    assert ((data.answer >= 0) & (data.answer < K)).all()
    assert len(data) == n


def test_vocabulary_layout(data):
    V = 2 + 100 + 8 + 8 + 40 + 3
    assert len(data.vocab) == V
    assert data.vocab[:3] == ["<pad>", "xxxxx", "ent0"]
    assert data.vocab[102] == "rel0" and data.vocab[110] == "obj0" and data.vocab[118] == "w0"
    assert data.vocab[-3:] == [".", ",", "!"]
    expected = [0, 1] + [ENTITY] * 100 + [RELATION] * 8 + [OBJECT] * 8 + [FILLER] * 40
    assert data.token_class(torch.arange(V)).tolist() == expected + [PUNCT] * 3
    with pytest.raises(ValueError, match=r"token ids in \[0, 161\)"):
        data.token_class(torch.tensor([V]))


def test_sentences_are_fillers_and_facts_then_punctuation(data):
    classes = data.token_class(data.doc)  # (n, S, W)
    length = (data.doc != PAD_ID).sum(dim=-1)  # (n, S)
    positions = torch.arange(data.doc.shape[-1])
    assert ((data.doc != PAD_ID) == (positions < length[..., None])).all()  # PAD only at the end
    last = classes.gather(-1, (length - 1)[..., None])[..., 0]
    assert (last == PUNCT).all()
    assert ((classes == PUNCT).sum(dim=-1) == 1).all()
    facts = (classes == ENTITY).sum(dim=-1)
    fillers = (classes == FILLER).sum(dim=-1)
    assert (facts <= 2).all() and ((fillers >= 2) & (fillers <= 5)).all()
    assert (length == facts * 3 + fillers + 1).all()
    assert 8.5 < length.float().mean() < 9.5  # "about 9 tokens" (spec han §5.1)


def test_query_holds_one_blank_fact_and_ends_with_a_full_stop(data):
    classes = data.token_class(data.query)
    assert ((data.query == BLANK_ID).sum(dim=1) == 1).all()
    r_key, o_key = _key(data)
    assert (data.token_class(r_key) == RELATION).all() and (data.token_class(o_key) == OBJECT).all()
    length = (data.query != PAD_ID).sum(dim=1)
    assert (data.query[torch.arange(len(data)), length - 1] == data.vocab.index(".")).all()
    fillers = (classes == FILLER).sum(dim=1)
    assert ((fillers >= 2) & (fillers <= 5)).all() and (length == fillers + 4).all()


# --- the answer and the distractors ----------------------------------------------------------


def test_key_fact_is_at_key_sent_key_pos(data):
    r_key, o_key = _key(data)
    rows = torch.arange(len(data))
    answer_id = data.cands[rows, data.answer]
    for i in range(len(data)):
        s, p = data.key_sent[i].item(), data.key_pos[i].item()
        assert data.doc[i, s, p : p + 3].tolist() == [answer_id[i], r_key[i], o_key[i]]


def test_no_distractor_matches_both_key_relation_and_object(data):
    r_key, o_key = (t.tolist() for t in _key(data))
    for i in range(len(data)):
        matches = [(s, p) for s, p, _, r, o in _facts(data, i) if (r, o) == (r_key[i], o_key[i])]
        assert matches == [(data.key_sent[i].item(), data.key_pos[i].item())]


def test_distractors_share_the_key_relation_or_object(data):
    """Both kinds of near miss occur, so unigram matching cannot find the answer."""
    r_key, o_key = (t.tolist() for t in _key(data))
    same_r = same_o = 0
    for i in range(len(data)):
        for _, _, _, r, o in _facts(data, i):
            same_r += r == r_key[i] and o != o_key[i]
            same_o += o == o_key[i] and r != r_key[i]
    assert same_r > 100 and same_o > 100


def test_candidates_are_distinct_entities_occurring_once_or_twice(data):
    assert (data.token_class(data.cands) == ENTITY).all()
    assert all(len(set(row)) == 10 for row in data.cands.tolist())
    counts = (data.doc[:, None] == data.cands[:, :, None, None]).sum(dim=(2, 3))  # (n, K)
    assert ((counts >= 1) & (counts <= 2)).all()
    entities = (data.token_class(data.doc) == ENTITY).sum(dim=(1, 2))
    assert (entities == counts.sum(dim=1)).all()  # no entity but the candidates
    answer_counts = counts[torch.arange(len(data)), data.answer].float()
    assert abs(answer_counts.mean() - counts.float().mean()) < 0.1  # same distribution


def test_facts_respect_the_types(data):
    T = data.n_types
    ids = data.first_id
    for i in range(len(data)):
        for _, _, e, r, _ in _facts(data, i):
            assert (e - ids["entity"]) % T == (r - ids["relation"]) % T


def test_untyped_facts_use_every_relation():
    data = make_syncloze(200, seed=1, n_types=0)
    ids = data.first_id
    mixed = sum(
        (e - ids["entity"]) % 4 != (r - ids["relation"]) % 4
        for i in range(len(data))
        for _, _, e, r, _ in _facts(data, i)
    )
    assert mixed > 100


def test_crowded_documents_drop_second_occurrences():
    data = make_syncloze(50, seed=2, S=5)  # room for 5 * 2 = 10 facts: one per candidate
    counts = (data.doc[:, None] == data.cands[:, :, None, None]).sum(dim=(2, 3))
    assert (counts == 1).all()
    assert data.doc.shape == (50, 5, 12)


def test_other_sizes():
    data = make_syncloze(20, seed=3, S=4, K=5, fill_range=(0, 1), max_facts_per_sentence=3)
    assert data.doc.shape == (20, 4, 1 + 9 + 1) and data.query.shape == (20, 5)
    r_key, o_key = _key(data)
    for i in range(20):
        s, p = data.key_sent[i].item(), data.key_pos[i].item()
        assert data.doc[i, s, p + 1 : p + 3].tolist() == [r_key[i], o_key[i]]


# --- determinism -----------------------------------------------------------------------------


def test_same_seed_same_data_other_seed_other_data(data):
    again = make_syncloze(300, seed=0)
    other = make_syncloze(300, seed=1)
    for name in ("doc", "query", "cands", "answer", "key_sent", "key_pos"):
        assert torch.equal(getattr(again, name), getattr(data, name))
    assert not torch.equal(other.doc, data.doc)


# --- baselines (spec han §5.6) ---------------------------------------------------------------


@pytest.fixture(scope="module")
def data2000() -> SynCloze:
    return make_syncloze(2000, seed=0)


def _accuracy(pred: torch.Tensor, data: SynCloze) -> float:
    return (pred == data.answer).float().mean().item()


def test_max_frequency_baseline_is_chance(data2000):
    pred = max_frequency_baseline(data2000, seed=0)
    assert pred.shape == (2000,) and pred.dtype == torch.int64
    assert _accuracy(pred, data2000) == pytest.approx(0.10, abs=0.03)
    assert torch.equal(max_frequency_baseline(data2000, seed=0), pred)


def test_type_oracle_reaches_the_type_prior(data2000):
    pred = type_oracle_baseline(data2000, seed=0)
    assert _accuracy(pred, data2000) == pytest.approx(0.38, abs=0.03)
    T, ids = data2000.n_types, data2000.first_id
    r_key, _ = _key(data2000)
    chosen = data2000.cands[torch.arange(2000), pred]
    assert ((chosen - ids["entity"]) % T == (r_key - ids["relation"]) % T).all()


def test_type_oracle_is_chance_without_types():
    data = make_syncloze(2000, seed=0, n_types=0)
    assert _accuracy(type_oracle_baseline(data, seed=0), data) == pytest.approx(0.10, abs=0.03)


# --- embeddings ------------------------------------------------------------------------------


def test_embeddings_cluster_entities_by_type(data):
    emb = syncloze_embeddings(data, E=16, seed=0)
    assert emb.shape == (len(data.vocab), 16) and emb.dtype == torch.float32
    assert torch.equal(emb[PAD_ID], torch.zeros(16))
    assert torch.equal(syncloze_embeddings(data, E=16, seed=0), emb)
    entities = emb[2:102]  # (100, 16)
    types = torch.arange(100) % 4
    distance = torch.cdist(entities, entities)
    same = types[:, None] == types[None, :]
    assert distance[same].mean() < 0.5 * distance[~same].mean()


def test_embeddings_from_a_size_and_untyped():
    emb = syncloze_embeddings(161, E=8, seed=1, n_types=0)
    assert emb.shape == (161, 8) and torch.equal(emb[0], torch.zeros(8))
    assert not torch.equal(syncloze_embeddings(161, E=8, seed=1), emb)  # typed by default
    with pytest.raises(ValueError, match="no room for PAD, the blank and 100 entities"):
        syncloze_embeddings(50, E=8, seed=0)
    with pytest.raises(ValueError, match="E must be a positive integer"):
        syncloze_embeddings(161, E=0, seed=0)
    with pytest.raises(ValueError, match="n_types must be an integer >= 0"):
        syncloze_embeddings(161, E=8, seed=0, n_types=-1)


# --- arguments -------------------------------------------------------------------------------


def test_text_shows_a_sample(data):
    text = data.text(0)
    answer = data.vocab[data.cands[0, data.answer[0]]]
    assert text.count("\n") == 10 + 2 and text.endswith(f"answer: {answer}")
    assert "xxxxx" in text.splitlines()[10]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"K": 101}, "K=101 distinct candidates need K <= n_entities, got 100"),
        ({"K": 21}, "K=21 candidates need K <= S * max_facts_per_sentence = 20"),
        ({"fill_range": (5, 2)}, "fill_range must be (fill_lo, fill_hi) with 0 <= fill_lo"),
        ({"fill_range": (-1, 2)}, "fill_range must be"),
        ({"fill_range": (1, 2, 3)}, "fill_range must be"),
        ({"fill_range": (1.0, 2)}, "fill_range must be"),
        ({"S": 0}, "S must be a positive integer, got 0"),
        ({"n_fillers": 0}, "n_fillers must be a positive integer"),
        ({"n_objects": 1}, "n_objects must be an integer >= 2"),
        ({"n_relations": 7}, "n_relations >= 8 for n_types=4, got 7"),
        ({"n_relations": 1, "n_types": 0}, "n_relations >= 2 for n_types=0, got 1"),
        ({"n_types": -1}, "n_types must be an integer >= 0"),
        ({"p_extra_occurrence": 1.5}, "p_extra_occurrence must be a probability in [0, 1]"),
        ({"p_same_relation": 0.6, "p_same_object": 0.6}, "must be at most 1, got 1.2"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make_syncloze(4, 0, **kwargs)


@pytest.mark.parametrize("n, seed", [(0, 0), (2.0, 0), (4, None), (4, 1.5)])
def test_n_and_seed_must_be_integers(n, seed):
    with pytest.raises(ValueError, match="must be"):
        make_syncloze(n, seed)
