"""Chapter 10's long runs: the arena's models on its tasks, one checkpoint per model and task.

Every run is :func:`rnnbook.arena.harness.long_run`: Adam at 1e-3, batches of 128, the same
number of updates for every model of a task, the data of step ``t`` from the seed
``seed * 10**9 + t``. ``python -m rnnbook.runs arena --task memory --models lstm dnc`` trains
the named models one after the other, each in ``<out-dir>/<checkpoint name>``, and writes
their checkpoints; ``--resume`` continues runs that were stopped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rnnbook import longrun
from rnnbook.arena import baselines, harness, zoo
from rnnbook.arena.tasks import (
    AddingTask,
    MemoryTask,
    PendulumAnglesTask,
    PendulumTask,
    RecallTask,
)

# The book's runs: task -> (the task, {model: updates}). Every model of a task sees the same
# batches in the same order, and every model has the same budget of updates except the NTM and
# the DNC on the memory task: on a CPU a step of theirs costs 15-30 times an LSTM's, so they
# stop at half the budget, and the chapter compares every model at that point too (the
# learning curves are evaluated every 250 updates).
MEMORY_MODELS = (
    "srn",
    "lstm",
    "lstm-scalar",
    "gru",
    "cwrnn",
    "urnn",
    "urnn-frozen",
    "lmu",
    "transformer",
    "recurrent-transformer",
)
PENDULUM_MODELS = ("mlp", "lstm", "gru", "transformer", "recurrent-transformer")
# without the velocities: the same models, and a network that sees the previous step too, to
# separate memory from the budget
ANGLES_MODELS = ("mlp", "mlp-2", "lstm", "gru", "transformer", "recurrent-transformer")
# how the copying loss grows with T: the models that solve the copying task at T = 100, and the
# LSTM, at T = 50 and T = 200 with the same budget (kept as learning curves only: CURVE_ONLY)
LENGTH_MODELS = ("lstm", "urnn", "urnn-frozen", "transformer")
LENGTHS = (50, 200)
BOOK_TASKS = {
    "memory": (
        MemoryTask(T=100),
        {**{model: 1000 for model in MEMORY_MODELS}, "ntm": 500, "dnc": 500},
    ),
    **{f"memory{T}": (MemoryTask(T=T), {}) for T in LENGTHS},
    "adding": (AddingTask(T=200), {model: 1000 for model in ("lstm", "gru", "urnn", "lmu")}),
    "recall": (
        RecallTask(T=100, D=20),
        {model: 1000 for model in ("srn", "lstm", "gru", "urnn", "lmu", "transformer")},
    ),
    "pendulum": (PendulumTask(), {model: 1000 for model in PENDULUM_MODELS}),
    # the velocities hidden, the next recorded step as the target (the thesis's)
    "pendulum-angles": (PendulumAnglesTask(), {model: 1000 for model in ANGLES_MODELS}),
}
EVAL_EVERY = 250
# The chrono-initialised LSTM at the orthogonal RNNs' state size, 128 units (73k parameters),
# beside rnnbook.arena.baselines' lstm-chrono and lstm-chrono-64. It is registered here rather
# than in that module because the committed checkpoints of the networks without memory record
# a hash of that module's code, which a new entry there would change.
zoo.MODELS.setdefault(
    "lstm-chrono-128",
    zoo.Entry("LSTM-128, chrono init", "gates", lambda task: baselines._lstm_chrono(task, 128)),
)

# Runs the book keeps only as a learning curve (checkpoints/<run name>.curve.csv), without a
# checkpoint: on the copying task the arena's LSTM with the chrono initialisation, and LSTMs of
# 64 units (20k parameters, the solvers' parameter count) and of 128 units (73k, the orthogonal
# RNNs' state size) with the same initialisation; the runs of LENGTH_MODELS at the other lengths.
# The command line trains them as it trains the others (`--models lstm-chrono`); a task without
# checkpointed runs trains its curve-only runs by default.
CURVE_ONLY = {
    "memory": {"lstm-chrono": 1000, "lstm-chrono-64": 1000, "lstm-chrono-128": 1000},
    **{f"memory{T}": {model: 1000 for model in LENGTH_MODELS} for T in LENGTHS},
}


def book_run(task_name: str, model: str, seed: int = 0) -> longrun.LongRun:
    task, budgets = BOOK_TASKS[task_name]
    steps = {**budgets, **CURVE_ONLY.get(task_name, {})}[model]
    return harness.long_run(model, task, steps=steps, seed=seed, eval_every=EVAL_EVERY)


# The seed study: every run of BOOK_TASKS but the NTM's and the DNC's (20-35 minutes each on a
# CPU) trained again with seeds 1 and 2 (other initial weights, other batches: step t draws
# from seed * 10**9 + t) for the same budget. Of those runs only the learning curves are kept
# (checkpoints/<run name>.curve.csv, the run name ending in -seed1 or -seed2); the chapter
# reads their last rows beside seed 0's. Runs added after the chapter's review (the gated RNNs
# and the Transformers on the pendulum without velocities) are single runs where their seeds did
# not fit that work's CPU budget: SINGLE_RUNS lists them per task.
SEEDS = (0, 1, 2)
SINGLE_RUNS = {
    "memory": ("ntm", "dnc"),
    "pendulum-angles": ("lstm", "gru", "transformer", "recurrent-transformer"),
}
SEED_STUDY = {
    name: tuple(model for model in budgets if model not in SINGLE_RUNS.get(name, ()))
    for name, (_, budgets) in BOOK_TASKS.items()
}


def curve_name(task_name: str, model: str, seed: int) -> str:
    """The file stem of the book run of ``model`` on ``task_name`` with ``seed``."""
    return harness.run_name(model, BOOK_TASKS[task_name][0], seed)


BOOK_RUNS = {
    harness.run_name(model, task): (lambda t=name, m=model: book_run(t, m))
    for name, (task, budgets) in BOOK_TASKS.items()
    for model in budgets
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m rnnbook.runs arena",
        description="Train the arena's models on one of Chapter 10's tasks with the book's "
        "budget and write their checkpoints (into RNNBOOK_CHECKPOINTS if set, else "
        "checkpoints/).",
        epilog="Example: python -m rnnbook.runs arena --task memory --models lstm urnn "
        "--out-dir runs/arena",
    )
    parser.add_argument("--task", required=True, choices=sorted(BOOK_TASKS))
    parser.add_argument(
        "--models", nargs="+", help="models to train (default: the book's models of the task)"
    )
    parser.add_argument("--out-dir", type=Path, required=True, help="one folder per run in it")
    parser.add_argument("--seed", type=int, default=0, help="weights and data (book: 0)")
    parser.add_argument("--resume", action="store_true", help="continue stopped runs")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)
    longrun.check_run_arguments(parser, args, ("threads",), ())
    models = [*BOOK_TASKS[args.task][1], *CURVE_ONLY.get(args.task, {})]
    args.models = args.models or list(BOOK_TASKS[args.task][1] or CURVE_ONLY[args.task])
    unknown = [m for m in args.models if m not in models]
    if unknown:
        parser.error(f"the book's {args.task} runs are {list(models)}; got {unknown}")
    return args


def main(argv=None) -> int:
    """Exit 0 when every checkpoint is written, 1 when a run is refused, 2 on a NaN or inf."""
    args = parse_args(argv)
    for model in args.models:
        run = book_run(args.task, model, args.seed)
        code = longrun.run_and_publish(
            run,
            args.out_dir / run.name,
            resume=args.resume,
            threads=args.threads,
            extra=lambda result, model=model: {"label": zoo.entry_of(model).label},
        )
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
