"""Can SBA's decisions save arithmetic? A gathered step against the dense masked step.

An SBA-LSTM decides per sequence and per module, so in a batch every row of the recurrent
matrix is still needed by some sequence. The dense step computes all four gates of every
unit, ``h @ W_hh.T`` (B, 4H), and then keeps what the decisions say (sba-select). The
gathered step computes, for each module, only the sequences that update it:
``h[idx_m] @ W_m.T`` with ``W_m`` the module's 4K rows, written into a zero tensor, so its
arithmetic is u times the dense one. Both are timed side by side on one thread over update
rates 0.05 to 1 (decisions drawn at random with that rate), for a few layer sizes and module
counts; the break-even rate is the largest measured rate at which the gathered step is
faster. Forward only: the backward pass of a gather is a scatter, which costs more.
"""

from __future__ import annotations

import argparse

import torch
from timing import compare, save

RATES = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)


def dense_step(h, W, b_units):
    """All gates of every unit, then the kept units' candidates thrown away."""

    def run():
        gates = h @ W.T  # (B, 4H)
        return gates * b_units.repeat(1, 4)

    return run


def gathered_step(h, W_modules, b):
    """For each module m, the gates of its K units for the sequences that update it only."""
    B, M = b.shape
    rows = W_modules.shape[1]  # 4K
    chosen = [torch.nonzero(b[:, m]).flatten() for m in range(M)]  # sequences per module

    def run():
        gates = h.new_zeros(B, M, rows)
        for m, idx in enumerate(chosen):
            if idx.numel():
                gates[idx, m] = h[idx] @ W_modules[m].T  # (n_m, 4K)
        return gates

    return run


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--modules", type=int, nargs="+", default=[2, 8, 32])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="one small size, not saved")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.modules = [128], [4]
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    rows = []
    print(f"{'H':>5} {'M':>4} {'u':>5} {'dense':>9} {'gathered':>9} {'gathered/dense':>15}")
    for H in args.sizes:
        h = torch.randn(args.batch, H, generator=g)
        W = torch.randn(4 * H, H, generator=g) / H**0.5  # torch's gate-stacked layout
        for M in args.modules:
            K = H // M
            # module m's rows of all four gates: (M, 4K, H)
            W_modules = W.view(4, M, K, H).transpose(0, 1).reshape(M, 4 * K, H).contiguous()
            for u in RATES:
                b = (torch.rand(args.batch, M, generator=g) < u).float()
                b_units = b.repeat_interleave(K, dim=1)
                times = compare(
                    {"dense": dense_step(h, W, b_units), "gathered": gathered_step(h, W_modules, b)}
                )
                row = {"H": H, "M": M, "batch": args.batch, "update_rate": u,
                       "measured_rate": float(b.mean()), **times,
                       "gathered_over_dense": times["gathered"] / times["dense"]}  # fmt: skip
                rows.append(row)
                print(
                    f"{H:5} {M:4} {u:5.2f} {times['dense'] * 1e6:7.0f}us "
                    f"{times['gathered'] * 1e6:7.0f}us {row['gathered_over_dense']:14.2f}x"
                )
    if not args.quick:
        print(f"wrote {save('sba_gather', rows)}")


if __name__ == "__main__":
    main()
