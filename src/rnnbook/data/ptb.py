"""The Penn Treebank (Mikolov's language-modelling version) from the registry: its text,
words with ``<eos>``, a vocabulary, ids and parallel streams for language models."""

from __future__ import annotations

from collections import Counter

import torch

from rnnbook._validate import check_choice, check_positive_int
from rnnbook.data.registry import fetch


def load_ptb(split: str = "train") -> str:
    """The text of ``split`` (train, valid or test), a sentence per line, rare words ``<unk>``."""
    check_choice(split, "split", ("train", "valid", "test"))
    return (fetch("ptb") / f"ptb.{split}.txt").read_text(encoding="utf-8")


def ptb_words(split: str = "train", limit: int | None = None) -> list[str]:
    """The words of ``split`` with ``<eos>`` at the end of every sentence; the first
    ``limit`` of them when given (Part II's quick slice: 100,000 train, 20,000 valid)."""
    words = []
    for line in load_ptb(split).splitlines():
        words += line.split() + ["<eos>"]
        if limit is not None and len(words) >= limit:
            break
    if limit is not None:
        check_positive_int(limit, "limit")
        words = words[:limit]
    return words


def vocabulary(words: list[str], size: int) -> list[str]:
    """The ``size`` most frequent words, most frequent first (ties in alphabetical order).
    ``<unk>`` is always in it: every other word maps to it (:func:`encode`)."""
    check_positive_int(size, "size")
    counts = Counter(words)
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    vocab = ranked[:size]
    if "<unk>" not in vocab:
        vocab = [*vocab[: size - 1], "<unk>"]
    return vocab


def encode(words: list[str], vocab: list[str]) -> torch.Tensor:
    """Word ids (N,) under ``vocab``; a word outside it becomes ``<unk>``."""
    index = {w: i for i, w in enumerate(vocab)}
    if "<unk>" not in index:
        raise ValueError("the vocabulary must hold <unk>, the id of every unknown word")
    unknown = index["<unk>"]
    return torch.tensor([index.get(w, unknown) for w in words], dtype=torch.long)


def batchify(ids: torch.Tensor, B: int) -> torch.Tensor:
    """Cut a stream of ids (N,) into B parallel streams (B, N // B), dropping the rest; stream
    b continues where stream b - 1's text ended, as in Zaremba et al.'s PTB pipeline."""
    check_positive_int(B, "B")
    if ids.dim() != 1 or ids.numel() < 2 * B:
        raise ValueError(
            f"ids must be a 1-d stream of at least 2B = {2 * B} ids, got {tuple(ids.shape)}"
        )
    n = ids.numel() // B
    return ids[: n * B].view(B, n)
