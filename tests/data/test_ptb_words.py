"""PTB as words for language models: the slice, the vocabulary, ids and parallel streams."""

import pytest
import torch

from rnnbook.data.ptb import batchify, encode, ptb_words, vocabulary


def test_vocabulary_is_most_frequent_first_with_unk_and_ties_alphabetical():
    words = "b a c a b a <unk> d".split()
    assert vocabulary(words, 3) == ["a", "b", "<unk>"]  # a 3, b 2; then <unk>, c, d once each
    assert vocabulary(words, 2) == ["a", "<unk>"]  # <unk> always gets a place


def test_unknown_words_map_to_unk():
    ids = encode("a zebra b".split(), ["a", "b", "<unk>"])
    assert ids.tolist() == [0, 2, 1]
    with pytest.raises(ValueError, match="<unk>"):
        encode(["a"], ["a", "b"])


def test_batchify_cuts_the_stream_into_consecutive_rows():
    streams = batchify(torch.arange(10), 3)
    assert streams.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]  # the 10th id is dropped
    with pytest.raises(ValueError, match="at least"):
        batchify(torch.arange(5), 3)


def test_the_quick_slice_of_ptb(mirror, monkeypatch):
    monkeypatch.setenv("RNNBOOK_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("RNNBOOK_OFFLINE", "1")
    words = ptb_words("train", 100_000)
    assert len(words) == 100_000 and words.count("<eos>") > 3000
    vocab = vocabulary(words, 2000)
    ids = encode(words, vocab)
    unk = (ids == vocab.index("<unk>")).double().mean().item()
    assert 0.15 < unk < 0.17  # measured 16.2% of the slice is <unk> or outside its 2,000 words
    assert len(ptb_words("valid")) == 73_760  # the mirror's count with one <eos> per line
