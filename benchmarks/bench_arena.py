"""Seconds per training update of the arena's models on the copying-memory task (Chapter 10).

One update is forward + the weighted loss + backward + gradient clipping + ``Adam.step()`` on
a batch of 128, exactly the arena's recipe. At each memory length T (sequences of T + 20
steps) every model is timed side by side with :func:`rnnbook.timing.compare` (interleaved
rounds, medians), so the ratios to the LSTM hold on a shared machine. The cost view of the
chapter: how each memory's price grows with the sequence length.

Nothing here asserts a time. The script checks that every loss is finite.

Usage: ``.venv/bin/python benchmarks/bench_arena.py`` (about 10 minutes on a 2-core CPU at one
thread; writes ``_build/bench/arena.json``, or with ``--record`` the book's record
``results/arena.json``); ``--quick`` (T = 50 and 100, the cheap models, not saved unless
``--output`` is given); ``--models lstm dnc`` to choose.
"""

from __future__ import annotations

import argparse
import json
import math

import torch
from timing import RECORD_HELP, save

from rnnbook.arena import harness, zoo
from rnnbook.arena.tasks import MemoryTask
from rnnbook.timing import compare

LENGTHS = (50, 100, 200)
CHEAP = ("srn", "lstm", "gru", "cwrnn", "urnn", "urnn-frozen", "lmu", "transformer")


def update(model, task, batch, clip):
    """One update of the arena's recipe; returns the loss."""
    optimizer = zoo.optimizer(model.parameters())
    x, y = batch

    def run():
        loss = task.loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if not math.isfinite(float(loss)):
            raise FloatingPointError(f"non-finite loss {float(loss)}")
        return loss

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--models", nargs="+", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", default=None)
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = args.models or (
        list(CHEAP) if args.quick else [m for m in zoo.MODELS if m != "lstm-scalar"]
    )
    lengths = (50, 100) if args.quick else LENGTHS
    rows = []
    for T in lengths:
        task = MemoryTask(T=T)
        contenders = {}
        for name in names:
            model = zoo.build(name, task, seed=0)
            batch = task.batch(harness.BATCH, 0)
            contenders[name] = update(model, task, batch, zoo.entry_of(name).clip)
        seconds = compare(contenders, rounds=args.rounds, warmup=1)
        for name in names:
            ratio = round(seconds[name] / seconds["lstm"], 2) if "lstm" in seconds else None
            label = zoo.entry_of(name).label
            row = {"T": T, "steps": T + 20, "model": name, "label": label,
                   "seconds": round(seconds[name], 4), "ratio_to_lstm": ratio}  # fmt: skip
            rows.append(row)
            versus = f"  ({ratio:.1f} x LSTM)" if ratio else ""
            print(f"T = {T:3}: {label:26} {row['seconds']:7.3f} s per update{versus}")
    if args.quick and not args.output:
        print(json.dumps(rows[:2], indent=1))
        return
    print(f"wrote {save(args.output or 'arena', rows, record=args.record)}")


if __name__ == "__main__":
    main()
