"""Seconds per training step of the NTM on the copy task, recipe (B) (spec ntm §5.3).

One training step is what the copy training will repeat 31,250 times: a batch of
``copy_task`` data, forward, the summed BCE over the answer steps divided by the batch,
backward, clipping to global norm 50, and ``Adam.step()``. The model is the copy
configuration (N = 128, M = 20, LSTM controller 100, one read and one write head,
63,136 parameters), batch 32, at sequence lengths L = 10 (21 steps, about the mean of the
training lengths U{1..20}) and L = 20 (41 steps). The lengths are timed in alternating rounds
on one torch thread; forward, backward and the optimizer are timed separately too.

The estimate of a full run multiplies the median step at L = 10 by 22/21 (the mean number
of steps, E[2L + 1] = 22, over 21) and by 31,250 steps. It is an estimate for this machine and
its load at the time, which the JSON records (``os.getloadavg``).

Usage: ``.venv/bin/python benchmarks/bench_ntm.py`` (about 20 s; writes
``_build/bench/ntm.json``, or with ``--record`` the book's record ``results/ntm.json``),
``--rounds 3`` for a quicker look.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F
from timing import RECORD_HELP, save

from rnnbook.data.synthetic import copy_task
from rnnbook.models.ntm import NTM
from rnnbook.train import clip

BATCH, STEPS_FULL_RUN, LENGTHS = 32, 31_250, (10, 20)


def copy_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """BCE with logits on the answer steps L+1..2L, summed over bits and steps, over B."""
    L = y.shape[1]
    answer = logits[:, L + 1 :]
    return F.binary_cross_entropy_with_logits(answer, y, reduction="sum") / y.shape[0]


def training_step(model, optimizer, x, y) -> dict[str, float]:
    """One step, with the time of each of its three parts."""
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    logits, _, _ = model(x)
    loss = copy_loss(logits, y)
    forward = time.perf_counter()
    loss.backward()
    clip(model.parameters(), "norm", 50.0)
    backward = time.perf_counter()
    optimizer.step()
    end = time.perf_counter()
    return {
        "step": end - start,
        "forward": forward - start,
        "backward": backward - forward,
        "optimizer": end - backward,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = NTM(9, 8)  # the copy configuration of recipe (B)
    n_parameters = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = {L: copy_task(BATCH, L, generator=L) for L in LENGTHS}
    for _ in range(args.warmup):
        for L in LENGTHS:
            training_step(model, optimizer, *batches[L])
    load_before = os.getloadavg()
    times = {L: [] for L in LENGTHS}
    for _ in range(args.rounds):
        for L in LENGTHS:
            times[L].append(training_step(model, optimizer, *batches[L]))
    load_after = os.getloadavg()

    rows = []
    for L in LENGTHS:
        parts = {k: [t[k] for t in times[L]] for k in times[L][0]}
        row = {
            "L": L,
            "time_steps": 2 * L + 1,
            "batch": BATCH,
            "parameters": n_parameters,
            "step_seconds_all": [round(s, 4) for s in parts["step"]],
            **{f"{k}_median": round(statistics.median(v), 4) for k, v in parts.items()},
            "step_min": round(min(parts["step"]), 4),
            "step_max": round(max(parts["step"]), 4),
        }
        rows.append(row)
        print(
            f"L = {L:2d} ({2 * L + 1} steps): median {row['step_median']:.3f} s per training "
            f"step (min {row['step_min']:.3f}, max {row['step_max']:.3f}); forward "
            f"{row['forward_median']:.3f}, backward {row['backward_median']:.3f}, "
            f"Adam {row['optimizer_median']:.4f}"
        )
    per_step = rows[0]["step_median"] * 22 / 21
    hours = per_step * STEPS_FULL_RUN / 3600
    print(
        f"full recipe-(B) run, {STEPS_FULL_RUN:,} steps at mean L = 10.5: about {hours:.1f} h "
        f"on this CPU at one thread (load average {load_before[0]:.2f} -> {load_after[0]:.2f})"
    )
    rows.append(
        {
            "estimate": "full run",
            "steps": STEPS_FULL_RUN,
            "seconds_per_step": round(per_step, 4),
            "hours": round(hours, 2),
            "loadavg_before": load_before,
            "loadavg_after": load_after,
        }
    )
    print(f"wrote {save('ntm', rows, record=args.record)}")


if __name__ == "__main__":
    main()
