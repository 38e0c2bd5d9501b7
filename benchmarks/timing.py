"""Saving benchmark results; the interleaved timing itself is ``rnnbook.timing.compare``."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import torch

from rnnbook.timing import compare  # noqa: F401  (re-exported for the bench scripts)

RESULTS = Path(__file__).parent / "results"


def save(name: str, rows: list[dict]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
    path.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    return path
