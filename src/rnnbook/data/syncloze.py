"""SynCloze: a synthetic cloze task shaped like CBT, where only one local context answers.

A document is S sentences of filler words and facts ``[entity, relation, object]``; the
query is a sentence with the fact ``[xxxxx, r*, o*]``. The answer is the one candidate
entity that the document states with exactly ``(r*, o*)``: other facts share r* or o*,
never both, and every candidate occurs once or twice whatever its role, so counting
words gives chance. A pointer model, (han-pointer), solves it by matching the right-hand
context of an entity token against the query. Entities and relations may carry one of
``n_types`` types; a query-only reader can then learn the type prior (about 38 %), the
analogue of CBT's query-only baselines. The generator replaces CBT offline in Chapter 8.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rnnbook._validate import check_positive_int, check_tensor

PAD_ID, BLANK_ID = 0, 1
PUNCTUATION = (".", ",", "!")
TOKEN_CLASSES = ("pad", "blank", "entity", "relation", "object", "filler", "punct")


@dataclass(frozen=True, eq=False)  # tensors: compare them with torch.equal
class SynCloze:
    """n SynCloze samples as int64 tensors, with the vocabulary and the generator's sizes.

    Attributes:
        doc: (n, S, W) token ids, 0 = PAD; W = fill_hi + 3 max_facts_per_sentence + 1.
        query: (n, Lq) token ids with one ``xxxxx`` (id 1); Lq = fill_hi + 4.
        cands: (n, K) the candidate entities' token ids, distinct.
        answer: (n,) the index of the answer in ``cands``, in [0, K).
        key_sent: (n,) the sentence of the key fact ``[answer, r*, o*]``.
        key_pos: (n,) the position of the answer token in that sentence.
        vocab: ``vocab[i]`` is the token of id i: ``<pad>``, ``xxxxx``, ``ent0``...,
            ``rel0``..., ``obj0``..., ``w0``... (fillers), then ``.``, ``,`` and ``!``.
        n_entities, n_relations, n_objects, n_fillers: the sizes of the token classes.
        n_types: the number of types (0: untyped); entity i and relation j have the types
            i mod n_types and j mod n_types.
    """

    doc: torch.Tensor
    query: torch.Tensor
    cands: torch.Tensor
    answer: torch.Tensor
    key_sent: torch.Tensor
    key_pos: torch.Tensor
    vocab: list[str]
    n_entities: int
    n_relations: int
    n_objects: int
    n_fillers: int
    n_types: int

    def __len__(self) -> int:
        return self.doc.shape[0]

    @property
    def first_id(self) -> dict[str, int]:
        """The first token id of each class in ``TOKEN_CLASSES``, and ``"end"`` (the size)."""
        sizes = (1, 1, self.n_entities, self.n_relations, self.n_objects, self.n_fillers, 3)
        starts = np.cumsum((0, *sizes)).tolist()
        return dict(zip((*TOKEN_CLASSES, "end"), starts))

    def token_class(self, ids) -> torch.Tensor:
        """The class of each token id as an index into ``TOKEN_CLASSES`` (same shape).

        For example ``data.token_class(data.doc) == TOKEN_CLASSES.index("entity")`` marks
        the entity tokens of every document.
        """
        ids = torch.as_tensor(ids)
        if ids.dtype.is_floating_point or ((ids < 0) | (ids >= len(self.vocab))).any():
            raise ValueError(f"ids must be integer token ids in [0, {len(self.vocab)})")
        bounds = torch.tensor(list(self.first_id.values())[1:-1])  # class c starts at bounds[c-1]
        return torch.bucketize(ids, bounds, right=True)

    def text(self, i: int) -> str:
        """Sample i as text: one sentence per line, then the query, candidates and answer."""
        words = [[self.vocab[t] for t in row if t != PAD_ID] for row in self.doc[i].tolist()]
        lines = [" ".join(sentence) for sentence in words]
        lines.append("query: " + " ".join(self.vocab[t] for t in self.query[i].tolist() if t))
        lines.append("candidates: " + " ".join(self.vocab[t] for t in self.cands[i].tolist()))
        lines.append("answer: " + self.vocab[self.cands[i, self.answer[i]]])
        return "\n".join(lines)


def make_syncloze(
    n: int,
    seed: int,
    *,
    S: int = 10,
    K: int = 10,
    n_entities: int = 100,
    n_relations: int = 8,
    n_objects: int = 8,
    n_fillers: int = 40,
    fill_range: tuple[int, int] = (2, 5),
    max_facts_per_sentence: int = 2,
    p_extra_occurrence: float = 0.5,
    p_same_relation: float = 0.3,
    p_same_object: float = 0.3,
    n_types: int = 4,
) -> SynCloze:
    """n SynCloze samples, built by the per-sample algorithm below (steps 1-8).

    1. K distinct candidate entities, uniform, and the answer index a, uniform.
    2. The key relation r* (among the relations of the answer's type) and object o*.
    3. Each candidate occurs 1 + Bernoulli(``p_extra_occurrence``) times; while the facts
       do not fit (more than S ``max_facts_per_sentence``), a random count of 2 drops to 1.
    4. The answer's first occurrence is the key fact ``[answer, r*, o*]``. Every other
       occurrence is a distractor ``[e, r, o]`` with r of e's type: ``(r*, o != o*)``
       with probability ``p_same_relation`` (if r* is not of e's type: the next case),
       ``(r != r*, o*)`` with probability ``p_same_object``, else ``(r != r*, o != o*)``.
    5. The facts, shuffled, go one by one into a uniform sentence that still has room.
    6. A sentence is f ~ U{fill_lo..fill_hi} one-token filler chunks and its facts (3-token
       chunks), the chunks in random order, then a random punctuation mark.
    7. The query is filler chunks and ``[xxxxx, r*, o*]`` in random order, then ``.``.
    8. ``key_sent`` and ``key_pos`` locate the answer token of the key fact.

    One NumPy ``Generator(seed)`` is consumed step by step, each step drawing for all n
    samples at once (vectorised: 2,500 samples take milliseconds). So the data are a
    function of ``(n, seed)`` and the arguments; the first 100 samples of n = 200 are not
    those of n = 100: use different seeds, not prefixes, for train and validation.

    Args:
        n: the number of samples.
        seed: the seed of the generator.
        S: context sentences per document.
        K: candidates per sample; at most ``n_entities`` and ``S * max_facts_per_sentence``.
        n_entities, n_relations, n_objects, n_fillers: the sizes of the token classes.
        fill_range: (fill_lo, fill_hi), the range of filler chunks per sentence and query.
        max_facts_per_sentence: the most facts a sentence holds.
        p_extra_occurrence: the probability that a candidate occurs a second time.
        p_same_relation, p_same_object: the distractor probabilities of step 4.
        n_types: the number of entity/relation types; 0 for untyped. Each type needs two
            relations (a distractor of the answer's type must be able to avoid r*).

    Returns:
        The samples as a ``SynCloze``.
    """
    T = _check_arguments(
        n,
        seed,
        S,
        K,
        (n_entities, n_relations, n_objects, n_fillers),
        fill_range,
        max_facts_per_sentence,
        (p_extra_occurrence, p_same_relation, p_same_object),
        n_types,
    )
    rng = np.random.default_rng(seed)
    fill_lo, fill_hi = fill_range
    F = 2 * K  # fact slots: slot k is candidate k's first occurrence, K + k its second
    ent0 = 2
    rel0 = ent0 + n_entities
    obj0 = rel0 + n_relations
    fill0 = obj0 + n_objects
    punct0 = fill0 + n_fillers

    # (1) K distinct candidates (the first K of a random order of the entities), answer a
    cands = rng.random((n, n_entities)).argsort(axis=1)[:, :K]  # (n, K) entity numbers
    a = rng.integers(K, size=n)  # (n,)
    answer = cands[np.arange(n), a]  # (n,)

    # (2) r* among the relations of the answer's type, o* among all objects. The relations of
    # type t are t, t + T, t + 2T, ... (with T = 1 when untyped: every relation).
    n_of_type = np.array([len(range(t, n_relations, T)) for t in range(T)])  # (T,)
    key_type = answer % T  # (n,)
    key_j = _uniform_int(rng, n_of_type[key_type])  # (n,) r* = key_type + T key_j
    r_key = key_type + T * key_j  # (n,)
    o_key = rng.integers(n_objects, size=n)  # (n,)

    # (3) occurrence counts 1 or 2; drop random second occurrences until the facts fit
    counts = 1 + (rng.random((n, K)) < p_extra_occurrence)  # (n, K)
    capacity = S * max_facts_per_sentence
    while (over := counts.sum(axis=1) > capacity).any():
        keys = np.where(counts > 1, rng.random((n, K)), -1.0)  # a random count of 2
        counts[np.flatnonzero(over), keys[over].argmax(axis=1)] -= 1

    # (4) facts: slot k holds candidate k's first occurrence, slot K + k its second
    fact_e = np.concatenate([cands, cands], axis=1)  # (n, F)
    valid = np.concatenate([np.ones((n, K), bool), counts == 2], axis=1)  # (n, F)
    e_type = fact_e % T  # (n, F)
    same_type = e_type == key_type[:, None]  # r* is a relation of e's type
    case = rng.random((n, F))
    same_relation = (case < p_same_relation) & same_type
    same_object = ~same_relation & (case < p_same_relation + p_same_object)
    # r != r* of e's type: one of the n_of_type[e] relations, skipping r*'s index if same type
    j = _uniform_int(rng, n_of_type[e_type] - same_type)  # (n, F)
    j = j + (same_type & (j >= key_j[:, None]))
    r_other = e_type + T * j  # (n, F)
    o_other = (o_key[:, None] + 1 + _uniform_int(rng, np.full((n, F), n_objects - 1))) % n_objects
    fact_r = np.where(same_relation, r_key[:, None], r_other)  # (n, F)
    fact_o = np.where(same_object, o_key[:, None], o_other)  # (n, F)
    fact_r[np.arange(n), a] = r_key  # the key fact: the answer's first occurrence
    fact_o[np.arange(n), a] = o_key

    # (5) shuffle the facts (invalid slots last), then place them one by one
    order = np.where(valid, rng.random((n, F)), 2.0).argsort(axis=1)  # (n, F)
    held = np.zeros((n, S), dtype=np.int64)  # facts placed in each sentence so far
    fact_sent = np.full((n, F), -1)  # (n, F) the sentence of each fact
    fact_rank = np.full((n, F), -1)  # (n, F) its index among that sentence's facts
    for step in range(F):
        slot = order[:, step]  # (n,)
        place = valid[np.arange(n), slot]  # samples that still have a fact to place
        keys = np.where(held < max_facts_per_sentence, rng.random((n, S)), -1.0)
        s = keys.argmax(axis=1)  # (n,) a uniform sentence with room
        fact_sent[place, slot[place]] = s[place]
        fact_rank[place, slot[place]] = held[place, s[place]]
        held[place, s[place]] += 1

    # (6) sentences as chunks: fill_hi filler slots, then max_facts_per_sentence fact slots
    C = fill_hi + max_facts_per_sentence
    chunk = np.zeros((n, S, C, 3), dtype=np.int64)  # (n, S, C, 3) tokens, 0 = unused
    length = np.zeros((n, S, C), dtype=np.int64)  # (n, S, C) 0, 1 (filler) or 3 (fact)
    f = rng.integers(fill_lo, fill_hi + 1, size=(n, S))  # (n, S) fillers per sentence
    chunk[..., :fill_hi, 0] = fill0 + rng.integers(n_fillers, size=(n, S, fill_hi))
    length[..., :fill_hi] = np.arange(fill_hi) < f[..., None]
    placed = np.nonzero(valid)  # (samples, slots) of every fact
    where = (placed[0], fact_sent[placed], fill_hi + fact_rank[placed])
    chunk[where] = np.stack(
        [ent0 + fact_e[placed], rel0 + fact_r[placed], obj0 + fact_o[placed]], axis=-1
    )
    length[where] = 3
    punct = punct0 + rng.integers(len(PUNCTUATION), size=(n, S))  # (n, S)
    W = fill_hi + 3 * max_facts_per_sentence + 1
    doc, start = _assemble(chunk, length, punct, W, rng)  # (n, S, W), (n, S, C)
    key_chunk = fill_hi + fact_rank[np.arange(n), a]  # (n,) the key fact's chunk slot
    key_sent = fact_sent[np.arange(n), a]  # (n,)
    key_pos = start[np.arange(n), key_sent, key_chunk]  # (8) (n,)

    # (7) the query: filler chunks and [xxxxx, r*, o*], shuffled, then "."
    q_chunk = np.zeros((n, 1, fill_hi + 1, 3), dtype=np.int64)  # (n, 1, fill_hi + 1, 3)
    q_length = np.zeros((n, 1, fill_hi + 1), dtype=np.int64)
    q_f = rng.integers(fill_lo, fill_hi + 1, size=(n, 1))
    q_chunk[:, 0, :fill_hi, 0] = fill0 + rng.integers(n_fillers, size=(n, fill_hi))
    q_length[..., :fill_hi] = np.arange(fill_hi) < q_f[..., None]
    q_chunk[:, 0, fill_hi] = np.stack([np.full(n, BLANK_ID), rel0 + r_key, obj0 + o_key], -1)
    q_length[:, 0, fill_hi] = 3
    full_stop = np.full((n, 1), punct0 + PUNCTUATION.index("."))
    query, _ = _assemble(q_chunk, q_length, full_stop, fill_hi + 4, rng)  # (n, 1, Lq)

    names = (
        ["<pad>", "xxxxx"]
        + [f"ent{i}" for i in range(n_entities)]
        + [f"rel{i}" for i in range(n_relations)]
        + [f"obj{i}" for i in range(n_objects)]
        + [f"w{i}" for i in range(n_fillers)]
        + list(PUNCTUATION)
    )
    as_long = torch.from_numpy
    return SynCloze(
        doc=as_long(doc),
        query=as_long(query[:, 0]),
        cands=as_long(ent0 + cands),
        answer=as_long(a),
        key_sent=as_long(key_sent),
        key_pos=as_long(key_pos),
        vocab=names,
        n_entities=n_entities,
        n_relations=n_relations,
        n_objects=n_objects,
        n_fillers=n_fillers,
        n_types=n_types,
    )


def _uniform_int(rng: np.random.Generator, high: np.ndarray) -> np.ndarray:
    """Uniform integers in [0, high) element-wise, for an array of bounds ``high`` >= 1."""
    return np.minimum((rng.random(high.shape) * high).astype(np.int64), high - 1)


def _assemble(
    chunk: np.ndarray, length: np.ndarray, punct: np.ndarray, width: int, rng
) -> tuple[np.ndarray, np.ndarray]:
    """Sentences from chunks: the used chunks in random order, then the punctuation mark.

    Args:
        chunk: (n, S, C, 3) the tokens of each chunk slot (the first ``length`` count).
        length: (n, S, C) each slot's length, 0 for an unused slot.
        punct: (n, S) the final token of each sentence.
        width: the padded sentence length (at least the longest sentence).

    Returns:
        The sentences (n, S, width), PAD-filled, and the start of each chunk slot in its
        sentence (n, S, C) (meaningless for unused slots).
    """
    n, S, C, _ = chunk.shape
    order = np.where(length > 0, rng.random((n, S, C)), 2.0).argsort(axis=-1)  # used first
    shuffled = np.take_along_axis(length, order, axis=-1)  # (n, S, C) lengths in text order
    start_in_order = np.cumsum(shuffled, axis=-1) - shuffled  # (n, S, C)
    start = np.empty_like(start_in_order)
    np.put_along_axis(start, order, start_in_order, axis=-1)  # back to slot order
    out = np.zeros((n, S, width), dtype=np.int64)  # (n, S, width)
    i, s, c = np.nonzero(length)  # every used chunk
    for t in range(3):  # token t of every chunk at least t + 1 long
        keep = length[i, s, c] > t
        out[i[keep], s[keep], start[i, s, c][keep] + t] = chunk[i, s, c, t][keep]
    out[np.arange(n)[:, None], np.arange(S), length.sum(axis=-1)] = punct
    return out, start


def _check_arguments(n, seed, S, K, sizes, fill_range, max_facts, probabilities, n_types) -> int:
    """Check make_syncloze's arguments; return T, the number of relation types (1 if untyped)."""
    n_entities, n_relations, n_objects, n_fillers = sizes
    names = ("n", "S", "K", "n_entities", "n_relations", "n_fillers", "max_facts_per_sentence")
    for value, name in zip((n, S, K, n_entities, n_relations, n_fillers, max_facts), names):
        check_positive_int(value, name)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed must be an integer (SynCloze is always seeded), got {seed!r}")
    if K > n_entities:
        raise ValueError(f"K={K} distinct candidates need K <= n_entities, got {n_entities}")
    if K > S * max_facts:
        raise ValueError(
            f"K={K} candidates need K <= S * max_facts_per_sentence = {S * max_facts} facts"
        )
    if isinstance(n_objects, bool) or not isinstance(n_objects, int) or n_objects < 2:
        raise ValueError(f"n_objects must be an integer >= 2 (o != o*), got {n_objects!r}")
    if (
        not isinstance(fill_range, tuple | list)
        or len(fill_range) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in fill_range)
        or not 0 <= fill_range[0] <= fill_range[1]
    ):
        raise ValueError(
            f"fill_range must be (fill_lo, fill_hi) with 0 <= fill_lo <= fill_hi, "
            f"got {fill_range!r}"
        )
    names = ("p_extra_occurrence", "p_same_relation", "p_same_object")
    for value, name in zip(probabilities, names):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    _, p_relation, p_object = probabilities
    if p_relation + p_object > 1.0:
        raise ValueError(
            f"p_same_relation + p_same_object must be at most 1, got {p_relation + p_object}"
        )
    if isinstance(n_types, bool) or not isinstance(n_types, int) or n_types < 0:
        raise ValueError(f"n_types must be an integer >= 0 (0: untyped), got {n_types!r}")
    T = max(n_types, 1)
    if n_relations < 2 * T:
        raise ValueError(
            f"n_relations must be at least 2 per type (r != r* within a type): "
            f"n_relations >= {2 * T} for n_types={n_types}, got {n_relations}"
        )
    return T


def syncloze_embeddings(
    data: SynCloze | int, E: int, seed: int, n_types: int | None = None, n_entities: int = 100
) -> torch.Tensor:
    """The frozen "pretrained" embeddings of SynCloze, the analogue of GloVe.

    Every row is N(0, 1), drawn from ``torch.Generator().manual_seed(seed)``; row 0 (PAD) is
    zero. With ``n_types`` T > 0, entity i's row is ``centroid[i mod T] + 0.5 noise``, so
    entities of a type cluster, as GloVe's vectors of related words do.

    Args:
        data: the samples (their vocabulary size, n_entities and n_types), or a
            vocabulary size.
        E: the embedding size.
        seed: the seed of the embeddings.
        n_types: the types to cluster by; ``None``: the data's (4 with a vocabulary size).
        n_entities: the entities (ids 2 to n_entities + 1) when ``data`` is a size.

    Returns:
        A float32 tensor (V, E).
    """
    check_positive_int(E, "E")
    if isinstance(data, SynCloze):
        V, n_entities = len(data.vocab), data.n_entities
        n_types = data.n_types if n_types is None else n_types
    else:
        V = check_positive_int(data, "data (a vocabulary size)")
        n_types = 4 if n_types is None else n_types
        if n_types > 0 and V < n_entities + 2:
            raise ValueError(f"V={V} has no room for PAD, the blank and {n_entities} entities")
    if isinstance(n_types, bool) or not isinstance(n_types, int) or n_types < 0:
        raise ValueError(f"n_types must be an integer >= 0, got {n_types!r}")
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(V, E, generator=g)  # (V, E)
    if n_types > 0:
        centroid = torch.randn(n_types, E, generator=g)  # (T, E)
        noise = torch.randn(n_entities, E, generator=g)  # (N_e, E)
        types = torch.arange(n_entities) % n_types
        emb[2 : 2 + n_entities] = centroid[types] + 0.5 * noise
    emb[PAD_ID] = 0.0
    return emb


def max_frequency_baseline(data: SynCloze, seed: int) -> torch.Tensor:
    """Predict the candidate that occurs most often in the document, ties broken at random.

    Returns the predicted candidate indices (n,); their accuracy is ``(pred ==
    data.answer).float().mean()``. Every candidate occurs once or twice whatever its role,
    so this is chance, 1/K.
    """
    counts = (data.doc[:, None] == data.cands[:, :, None, None]).sum(dim=(2, 3))  # (n, K)
    g = torch.Generator().manual_seed(seed)
    return (counts + torch.rand(counts.shape, generator=g)).argmax(dim=1)  # ties at random


def type_oracle_baseline(data: SynCloze, seed: int) -> torch.Tensor:
    """Read only the query: predict a random candidate of the query relation's type.

    The relation r* follows ``xxxxx`` in the query; the answer has its type, as does about
    a quarter of the other candidates with 4 types, so this scores about 38 %, and chance
    when untyped. Returns the predicted candidate indices (n,).
    """
    check_tensor(data.query, "data.query", ndim=2)
    ids = data.first_id
    T = max(data.n_types, 1)
    blank = (data.query == BLANK_ID).int().argmax(dim=1)  # (n,)
    r_key = data.query[torch.arange(len(data)), blank + 1] - ids["relation"]  # (n,)
    fits = (data.cands - ids["entity"]) % T == (r_key % T)[:, None]  # (n, K)
    g = torch.Generator().manual_seed(seed)
    keys = torch.where(fits, torch.rand(fits.shape, generator=g), -1.0)
    return keys.argmax(dim=1)
