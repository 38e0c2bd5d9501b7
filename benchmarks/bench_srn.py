"""One training step (forward + backward) of rnnbook's SRN against torch.nn.RNN.

The SRN loops over time in Python, one small matrix product per step; nn.RNN runs the
same recurrence in C++ (cuDNN on a GPU). The ratio is what the readable loop costs.
"""

from __future__ import annotations

import argparse

import torch
from timing import RECORD_HELP, compare, save

from rnnbook.models import SRN


def step(model, x):
    """A forward and backward pass; both models return the hidden states first or second."""

    def run():
        output = model(x)
        hidden = output[1] if isinstance(model, SRN) else output[0]  # (B, T, d_h) either way
        hidden.pow(2).mean().backward()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = []
    print(f"{'d_h':>5} {'T':>5} {'rnnbook SRN':>12} {'nn.RNN':>10} {'ratio':>7}")
    for d_h in (32, 128):
        for T in (50, 200):
            x = torch.randn(64, T, 8)
            ours = SRN(8, d_h, 1)
            theirs = ours.to_torch()
            times = compare(
                {
                    "rnnbook": step(ours, x),
                    "torch": step(theirs, x),
                }
            )
            ratio = times["rnnbook"] / times["torch"]
            rows.append({"d_h": d_h, "T": T, "batch": 64, **times, "ratio": ratio})
            print(
                f"{d_h:5} {T:5} {times['rnnbook'] * 1e3:10.2f}ms {times['torch'] * 1e3:8.2f}ms "
                f"{ratio:6.1f}x"
            )
    print(f"wrote {save('srn', rows, record=args.record)}")


if __name__ == "__main__":
    main()
