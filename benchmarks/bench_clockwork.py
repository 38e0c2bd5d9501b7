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
* ``masked``: the same CWRNN computed whole, then masked (skip-update);
* ``products``: the floor under ``sliced``: the multiply-adds of its forward and backward
  pass (:func:`sliced_products`), as plain ``addmm_`` calls on preallocated contiguous
  tensors, with nothing else: no autograd, no tanh, no copies of idle rows, no gathers. The
  forward and the gradients to the states have the model's shapes; each weight gradient is
  one product over all the module's ticks, where the model adds one product per tick (the
  same multiply-adds, fewer and larger products);
* ``dense_products``: the same for the SRN's products (:func:`dense_products`), so that
  ``products / dense_products`` is the BLAS's own time for the sliced arithmetic.

For each pair the ratio is taken in every round (the contenders run one after the other
within a round, so a burst of load slows them alike); the median ratio and its spread
(lowest and highest of the rounds) are reported beside the arithmetic: the multiply-adds of
the sliced model's forward and backward pass relative to the SRN's (``arithmetic``), and the
time ratio over that arithmetic (1.0 would be a model that costs exactly its arithmetic).

The two floors split the time over the arithmetic into three factors, each one a per-round
ratio with its median and spread:

    (sliced / srn) / arithmetic
        = sliced / products                             sliced_over_products: our bookkeeping
        × (products / dense_products) / arithmetic      floor_over_arithmetic: the BLAS itself
        × dense_products / srn                          dense_products_over_srn: the SRN's own

Runs go to ``_build/bench/clockwork.json``; ``--record`` writes the book's record,
``benchmarks/results/clockwork.json`` (on an idle machine only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
from timing import RECORD_HELP, read_record, save

from rnnbook.models import SRN
from rnnbook.models.clockwork import (
    CWRNN,
    _projection_groups,
    _rnn_plan,
    module_runs,
    recurrent_share,
)
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


# --- the floor: the products alone -----------------------------------------------------------
# A product is (part, m, k, n): an (m, k) matrix times a (k, n) one, m·k·n multiply-adds.
# The parts name where it comes from; "readout" is the same in both models and is left out
# of arithmetic(), which counts the recurrence and the input projection only.


def _width(s: slice) -> int:
    return s.stop - s.start


def sliced_products(periods, H: int, L: int, B: int, d_x: int, d_y: int = 1) -> list:
    """The matrix products of one forward and backward pass of the sliced CWRNN (uni mask,
    t0 = 0) as ``step()`` times it, read off the plan the model itself follows
    (``_rnn_plan``, ``_projection_groups``; see ``_ClockedRecurrence``). The input needs no
    gradient (as in ``main``), so there is no product for it."""
    periods = tuple(periods)
    k = H // len(periods)
    steps, blocks, _ = _rnn_plan(periods, k, "uni", L, 0)
    groups = _projection_groups(periods, k, L, 0)
    products = []
    # forward: each group's input projection at its ticks, one product per group
    for rows, ticks_at in groups:
        if ticks_at:
            products.append(("input", len(ticks_at) * B, d_x, _width(rows)))
    # forward: one product per ticking run per step, h_{t-1}[:, S] W[R, S]^T
    for runs in steps:
        for rows, sources, ticks in runs:
            if ticks:
                products.append(("recurrent", B, _width(sources), _width(rows)))
    products += _readout_products(H, L, B, d_y)
    # backward: per step, from the last, δ_t[:, R] W[R, S] added into g[:, S]
    for runs in reversed(steps):
        for rows, sources, ticks in runs:
            if ticks:
                products.append(("grad_h", B, _width(rows), _width(sources)))
    # backward: each module's weight gradient over its ticks (the tick at t = 0 against h0)
    for _, sources, ticks_at in blocks:
        if ticks_at and ticks_at[0] == 0:
            products.append(("grad_W", k, B, _width(sources)))
            ticks_at = ticks_at[1:]
        if ticks_at:
            products.append(("grad_W", k, len(ticks_at) * B, _width(sources)))
    # backward: each group's input weight gradient over its ticks
    for rows, ticks_at in groups:
        if ticks_at:
            products.append(("grad_W_x", _width(rows), len(ticks_at) * B, d_x))
    return products


def dense_products(H: int, L: int, B: int, d_x: int, d_y: int = 1) -> list:
    """The SRN's products for the same pass: the input projection of all steps at once, one
    (B, H)·(H, H) product per step forward and one per step backward, each weight gradient
    as one product over all steps (the layout of :func:`sliced_products`; the book's SRN,
    through autograd, takes the recurrent one step by step), and the same read-out."""
    products = [("input", L * B, d_x, H)]
    products += [("recurrent", B, H, H)] * L
    products += _readout_products(H, L, B, d_y)
    products += [("grad_h", B, H, H)] * L
    products += [("grad_W", H, L * B, H), ("grad_W_x", H, L * B, d_x)]
    return products


def _readout_products(H: int, L: int, B: int, d_y: int) -> list:
    """y = h W_y^T of every step at once, and its two gradients (to the states, to W_y)."""
    return [("readout", L * B, H, d_y), ("readout", L * B, d_y, H), ("readout", d_y, L * B, H)]


def multiply_adds(products, readout: bool = True) -> int:
    """The multiply-adds of a list of products, with or without the read-out's."""
    return sum(m * k * n for part, m, k, n in products if readout or part != "readout")


def run_products(products, seed: int = 0):
    """A callable that performs ``products`` as ``out.addmm_(a, b)`` on preallocated
    contiguous tensors and does nothing else. Every operand is the front of one of three
    random buffers (a, b, out), as large as the largest product needs, so every step reuses
    the same memory (the model writes a new state at each step); small random contents (std
    0.01) keep the sums that the repeated calls add up finite."""
    g = torch.Generator().manual_seed(seed)
    a_buf = 0.01 * torch.randn(max(m * k for _, m, k, n in products), generator=g)
    b_buf = 0.01 * torch.randn(max(k * n for _, m, k, n in products), generator=g)
    out_buf = 0.01 * torch.randn(max(m * n for _, m, k, n in products), generator=g)
    triples = [
        (out_buf[: m * n].view(m, n), a_buf[: m * k].view(m, k), b_buf[: k * n].view(k, n))
        for _, m, k, n in products
    ]

    def run():
        for out, a, b in triples:
            out.addmm_(a, b)

    return run


def interleaved(contenders: dict, rounds: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per call of each contender in every round, contenders one after the other."""
    return rounds_of(contenders, rounds, warmup)


def ratio(times, a: str, b: str, over: float = 1.0) -> dict[str, float]:
    """The per-round ratio a/b (divided by ``over``): median, lowest and highest."""
    r = [x / y / over for x, y in zip(times[a], times[b])]
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
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
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
          f"{'time/arith':>10} {'sliced/dense':>13} {'masked/SRN':>11} "
          f"{'sliced/products':>16} {'floor/arith':>12} {'SRN-floor/SRN':>14}")  # fmt: skip
    rows = []
    load_before = _load()
    for width in args.inputs:
        for H in args.sizes:
            d_x = H if width == "H" else int(width)
            x = torch.randn(args.batch, L, d_x)
            clockwork = CWRNN(d_x, H, 1, PERIODS)
            dense = CWRNN(d_x, H, 1, (1,) * len(PERIODS), connectivity="bi")
            srn = SRN(d_x, H, 1)  # the book's SRN: one dense step per time step
            ours = sliced_products(PERIODS, H, L, args.batch, d_x)
            theirs = dense_products(H, L, args.batch, d_x)
            times = interleaved(
                {
                    "srn": step(srn, x),
                    "dense": step(dense, x),
                    "sliced": step(clockwork, x, mode="sliced"),
                    "masked": step(clockwork, x, mode="masked"),
                    "products": run_products(ours),
                    "dense_products": run_products(theirs),
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
            # the floor: the same multiply-adds as plain products (the read-out included)
            row["products_arithmetic"] = multiply_adds(ours) / multiply_adds(theirs)
            row["products_over_dense_products"] = ratio(times, "products", "dense_products")
            row["floor_over_arithmetic"] = ratio(times, "products", "dense_products", share)
            row["sliced_over_products"] = ratio(times, "sliced", "products")
            row["dense_products_over_srn"] = ratio(times, "dense_products", "srn")
            rows.append(row)
            s = row["sliced_over_srn"]
            print(
                f"{d_x:5} {H:5} {row['srn'] * 1e3:7.1f}ms {s['median']:6.2f}x "
                f"({s['low']:.2f}-{s['high']:.2f}) {share:6.3f} "
                f"{row['time_over_arithmetic']:10.2f} "
                f"{row['sliced_over_dense']['median']:12.2f}x "
                f"{row['masked_over_srn']['median']:10.2f}x "
                f"{row['sliced_over_products']['median']:15.2f}x "
                f"{row['floor_over_arithmetic']['median']:12.2f} "
                f"{row['dense_products_over_srn']['median']:13.2f}x",
                flush=True,
            )
    if args.quick:
        return
    path = save("clockwork", rows, record=args.record)
    result = json.loads(path.read_text())  # the machine, and how loaded it was
    result["machine"]["load"] = {
        "given": args.load,
        "loadavg_before": load_before,
        "loadavg_after": _load(),
    }
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
    if not args.record:
        beside_record(rows)


def beside_record(rows) -> None:
    """Time over arithmetic in the book's record and in this run, side by side."""
    record = read_record("clockwork")
    if record is None:
        return
    recorded = {(row["d_x"], row["H"]): row for row in record["rows"]}
    print("time/arith: the book's record | this run")
    for row in rows:
        old = recorded.get((row["d_x"], row["H"]))
        if old is not None:
            print(f"  d_x = {row['d_x']:4}, H = {row['H']:4}: {old['time_over_arithmetic']:.2f} "
                  f"| {row['time_over_arithmetic']:.2f}")  # fmt: skip


def _load() -> list[float]:
    """The 1, 5 and 15 minute load averages (Unix), for the record."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (OSError, AttributeError):
        return []


if __name__ == "__main__":
    main()
