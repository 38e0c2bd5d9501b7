"""Real skipping pays: a Clockwork RNN that computes only its ticking modules, against an
equal-size dense SRN, the same dense network run through the same hand-written code, and the
same CWRNN computed whole and then masked.

8 modules with periods 1, 2, 4, ..., 128 (uni connectivity), hidden sizes 128 to 1024, one
forward and backward pass of a batch of 32 sequences of 256 steps with a loss on the
outputs, on one thread, all four timed side by side in interleaved rounds. Two input
widths: ``d_x = 1`` (the recurrence dominates) and ``d_x = H`` (an input as wide as the
state, as in a language model, where the input projection is as large as the recurrent
product; real skipping projects each module's input only at its ticks).

Contenders:

* ``srn``: the book's SRN (autograd, one dense step per time step);
* ``dense``: a CWRNN with every period 1 and dense connections, through the same
  hand-written BPTT as the sliced model: the fair dense baseline for the code path;
* ``sliced``: the CWRNN computing only its ticking modules (cw-sliced);
* ``masked``: the same CWRNN computed whole, then masked (skip-update).

For each pair the ratio is taken in every round (the contenders run one after the other
within a round, so a burst of load slows them alike); the median ratio and its spread
(lowest and highest of the rounds) are reported beside the arithmetic: the multiply-adds of
the sliced model's forward and backward pass relative to the SRN's (``arithmetic``), and the
time ratio over that arithmetic (1.0 would be a model that costs exactly its arithmetic).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
from timing import save

from rnnbook.models import SRN
from rnnbook.models.clockwork import CWRNN, module_runs, recurrent_share
from rnnbook.skip import window_update_rate
from rnnbook.timing import rounds_of

PERIODS = (1, 2, 4, 8, 16, 32, 64, 128)


def step(model, x, **forward):
    """A forward and backward pass with a loss on the outputs, as in training (both models
    return the read-out first): every step's state gets a gradient through the read-out."""

    def run():
        model.zero_grad(set_to_none=True)
        y = model(x, **forward)[0]
        y.pow(2).mean().backward()

    return run


def sliced_share(periods, L: int) -> float:
    """The recurrent products the sliced CWRNN computes, as a share of a dense SRN's three
    per step (forward, gradient to h, gradient to W), for uni connectivity: a ticking run
    of modules first..end-1 multiplies its rows by the columns of modules first..M-1."""
    M = len(periods)
    run_share = sum(
        (end - first) * (M - first)
        for runs in module_runs(periods, L)
        for first, end, ticks in runs
        if ticks
    ) / (L * M * M)
    return (2 * run_share + recurrent_share(periods, L, "uni")) / 3


def arithmetic(periods, L: int, d_x: int, H: int) -> float:
    """Multiply-adds of the sliced CWRNN's forward and backward pass over the SRN's: the
    input projection (forward and weight gradient; the input needs no gradient) at the
    update rate, the three recurrent products at ``sliced_share``."""
    u = window_update_rate(periods, L)
    dense = 2 * d_x * H + 3 * H * H
    return (2 * u * d_x * H + 3 * sliced_share(periods, L) * H * H) / dense


def interleaved(contenders: dict, rounds: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per call of each contender in every round, contenders one after the other."""
    return rounds_of(contenders, rounds, warmup)


def ratio(times, a: str, b: str) -> dict[str, float]:
    """The per-round ratio a/b: median, lowest and highest."""
    r = [x / y for x, y in zip(times[a], times[b])]
    return {"median": statistics.median(r), "low": min(r), "high": max(r)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--inputs", nargs="+", default=["1", "H"], help="d_x: 1 and/or H")
    parser.add_argument("--steps", type=int, default=256, help="sequence length L")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="one small size, not saved")
    parser.add_argument("--load", default="", help="the machine's load, recorded as given")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.steps, args.rounds = [128], 64, 3
    torch.set_num_threads(1)
    torch.manual_seed(0)
    L = args.steps
    u = window_update_rate(PERIODS, L)
    print(f"update rate of a {L}-step window: {u:.3f}; recurrent arithmetic of the sliced "
          f"CWRNN: {sliced_share(PERIODS, L):.3f} of the SRN's "
          f"(ideal {recurrent_share(PERIODS, L, 'uni'):.3f})")  # fmt: skip
    print(f"{'d_x':>5} {'H':>5} {'SRN':>9} {'sliced/SRN (spread)':>22} {'arith':>6} "
          f"{'time/arith':>10} {'sliced/dense':>13} {'masked/SRN':>11}")  # fmt: skip
    rows = []
    load_before = _load()
    for width in args.inputs:
        for H in args.sizes:
            d_x = H if width == "H" else int(width)
            x = torch.randn(args.batch, L, d_x)
            clockwork = CWRNN(d_x, H, 1, PERIODS)
            dense = CWRNN(d_x, H, 1, (1,) * len(PERIODS), connectivity="bi")
            srn = SRN(d_x, H, 1)  # the book's SRN: one dense step per time step
            times = interleaved(
                {
                    "srn": step(srn, x),
                    "dense": step(dense, x),
                    "sliced": step(clockwork, x, mode="sliced"),
                    "masked": step(clockwork, x, mode="masked"),
                },
                rounds=args.rounds,
                warmup=2,
            )
            share = arithmetic(PERIODS, L, d_x, H)
            row = {
                "d_x": d_x,
                "H": H,
                "L": L,
                "batch": args.batch,
                "periods": list(PERIODS),
                "rounds": args.rounds,
                "update_rate": u,
                "arithmetic": share,  # sliced multiply-adds over the SRN's, forward + backward
                **{name: statistics.median(ts) for name, ts in times.items()},
                "sliced_over_srn": ratio(times, "sliced", "srn"),
                "sliced_over_dense": ratio(times, "sliced", "dense"),
                "dense_over_srn": ratio(times, "dense", "srn"),
                "masked_over_srn": ratio(times, "masked", "srn"),
            }
            row["time_over_arithmetic"] = row["sliced_over_srn"]["median"] / share
            rows.append(row)
            s = row["sliced_over_srn"]
            print(
                f"{d_x:5} {H:5} {row['srn'] * 1e3:7.1f}ms {s['median']:6.2f}x "
                f"({s['low']:.2f}-{s['high']:.2f}) {share:6.3f} "
                f"{row['time_over_arithmetic']:10.2f} "
                f"{row['sliced_over_dense']['median']:12.2f}x "
                f"{row['masked_over_srn']['median']:10.2f}x",
                flush=True,
            )
    if not args.quick:
        path = save("clockwork", rows)
        record = json.loads(path.read_text())  # the machine, and how loaded it was
        record["machine"]["load"] = {
            "given": args.load,
            "loadavg_before": load_before,
            "loadavg_after": _load(),
        }
        path.write_text(json.dumps(record, indent=2))
        print(f"wrote {path}")


def _load() -> list[float]:
    """The 1, 5 and 15 minute load averages (Unix), for the record."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (OSError, AttributeError):
        return []


if __name__ == "__main__":
    main()
