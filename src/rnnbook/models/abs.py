"""Attention-based skipping (ABS, Chapter 9): a reader's own attention decides which of its
encoder's outputs to keep.

HAN-ptr (Chapter 8, :class:`rnnbook.models.han.HAN`) attends over every sequence it encodes:
``α^word`` over the words of a sentence, ``α^sent`` over the sentences. ABS reads that
distribution as the probability that each position **updates** the encoding. With the encoder's
outputs ``ĥ_1 … ĥ_n`` of one sequence and their attention ``α_1 … α_n`` (summing to 1 over the
real positions),

    b_t ~ Bernoulli(α_t),   b_t = 0 on PAD                                     (abs-decision)
    h_t = b_t ĥ_t + (1 − b_t) h_{t−1},   h_0 = 0                                  (abs-fill)

so a skipped position holds a copy of the last kept output (a forward fill), and zeros before
the first. The decision is taken **in hindsight**: the encoder has already read every token,
so nothing is saved; the recurrence is not run again. A bidirectional encoder's concatenated
output is filled as one vector, in reading order, with one decision per token. Because the
attention of a sequence sums to 1,

    E[Σ_t b_t] = Σ_t α_t = 1                                                   (abs-expected)

per sentence (word level) or per document (sentence level), whatever the model has learned.

The two variants differ in which attention the reader uses after the skip:

* **ABS-AS** (attend and skip), word level only: the blend uses the original attention over
  the filled outputs, ``D^blend_i = Σ_j α^word_{i,j} D̃^word_{i,j}``, and the pointer keeps
  the original ``α^word``                                                            (abs-as)
* **ABS-ASA** (attend, skip, attend), at the word level, the sentence level or both: the
  attention is computed again on the filled outputs, ``α'_t = softmax_t(q · h_t)``, and used
  for the blend and the pointer                                                     (abs-asa)

Instead of the Bernoulli draw, two deterministic selections keep a chosen number of positions:

    top-k:  b_t = 1 for the k positions with the highest α_t (all, if n ≤ k)        (abs-topk)
    ranked: b_t = 1 for the top k = max(1, ⌊u n + ½⌋) positions, for a target rate u (abs-rank)

ties broken by position (the earlier first). The dissertation writes the ranked rule with a
strict ``α_t > α_θ``, where ``α_θ`` is the smallest attention inside the top-u share; taken
literally that drops the k-th token, so we keep it.

Gradients reach the decisions through the identity straight-through estimator with respect to
the attention,

    b ← b + (α − sg(α))                                                                (abs-ste)

(``sg`` = stop gradient): the forward value stays 0 or 1, and the backward pass takes
``∂b_t/∂α_t := 1``. The dissertation does not say how it trained the decisions; it applies the
estimator to every discrete step of its previous chapter, and Skip RNNs train their gates so.
"""

from __future__ import annotations

import math

import torch

from rnnbook._validate import check_choice, check_positive_int, check_tensor
from rnnbook.models.han import HAN, masked_softmax
from rnnbook.skip import UpdateTally, skip_update

HOWS = ("bernoulli", "topk", "rank")  # how the positions to keep are chosen
ABS_MODES = ("as", "asa")
LEVELS = ("w", "s", "ws")


def forward_fill(h_hat: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(abs-fill): keep ``h_hat`` where ``b`` is 1, copy the last kept row where it is 0.

    Args:
        h_hat: (..., T, D) the encoder's outputs, T positions of D features.
        b: (..., T) the decisions, 1 = keep (update), 0 = skip; floats, which may carry the
            straight-through term of (abs-ste).

    Returns (..., T, D): ``h_t = b_t ĥ_t + (1 − b_t) h_{t−1}`` with ``h_0 = 0``. Where ``b``
    is 0 the previous row comes back exactly, so rows that share a copy are equal to the bit.
    """
    check_tensor(h_hat, "h_hat")
    check_tensor(b, "b")
    if h_hat.dim() < 2 or b.shape != h_hat.shape[:-1]:
        raise ValueError(
            f"expected h_hat (..., T, D) and b (..., T) with the same leading shape, got "
            f"h_hat {tuple(h_hat.shape)} and b {tuple(b.shape)}"
        )
    h = torch.zeros_like(h_hat[..., 0, :])  # h_0 = 0
    rows = []
    for t in range(h_hat.shape[-2]):
        h = skip_update(h_hat[..., t, :], h, b[..., t].unsqueeze(-1))  # (skip-update)
        rows.append(h)
    return torch.stack(rows, dim=-2)


def keep_count(n: torch.Tensor, how: str, k: int | None = None, rate: float | None = None):
    """How many positions a deterministic selection keeps in a sequence of ``n`` real ones.

    ``how="topk"``: ``min(k, n)`` (abs-topk). ``how="rank"``: ``max(1, ⌊rate · n + ½⌋)``,
    capped at ``n``, and 0 for an empty sequence (abs-rank). ``n`` is an int64 tensor of
    sequence lengths; the result has its shape.
    """
    if how == "topk":
        return torch.clamp(n, max=k)
    if how == "rank":
        nearest = torch.floor(rate * n.double() + 0.5).long()
        return torch.minimum(nearest.clamp_min(1), n)
    raise ValueError(f"keep_count is for how='topk' or 'rank', got {how!r}")


def abs_decisions(
    alpha: torch.Tensor,
    mask: torch.Tensor,
    how: str = "bernoulli",
    k: int | None = None,
    rate: float | None = None,
    ste: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The update decisions of ABS from the attention of each sequence.

    Args:
        alpha: (..., T) attention over the last dimension, 0 on PAD (e.g. from
            :func:`~rnnbook.models.han.masked_softmax`).
        mask: (..., T) booleans, True on real positions. PAD never updates.
        how: ``"bernoulli"`` (abs-decision), ``"topk"`` with ``k`` (abs-topk), or ``"rank"``
            with a target update rate ``rate`` in (0, 1] (abs-rank).
        ste: add the straight-through term of (abs-ste), so the loss reaches ``alpha``
            through the decisions as well; False detaches them.
        generator: optional, for the Bernoulli draw.

    Returns (..., T) floats whose values are 0 or 1.
    """
    check_tensor(alpha, "alpha")
    check_tensor(mask, "mask")
    check_choice(how, "how", HOWS)
    if mask.dtype != torch.bool or mask.shape != alpha.shape:
        raise ValueError(
            f"mask must be booleans of the shape of alpha {tuple(alpha.shape)}, got "
            f"{mask.dtype} of shape {tuple(mask.shape)}"
        )
    a = alpha.detach()
    if how == "bernoulli":
        if k is not None or rate is not None:
            raise ValueError(
                f"how='bernoulli' takes neither k nor rate, got k={k!r}, rate={rate!r}"
            )
        if (a < 0).any() or (a > 1).any():
            raise ValueError(
                "alpha must be probabilities in [0, 1] for how='bernoulli', got values from "
                f"{float(a.min()):g} to {float(a.max()):g}"
            )
        b = torch.bernoulli(a, generator=generator) * mask
    else:
        if how == "topk":
            if rate is not None:
                raise ValueError(f"how='topk' takes k, not rate, got rate={rate!r}")
            check_positive_int(k, "k")
        else:
            if k is not None:
                raise ValueError(f"how='rank' takes rate, not k, got k={k!r}")
            if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= 1:
                raise ValueError(f"rate must be a number in (0, 1] for how='rank', got {rate!r}")
        kept = keep_count(mask.sum(-1), how, k, rate)  # (...,)
        score = a.masked_fill(~mask, -math.inf)  # PAD ranks last
        order = torch.sort(score, dim=-1, descending=True, stable=True).indices
        rank = torch.empty_like(order).scatter_(
            -1, order, torch.arange(a.shape[-1], device=a.device).expand_as(order)
        )
        b = ((rank < kept.unsqueeze(-1)) & mask).to(a.dtype)
    if ste:
        b = b + (alpha - a)  # (abs-ste): the value stays 0/1, the gradient is 1
    return b


class ABSHAN(HAN):
    """HAN-ptr with attention-based skipping: ABS-AS or ABS-ASA (Chapter 9).

    Args:
        embedding, H: as :class:`~rnnbook.models.han.HAN`. Every encoder is a plain biGRU and
            the head is the pointer; the query is never skipped.
        mode: ``"as"`` (abs-as) or ``"asa"`` (abs-asa).
        levels: ``"w"`` (word encodings), ``"s"`` (sentence encodings) or ``"ws"`` (both);
            ABS-AS exists only at ``"w"``, because the sentence encodings serve only the
            sentence attention, which it keeps.
        how, k, rate, ste: how the decisions are taken, as :func:`abs_decisions`.

    The decisions are sampled in training and in evaluation alike. Counts since
    :meth:`reset_tally` give :meth:`update_rates`; ``last`` holds the most recent forward
    pass's decisions ``b_word`` (B, S, W) and ``b_sent`` (B, S) (ones where that level does
    not skip) and the attention before the skip, ``alpha_word_before`` and
    ``alpha_sent_before``, all detached.
    """

    def __init__(
        self,
        embedding: torch.Tensor,
        H: int,
        mode: str = "as",
        levels: str = "w",
        how: str = "bernoulli",
        k: int | None = None,
        rate: float | None = None,
        ste: bool = True,
    ):
        super().__init__(embedding, H, head="ptr")
        check_choice(mode, "mode", ABS_MODES)
        check_choice(levels, "levels", LEVELS)
        if mode == "as" and levels != "w":
            raise ValueError(f"ABS-AS skips only at the word level (levels='w'), got {levels!r}")
        abs_decisions(torch.ones(1), torch.ones(1, dtype=torch.bool), how, k, rate)  # checks
        self.mode, self.levels = mode, levels
        self.how, self.k, self.rate, self.ste = how, k, rate, ste
        self.generator: torch.Generator | None = None
        self.tallies = {level: UpdateTally() for level in levels}
        self.reset_tally()
        self.last: dict[str, torch.Tensor] = {}

    def _decide(self, alpha, mask):
        return abs_decisions(alpha, mask, self.how, self.k, self.rate, self.ste, self.generator)

    def skip_words(self, D_word, alpha_word, mask_w, q):
        self.last["alpha_word_before"] = alpha_word.detach()
        if "w" not in self.levels:
            self.last["b_word"] = mask_w.to(alpha_word.dtype)
            return D_word, alpha_word
        b = self._decide(alpha_word, mask_w)  # (B, S, W), one decision per token
        self.last["b_word"] = b.detach()
        self.tallies["w"].count(b.detach()[mask_w])
        D_filled = forward_fill(D_word, b)  # (abs-fill) within each sentence
        if self.mode == "as":
            return D_filled, alpha_word  # (abs-as): the original attention
        beta = torch.einsum("bswh,bh->bsw", D_filled, q)
        return D_filled, masked_softmax(beta, mask_w, dim=-1)  # (abs-asa): attend again

    def skip_sentences(self, D_sent, alpha_sent, mask_s, q):
        self.last["alpha_sent_before"] = alpha_sent.detach()
        if "s" not in self.levels:
            self.last["b_sent"] = mask_s.to(alpha_sent.dtype)
            return D_sent, alpha_sent
        b = self._decide(alpha_sent, mask_s)  # (B, S), one decision per sentence
        self.last["b_sent"] = b.detach()
        self.tallies["s"].count(b.detach()[mask_s])
        D_filled = forward_fill(D_sent, b)  # (abs-fill) over the sentences
        beta = torch.einsum("bsh,bh->bs", D_filled, q)
        return D_filled, masked_softmax(beta, mask_s, dim=-1)  # (abs-asa)

    def reset_tally(self) -> None:
        """Start counting the decisions afresh."""
        for tally in self.tallies.values():
            tally.reset_tally()

    def update_rates(self) -> dict[str, float]:
        """The share of real tokens (``"w"``) or non-empty sentences (``"s"``) that updated
        since :meth:`reset_tally`, for each skipping level: the update rate (skip-rate) with
        one decision per token, shared by the two directions."""
        return {level: tally.update_rate() for level, tally in self.tallies.items()}

    def extra_repr(self) -> str:
        selection = {"bernoulli": "", "topk": f", k={self.k}", "rank": f", rate={self.rate}"}
        return (
            f"V={self.V}, E={self.E}, H={self.H}, mode={self.mode}, levels={self.levels}, "
            f"how={self.how}{selection[self.how]}, ste={self.ste}"
        )
