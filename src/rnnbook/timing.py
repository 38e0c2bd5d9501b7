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


def compare(
    contenders: dict[str, Callable[[], object]], rounds: int = 15, warmup: int = 3
) -> dict[str, float]:
    """Median seconds per call of each contender, measured in alternating rounds."""
    if not isinstance(contenders, dict) or not contenders:
        raise ValueError(
            f"contenders must be a non-empty dict of name -> callable, got {contenders!r}"
        )
    if not all(callable(fn) for fn in contenders.values()):
        raise ValueError("contenders must be a non-empty dict of name -> callable")
    check_positive_int(rounds, "rounds")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}
