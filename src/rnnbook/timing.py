"""Side-by-side timing: run every contender once per round, keep each one's median.

Interleaving the contenders means a burst of load on the machine slows them all alike, so
their *ratio* stays meaningful even when the absolute times move. Used by ``benchmarks/`` and
by chapters that report a speed ratio measured while they render (never asserted).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from rnnbook._validate import check_positive_int


def rounds_of(
    contenders: dict[str, Callable[[], object]],
    rounds: int = 15,
    warmup: int = 3,
    clock: Callable[[], float] | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each contender in every round, the contenders one after the other.

    ``clock`` is ``time.perf_counter`` (wall time) by default; ``time.thread_time`` counts only
    this thread's CPU time, which a busy machine disturbs less.
    """
    clock = time.perf_counter if clock is None else clock
    if not isinstance(contenders, dict) or not contenders:
        raise ValueError(
            f"contenders must be a non-empty dict of name -> callable, got {contenders!r}"
        )
    if not all(callable(fn) for fn in contenders.values()):
        raise ValueError("contenders must be a non-empty dict of name -> callable")
    check_positive_int(rounds, "rounds")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")
    if not callable(clock):
        raise ValueError(f"clock must be a callable returning seconds, got {clock!r}")
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return times


def compare(
    contenders: dict[str, Callable[[], object]],
    rounds: int = 15,
    warmup: int = 3,
    clock: Callable[[], float] | None = None,
) -> dict[str, float]:
    """Median seconds per call of each contender, measured in alternating rounds
    (:func:`rounds_of`)."""
    times = rounds_of(contenders, rounds, warmup, clock)
    return {name: statistics.median(ts) for name, ts in times.items()}
