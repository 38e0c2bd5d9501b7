"""Hierarchical attention networks for cloze questions (Chapter 8), with surprisal-gated
encoders inside them (the chapter's second part).

A sample is a document of S sentences of at most W tokens (``doc`` (B, S, W), 0 = PAD), a
query with one blank (``query`` (B, L_q)) and K candidate tokens (``cands`` (B, K)). A
bidirectional GRU reads the query; its final states give the query vector
``q = [→h_last; ←h_first]`` (2H,) (the dissertation does not say which vector; we take the
final states, as Kadlec et al.'s reader does). A second biGRU reads every sentence on its
own, and attention with ``q`` blends each sentence into one vector:

    β_{i,j} = q · D^word_{i,j},   α^word_{i,j} = softmax_j(β_{i,j})        (han-word-attention)
    D^blend_i = Σ_j α^word_{i,j} D^word_{i,j}                                        (han-blend)

A third biGRU reads the S blended sentences, and attention picks sentences:

    D^sent = biGRU_s(D^blend),   α^sent_i = softmax_i(q · D^sent_i)               (han-sentence)

Two heads answer. **HAN-doc-vec** maps the attended document vector to the embedding space
and scores the candidates' (trainable) embeddings ``c_k``:

    D^doc = Σ_i α^sent_i D^sent_i,   γ_k = c_k · (W_f D^doc + b_f)                (han-docvec)

**HAN-ptr** has no parameters after the sentence level: it multiplies the two attentions into
one distribution over the document's tokens and sums it over the positions of each
candidate (Kadlec et al.'s attention sum):

    α^doc_{i,j} = α^sent_i α^word_{i,j},  P(c_k) = Σ_{D_{i,j} = c_k} α^doc_{i,j}   (han-pointer)

Both train with the categorical cross-entropy over the K candidates, (han-loss); for the
pointer, whose scores do not sum to 1, on the scores renormalised over the candidates (the
dissertation does not say; Keras, which it used, computes its cross-entropy so). **RAN** is
HAN-doc-vec without the sentence level: one biGRU over the real tokens of the whole document,
one attention over all of them.

Any of HAN's three encoders (query ``"q"``, words ``"w"``, sentences ``"s"``) can be a
surprisal-gated biGRU, :class:`~rnnbook.models.sba.SBAGRUCell` in each direction: the SGRU
((sba-pool), (sba-surprisal), (sba-decision), (sba-select)) or the SENS-GRU ((sens-vote),
(sens-select)). Their update rates are counted over real tokens; how low they may go is
(han-u-min) and (han-u-effective) in :mod:`rnnbook.skip`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from rnnbook._validate import check_choice, check_positive_int, check_tensor
from rnnbook.models.sba import MODES, SBAGRUCell

HEADS = ("ptr", "docvec")
PLACES = ("q", "w", "s")  # query, word and sentence encoder
SKIP_KEYS = ("where", "mode", "M", "theta", "reference", "pooling")
EPS = 1e-12  # the clamp before the log of (han-loss)


@dataclass
class ClozeOutput:
    """What a cloze model returns.

    Attributes:
        scores: (B, K) candidate scores; the prediction is their argmax. HAN-ptr gives the
            pointer sums ``P(c_k)`` (han-pointer), HAN-doc-vec and RAN the logits ``γ_k``
            (han-docvec).
        alpha_word: (B, S, W) word attention, each non-empty sentence's row summing to 1
            over its real tokens, 0 on PAD; None for RAN.
        alpha_sent: (B, S) sentence attention, 0 on empty sentences; None for RAN.
        alpha_doc: (B, S, W) attention over the document's tokens, summing to 1, 0 on PAD:
            ``α^sent α^word`` for HAN, RAN's one attention put back on the grid. It is what
            :func:`pointer_sum` takes, so any model's head can be swapped for the pointer.
    """

    scores: torch.Tensor
    alpha_word: torch.Tensor | None
    alpha_sent: torch.Tensor | None
    alpha_doc: torch.Tensor


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """A softmax over the positions where ``mask`` is True; exactly 0 elsewhere.

    Masked scores are replaced by the dtype's most negative number (not −∞), so a row with no
    real position comes out all zeros, without NaN in the forward or the backward pass.

    Args:
        scores: any shape. mask: booleans of the same shape, True = real. dim: the softmax's
            dimension.
    """
    check_tensor(scores, "scores")
    check_tensor(mask, "mask")
    if mask.dtype != torch.bool or mask.shape != scores.shape:
        raise ValueError(
            f"mask must be booleans of the shape of scores {tuple(scores.shape)}, got "
            f"{mask.dtype} of shape {tuple(mask.shape)}"
        )
    very_negative = torch.finfo(scores.dtype).min
    alpha = torch.softmax(scores.masked_fill(~mask, very_negative), dim=dim)
    return alpha.masked_fill(~mask, 0.0)


def pointer_sum(alpha_doc: torch.Tensor, doc: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
    """(han-pointer): ``P(c_k) = Σ α^doc`` over the document positions holding token ``c_k``.

    Args:
        alpha_doc: (B, S, W) attention over the document (any (B, ...) grid works).
        doc: token ids of the same shape, 0 = PAD. PAD never matches a candidate, and only
            the document counts (occurrences in the query do not).
        cands: (B, K) candidate token ids.

    Returns (B, K): each candidate's attention mass, summing to at most 1 (attention on other
    tokens is lost).
    """
    check_tensor(alpha_doc, "alpha_doc")
    check_tensor(cands, "cands", ndim=2)
    if doc.shape != alpha_doc.shape or cands.shape[0] != doc.shape[0]:
        raise ValueError(
            f"alpha_doc and doc must have one shape (B, S, W) and cands (B, K) the same B, got "
            f"{tuple(alpha_doc.shape)}, {tuple(doc.shape)} and {tuple(cands.shape)}"
        )
    tokens = doc.flatten(1)  # (B, S·W)
    hit = (tokens.unsqueeze(-1) == cands.unsqueeze(1)) & (tokens != 0).unsqueeze(-1)  # (B, S·W, K)
    return torch.einsum("bn,bnk->bk", alpha_doc.flatten(1), hit.to(alpha_doc.dtype))  # (B, K)


def cloze_loss(
    scores: torch.Tensor, answer: torch.Tensor, head: str, renorm: bool = True
) -> torch.Tensor:
    """(han-loss): the mean categorical cross-entropy of the answers.

    Args:
        scores: (B, K) from a model: logits ``γ`` for ``head="docvec"`` (HAN-doc-vec, RAN),
            pointer sums ``P`` for ``head="ptr"``.
        answer: (B,) int64, the index of the right candidate.
        head: ``"ptr"`` or ``"docvec"``.
        renorm: pointer only. True (default; the chapter's notes list this choice):
            ``−log(P_a / Σ_k P_k)``, the
            cross-entropy of the scores renormalised over the candidates, as Keras computes
            it; False: Kadlec et al.'s ``−log P_a``. Both are clamped at 1e-12 before the log.
    """
    check_choice(head, "head", HEADS)
    check_tensor(scores, "scores", ndim=2)
    check_tensor(answer, "answer", ndim=1)
    if answer.dtype != torch.int64 or answer.shape[0] != scores.shape[0]:
        raise ValueError(
            f"answer must be int64 of shape (B,) = ({scores.shape[0]},), got {answer.dtype} "
            f"of shape {tuple(answer.shape)}"
        )
    if head == "docvec":
        return F.cross_entropy(scores, answer)
    P = scores
    if renorm:
        P = P / P.sum(-1, keepdim=True).clamp_min(EPS)
    return -torch.log(P.gather(1, answer.unsqueeze(1)).clamp_min(EPS)).mean()


class BiGRU(nn.Module):
    """A bidirectional GRU over padded sequences; the two outputs concatenated, (B, T, 2H).

    Each sequence is read over its real positions only (``mask`` True), in their order, so
    PAD inside a sequence is passed over too (RAN concatenates its sentences this way), and
    the backward direction starts at the last real token. An all-PAD row reads nothing: its
    outputs and final states are zeros.

    Without ``skip`` this is ``nn.GRU`` on packed sequences (reset after the product,
    torch's GRU); with ``skip`` (the keyword arguments of
    :class:`~rnnbook.models.sba.SBAGRUCell`: ``M``, ``theta``, ``mode``, ``reference``,
    ``pooling``) each direction is its own SGRU or SENS-GRU cell (the GRU of (lstm-G1)-(lstm-G4)
    in Chapter 2, reset before the product), run by a loop over time with PAD masked (PAD
    never updates and never counts). Both have the same parameter count.

    Args:
        d_x: input size. H: hidden units per direction. skip: None or a dict.

    ``forward(x, mask)`` takes x (N, T, d_x) and mask (N, T) booleans and returns
    ``(out, last)``: out (N, T, 2H), zeros on PAD, and ``last = [→h_last; ←h_first]`` (N, 2H),
    the final state of each direction. With ``record = True`` a skipping encoder keeps
    ``decisions`` (N, T, 2, M), the module decisions (SGRU) or votes (SENS) of the forward
    and backward direction at each position, and ``updates`` (N, T, 2), the share of the
    state that updated there; both 0 on PAD.
    """

    def __init__(self, d_x: int, H: int, skip: dict | None = None):
        super().__init__()
        check_positive_int(d_x, "d_x")
        check_positive_int(H, "H")
        self.input_size, self.hidden_size = d_x, H
        self.skip = None if skip is None else dict(skip)
        if skip is None:
            self.gru = nn.GRU(d_x, H, batch_first=True, bidirectional=True)
        else:
            self.forward_cell = SBAGRUCell(d_x, H, **skip)
            self.backward_cell = SBAGRUCell(d_x, H, **skip)
        self.record = False
        self.decisions: torch.Tensor | None = None
        self.updates: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        check_tensor(x, "x", ndim=3)
        check_tensor(mask, "mask")
        N, T, d_x = x.shape
        if d_x != self.input_size or mask.shape != (N, T) or mask.dtype != torch.bool:
            raise ValueError(
                f"expected x (N, T, d_x) with d_x = {self.input_size} and a boolean mask "
                f"(N, T), got x {tuple(x.shape)} and mask {mask.dtype} {tuple(mask.shape)}"
            )
        H2 = 2 * self.hidden_size
        lengths = mask.sum(1)  # (N,)
        T_c = int(lengths.max()) if N else 0
        if T_c == 0:  # nothing to read
            return x.new_zeros(N, T, H2), x.new_zeros(N, H2)
        # compact: the real positions of each row first, in order (a stable sort on "is PAD")
        order = torch.argsort((~mask).to(torch.uint8), dim=1, stable=True)[:, :T_c]  # (N, T_c)
        x_c = x.gather(1, order.unsqueeze(-1).expand(-1, -1, d_x))  # (N, T_c, d_x)
        if self.skip is None:
            out_c, last = self._packed(x_c, lengths)
        else:
            out_c, last = self._loop(x_c, lengths, order, T)
        # back to the original positions; the compacted tail (PAD) is zero and lands on PAD
        out = x.new_zeros(N, T, H2).scatter(1, order.unsqueeze(-1).expand(-1, -1, H2), out_c)
        return out, last  # (N, T, 2H), (N, 2H)

    def _packed(self, x_c, lengths):
        N, T_c, _ = x_c.shape
        H2 = 2 * self.hidden_size
        rows = (lengths > 0).nonzero().squeeze(1)  # packing needs length >= 1
        packed = pack_padded_sequence(
            x_c[rows], lengths[rows].cpu(), batch_first=True, enforce_sorted=False
        )
        out_p, h_n = self.gru(packed)  # h_n (2, n, H): forward last, backward first
        out_r, _ = pad_packed_sequence(out_p, batch_first=True, total_length=T_c)  # (n, T_c, 2H)
        last_r = torch.cat([h_n[0], h_n[1]], dim=-1)  # (n, 2H)
        if rows.shape[0] == N:
            return out_r, last_r
        out_c = x_c.new_zeros(N, T_c, H2).index_copy(0, rows, out_r)
        return out_c, x_c.new_zeros(N, H2).index_copy(0, rows, last_r)

    def _loop(self, x_c, lengths, order, T):
        N, T_c, _ = x_c.shape
        valid = torch.arange(T_c, device=x_c.device) < lengths.unsqueeze(1)  # (N, T_c)
        outs, lasts, traces = [], [], []
        for cell, reverse in ((self.forward_cell, False), (self.backward_cell, True)):
            x_proj = cell.project_inputs(x_c)  # (N, T_c, 3H): the input half of every step
            steps = list(zip(x_proj.unbind(1), valid.unbind(1)))
            if reverse:  # right to left: PAD first, which keeps h_0 = 0 and s_0 = log M
                steps.reverse()
            cell.trace = [] if self.record else None
            state = cell.initial_state(N, dtype=x_c.dtype, device=x_c.device)
            hs = []
            for x_proj_t, valid_t in steps:
                state = cell.step(x_proj_t, state, valid_t)
                hs.append(state[0])
            if reverse:
                hs.reverse()
            outs.append(torch.stack(hs, dim=1))  # (N, T_c, H)
            lasts.append(state[0])  # forward: at the last real token; backward: at the first
            if self.record:
                trace = cell.trace[::-1] if reverse else cell.trace
                traces.append(torch.stack(trace, dim=1))  # (N, T_c, M)
                cell.trace = None
        if self.record:
            self._keep_decisions(torch.stack(traces, dim=2), order, T)
        out_c = torch.cat(outs, dim=-1) * valid.unsqueeze(-1).to(x_c.dtype)  # zeros on PAD
        return out_c, torch.cat(lasts, dim=-1)

    def _keep_decisions(self, decisions, order, T):
        N, T_c, _, M = decisions.shape  # (N, T_c, 2, M), compacted
        index = order.view(N, T_c, 1, 1).expand(-1, -1, 2, M)
        self.decisions = decisions.new_zeros(N, T, 2, M).scatter(1, index, decisions)
        if self.skip.get("mode", "module") == "module":
            self.updates = self.decisions.mean(-1)  # share of modules
        else:  # the layer's decision, [2 Σ votes ≥ M]
            self.updates = (2 * self.decisions.sum(-1) >= M).to(decisions.dtype)

    def reset_tally(self) -> None:
        """Start counting the update rates afresh (a skipping encoder)."""
        if self.skip is not None:
            self.forward_cell.reset_tally()
            self.backward_cell.reset_tally()

    def update_rates(self) -> tuple[float, float]:
        """The update rates (forward, backward) per real token since :meth:`reset_tally`."""
        if self.skip is None:
            raise ValueError("this BiGRU does not skip: its update rate is 1")
        return self.forward_cell.update_rate(), self.backward_cell.update_rate()

    def extra_repr(self) -> str:
        return f"d_x={self.input_size}, H={self.hidden_size}, skip={self.skip}"


def check_cloze_inputs(doc, query, cands, V: int) -> None:
    """``doc`` (B, S, W), ``query`` (B, L_q), ``cands`` (B, K): int64 token ids in [0, V)."""
    for name, x, letters in (
        ("doc", doc, "(B, S, W)"),
        ("query", query, "(B, L_q)"),
        ("cands", cands, "(B, K)"),
    ):
        check_tensor(x, name)
        if x.dim() != len(letters.split(",")) or x.numel() == 0:
            raise ValueError(f"{name} must be a non-empty {letters} tensor, got {tuple(x.shape)}")
        if x.dtype != torch.int64:
            raise TypeError(f"{name} must hold int64 token ids, got {x.dtype}")
    if not doc.shape[0] == query.shape[0] == cands.shape[0]:
        raise ValueError(
            f"doc, query and cands must share the batch size B, got {tuple(doc.shape)}, "
            f"{tuple(query.shape)} and {tuple(cands.shape)}"
        )
    lo = min(int(x.min()) for x in (doc, query, cands))
    hi = max(int(x.max()) for x in (doc, query, cands))
    if lo < 0 or hi >= V:
        raise ValueError(f"token ids must lie in [0, V) = [0, {V}), got ids from {lo} to {hi}")


class _ClozeModel(nn.Module):
    """What HAN and RAN share: the frozen embedding, the query encoder, the doc-vec head."""

    def _setup_embeddings(self, embedding: torch.Tensor, H: int) -> None:
        check_tensor(embedding, "embedding", ndim=2)
        if not embedding.is_floating_point():
            raise TypeError(f"embedding must be a float (V, E) matrix, got {embedding.dtype}")
        check_positive_int(H, "H")
        self.V, self.E = embedding.shape
        self.H = H
        # one frozen matrix for document and query (the dissertation does not say whether they
        # share one; the chapter's notes list this choice): it gets no gradient
        self.embedding = nn.Embedding.from_pretrained(embedding.detach().clone(), freeze=True)

    def _setup_docvec_head(self, embedding: torch.Tensor) -> None:
        self.W_f = nn.Linear(2 * self.H, self.E)  # W_f (E, 2H) and b_f (E,) of (han-docvec)
        # E_c: the candidates' own embedding, trainable, initialised from the frozen one
        self.candidate_embedding = nn.Embedding.from_pretrained(
            embedding.detach().clone(), freeze=False
        )

    def _docvec_scores(self, D_doc: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
        D_final = self.W_f(D_doc)  # (B, E)
        c = self.candidate_embedding(cands)  # (B, K, E)
        return torch.einsum("bke,be->bk", c, D_final)  # (han-docvec): γ (B, K)

    def _encode_query(self, query: torch.Tensor) -> torch.Tensor:
        _, q = self.query_encoder(self.embedding(query), query != 0)  # (B, 2H): [→h; ←h]
        return q

    def reset_tally(self) -> None:
        """Start counting the skipping encoders' update rates afresh."""
        for encoder in self.modules():
            if isinstance(encoder, BiGRU):
                encoder.reset_tally()


class HAN(_ClozeModel):
    """The hierarchical attention network for cloze questions: HAN-ptr or HAN-doc-vec.

    Implements (han-word-attention), (han-blend), (han-sentence) and either (han-pointer) or
    (han-docvec); the loss is :func:`cloze_loss` (han-loss).

    Args:
        embedding: (V, E) float matrix (GloVe, or random for SynCloze), frozen; row 0 is PAD.
        H: hidden units per direction of each of the three biGRUs (query, word, sentence).
        head: ``"ptr"`` (no parameters after the sentence level) or ``"docvec"`` (adds
            ``W_f``, ``b_f`` and the trainable candidate embedding ``E_c``, initialised from
            ``embedding``).
        skip: None, or a dict ``where`` (``"q"``, ``"w"``, ``"s"`` or a combination such as
            ``"ws"`` or ``{"w", "s"}``), ``M``, ``theta`` and optionally ``mode``
            (``"module"`` = SGRU, ``"ensemble"`` = SENS-GRU), ``reference``, ``pooling``: the
            encoders named in ``where`` get a :class:`BiGRU` with SBA in each direction.

    ``forward(doc, query, cands)`` with int64 ``doc`` (B, S, W), ``query`` (B, L_q) and
    ``cands`` (B, K), 0 = PAD, returns a :class:`ClozeOutput`. Empty sentences are read as
    nothing: zero word outputs and blend, and the sentence encoder and attention pass over
    them. The encoders are ``query_encoder``, ``word_encoder`` and ``sentence_encoder``; set
    an encoder's ``record = True`` to keep its decisions.

    Notes:
        ``nn.GRU`` (reset after the product) where nothing skips, the GRU of
        (lstm-G1)-(lstm-G4) (reset before) where SBA skips; both have ``3H(d_x + H) + 6H``
        parameters per direction, so a model has the same parameter count wherever it skips.
    """

    def __init__(self, embedding: torch.Tensor, H: int, head: str = "ptr", skip=None):
        super().__init__()
        check_choice(head, "head", HEADS)
        self._setup_embeddings(embedding, H)
        self.head = head
        self.where, cell_args = _parse_skip(skip)
        self.skip = skip

        def encoder(place, d_x):
            return BiGRU(d_x, H, cell_args if place in self.where else None)

        self.query_encoder = encoder("q", self.E)
        self.word_encoder = encoder("w", self.E)
        self.sentence_encoder = encoder("s", 2 * H)
        if head == "docvec":
            self._setup_docvec_head(embedding)

    def forward(self, doc: torch.Tensor, query: torch.Tensor, cands: torch.Tensor):
        check_cloze_inputs(doc, query, cands, self.V)
        B, S, W = doc.shape
        q = self._encode_query(query)  # (B, 2H)
        mask_w = doc != 0  # (B, S, W): real tokens
        D_emb = self.embedding(doc).view(B * S, W, self.E)  # one sequence per sentence
        D_word, _ = self.word_encoder(D_emb, mask_w.view(B * S, W))  # (B·S, W, 2H)
        D_word = D_word.view(B, S, W, -1)  # (B, S, W, 2H)
        beta_word = torch.einsum("bswh,bh->bsw", D_word, q)  # (han-word-attention)
        alpha_word = masked_softmax(beta_word, mask_w, dim=-1)  # (B, S, W)
        D_word, alpha_word = self.skip_words(D_word, alpha_word, mask_w, q)  # ABS, Chapter 9
        D_blend = torch.einsum("bsw,bswh->bsh", alpha_word, D_word)  # (han-blend): (B, S, 2H)
        mask_s = mask_w.any(-1)  # (B, S): non-empty sentences
        D_sent, _ = self.sentence_encoder(D_blend, mask_s)  # (B, S, 2H)
        beta_sent = torch.einsum("bsh,bh->bs", D_sent, q)
        alpha_sent = masked_softmax(beta_sent, mask_s, dim=-1)  # (han-sentence): (B, S)
        D_sent, alpha_sent = self.skip_sentences(D_sent, alpha_sent, mask_s, q)  # ABS
        alpha_doc = alpha_sent.unsqueeze(-1) * alpha_word  # (han-pointer): (B, S, W)
        if self.head == "ptr":
            scores = pointer_sum(alpha_doc, doc, cands)  # (B, K)
        else:
            D_doc = torch.einsum("bs,bsh->bh", alpha_sent, D_sent)  # (han-docvec): (B, 2H)
            scores = self._docvec_scores(D_doc, cands)  # (B, K)
        return ClozeOutput(scores, alpha_word, alpha_sent, alpha_doc)

    def skip_words(self, D_word, alpha_word, mask_w, q):
        """What the reader does with its word encodings after attending to them: HAN keeps
        both. Attention-based skipping (Chapter 9, :class:`rnnbook.models.abs.ABSHAN`) masks
        the encodings here and may attend again. Returns ``(D_word, alpha_word)`` for the
        blend (han-blend) and the pointer (han-pointer)."""
        return D_word, alpha_word

    def skip_sentences(self, D_sent, alpha_sent, mask_s, q):
        """The same after the sentence attention: HAN keeps ``(D_sent, alpha_sent)``."""
        return D_sent, alpha_sent

    def update_rates(self) -> dict[str, float]:
        """The update rates since ``reset_tally()``, per real token (sentence), [0, 1].

        For every skipping encoder ``p`` in ``"q"``, ``"w"``, ``"s"``: ``rates[p]``, the mean
        of the two directions (the source's u), and ``rates[p + "_fwd"]``,
        ``rates[p + "_bwd"]``. SGRU counts the share of modules that updated, SENS the share
        of tokens on which the layer updated; padding is never counted.
        """
        rates = {}
        for place, encoder in zip(PLACES, self._encoders()):
            if encoder.skip is not None:
                fwd, bwd = encoder.update_rates()
                rates[place] = (fwd + bwd) / 2
                rates[place + "_fwd"], rates[place + "_bwd"] = fwd, bwd
        return rates

    def _encoders(self):
        return self.query_encoder, self.word_encoder, self.sentence_encoder

    def extra_repr(self) -> str:
        return f"V={self.V}, E={self.E}, H={self.H}, head={self.head}, skip={self.skip}"


class RAN(_ClozeModel):
    """The recurrent attention network: HAN-doc-vec without the sentence level.

    The real tokens of the S sentences, concatenated in order, go through one biGRU; one
    attention with the query vector runs over all of them, (han-word-attention) with the
    softmax over the document; ``D^doc`` is the attended sum and the head is (han-docvec).

    Args:
        embedding: (V, E) float matrix, frozen; row 0 is PAD. H: hidden units per direction.

    ``forward(doc, query, cands)`` as :class:`HAN`; the :class:`ClozeOutput` has no
    ``alpha_word``/``alpha_sent``, and ``alpha_doc`` (B, S, W) is the attention put back on
    the document's grid, ready for :func:`pointer_sum` (the chapter's head swap).
    """

    def __init__(self, embedding: torch.Tensor, H: int):
        super().__init__()
        self._setup_embeddings(embedding, H)
        self.query_encoder = BiGRU(self.E, H)
        self.document_encoder = BiGRU(self.E, H)
        self._setup_docvec_head(embedding)

    def forward(self, doc: torch.Tensor, query: torch.Tensor, cands: torch.Tensor):
        check_cloze_inputs(doc, query, cands, self.V)
        B, S, W = doc.shape
        q = self._encode_query(query)  # (B, 2H)
        mask = (doc != 0).view(B, S * W)  # the document as one sequence, PAD passed over
        D_word, _ = self.document_encoder(self.embedding(doc).view(B, S * W, self.E), mask)
        beta = torch.einsum("bnh,bh->bn", D_word, q)  # (han-word-attention), over the document
        alpha = masked_softmax(beta, mask, dim=-1)  # (B, S·W)
        D_doc = torch.einsum("bn,bnh->bh", alpha, D_word)  # (B, 2H)
        scores = self._docvec_scores(D_doc, cands)  # (han-docvec): (B, K)
        return ClozeOutput(scores, None, None, alpha.view(B, S, W))

    def extra_repr(self) -> str:
        return f"V={self.V}, E={self.E}, H={self.H}"


def _parse_skip(skip) -> tuple[frozenset, dict | None]:
    """The placements and the cell arguments of HAN's ``skip`` dict."""
    if skip is None:
        return frozenset(), None
    if not isinstance(skip, dict):
        raise TypeError(f"skip must be None or a dict, got {type(skip).__name__}")
    unknown = set(skip) - set(SKIP_KEYS)
    if unknown:
        raise ValueError(f"skip accepts the keys {SKIP_KEYS}, got unknown {sorted(unknown)}")
    missing = [key for key in ("where", "M", "theta") if key not in skip]
    if missing:
        raise ValueError(f"skip needs the keys 'where', 'M' and 'theta', missing {missing}")
    where = skip["where"]
    places = frozenset(where) if isinstance(where, str | set | frozenset | list | tuple) else None
    if not places or not places <= set(PLACES):
        raise ValueError(
            f"skip['where'] must name encoders from {PLACES} (e.g. 'w', 'ws' or {{'q', 's'}}), "
            f"got {where!r}"
        )
    if "mode" in skip:
        check_choice(skip["mode"], "mode", MODES)
    return places, {key: value for key, value in skip.items() if key != "where"}
