"""The bigram model of a stream of tokens: a language-model baseline without memory.

It predicts the next token from the current one alone, with the pair counts of a training
text smoothed by absolute discounting. It is a standard baseline, not a bound: other
smoothings of the same counts (Kneser-Ney's, for one) may do better. A language model
that stays above it has not shown, by its perplexity, what its memory is worth. (The unigram,
which sees no token at all, is :func:`rnnbook.train.unigram_perplexity`.) Chapters 2 and 5
put it beside their language models.
"""

from __future__ import annotations

import math

import torch

from rnnbook._validate import check_positive_int


def _check_ids(name: str, t, vocab_size: int) -> None:
    """Integer ids in [0, vocab_size)."""
    if not torch.is_tensor(t) or t.dtype.is_floating_point or t.dtype == torch.bool:
        raise ValueError(f"{name} must be a tensor of integer ids, got {t!r}")
    if t.numel() and (t.min() < 0 or t.max() >= vocab_size):
        raise ValueError(f"{name} must hold ids in [0, {vocab_size}), got {t.min()}..{t.max()}")


def _check_stream(name: str, t, vocab_size: int) -> None:
    """One stream: a 1-D tensor of at least two integer ids in [0, vocab_size)."""
    if not torch.is_tensor(t) or t.dim() != 1 or t.numel() < 2:
        got = f"shape {tuple(t.shape)}" if torch.is_tensor(t) else repr(t)
        raise ValueError(
            f"{name} must be one stream of integer ids, a 1-D tensor of at least two, got {got}"
        )
    _check_ids(name, t, vocab_size)


def bigram_probability(
    train: torch.Tensor, previous: torch.Tensor, current: torch.Tensor, vocab_size: int
) -> torch.Tensor:
    """``p(current | previous)`` under the bigram model estimated on the stream ``train``:
    the next token from the current one alone, with no memory of what came before it.

    The pair counts of ``train`` are smoothed by absolute discounting towards the unigram
    ``p(w) = c(w) / N`` (Ney, Essen and Kneser, 1994): every pair seen gives up ``D`` of its
    count, and what is given up is shared out as the unigram,

        p(w | v) = max(c(v, w) - D, 0) / c(v) + D n(v) / c(v) * p(w),

    where ``c(v, w)`` counts ``v`` followed by ``w`` in ``train``, ``c(v)`` counts ``v``
    followed by anything, and ``n(v)`` is the number of different tokens seen after ``v``.
    ``D = n1 / (n1 + 2 n2)``, from the numbers of pairs seen once (n1) and twice (n2) in
    ``train`` (0.5 if no pair is seen once): nothing is tuned on the text evaluated. A token
    never followed by anything in ``train`` predicts with the unigram. For every ``v``, the
    probabilities sum to 1 over the vocabulary.

    ``train`` is one stream (1-D, at least two ids); ``previous`` and ``current`` are ids of
    one shape, any. Returns float64 of that shape.
    """
    check_positive_int(vocab_size, "vocab_size")
    _check_stream("train", train, vocab_size)
    _check_ids("previous", previous, vocab_size)
    _check_ids("current", current, vocab_size)
    if previous.shape != current.shape:
        raise ValueError(
            f"previous and current must have one shape, got {tuple(previous.shape)} and "
            f"{tuple(current.shape)}"
        )
    V = vocab_size
    train, previous, current = train.long(), previous.long(), current.long()  # v V + w fits
    unigram = torch.bincount(train, minlength=V).double() / train.numel()  # p(w)
    pairs, pair_counts = torch.unique(train[:-1] * V + train[1:], return_counts=True)  # v V + w
    n1, n2 = (pair_counts == 1).sum().item(), (pair_counts == 2).sum().item()
    D = n1 / (n1 + 2 * n2) if n1 > 0 else 0.5
    c_v = torch.bincount(train[:-1], minlength=V).double()  # c(v)
    n_v = torch.bincount(pairs // V, minlength=V).double()  # n(v)

    key = previous * V + current
    found = torch.searchsorted(pairs, key).clamp(max=pairs.numel() - 1)
    c_vw = torch.where(pairs[found] == key, pair_counts[found].double(), 0.0)  # c(v, w)
    c, n, p_w = c_v[previous], n_v[previous], unigram[current]
    seen = c > 0
    c = c.clamp(min=1)  # divides only where v was seen
    return torch.where(seen, (c_vw - D).clamp(min=0) / c + D * n / c * p_w, p_w)


def bigram_perplexity(train: torch.Tensor, ids: torch.Tensor, vocab_size: int) -> float:
    """The perplexity on the stream ``ids`` of the bigram model estimated on the stream
    ``train`` (:func:`bigram_probability`):
    ``exp(-(1/(N-1)) sum_{n>=1} log p(ids_n | ids_{n-1}))``, over the N - 1 tokens of ``ids``
    that have a token before them.

    Infinite if ``ids`` holds a token absent from ``train``, as for
    :func:`rnnbook.train.unigram_perplexity`. Both are 1-D tensors of at least two ids.
    """
    check_positive_int(vocab_size, "vocab_size")
    _check_stream("ids", ids, vocab_size)
    p = bigram_probability(train, ids[:-1], ids[1:], vocab_size)
    return math.exp(-p.log().mean().item())


def best_bigram_perplexity(ids: torch.Tensor, vocab_size: int) -> float:
    """The lowest perplexity on the stream ``ids`` that any predictor of each token from the
    one before it alone (the same ``q(w | v)`` at every position) can reach: that of the
    bigram of ``ids``'s own pair frequencies, ``p(w | v) = c(v, w) / c(v)`` counted on
    ``ids`` itself, unsmoothed.

    For any such ``q``, the mean of ``-log q(ids_n | ids_{n-1})`` over the N - 1 pairs is at
    least the conditional entropy of the pairs' frequencies, which this ``p`` reaches
    (Gibbs' inequality, context by context). It is a bound, not a model: it is fitted to the
    text it scores. Where the text is long beside the number of pairs, and another text has
    the same statistics (the characters of Chapter 2), a bigram estimated on that text comes
    close to it; a model below it must use more than the current token. ``ids`` is a 1-D
    tensor of at least two ids.
    """
    check_positive_int(vocab_size, "vocab_size")
    _check_stream("ids", ids, vocab_size)
    ids, V = ids.long(), vocab_size
    pairs, counts = torch.unique(ids[:-1] * V + ids[1:], return_counts=True)  # v V + w
    c_v = torch.bincount(ids[:-1], minlength=V).double()  # c(v)
    p = counts.double() / c_v[pairs // V]  # c(v, w) / c(v), each pair seen
    return math.exp(-(counts.double() * p.log()).sum().item() / (ids.numel() - 1))
