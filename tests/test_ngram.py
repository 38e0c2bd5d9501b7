"""The bigram model of rnnbook.ngram: by hand, normalised, and its bad input."""

import math

import pytest
import torch

from rnnbook.ngram import best_bigram_perplexity, bigram_perplexity, bigram_probability
from rnnbook.testing import assert_close_ulps
from rnnbook.train import unigram_perplexity


def test_bigram_probability_by_hand():
    # pairs: (0,0) (0,1) (1,0) (0,1) (1,2): seen once 3 (n1), twice 1 (n2): discount = 3 / 5
    train = torch.tensor([0, 0, 1, 0, 1, 2])  # p(w) = 3/6, 2/6, 1/6
    discount, unigram = 3 / 5, torch.tensor([3, 2, 1], dtype=torch.float64) / 6
    previous, current = torch.tensor([0, 0, 0, 1, 2]), torch.tensor([0, 1, 2, 2, 1])
    expected = torch.stack([
        (1 - discount) / 3 + discount * 2 / 3 * unigram[0],  # c(0) = 3, n(0) = 2 (0 and 1 follow it)
        (2 - discount) / 3 + discount * 2 / 3 * unigram[1],
        discount * 2 / 3 * unigram[2],  # never seen after 0: the unigram's share only
        (1 - discount) / 2 + discount * 2 / 2 * unigram[2],  # c(1) = 2, n(1) = 2
        unigram[1],  # 2 is followed by nothing in train: the unigram
    ])  # fmt: skip
    got = bigram_probability(train, previous, current, 3)
    assert got.dtype == torch.float64 and got.shape == (5,)
    assert_close_ulps(got, expected)
    assert bigram_perplexity(train, torch.tensor([0, 1, 2]), 3) == pytest.approx(
        math.exp(-(expected[1].log() + expected[3].log()).item() / 2)
    )


def test_bigram_probabilities_sum_to_one_after_every_token_seen():
    train = torch.randint(0, 7, (300,), generator=torch.Generator().manual_seed(0))
    every = torch.arange(7)
    for v in range(7):
        p = bigram_probability(train, torch.full((7,), v), every, 7)
        assert_close_ulps(p.sum(), torch.tensor(1.0, dtype=torch.float64), ulps=16)
        assert (p > 0).all()  # with the unigram's share, no token seen in train is impossible


def test_the_bigram_needs_the_previous_token_and_beats_the_unigram_when_it_helps():
    """On a stream in which each token names the next, the bigram is nearly certain, and the
    unigram (which sees no context) is not; on a shuffled stream the two are close."""
    cycle = torch.arange(5).repeat(40)  # 0 1 2 3 4 0 1 ...
    assert bigram_perplexity(cycle, cycle, 5) < 1.05
    assert unigram_perplexity(cycle, cycle, 5) == pytest.approx(5)
    shuffled = cycle[torch.randperm(200, generator=torch.Generator().manual_seed(1))]
    assert bigram_perplexity(shuffled, shuffled, 5) > 0.8 * unigram_perplexity(
        shuffled, shuffled, 5
    )


def test_the_bigram_says_what_it_expected():
    train = torch.tensor([0, 1, 2, 1])
    with pytest.raises(ValueError, match=r"ids must be one stream of integer ids, a 1-D tensor"):
        bigram_perplexity(train, torch.tensor([[0, 1], [1, 2]]), 3)
    with pytest.raises(ValueError, match=r"train must be one stream .* got shape \(1,\)"):
        bigram_perplexity(torch.tensor([0]), train, 3)
    with pytest.raises(ValueError, match=r"ids must hold ids in \[0, 3\), got 0..3"):
        bigram_perplexity(train, torch.tensor([0, 3]), 3)
    with pytest.raises(ValueError, match=r"previous and current must have one shape"):
        bigram_probability(train, torch.tensor([0, 1]), torch.tensor([1]), 3)
    with pytest.raises(ValueError, match=r"current must be a tensor of integer ids"):
        bigram_probability(train, torch.tensor([0]), torch.tensor([0.5]), 3)
    assert bigram_perplexity(train, torch.tensor([0, 3]), 4) == math.inf  # 3 never in train


def test_the_bigram_edge_cases():
    # every pair of [0, 1, 0, 1, 0, 1] is seen at least twice, none once: D = 0.5
    train = torch.tensor([0, 1, 0, 1, 0, 1], dtype=torch.int16)  # any integer type
    p = bigram_probability(train, torch.tensor([[0, 0], [1, 1]]), torch.tensor([[0, 1], [0, 1]]), 3)
    assert p.shape == (2, 2)  # ids of any shape
    unigram = torch.tensor([0.5, 0.5], dtype=torch.float64)
    expected = torch.tensor(
        [
            [0.5 * 1 / 3 * unigram[0], (3 - 0.5) / 3 + 0.5 * 1 / 3 * unigram[1]],  # c(0) = 3
            [(2 - 0.5) / 2 + 0.5 * 1 / 2 * unigram[0], 0.5 * 1 / 2 * unigram[1]],  # c(1) = 2
        ],
        dtype=torch.float64,
    )
    assert_close_ulps(p, expected)
    # token 2 never occurs in train: after a context seen, its probability is 0
    assert bigram_probability(train, torch.tensor([0]), torch.tensor([2]), 3).item() == 0.0


def test_the_best_bigram_is_a_bound_that_its_own_pairs_reach():
    cycle = torch.arange(5).repeat(40)
    assert best_bigram_perplexity(cycle, 5) == 1.0  # each token names the next
    # [0, 0, 1, 0, 1]: after 0, 0 once and 1 twice; after 1, 0 once
    stream = torch.tensor([0, 0, 1, 0, 1])
    nll = -(math.log(1 / 3) + 2 * math.log(2 / 3) + math.log(1.0)) / 4
    assert best_bigram_perplexity(stream, 2) == pytest.approx(math.exp(nll))
    text = torch.randint(0, 6, (500,), generator=torch.Generator().manual_seed(2))
    other = torch.randint(0, 6, (500,), generator=torch.Generator().manual_seed(3))
    for train in (text, text[:250], other):  # a bigram estimated on any text scores above it
        assert best_bigram_perplexity(text, 6) < bigram_perplexity(train, text, 6)
    with pytest.raises(ValueError, match=r"ids must be one stream"):
        best_bigram_perplexity(torch.tensor([1]), 6)
