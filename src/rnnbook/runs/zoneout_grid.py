"""Chapter 7's gate-level zoneout grid: Z_ch, Z_f, Z_i and Z_c trained on the PTB slice at
every update probability p of the source's grid.

Each run is the long run of Chapters 6 and 7 (:mod:`rnnbook.runs.wordlm`: the same slice,
streams, windows, initial weights, H = 128, Adam at 3e-3, clip 10, 25 passes of 90 windows)
with the cell :class:`rnnbook.models.zoneout.GateZoneoutLSTMCell` of variant ``ch``, ``f``,
``i`` or ``c`` at update probability ``p`` (no decay). The source's two uses of one trained
network are two columns of the same learning curve:

* ZO+M, the coins kept at test time: ``valid_ppl`` = ``valid_ppl_stochastic`` (coins seeded
  with 10,000 at every evaluation);
* ZO+R, a plain LSTM at test time: ``valid_ppl_plain``;

with Krueger's expectation rule as a third, ``valid_ppl_expectation``, and ``valid_u``, the
share of coins that said "update" in the stochastic pass (p within sampling noise).
Epochs to the best validation pass come from the curve (:func:`best_pass`).

At p = 1 every coin says "update" and each variant computes the LSTM exactly (a product by 1
and a sum with 0 at every gate): its run is Chapter 6's ``ptb-slice-lstm``, step for step
(``tests/test_runs_zoneout_grid.py`` checks it on a short run), so the queue trains it last.
Z_c at p = 0.2 is Chapter 7's ``ptb-slice-zc`` under another name.

``python -m rnnbook.runs zgrid --help`` lists the options.
"""

from __future__ import annotations

import argparse
import math
import sys

import torch

from rnnbook import longrun
from rnnbook.models import LanguageModel
from rnnbook.models.zoneout import GateZoneoutLSTMCell
from rnnbook.runs import wordlm
from rnnbook.runs.penalty_sweep import (
    PASSES,
    PER_PASS,
    publish_curve_only,
    slice_config,
    slice_windows,
    valid_streams,
)
from rnnbook.runtime import seed_everything
from rnnbook.train import CarriedState, token_cross_entropy

VARIANTS = ("ch", "f", "i", "c")
NAMES = {"ch": "Z_ch", "f": "Z_f", "i": "Z_i", "c": "Z_c"}
P_GRID = tuple(round(0.1 * k, 1) for k in range(1, 11))  # 0.1, 0.2, ..., 1.0


def check_cell(variant: str, p: float) -> None:
    """Refuse a variant or update probability outside the grid's, saying what came."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
        raise ValueError(f"p must be an update probability in (0, 1], got {p!r}")


def run_name(variant: str, p: float, seed: int = 0) -> str:
    """``ptb-slice-z<variant>-p<p>[-seed<k>]``, e.g. ``ptb-slice-zch-p0.3``."""
    check_cell(variant, p)
    return f"ptb-slice-z{variant}-p{p:g}" + (f"-seed{seed}" if seed else "")


def build_zoneout_lm(variant: str, p: float) -> LanguageModel:
    """Chapter 7's language model around the gate-level zoneout cell (ZO+M in evaluation)."""
    check_cell(variant, p)
    cell = GateZoneoutLSTMCell(wordlm.HIDDEN, wordlm.HIDDEN, variant=variant, p=float(p))
    return LanguageModel(wordlm.VOCAB, cell, tie_weights=True)


def zgrid_run(
    *,
    variant: str = "c",
    p: float = 0.5,
    seed: int = 0,
    passes: int = PASSES,
    lr: float = 3e-3,
    name: str | None = None,
) -> longrun.LongRun:
    """The long run of gate-level zoneout ``variant`` at update probability ``p``."""
    check_cell(variant, p)

    def build_model() -> LanguageModel:
        seed_everything(seed)  # the chapters' initial weights: torch.manual_seed(seed) first
        return build_zoneout_lm(variant, p)

    text = f"{NAMES[variant]}, p = {p:g}, evaluated with coins (ZO+M)"
    config = slice_config(text, f"z{variant}", seed, passes, lr)
    config["p"] = float(p)
    return longrun.LongRun(
        name=name or run_name(variant, p, seed),
        config=config,
        build_model=build_model,
        batch=lambda step: slice_windows()(step),
        loss_fn=CarriedState(token_cross_entropy),
        evaluate=lambda m: wordlm.evaluate_word_lm(m, valid_streams()),
        optimizer=lambda parameters: torch.optim.Adam(parameters, lr=lr),
        steps=passes * PER_PASS,
        eval_every=PER_PASS,
        clip_mode="norm",
        clip_at=wordlm.CLIP,
        train_column="train_ppl",
        train_unit=math.exp,
        recent=PER_PASS,
    )


def grid(p_values=P_GRID, variants=VARIANTS, seed: int = 0) -> list[dict]:
    """The grid's runs as keyword arguments of :func:`zgrid_run`, p by p, then variant."""
    return [dict(variant=v, p=p, seed=seed) for p in p_values for v in variants]


def best_pass(rows: list[dict], column: str = "valid_ppl") -> tuple[float, int]:
    """``(best value, pass)`` of a learning curve's ``column``: the lowest value after
    training (the untrained row 0 left out) and the pass (1, 2, ...) that reached it, the
    first such pass on a tie."""
    trained = [(row[column], k) for k, row in enumerate(rows) if k > 0 and row.get(column)]
    if not trained:
        raise ValueError(f"the curve has no trained row with {column!r}")
    value, at = min(trained, key=lambda pair: (pair[0], pair[1]))
    return value, at


# --- the command line ------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    parser = longrun.run_parser(
        "zgrid",
        "Train one of Chapter 7's gate-level zoneout language models on the PTB slice",
        "--variant c --p 0.3 --out-dir runs/ptb-slice-zc-p0.3",
    )
    parser.add_argument("--variant", choices=VARIANTS, default="c")
    parser.add_argument("--p", type=float, required=True, help="the update probability")
    parser.add_argument("--passes", type=int, default=PASSES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--name", help="the run's name (default ptb-slice-z<variant>-p<p>)")
    args = parser.parse_args(argv)
    longrun.check_run_arguments(parser, args, ("passes", "threads"), positive=("lr",))
    try:
        check_cell(args.variant, args.p)
    except ValueError as error:
        parser.error(str(error))
    return args


def main(argv=None) -> int:
    """Exit 0 when the run is published, 1 when it is refused, 2 on a NaN or inf."""
    args = parse_args(argv)
    run = zgrid_run(variant=args.variant, p=args.p, seed=args.seed, passes=args.passes,
                    lr=args.lr, name=args.name)  # fmt: skip
    return publish_curve_only(
        run, args.out_dir, resume=args.resume, threads=args.threads,
        extra=lambda result: {"seed": args.seed},
    )  # fmt: skip


# No book checkpoint yet: the grid's weights stay in the runs' folders, its curves are
# committed (checkpoints/ptb-slice-z<variant>-p<p>.curve.csv).
BOOK_RUNS: dict = {}

if __name__ == "__main__":
    sys.exit(main())
