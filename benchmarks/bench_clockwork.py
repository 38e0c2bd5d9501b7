"""Real skipping pays: a Clockwork RNN that computes only its ticking modules, against an
equal-size dense SRN and against the same CWRNN computed whole and then masked.

8 modules with periods 1, 2, 4, ..., 128 (uni connectivity), hidden sizes 128 to 1024, one
forward and backward pass of a batch of 32 sequences of 256 steps with a loss on the
outputs, on one thread, all three timed side by side. Beside the measured time ratios: the
update rate of the window and the recurrent arithmetic relative to the dense SRN, both the
ideal (each ticking module against only the columns it reads, ``recurrent_share``) and what
the sliced model multiplies (one slice of rows per run of ticking modules forward and back,
the ideal blocks for the weight gradient). The masked model multiplies everything.
"""

from __future__ import annotations

import argparse

import torch
from timing import compare, save

from rnnbook.models import SRN
from rnnbook.models.clockwork import CWRNN, module_runs, recurrent_share
from rnnbook.skip import window_update_rate

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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--steps", type=int, default=256, help="sequence length L")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="one small size, not saved")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.steps = [128], 64
    torch.set_num_threads(1)
    torch.manual_seed(0)
    u = window_update_rate(PERIODS, args.steps)
    ideal, sliced = recurrent_share(PERIODS, args.steps, "uni"), sliced_share(PERIODS, args.steps)
    rows = []
    print(
        f"update rate of a {args.steps}-step window: {u:.3f}; recurrent arithmetic of the "
        f"sliced CWRNN: {sliced:.3f} of the SRN's (ideal {ideal:.3f})"
    )
    print(f"{'H':>5} {'SRN':>9} {'sliced':>9} {'masked':>9} {'sliced/SRN':>11} {'masked/SRN':>11}")
    for H in args.sizes:
        x = torch.randn(args.batch, args.steps, 1)
        clockwork = CWRNN(1, H, 1, PERIODS)
        srn = SRN(1, H, 1)  # the book's SRN: one dense step per time step
        times = compare(
            {
                "srn": step(srn, x),
                "sliced": step(clockwork, x, mode="sliced"),
                "masked": step(clockwork, x, mode="masked"),
            }
        )
        row = {
            "H": H,
            "L": args.steps,
            "batch": args.batch,
            "periods": list(PERIODS),
            "update_rate": u,
            "flop_ratio_sliced": sliced,  # recurrent products computed, relative to the SRN
            "flop_ratio_ideal": ideal,  # each ticking module against the columns it reads
            **times,
            "sliced_over_srn": times["sliced"] / times["srn"],
            "masked_over_srn": times["masked"] / times["srn"],
        }
        rows.append(row)
        print(
            f"{H:5} {times['srn'] * 1e3:7.1f}ms {times['sliced'] * 1e3:7.1f}ms "
            f"{times['masked'] * 1e3:7.1f}ms {row['sliced_over_srn']:10.2f}x "
            f"{row['masked_over_srn']:10.2f}x"
        )
    if not args.quick:
        print(f"wrote {save('clockwork', rows)}")


if __name__ == "__main__":
    main()
