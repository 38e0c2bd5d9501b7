"""The Penn Treebank (Mikolov's language-modelling version) as token streams for language models.

From the registry's text to what a model reads: words or characters with ``<eos>`` at the
end of every line, the first n of them (a slice), a vocabulary, ids, B parallel streams and
BPTT windows ``(input, target)``. ``ptb_slice`` does all of it in one call.

Decisions where the sources are silent:

* **Characters** follow Mikolov's ``ptb.char.*.txt``, derived from the word-level text:
  the characters of the words, one space between words (Mikolov writes ``_``), ``<unk>``
  spelled out as five characters, one ``<eos>`` symbol per line. That gives 49 characters
  plus ``<eos>``, the 50 symbols of the usual character-level PTB.
* **Remainders**: :func:`batchify` drops the last ``N mod B`` ids (as Zaremba et al.);
  :func:`bptt_windows` keeps a short last window, so every remaining id is predicted once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rnnbook._validate import check_choice, check_positive_int, check_tensor
from rnnbook.data.registry import fetch

EOS, UNK = "<eos>", "<unk>"
SPLITS = ("train", "valid", "test")


def load_ptb(split: str = "train") -> str:
    """The text of ``split`` (train, valid or test), a sentence per line, rare words ``<unk>``."""
    check_choice(split, "split", SPLITS)
    return (fetch("ptb") / f"ptb.{split}.txt").read_text(encoding="utf-8")


def _first(tokens: list[str], limit: int | None, split: str, level: str) -> list[str]:
    if limit is None:
        return tokens
    if len(tokens) < limit:
        raise ValueError(
            f"limit must be at most the {len(tokens):,} {level} tokens of PTB {split}, "
            f"got {limit:,}"
        )
    return tokens[:limit]


def ptb_words(split: str = "train", limit: int | None = None) -> list[str]:
    """The words of ``split`` with ``<eos>`` at the end of every line; the first ``limit``
    of them when given (Part II's quick slice: 100,000 train, 20,000 valid)."""
    if limit is not None:
        check_positive_int(limit, "limit")
    words = []
    for line in load_ptb(split).splitlines():
        words += line.split() + [EOS]
        if limit is not None and len(words) >= limit:
            break
    return _first(words, limit, split, "word")


def ptb_chars(split: str = "train", limit: int | None = None) -> list[str]:
    """The characters of ``split``: each line's words joined by one space, then ``<eos>``.

    ``<unk>`` is spelled out, as in Mikolov's character-level files, so every token is one
    character except ``<eos>``; the first ``limit`` tokens when given.
    """
    if limit is not None:
        check_positive_int(limit, "limit")
    chars: list[str] = []
    for line in load_ptb(split).splitlines():
        chars.extend(" ".join(line.split()))
        chars.append(EOS)
        if limit is not None and len(chars) >= limit:
            break
    return _first(chars, limit, split, "character")


def vocabulary(tokens: Sequence[str], size: int | None = None, unk: str | None = UNK) -> list[str]:
    """The ``size`` most frequent tokens (all when ``None``), most frequent first; ties in
    the order of first occurrence in ``tokens``, as ``collections.Counter.most_common``
    (on the quick slice this decides which of 262 words seen 6 times get the last places,
    and it gives the slice's unigram perplexity of 165.2 that Chapter 6 quotes).

    ``unk`` (default ``<unk>``) always gets a place, as the last one when the text did not
    rank it among the first ``size``: every token outside the vocabulary maps to it
    (:func:`encode`). ``unk=None`` makes a closed vocabulary (the 50 PTB characters).
    """
    if size is not None:
        check_positive_int(size, "size")
    counts = Counter(tokens)  # keys in order of first occurrence
    vocab = sorted(counts, key=counts.get, reverse=True)[:size]  # stable: ties keep that order
    if unk is not None and unk not in vocab:
        vocab = vocab[: size - 1] if size is not None and len(vocab) == size else vocab
        vocab.append(unk)
    return vocab


def encode(tokens: Sequence[str], vocab: Sequence[str], unk: str | None = UNK) -> torch.Tensor:
    """Token ids (N,) under ``vocab``; a token outside it becomes ``unk``.

    With ``unk=None`` the vocabulary is closed and an unknown token is an error.
    """
    index = {t: i for i, t in enumerate(vocab)}
    if len(index) != len(vocab):
        raise ValueError(f"the vocabulary must not repeat a token; {len(vocab) - len(index)} do")
    if unk is None:
        missing = next((t for t in tokens if t not in index), None)
        if missing is not None:
            raise ValueError(
                f"token {missing!r} is not in the closed vocabulary of {len(vocab)} tokens"
            )
        return torch.tensor([index[t] for t in tokens], dtype=torch.long)
    if unk not in index:
        raise ValueError(f"the vocabulary must hold {unk}, the id of every unknown word")
    unknown = index[unk]
    return torch.tensor([index.get(t, unknown) for t in tokens], dtype=torch.long)


def decode(ids, vocab: Sequence[str], sep: str = " ") -> str:
    """The text of ``ids``: tokens joined by ``sep`` (``""`` for characters), a line break
    for every ``<eos>``."""
    ids = torch.as_tensor(ids)
    check_tensor(ids, "ids", ndim=1)
    tokens = [vocab[i] for i in ids.tolist()]
    lines, line = [], []
    for token in tokens:
        if token == EOS:
            lines.append(sep.join(line))
            line = []
        else:
            line.append(token)
    return "\n".join([*lines, sep.join(line)])


def batchify(ids: torch.Tensor, B: int) -> torch.Tensor:
    """Cut a stream of ids (N,) into B parallel streams (B, N // B), dropping the last
    ``N mod B`` ids; stream b continues where stream b - 1's text ended, as in Zaremba et
    al.'s PTB pipeline. Each row is then read left to right, window by window."""
    check_positive_int(B, "B")
    check_tensor(ids, "ids")
    if ids.dim() != 1 or ids.numel() < 2 * B:
        raise ValueError(
            f"ids must be a 1-d stream of at least 2B = {2 * B} ids, got {tuple(ids.shape)}"
        )
    n = ids.numel() // B
    return ids[: n * B].view(B, n)  # (B, N // B)


def bptt_windows(stream: torch.Tensor, k: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The BPTT windows of parallel streams (B, N): pairs ``(x, y)`` of shape (B, k), where
    ``y`` is ``x`` shifted by one step: ``y[:, t] = stream[:, s + t + 1]`` for ``x[:, t] =
    stream[:, s + t]``.

    The windows start at s = 0, k, 2k, ... and cover the N - 1 predictions of each stream;
    the last window is shorter when k does not divide N - 1. These are the windows that
    :func:`rnnbook.train.fit_lm` trains on and :func:`rnnbook.train.lm_loss` evaluates.
    """
    check_positive_int(k, "k")
    _check_stream(stream)
    x, y = stream[:, :-1], stream[:, 1:]  # (B, N - 1) each: y is x shifted by one step
    return [(x[:, s : s + k], y[:, s : s + k]) for s in range(0, x.shape[1], k)]


def _check_stream(stream) -> None:
    check_tensor(stream, "stream", ndim=2)
    if stream.dtype.is_floating_point or stream.dtype.is_complex or stream.shape[1] < 2:
        raise ValueError(
            "stream must hold integer ids (B, N) with N >= 2, "
            f"got {stream.dtype} of shape {tuple(stream.shape)}"
        )


@dataclass(frozen=True)
class PTBSlice:
    """The first tokens of PTB train and valid as ids under one vocabulary.

    Attributes:
        level: ``"word"`` or ``"char"``.
        vocab: the tokens, most frequent first; ``vocab[i]`` is the token of id i.
        train, valid: ids (N_train,) and (N_valid,).
        unk_share: the share of each split's tokens that the vocabulary maps to ``<unk>``
            (words only: the original ``<unk>`` plus the words outside the vocabulary).
        oov_share: the part of ``unk_share`` due to words that were not ``<unk>`` in the text.
    """

    level: str
    vocab: list[str]
    train: torch.Tensor
    valid: torch.Tensor
    unk_share: dict[str, float]
    oov_share: dict[str, float]

    def decode(self, ids) -> str:
        """The text of ``ids``: words separated by spaces, characters joined."""
        return decode(ids, self.vocab, sep=" " if self.level == "word" else "")


def ptb_slice(
    n_train: int | None = 100_000,
    n_valid: int | None = 20_000,
    vocab_size: int | None = 2000,
    level: str = "word",
) -> PTBSlice:
    """The first ``n_train`` training and ``n_valid`` validation tokens (``None``: all) and
    the vocabulary of the ``vocab_size`` most frequent training tokens (``None``: all).

    The defaults are Part II's quick slice (Chapters 5-7):
    100,000 + 20,000 words with ``<eos>``, 2,000 words of which ``<unk>`` is one (the
    slice's second most frequent word). Characters (``level="char"``) take the closed
    vocabulary of the 50 symbols of the whole training split (``vocab_size=None``); every
    validation and test character occurs in it.
    """
    check_choice(level, "level", ("word", "char"))
    if level == "char" and vocab_size is not None:
        raise ValueError(
            "the character vocabulary is the 50 symbols of the whole training text; "
            f"vocab_size must be None for level='char', got {vocab_size!r}"
        )
    tokens_of = ptb_words if level == "word" else ptb_chars
    train, valid = tokens_of("train", n_train), tokens_of("valid", n_valid)
    if level == "word":
        unk = UNK
        vocab = vocabulary(train, vocab_size)
    else:  # the whole split's alphabet, so that a short slice still reads every valid text
        unk = None
        vocab = vocabulary(train if n_train is None else ptb_chars("train"), unk=None)
    ids = {"train": encode(train, vocab, unk=unk), "valid": encode(valid, vocab, unk=unk)}
    unk_share, oov_share = {}, {}
    if unk is not None:
        for split, text in (("train", train), ("valid", valid)):
            unk_share[split] = (ids[split] == vocab.index(unk)).double().mean().item()
            oov_share[split] = unk_share[split] - text.count(unk) / len(text)
    return PTBSlice(level, vocab, ids["train"], ids["valid"], unk_share, oov_share)
