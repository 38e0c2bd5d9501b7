"""The copy task's long runs: the NTM of Chapter 3 and its LSTM baseline, one recipe for both.

Recipe (B) of Chapter 3 (Collier & Beel 2018): Adam at ``lr`` (1e-3), batches of 32, gradient
clipping to global norm 50, lengths L ~ U{1..20} with one length per batch. The batch of step
``t`` is ``copy_task(batch, (1, max_length), generator=seed * 10**9 + t)``: the data depend on
the run's seed and the step alone, so a resumed run sees what an uninterrupted one saw.

Every ``eval_every`` steps the model is tested on fixed batches of 64 sequences at
L = 10, 20, 30, 50, 100 and 120 (generator 7,000,000 + L, the same for every seed): bit
errors per sequence and the cost in bits per sequence, the learning curve's columns.

The command line (``python -m rnnbook.runs copy --help``) trains either model into a run
folder and writes its checkpoint; Chapter 3 calls :func:`ntm_run` and :func:`lstm_run`
through :func:`rnnbook.longrun.train_or_load`.
"""

from __future__ import annotations

import argparse
import sys

import torch

from rnnbook import longrun
from rnnbook.data.synthetic import copy_task
from rnnbook.models.lstm import StackedLSTM
from rnnbook.models.ntm import NTM, bit_errors_per_sequence, bits_per_sequence, copy_loss
from rnnbook.runtime import seed_everything

WIDTH = 8  # data bits per vector; the input has one more channel, the delimiter
MIN_LENGTH = 1
GRAD_CLIP_NORM = 50.0
OUTPUT_CLIP = 20.0  # the NTM cell's clip of its interface vector and its logits
TRAIN_SEED_STRIDE = 10**9  # the batch of step t is drawn with seed * 10**9 + t
EVAL_LENGTHS = (10, 20, 30, 50, 100, 120)
EVAL_BATCH = 64
EVAL_SEED_BASE = 7_000_000  # the test batch at length L is drawn with 7,000,000 + L
SOLVED_LENGTH = 20
RECENT = 100  # the stop rule's window of training steps
DATA = f"copy_task(batch, (1, max_length), generator=seed * {TRAIN_SEED_STRIDE} + step)"


def train_batch(step: int, *, seed: int, batch: int = 32, max_length: int = 20, device="cpu"):
    """The training batch of ``step``: ``(x, y)`` from the generator ``seed * 10**9 + step``
    (``seed`` is the run's data seed)."""
    x, y = copy_task(
        batch, (MIN_LENGTH, max_length), width=WIDTH, generator=seed * TRAIN_SEED_STRIDE + step
    )
    return x.to(device), y.to(device)


def eval_batch(L: int):
    """The fixed test batch of length ``L``: 64 sequences, generator 7,000,000 + L."""
    return copy_task(EVAL_BATCH, L, width=WIDTH, generator=EVAL_SEED_BASE + L)


def loss_fn(model, batch) -> torch.Tensor:
    """The copy loss (mean binary cross-entropy of the answers, in nats) of either model."""
    x, y = batch
    return copy_loss(model(x)[0], y)


def evaluator(device="cpu"):
    """``evaluate(model)``: bit errors and cost in bits per sequence on the fixed test batches."""
    batches = {L: eval_batch(L) for L in EVAL_LENGTHS}

    def evaluate(model) -> dict[str, float]:
        errors, costs = {}, {}
        for L, (x, y) in batches.items():
            logits = model(x.to(device))[0].cpu()
            errors[f"bit_errors_L{L}"] = bit_errors_per_sequence(logits, y)
            costs[f"eval_bits_L{L}"] = float(bits_per_sequence(copy_loss(logits, y)))
        return {**errors, **costs}

    return evaluate


def solved_rule(solved_evals: int = 3, solved_cost: float = 0.1):
    """The stop rule "solved on the training lengths", and its description for the config.

    Solved: the L = 20 test batch had no wrong bit at ``solved_evals`` evaluations in a row,
    and the mean training cost of the last 100 steps is below ``solved_cost`` bits per sequence.
    """
    description = (
        f"stop at the first evaluation where the L = {SOLVED_LENGTH} test batch ({EVAL_BATCH} "
        f"sequences, seed {EVAL_SEED_BASE + SOLVED_LENGTH}) has had 0 bit errors per sequence "
        f"at {solved_evals} evaluations in a row and the mean training cost of the last "
        f"{RECENT} steps is below {solved_cost:g} bits per sequence"
    )

    def rule(rows: list[dict], recent: list[float]) -> str | None:
        streak = 0
        for row in reversed(rows):
            if row.get(f"bit_errors_L{SOLVED_LENGTH}") != 0:
                break
            streak += 1
        cost = sum(recent) / len(recent) if recent else float("inf")
        if streak >= solved_evals and len(recent) == RECENT and cost < solved_cost:
            return (
                f"solved: L = {SOLVED_LENGTH} error-free at {streak} evaluations in a row, "
                f"training cost of the last {RECENT} steps {cost:.4f} bits per sequence"
            )
        return None

    return rule, description


def ntm_run(
    *,
    seed: int = 0,
    steps: int = 31_250,
    batch: int = 32,
    lr: float = 1e-3,
    N: int = 128,
    M: int = 20,
    controller: int = 100,
    max_length: int = 20,
    eval_every: int = 250,
    stop_when_solved: bool = False,
    solved_evals: int = 3,
    solved_cost: float = 0.1,
    device="cpu",
    name: str = "ntm-copy",
) -> longrun.LongRun:
    """Chapter 3's NTM: memory N x M (128 x 20, constant 1e-6), one read and one write head,
    shifts {-1, 0, +1}, an LSTM controller of 100 units (63,136 parameters at these sizes)."""
    rule, description = solved_rule(solved_evals, solved_cost) if stop_when_solved else (None, None)

    def build_model() -> NTM:
        seed_everything(seed)
        model = NTM(
            WIDTH + 1,
            WIDTH,
            N=N,
            M=M,
            controller="lstm",
            d_ctrl=controller,
            n_read=1,
            n_write=1,
            shift=1,
            mem_init="constant",
            clip=OUTPUT_CLIP,
        )
        return model.to(device)

    config = {
        "task": "copy",
        "recipe": "B (Collier & Beel 2018), spec ntm §5.3",
        "width": WIDTH,
        "min_length": MIN_LENGTH,
        "max_length": max_length,
        "N": N,
        "M": M,
        "controller": "lstm",
        "d_ctrl": controller,
        "n_read": 1,
        "n_write": 1,
        "shift": 1,
        "mem_init": "constant",
        "output_clip": OUTPUT_CLIP,
        "optimizer": "adam",
        "lr": lr,
        "batch": batch,
        "grad_clip_norm": GRAD_CLIP_NORM,
        "seed": seed,
        "data": DATA,
        "stop_rule": description,
    }
    return _copy_run(
        name, config, build_model, seed, steps, batch, lr, max_length, eval_every, rule, device
    )


def lstm_run(
    *,
    seed: int = 0,
    steps: int = 31_250,
    batch: int = 32,
    lr: float = 1e-3,
    hidden: int = 256,
    layers: int = 3,
    max_length: int = 20,
    eval_every: int = 250,
    data_seed: int | None = None,
    device="cpu",
    name: str = "lstm-copy",
) -> longrun.LongRun:
    """The LSTM baseline: ``layers`` stacked ``nn.LSTM`` layers of ``hidden`` units and a linear
    read-out (the paper's 3 x 256 by default; the book's checkpoint has 3 x 128). It has a
    fixed budget and no stop rule: it is not expected to solve the task.

    ``data_seed`` (default: ``seed``) chooses the stream of training batches apart from the
    weights: with the NTM's seed the baseline learns from exactly the NTM's batches.
    """

    def build_model() -> StackedLSTM:
        seed_everything(seed)
        return StackedLSTM(WIDTH + 1, WIDTH, hidden=hidden, layers=layers).to(device)

    config = {
        "task": "copy",
        "recipe": "B (Collier & Beel 2018), spec ntm §5.3, for the LSTM baseline",
        "width": WIDTH,
        "min_length": MIN_LENGTH,
        "max_length": max_length,
        "model": "nn.LSTM + linear read-out",
        "hidden": hidden,
        "layers": layers,
        "optimizer": "adam",
        "lr": lr,
        "batch": batch,
        "grad_clip_norm": GRAD_CLIP_NORM,
        "seed": seed,
        "data": DATA,
        "stop_rule": None,
    }
    if data_seed is not None and data_seed != seed:
        config["data_seed"] = data_seed
        config["data"] = DATA.replace("seed *", "data_seed *")
    data = seed if data_seed is None else data_seed
    return _copy_run(
        name, config, build_model, data, steps, batch, lr, max_length, eval_every, None, device
    )


def _copy_run(
    name, config, build_model, seed, steps, batch, lr, max_length, eval_every, rule, device
) -> longrun.LongRun:
    return longrun.LongRun(
        name=name,
        config=config,
        build_model=build_model,
        batch=lambda step: train_batch(
            step, seed=seed, batch=batch, max_length=max_length, device=device
        ),
        loss_fn=loss_fn,
        evaluate=evaluator(device),
        optimizer=lambda parameters: torch.optim.Adam(parameters, lr=lr),
        steps=steps,
        eval_every=eval_every,
        clip_mode="norm",
        clip_at=GRAD_CLIP_NORM,
        train_column="train_bits",
        train_unit=lambda loss: float(bits_per_sequence(loss)),
        stop_rule=rule,
        recent=RECENT,
    )


# --- the runs behind the book's checkpoints ---------------------------------------------------

# Chapter 3 loads these (quick profile) or retrains them (full); tests/test_book_checkpoints.py
# checks each committed checkpoint against its run: config, code and recorded results.
# Each takes the keyword ``device`` (default "cpu"); the command that retrains it is beside it.
BOOK_RUNS = {
    "ntm-copy": lambda **device: ntm_run(seed=2, steps=31_250, **device),
    # the LSTM learns from the NTM's batches (data seed 2) for as many steps; 3 x 128: 1.35 MB
    "lstm-copy": lambda **device: lstm_run(hidden=128, steps=31_250, data_seed=2, **device),
}
BOOK_COMMANDS = {
    "ntm-copy": "python -m rnnbook.runs copy --model ntm --seed 2 --out-dir runs/ntm-copy",
    "lstm-copy": "python -m rnnbook.runs copy --model lstm --hidden 128 --data-seed 2 "
    "--out-dir runs/lstm-copy",
}


# --- the command line ------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    parser = longrun.run_parser(
        "copy",
        "Train Chapter 3's NTM or its LSTM baseline on the copy task",
        "--model ntm --seed 2 --out-dir runs/ntm-copy",
    )
    parser.add_argument("--model", required=True, choices=["ntm", "lstm"])
    parser.add_argument("--steps", type=int, default=31_250, help="the most steps to train")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-length", type=int, default=20, help="train on L ~ U{1..this}")
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--name", help="checkpoint name (default ntm-copy or lstm-copy)")
    ntm = parser.add_argument_group("the NTM")
    ntm.add_argument("--N", type=int, default=128, help="memory rows")
    ntm.add_argument("--M", type=int, default=20, help="memory row width")
    ntm.add_argument("--controller", type=int, default=100, help="LSTM controller units")
    ntm.add_argument("--stop-when-solved", action="store_true")
    ntm.add_argument("--solved-evals", type=int, default=3, help="evaluations in a row")
    ntm.add_argument("--solved-cost", type=float, default=0.1, help="bits per sequence")
    lstm = parser.add_argument_group("the LSTM baseline")
    lstm.add_argument("--hidden", type=int, default=256, help="units per layer")
    lstm.add_argument("--layers", type=int, default=3, help="stacked layers")
    lstm.add_argument("--data-seed", type=int, help="the batches' seed (default: --seed)")
    args = parser.parse_args(argv)
    whole = ("steps", "batch", "max_length", "eval_every", "threads", "N", "M", "controller")
    longrun.check_run_arguments(parser, args, (*whole, "hidden", "layers", "solved_evals"), ("lr",))
    return args


def run_from_args(args: argparse.Namespace) -> longrun.LongRun:
    common = dict(
        seed=args.seed,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        max_length=args.max_length,
        eval_every=args.eval_every,
    )
    if args.name:
        common["name"] = args.name
    if args.model == "ntm":
        return ntm_run(
            **common,
            N=args.N,
            M=args.M,
            controller=args.controller,
            stop_when_solved=args.stop_when_solved,
            solved_evals=args.solved_evals,
            solved_cost=args.solved_cost,
        )
    return lstm_run(**common, hidden=args.hidden, layers=args.layers, data_seed=args.data_seed)


def main(argv=None) -> int:
    """Exit 0 when the checkpoint is written, 1 when the run is refused, 2 on a NaN or inf."""
    args = parse_args(argv)
    run = run_from_args(args)

    def extra(result) -> dict:
        final = result.rows[-1]
        return {
            "seed": args.seed,
            "solved": result.stopped is not None,
            "bit_errors_per_sequence": {str(L): final[f"bit_errors_L{L}"] for L in EVAL_LENGTHS},
            "eval": f"{EVAL_BATCH} sequences per length, generator {EVAL_SEED_BASE} + L",
        }

    return longrun.run_and_publish(
        run, args.out_dir, resume=args.resume, threads=args.threads, extra=extra
    )


if __name__ == "__main__":
    sys.exit(main())
