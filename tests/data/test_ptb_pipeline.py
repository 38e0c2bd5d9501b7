"""rnnbook.data.ptb as a pipeline: words and characters, vocabulary, slices, streams, windows."""

import pytest
import torch

from rnnbook.data import ptb
from rnnbook.data.ptb import (
    batchify,
    bptt_windows,
    decode,
    encode,
    ptb_chars,
    ptb_slice,
    ptb_words,
    vocabulary,
)

TEXT = " the cat sat \n the <unk> ran \n"  # the layout of ptb.*.txt: a space at both ends


@pytest.fixture
def tiny_ptb(monkeypatch):
    """``load_ptb`` answers with the hand-made TEXT (train) and a shorter valid text."""
    texts = {"train": TEXT, "valid": " a cat \n", "test": " the dog \n"}
    monkeypatch.setattr(ptb, "load_ptb", lambda split="train": texts[split])


@pytest.fixture
def ptb_mirror(mirror, monkeypatch):
    monkeypatch.setenv("RNNBOOK_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("RNNBOOK_OFFLINE", "1")


# --- tokenisation on hand-made text -------------------------------------------------------------


def test_words_end_every_line_with_eos(tiny_ptb):
    assert ptb_words() == "the cat sat <eos> the <unk> ran <eos>".split()
    assert ptb_words("train", 4) == ["the", "cat", "sat", "<eos>"]
    assert ptb_words("train", 5) == ["the", "cat", "sat", "<eos>", "the"]


def test_characters_join_words_by_one_space_and_spell_unk_out(tiny_ptb):
    chars = ptb_chars()
    assert chars == [*"the cat sat", "<eos>", *"the <unk> ran", "<eos>"]
    assert ptb_chars("train", 3) == ["t", "h", "e"]
    assert ptb_chars("valid") == [*"a cat", "<eos>"]


@pytest.mark.parametrize("tokens_of", [ptb_words, ptb_chars])
def test_a_slice_longer_than_the_split_is_an_error(tiny_ptb, tokens_of):
    with pytest.raises(ValueError, match=r"limit must be at most the \d+ \w+ tokens of PTB valid"):
        tokens_of("valid", 1000)
    with pytest.raises(ValueError, match="limit must be a positive integer, got 0"):
        tokens_of("train", 0)


# --- vocabulary and ids -------------------------------------------------------------------------


def test_vocabulary_ranks_by_count_then_first_occurrence():
    tokens = "d b a c a b a c".split()  # a 3; b 2, c 2 (b first); d 1
    assert vocabulary(tokens) == ["a", "b", "c", "d", "<unk>"]
    assert vocabulary(tokens, 3) == ["a", "b", "<unk>"]  # <unk> takes the last place
    assert vocabulary(tokens, 3, unk=None) == ["a", "b", "c"]
    # ties follow the text: reversed, c comes before b
    assert vocabulary(tokens[::-1], 3, unk=None) == ["a", "c", "b"]
    assert vocabulary([*tokens, "<unk>", "<unk>", "<unk>", "<unk>"], 2) == ["<unk>", "a"]


def test_encode_maps_unknown_tokens_to_unk_and_decode_inverts_it():
    vocab = ["the", "<eos>", "cat", "<unk>"]
    ids = encode("the zebra cat <eos> the".split(), vocab)
    assert ids.tolist() == [0, 3, 2, 1, 0] and ids.dtype == torch.long
    assert decode(ids, vocab) == "the <unk> cat\nthe"
    assert decode(torch.tensor([2, 1]), vocab) == "cat\n"
    assert decode([0, 2], ["a", "b", "c"], sep="") == "ac"


def test_a_closed_vocabulary_rejects_unknown_tokens():
    assert encode(list("abca"), ["a", "b", "c"], unk=None).tolist() == [0, 1, 2, 0]
    with pytest.raises(ValueError, match="token 'z' is not in the closed vocabulary of 3 tokens"):
        encode(list("abz"), ["a", "b", "c"], unk=None)
    with pytest.raises(ValueError, match="must not repeat a token; 1 do"):
        encode(["a"], ["a", "b", "a", "<unk>"])
    with pytest.raises(ValueError, match="size must be a positive integer, got 0"):
        vocabulary(["a"], 0)


# --- streams and BPTT windows -------------------------------------------------------------------


def test_batchify_makes_B_consecutive_streams_and_drops_the_tail():
    streams = batchify(torch.arange(11), 2)
    assert streams.tolist() == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]  # 11 mod 2 = 1 id dropped


@pytest.mark.parametrize("k, lengths", [(3, [3, 3, 3]), (4, [4, 4, 1]), (9, [9]), (50, [9])])
def test_windows_cover_every_prediction_once_and_targets_are_inputs_shifted_by_one(k, lengths):
    stream = batchify(torch.arange(20), 2)  # (2, 10): 9 predictions per stream
    windows = bptt_windows(stream, k)
    assert [x.shape[1] for x, _ in windows] == lengths
    for x, y in windows:
        assert x.shape == y.shape == (2, x.shape[1])
        assert torch.equal(y, x + 1)  # the stream is arange, so "next id" is "id + 1"
    assert torch.equal(torch.cat([x for x, _ in windows], dim=1), stream[:, :-1])
    assert torch.equal(torch.cat([y for _, y in windows], dim=1), stream[:, 1:])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: batchify(torch.arange(5), 3), r"at least 2B = 6 ids, got \(5,\)"),
        (lambda: batchify(torch.zeros(4, 2), 2), r"1-d stream .* got \(4, 2\)"),
        (lambda: batchify(torch.arange(8), 0), "B must be a positive integer, got 0"),
        (
            lambda: bptt_windows(torch.arange(8), 2),
            r"stream must have 2 dimensions, got shape \(8,\)",
        ),
        (lambda: bptt_windows(torch.zeros(2, 4), 2), "integer ids .* got torch.float32"),
        (lambda: bptt_windows(torch.zeros(2, 1, dtype=torch.long), 2), r"N >= 2, .*\(2, 1\)"),
        (lambda: bptt_windows(torch.zeros(2, 4, dtype=torch.long), 0), "k must be a positive"),
        (lambda: ptb_slice(level="bytes"), r"level must be one of \('word', 'char'\)"),
        (lambda: ptb_slice(level="char"), "vocab_size must be None for level='char', got 2000"),
    ],
)
def test_bad_arguments_are_rejected(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_a_slice_of_hand_made_text(tiny_ptb):
    words = ptb_slice(n_train=None, n_valid=None, vocab_size=4)
    assert words.vocab == ["the", "<eos>", "cat", "<unk>"]  # the 2, <eos> 2, then cat first of 1s
    assert words.train.tolist() == [0, 2, 3, 1, 0, 3, 3, 1]  # sat and ran become <unk>
    assert words.unk_share["train"] == pytest.approx(3 / 8)
    assert words.oov_share["train"] == pytest.approx(2 / 8)  # one of the three was <unk> already
    assert words.decode(words.valid) == "<unk> cat\n"
    chars = ptb_slice(n_train=4, n_valid=None, vocab_size=None, level="char")
    assert "<unk>" not in chars.vocab and len(chars.vocab) == len(set(TEXT) - {" ", "\n"}) + 2
    assert chars.decode(chars.valid) == "a cat\n" and chars.unk_share == {}


# --- the real PTB through the offline mirror --------------------------------------------------


def test_the_quick_word_slice(ptb_mirror):
    """Part II's quick slice (clockwork §5.4 Q3, sba §5.3, zoneout §7), measured."""
    s = ptb_slice()
    assert s.train.shape == (100_000,) and s.valid.shape == (20_000,)
    assert len(s.vocab) == 2000 and s.vocab[:4] == ["the", "<unk>", "<eos>", "N"]
    # sba §5.3 says 16 % <unk> in train and 21 % in valid; clockwork §5.4 Q3's "11 %" is the
    # part of the training slice that was a real word outside the 2,000 (the rest, 5.0 %,
    # was <unk> in the text already).
    assert s.unk_share == {"train": 0.16164, "valid": pytest.approx(0.20885)}
    assert s.oov_share["train"] == pytest.approx(0.11119)
    assert s.oov_share["valid"] == pytest.approx(0.15295)


def test_the_character_level_ptb(ptb_mirror):
    s = ptb_slice(500_000, 100_000, None, level="char")
    assert s.train.shape == (500_000,) and s.valid.shape == (100_000,)
    assert len(s.vocab) == 50 and s.vocab[:3] == [" ", "e", "t"]  # 49 characters and <eos>
    assert s.decode(s.train[:24]) == "aer banknote berlitz cal"
    assert [len(ptb_chars(split)) for split in ("valid", "test")] == [393_042, 442_423]
    assert set(ptb_chars("test")) <= set(s.vocab)  # the closed vocabulary reads every split
