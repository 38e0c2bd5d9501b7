"""One training step (forward + backward) of the book's LSTM and GRU against nn.LSTM / nn.GRU.

Three contenders per cell, each computing the same function:

* ``per-step``: the cell called on one raw input step at a time, ``cell(x_t, state)``, as the
  equations read;
* ``rnnbook``: ``Recurrent(cell)``, which projects the inputs of all steps in one matrix
  product before the loop (what the chapters use);
* ``torch``: nn.LSTM / nn.GRU, whose loop and gate arithmetic run in fused C++ (cuDNN on a GPU).

``--compile`` adds ``torch.compile`` of the step function (slow to compile; see the chapter).
"""

from __future__ import annotations

import argparse
import time

import torch
from timing import RECORD_HELP, compare, save

from rnnbook.models import GRUCell, LSTMCell, Recurrent

CELLS = {"lstm": LSTMCell, "gru": GRUCell}


def synchronize(x):
    """Wait for the GPU to finish, so that the timer measures the work and not its launch."""
    if x.is_cuda:
        torch.cuda.synchronize()


def per_step(cell, x):
    def run():
        state = cell.initial_state(x.shape[0], dtype=x.dtype, device=x.device)
        outputs = []
        for t in range(x.shape[1]):
            state = cell(x[:, t], state)
            outputs.append(state[0] if isinstance(state, tuple) else state)
        torch.stack(outputs, 1).pow(2).mean().backward()
        synchronize(x)

    return run


def whole_sequence(module, x):
    def run():
        module(x)[0].pow(2).mean().backward()
        synchronize(x)

    return run


def compiled_steps(cell, x):
    step = torch.compile(cell.step)

    def run():
        x_proj = cell.project_inputs(x)
        state = cell.initial_state(x.shape[0], dtype=x.dtype, device=x.device)
        outputs = []
        for t in range(x.shape[1]):
            state = step(x_proj[:, t], state)
            outputs.append(state[0] if isinstance(state, tuple) else state)
        torch.stack(outputs, 1).pow(2).mean().backward()
        synchronize(x)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", action="store_true", help="also time torch.compile")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuDNN for nn.LSTM)")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = []
    print(
        f"{'cell':>5} {'d_h':>4} {'T':>4} {'per-step':>9} {'rnnbook':>9} {'torch':>9} {'ratio':>6}"
    )
    for kind, Cell in CELLS.items():
        for d_h in (64, 128):
            for T in (50, 200):
                x = torch.randn(64, T, 8, device=device)
                cell = Cell(8, d_h).to(device)
                contenders = {
                    "per_step": per_step(cell, x),
                    "rnnbook": whole_sequence(Recurrent(cell), x),
                    "torch": whole_sequence(cell.to_torch(), x),
                }
                row = {"cell": kind, "d_h": d_h, "T": T, "batch": 64, "device": args.device}
                if args.compile:
                    start = time.perf_counter()
                    contenders["compiled"] = compiled_steps(cell, x)
                    contenders["compiled"]()
                    row["compile_seconds"] = time.perf_counter() - start
                times = compare(contenders, rounds=9, warmup=2)
                row.update(times, ratio=times["rnnbook"] / times["torch"])
                rows.append(row)
                print(
                    f"{kind:>5} {d_h:4} {T:4} {times['per_step'] * 1e3:7.1f}ms "
                    f"{times['rnnbook'] * 1e3:7.1f}ms {times['torch'] * 1e3:7.1f}ms "
                    f"{row['ratio']:5.1f}x"
                    + (f"  compiled {times['compiled'] * 1e3:.1f}ms" if args.compile else "")
                )
    name = "lstm_gru" if args.device == "cpu" else f"lstm_gru_{args.device}"
    print(f"wrote {save(name, rows, record=args.record)}")


if __name__ == "__main__":
    main()
