"""rnnbook.timing.compare: interleaved rounds, medians, and clear errors. No absolute times."""

from __future__ import annotations

import re
import time

import pytest

from rnnbook import timing
from rnnbook.timing import compare


def noop():
    return None


class FakeClock:
    """Stands in for ``time.perf_counter``: time moves only when a contender says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def contender(self, durations):
        """A callable that takes ``durations[0]``, then ``durations[1]``, ... seconds."""
        durations = iter(durations)

        def run():
            self.now += next(durations)

        return run


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timing.time, "perf_counter", fake)
    return fake


def test_returns_one_median_per_name():
    result = compare({"a": noop, "b": noop, "c": noop}, rounds=3, warmup=0)
    assert list(result) == ["a", "b", "c"]
    assert all(isinstance(t, float) and t >= 0 for t in result.values())


@pytest.mark.parametrize("rounds, warmup", [(1, 0), (5, 3), (15, 3), (2, 7)])
def test_calls_each_contender_warmup_plus_rounds_times(rounds, warmup):
    calls = {"a": 0, "b": 0}

    def counter(name):
        def run():
            calls[name] += 1

        return run

    compare({name: counter(name) for name in calls}, rounds=rounds, warmup=warmup)
    assert calls == {"a": warmup + rounds, "b": warmup + rounds}


def test_default_is_3_warmup_calls_and_15_rounds():
    calls = []
    compare({"a": lambda: calls.append(1)})
    assert len(calls) == 3 + 15


def test_rounds_alternate_between_contenders():
    """After the warm-up every round runs each contender once, in the dict's order."""
    log = []
    contenders = {name: (lambda name=name: log.append(name)) for name in "abc"}
    compare(contenders, rounds=4, warmup=2)
    assert log[:6] == ["a", "a", "b", "b", "c", "c"]  # warm-up, contender by contender
    assert log[6:] == ["a", "b", "c"] * 4


def test_return_values_of_contenders_are_ignored():
    assert set(compare({"x": lambda: 42, "y": lambda: [1, 2]}, rounds=2, warmup=0)) == {"x", "y"}


def test_median_of_each_contenders_times(clock):
    contenders = {
        "odd": clock.contender([5.0, 1.0, 3.0]),
        "skewed": clock.contender([2.0, 2.0, 100.0]),  # an outlier does not move the median
    }
    assert compare(contenders, rounds=3, warmup=0) == {"odd": 3.0, "skewed": 2.0}


def test_median_of_an_even_number_of_rounds_is_the_mean_of_the_middle_two(clock):
    assert compare({"a": clock.contender([1.0, 10.0, 2.0, 3.0])}, rounds=4, warmup=0) == {"a": 2.5}


def test_warmup_calls_are_not_timed(clock):
    slow_warmup = clock.contender([1000.0, 1000.0, 1.0, 1.0, 1.0])
    assert compare({"a": slow_warmup}, rounds=3, warmup=2) == {"a": 1.0}


def test_sleeping_contender_is_slower_than_a_noop():
    result = compare({"sleep": lambda: time.sleep(0.02), "noop": noop}, rounds=3, warmup=0)
    assert result["sleep"] > result["noop"]


def test_contender_exceptions_propagate():
    def broken():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        compare({"broken": broken}, rounds=1, warmup=0)


@pytest.mark.parametrize(
    "contenders",
    [{}, {"a": 1.5}, {"a": noop, "b": "not callable"}, {"a": None}],
    ids=["empty", "number", "one-string", "none"],
)
def test_rejects_empty_or_non_callable_contenders(contenders):
    with pytest.raises(ValueError, match="contenders must be a non-empty dict of name -> callable"):
        compare(contenders)


def test_rejects_a_list_of_callables():
    with pytest.raises(ValueError, match="contenders must be a non-empty dict"):
        compare([noop, noop])


@pytest.mark.parametrize("rounds", [0, -1, 2.5, True, "3"])
def test_rejects_bad_rounds(rounds):
    with pytest.raises(
        ValueError, match=re.escape(f"rounds must be a positive integer, got {rounds!r}")
    ):
        compare({"a": noop}, rounds=rounds)


@pytest.mark.parametrize("warmup", [-1, -10, 0.5, "1", None])
def test_rejects_bad_warmup(warmup):
    with pytest.raises(
        ValueError, match=re.escape(f"warmup must be a non-negative integer, got {warmup!r}")
    ):
        compare({"a": noop}, warmup=warmup)


def test_rejects_bool_warmup():
    with pytest.raises(ValueError, match="warmup must be a non-negative integer, got True"):
        compare({"a": noop}, warmup=True)


def test_zero_warmup_is_allowed():
    calls = []
    compare({"a": lambda: calls.append(1)}, rounds=2, warmup=0)
    assert len(calls) == 2


def test_nothing_is_called_when_the_arguments_are_rejected():
    calls = []
    with pytest.raises(ValueError):
        compare({"a": lambda: calls.append(1), "b": 3})
    with pytest.raises(ValueError):
        compare({"a": lambda: calls.append(1)}, rounds=0)
    with pytest.raises(ValueError):
        compare({"a": lambda: calls.append(1)}, warmup=-1)
    assert calls == []


def test_rounds_of_keeps_every_round_and_takes_any_clock():
    ticks = iter(range(100))
    times = timing.rounds_of(
        {"a": lambda: None, "b": lambda: None}, rounds=3, warmup=1, clock=lambda: next(ticks)
    )
    assert times == {"a": [1, 1, 1], "b": [1, 1, 1]}  # one tick between start and end
    with pytest.raises(ValueError, match="clock"):
        timing.rounds_of({"a": lambda: None}, rounds=1, warmup=0, clock=3.0)
