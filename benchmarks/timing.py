"""Saving benchmark results; the interleaved timing itself is ``rnnbook.timing.compare``.

A run goes to ``_build/bench/<name>.json``: a reader's ``make bench`` leaves the book's
records alone. Only ``record=True`` (``--record`` on every bench script, ``make bench
RECORD=1``) writes ``benchmarks/results/<name>.json``, the record the chapters quote; make
one on an idle machine.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import torch

from rnnbook.timing import compare  # noqa: F401  (re-exported for the bench scripts)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"  # the book's records, read by the chapters
RUNS = HERE.parent / "_build" / "bench"  # every other run

RECORD_HELP = (
    "write the book's record, benchmarks/results/<name>.json, which the chapters quote "
    "(an idle machine only); without it the run goes to _build/bench/<name>.json"
)


def save(name: str, rows: list[dict], record: bool = False) -> Path:
    """Write ``rows`` and the machine to ``_build/bench/<name>.json``, or with
    ``record=True`` to ``benchmarks/results/<name>.json``; return the path."""
    folder = RESULTS if record else RUNS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
    path.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    if not record:
        print(
            f"a reader's run, in {path}; the book's record, benchmarks/results/{name}.json, "
            "is untouched (--record replaces it)"
        )
    return path


def read_record(name: str) -> dict | None:
    """The book's record ``benchmarks/results/<name>.json``, or None if there is none."""
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None
