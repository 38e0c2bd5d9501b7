"""The embedded Reber grammar and the sum of sines of Chapter 5."""

import random

import pytest
import torch

from rnnbook.data import reber
from rnnbook.data.synthetic import sum_of_sines


def test_the_generator_emits_only_grammatical_strings_and_every_prefix_is_legal():
    rng = random.Random(1)
    for _ in range(2000):
        s = reber.embedded_reber_string(rng)
        assert reber.is_grammatical(s), s
        for t in range(len(s)):
            assert s[t] in reber.legal_successors(s[:t]), (s, t)
        assert s[-2] == s[1]  # the long-range dependency


def test_length_statistics_of_the_unconditioned_grammar():
    rng = random.Random(0)
    lengths = [len(reber.embedded_reber_string(rng)) for _ in range(20_000)]
    assert min(lengths) == 9
    assert 11.8 < sum(lengths) / len(lengths) < 12.2  # the spec measured 12.0


def test_strings_of_one_length_are_reproducible():
    strings = reber.strings_of_length(50, 20, seed=3)
    assert {len(s) for s in strings} == {20}
    assert strings == reber.strings_of_length(50, 20, seed=3)  # a seed replayed
    assert strings != reber.strings_of_length(50, 20, seed=4)


@pytest.mark.parametrize(
    "prefix, successors",
    [("", {"B"}), ("B", {"T", "P"}), ("BT", {"B"}), ("BTB", {"T", "P"}), ("BTBTS", {"S", "X"}),
     ("BTBPVV", {"E"}), ("BTBPVVE", {"T"}), ("BPBPVVE", {"P"}), ("BPBPVVEP", {"E"}),
     ("BPBPVVEPE", set())],
)  # fmt: skip
def test_legal_successors_by_hand(prefix, successors):
    assert reber.legal_successors(prefix) == successors


@pytest.mark.parametrize("bad", ["T", "BS", "BTBX", "BTBPVVEP", "BTBPVVETT"])
def test_a_prefix_outside_the_grammar_is_refused(bad):
    with pytest.raises(ValueError, match="Reber"):
        reber.legal_successors(bad)
    assert not reber.is_grammatical(bad)


def test_one_hot_inputs_and_shifted_targets():
    strings = reber.strings_of_length(4, 12, seed=0)
    x, y = reber.one_hot(strings)
    assert x.shape == (4, 11, 7) and y.shape == (4, 11)
    assert torch.equal(x.argmax(-1)[:, 1:], y[:, :-1])  # the target is the next input
    with pytest.raises(ValueError, match="one length"):
        reber.one_hot(["BTBTXSETE", "BPBTSXSEPE"])


def test_prediction_errors_of_a_perfect_and_a_clueless_predictor():
    strings = reber.strings_of_length(20, 14, seed=2)
    _, y = reber.one_hot(strings)
    perfect = reber.prediction_errors(y, strings)
    assert perfect == {"hamming": 0.0, "illegal": 0.0, "critical": 0.0}
    always_b = reber.prediction_errors(torch.zeros_like(y), strings)
    assert always_b["critical"] == 1.0 and always_b["illegal"] >= 12  # B is legal only at t=1
    swapped = y.clone()
    swapped[:, -2] = torch.where(y[:, -2] == reber.INDEX["T"], reber.INDEX["P"], reber.INDEX["T"])
    errors = reber.prediction_errors(swapped, strings)
    assert errors["critical"] == 1.0 and errors["hamming"] == 1.0 and errors["illegal"] == 1.0


def test_the_sum_of_sines_spans_minus_one_to_one_with_the_specs_moments():
    y = sum_of_sines()
    assert y.shape == (256,) and y.min() == -1 and y.max() == 1
    assert float(y.var(unbiased=False)) == pytest.approx(0.3907, abs=1e-4)
    assert float(y.mean()) == pytest.approx(-0.0587, abs=1e-4)
