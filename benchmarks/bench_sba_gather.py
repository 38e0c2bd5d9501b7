"""Could SBA-LSTM decisions save arithmetic if they were known before the step? Each variant's
gathered gate product against the dense one.

SBA decides *after* computing the candidate, so it saves nothing (Chapter 6). This benchmark
asks the hypothetical question: if a module's decision were known before the step, how much
of the gate product ``h @ W_hh.T`` (B, 4H) could a kept module skip, and would skipping pay?
A kept unit still needs some gate blocks, depending on the variant (torch's gate order
i, f, g, o):

* S_c (``c_t = c_{t-1}``, ``h_t = o ⊙ tanh c_t``): needs o, skips i, f, g (3 of 4 blocks);
* S_ic (``i := 0``, ``c_t = f ⊙ c_{t-1}``): needs f and o, skips i and g (2 of 4);
* S_ff, S_fh, S_fc (``f := 1``) and S_h (``h_t = h_{t-1}``, the cell updates): skip one
  block (f, or o), need the other three (1 of 4);
* S_ch with both of its decisions "keep": skips all four (the most any variant can skip).

The dense step computes all four blocks of every unit in one product. The gathered step
computes the needed blocks of every unit in one product, and each skippable block only for
the sequences that update the unit, in one of two ways:

* ``module``: one product per module with the sequences that update it,
  ``h[idx_m] @ W_m.T`` with ``W_m`` the module's skippable rows (the natural gather for a
  few large modules);
* ``sequence``: one product per sequence with the rows of the units it updates,
  ``h[b] @ W_skip[rows_b].T`` (the natural gather for one module per unit, M = H, the S_ic
  setting of Chapter 6).

Both contenders return the gate pre-activations; neither merges them with the previous
state, which both would do alike. The arithmetic of the gathered step is
``(needed + u * skippable) / 4`` of the dense one (``arithmetic`` in the results).

Decisions are drawn at random with update rates 0.05 to 1. Timing: one thread, dense and
gathered in alternating rounds with the median of each kept (as :func:`rnnbook.timing.compare`
does, but timed with the thread's CPU clock, ``time.thread_time``, not the wall clock: on a
shared machine the wall clock also counts the time other processes held the core), and that
whole comparison repeated ``--repeats`` times, the repetitions interleaved over the
configurations (every configuration once, then every configuration again, ...), so that a
burst of load hits different configurations in different repetitions. Each row keeps every
repetition's ratio; the results report their median, minimum and maximum, and the machine's
load average before and after. Forward only: the backward pass of a gather is a scatter,
which costs more.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
from timing import RECORD_HELP, save

from rnnbook.timing import compare as median_rounds

RATES = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
RATES_PER_UNIT = (0.05, 0.2, 0.5, 1.0)  # M = H above H = 256
GATES = "ifgo"  # torch's order of the four gate blocks
# variant label: the gate blocks a kept unit can skip
SKIPPABLE = {
    "S_ch (both kept)": "ifgo",
    "S_c": "ifg",
    "S_ic": "ig",
    "S_f*, S_h": "f",  # S_f* skip f; S_h skips o: one block either way
}


def compare(contenders, rounds: int, warmup: int) -> dict[str, float]:
    """Median seconds of the thread's CPU time per call of each contender, measured in
    alternating rounds after ``warmup`` calls of each."""
    return median_rounds(contenders, rounds, warmup, clock=time.thread_time)


def block_rows(H: int, blocks: str) -> torch.Tensor:
    """The rows of W_hh (4H, H) that hold the given gate blocks, unit by unit within each
    block."""
    return torch.cat([torch.arange(GATES.index(g) * H, (GATES.index(g) + 1) * H) for g in blocks])


def dense_step(h, W):
    """All four gate blocks of every unit, one product."""

    def run():
        return h @ W.T  # (B, 4H)

    return run


def gathered_by_module(h, W_need, W_skip_modules, b):
    """The needed blocks for everyone; each module's skippable rows for the sequences that
    update it (one product per module)."""
    B, M = b.shape
    rows = W_skip_modules.shape[1]  # n_skip * K
    chosen = [torch.nonzero(b[:, m]).flatten() for m in range(M)]  # sequences per module

    def run():
        needed = h @ W_need.T if W_need is not None else None  # (B, n_need H)
        skipped = h.new_zeros(B, M, rows)
        for m, idx in enumerate(chosen):
            if idx.numel():
                skipped[idx, m] = h[idx] @ W_skip_modules[m].T  # (n_m, n_skip K)
        return needed, skipped

    return run


def gathered_by_sequence(h, W_need, W_skip, b_units, n_skip):
    """The needed blocks for everyone; each sequence's product with the skippable rows of the
    units it updates (one product per sequence)."""
    B, H = b_units.shape
    # W_skip holds the skippable blocks one after the other: unit j's rows are j + H k
    chosen = [
        torch.cat([torch.nonzero(b_units[s]).flatten() + k * H for k in range(n_skip)])
        for s in range(B)
    ]

    def run():
        needed = h @ W_need.T if W_need is not None else None
        skipped = h.new_zeros(B, n_skip * H)
        for s, rows in enumerate(chosen):
            if rows.numel():
                skipped[s, rows] = h[s] @ W_skip[rows].T  # (n_rows,)
        return needed, skipped

    return run


def configurations(sizes, modules, variants):
    """(H, M, variant, strategy, u) to time. One module per unit (M = H) is slow to gather
    (a product per module or per sequence): above H = 256 it is timed for S_ic alone, the
    variant Chapter 6 runs with M = H, at fewer rates."""
    for H in sizes:
        for M in sorted({M for M in modules if H % M == 0} | {H}):
            for variant in variants:
                if M == H and H > 256 and variant != "S_ic":
                    continue
                strategies = ("module", "sequence") if M == H else ("module",)
                rates = RATES_PER_UNIT if M == H and H > 256 else RATES
                for strategy in strategies:
                    for u in rates:
                        yield H, M, variant, strategy, u


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--modules", type=int, nargs="+", default=[2, 8, 32],
                        help="module counts; M = H is always added")  # fmt: skip
    parser.add_argument("--variants", nargs="+", default=list(SKIPPABLE), choices=list(SKIPPABLE))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="one small size, not saved")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.modules, args.repeats = [128], [4], 2
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    load_before = os.getloadavg()
    weights, contenders, rows = {}, {}, {}
    for H, M, variant, strategy, u in configurations(args.sizes, args.modules, args.variants):
        if H not in weights:
            h = torch.randn(args.batch, H, generator=g)
            W = torch.randn(4 * H, H, generator=g) / H**0.5  # torch's gate-stacked layout
            weights[H] = (h, W)
        h, W = weights[H]
        skip = SKIPPABLE[variant]
        need = "".join(gate for gate in GATES if gate not in skip)
        W_need = W[block_rows(H, need)].contiguous() if need else None
        W_skip = W[block_rows(H, skip)].contiguous()  # (n_skip H, H)
        K, n_skip = H // M, len(skip)
        # module m's skippable rows of every block: (M, n_skip K, H)
        W_skip_modules = W_skip.view(n_skip, M, K, H).transpose(0, 1).reshape(M, n_skip * K, H)
        b = (torch.rand(args.batch, M, generator=g) < u).float()
        b_units = b.repeat_interleave(K, dim=1)
        gathered = (
            gathered_by_module(h, W_need, W_skip_modules.contiguous(), b)
            if strategy == "module"
            else gathered_by_sequence(h, W_need, W_skip, b_units, n_skip)
        )
        key = (H, M, variant, strategy, u)
        contenders[key] = {"dense": dense_step(h, W), "gathered": gathered}
        measured = float(b.mean())
        rows[key] = {
            "H": H, "M": M, "variant": variant, "skipped_blocks": skip, "strategy": strategy,
            "batch": args.batch, "update_rate": u, "measured_rate": measured,
            "arithmetic": (len(need) + measured * n_skip) / 4,
            "dense": [], "gathered": [], "ratios": [],
        }  # fmt: skip
    for repeat in range(args.repeats):  # every configuration once per repetition
        for key, pair in contenders.items():
            times = compare(pair, rounds=args.rounds, warmup=2)
            row = rows[key]
            row["dense"].append(times["dense"])
            row["gathered"].append(times["gathered"])
            row["ratios"].append(times["gathered"] / times["dense"])
        print(f"repetition {repeat + 1} of {args.repeats} done", flush=True)
    print(f"{'H':>5} {'M':>5} {'variant':>17} {'gather':>8} {'u':>5} {'arith':>6} "
          f"{'dense':>8} {'ratio: median':>14} {'min':>6} {'max':>6}")  # fmt: skip
    for row in rows.values():
        row["ratio_median"] = statistics.median(row["ratios"])
        row["ratio_min"], row["ratio_max"] = min(row["ratios"]), max(row["ratios"])
        row["dense_median"] = statistics.median(row["dense"])
        print(
            f"{row['H']:5} {row['M']:5} {row['variant']:>17} {row['strategy']:>8} "
            f"{row['update_rate']:5.2f} {row['arithmetic']:6.3f} "
            f"{row['dense_median'] * 1e6:6.0f}us {row['ratio_median']:14.2f} "
            f"{row['ratio_min']:6.2f} {row['ratio_max']:6.2f}"
        )
    load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min): before {load_before}, after {load_after}")
    if not args.quick:
        meta = {"repeats": args.repeats, "rounds": args.rounds, "clock": "thread CPU time",
                "load_average_before": load_before, "load_average_after": load_after}  # fmt: skip
        path = save("sba_gather", list(rows.values()), record=args.record)
        record = json.loads(path.read_text())
        record["machine"].update(meta)  # how the timing was made, and how busy the machine was
        path.write_text(json.dumps(record, indent=2))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
