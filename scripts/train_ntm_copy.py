"""Train the NTM on the copy task, recipe (B) of spec ntm §5.3; write the checkpoint "ntm-copy".

The model is the book's copy configuration: ``NTM(9, 8)``, an LSTM controller of 100 units,
one read and one write head, shift range 1, memory 128 x 20 initialised to the constant 1e-6
(63,136 parameters). Training uses Adam (lr 1e-3), batch 32, gradient clipping to global
norm 50 and lengths L ~ U{1..20}, one length per batch (``copy_task``), for up to 31,250 steps
(10^6 sequences). Each step is one call of ``rnnbook.train.fit``'s loop, so its NaN guard
stops the run before the optimizer uses a non-finite loss or gradient.

Every ``--eval-every`` steps the script

* evaluates the bit errors per sequence at L = 10, 20, 30, 50, 100 and 120 (and the cost in
  bits at each length) on fixed seeded test batches of 64 sequences (seed 7,000,000 + L,
  the same for every training seed);
* appends a row to ``<out-dir>/learning_curve.csv``: the step, the wall seconds so far, the
  mean training cost in bits per sequence since the previous row, the gradient norms and the
  evaluation;
* overwrites a resumable snapshot ``<out-dir>/snapshot.pt`` (model, Adam state, step, the
  stop rule's state), so a crash or a kill loses at most ``--eval-every`` steps; ``--resume``
  continues from it (or starts afresh when there is none yet) and gives the same weights as
  an uninterrupted run.

With ``--stop-when-solved`` it stops at the first evaluation where the L = 20 test batch has
had 0 bit errors per sequence at 3 evaluations in a row and the training cost of the last 100
steps is below 0.1 bits per sequence. At the end it writes ``checkpoints/ntm-copy.pt`` and
``.json`` with ``rnnbook.checkpoints.save_checkpoint`` (into ``RNNBOOK_CHECKPOINTS`` if set),
reloads them with ``load_checkpoint`` as a check, and copies the record to
``<out-dir>/summary.json``. The checkpoint's config is :func:`copy_config`: the chapter must
pass the same dict to ``train_or_load("ntm-copy", ...)``.

Determinism: the weights are drawn after ``seed_everything(seed)``; the training batch of
step t comes from its own generator seeded with ``seed * 10**9 + t``, so a resumed run sees
the same data. On one machine with one torch thread the run is bitwise reproducible.

Usage (from the repository root):

    .venv/bin/python scripts/train_ntm_copy.py --stop-when-solved --out-dir runs/ntm-copy
    .venv/bin/python scripts/train_ntm_copy.py --resume --stop-when-solved --out-dir runs/ntm-copy
    # a smoke test that leaves checkpoints/ alone:
    RNNBOOK_CHECKPOINTS=runs/smoke-ck .venv/bin/python scripts/train_ntm_copy.py --N 32 --M 8 \\
        --controller 64 --max-length 5 --steps 200 --eval-every 50 --out-dir runs/smoke
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import torch

from rnnbook.checkpoints import load_checkpoint, model_code_sha256, save_checkpoint
from rnnbook.data.synthetic import copy_task
from rnnbook.models.ntm import NTM, bit_errors_per_sequence, bits_per_sequence, copy_loss
from rnnbook.runtime import seed_everything
from rnnbook.train import fit

NAME = "ntm-copy"
WIDTH = 8  # data bits per vector; the input has one more channel, the delimiter
GRAD_CLIP_NORM = 50.0
OUTPUT_CLIP = 20.0  # NTMCell's clip of xi_t and of the logits
MIN_LENGTH = 1
TRAIN_SEED_STRIDE = 10**9  # the batch of step t is drawn with seed * 10**9 + t
EVAL_LENGTHS = (10, 20, 30, 50, 100, 120)
EVAL_BATCH = 64
EVAL_SEED_BASE = 7_000_000  # the test batch at length L is drawn with 7,000,000 + L
SOLVED_LENGTH = 20
RECENT = 100  # the stop rule's window of training steps
ROOT = Path(__file__).resolve().parent.parent

CSV_COLUMNS = (
    ["step", "seconds", "train_bits", "grad_norm_mean", "grad_norm_max", "sec_per_step"]
    + [f"bit_errors_L{L}" for L in EVAL_LENGTHS]
    + [f"eval_bits_L{L}" for L in EVAL_LENGTHS]
    + ["eval_seconds"]
)
# the arguments that determine the weights: a snapshot made with others is not resumed
WEIGHT_SETTINGS = ("seed", "batch", "lr", "N", "M", "controller", "max_length", "recipe")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recipe", default="collier", choices=["collier"], help="spec §5.3 (B)")
    parser.add_argument("--steps", type=int, default=31_250, help="the most steps to train")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--N", type=int, default=128, help="memory rows")
    parser.add_argument("--M", type=int, default=20, help="memory row width")
    parser.add_argument("--controller", type=int, default=100, help="LSTM controller size")
    parser.add_argument("--max-length", type=int, default=20, help="train on L ~ U{1..this}")
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--stop-when-solved", action="store_true")
    parser.add_argument("--solved-evals", type=int, default=3, help="evaluations in a row")
    parser.add_argument("--solved-cost", type=float, default=0.1, help="bits per sequence")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--out-dir", type=Path, default=Path("runs/ntm-copy"))
    parser.add_argument("--resume", action="store_true", help="continue <out-dir>/snapshot.pt")
    parser.add_argument("--name", default=NAME, help="checkpoint name (the book uses ntm-copy)")
    args = parser.parse_args(argv)
    for name in ("steps", "batch", "N", "M", "controller", "max_length", "eval_every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.threads < 1 or args.solved_evals < 1 or not args.lr > 0:
        parser.error("--threads and --solved-evals must be at least 1 and --lr positive")
    return args


def stop_rule(args) -> str | None:
    if not args.stop_when_solved:
        return None
    return (
        f"stop at the first evaluation (every {args.eval_every} steps) where the L = "
        f"{SOLVED_LENGTH} test batch ({EVAL_BATCH} sequences, seed "
        f"{EVAL_SEED_BASE + SOLVED_LENGTH}) has had 0 bit errors per sequence at "
        f"{args.solved_evals} evaluations in a row and "
        f"the mean training cost of the last {RECENT} steps is below {args.solved_cost:g} bits "
        "per sequence"
    )


def copy_config(args, steps_trained: int) -> dict:
    """Everything that determines the trained weights: the checkpoint's ``config``."""
    return {
        "task": "copy",
        "recipe": "B (Collier & Beel 2018), spec ntm §5.3",
        "width": WIDTH,
        "min_length": MIN_LENGTH,
        "max_length": args.max_length,
        "N": args.N,
        "M": args.M,
        "controller": "lstm",
        "d_ctrl": args.controller,
        "n_read": 1,
        "n_write": 1,
        "shift": 1,
        "mem_init": "constant",
        "output_clip": OUTPUT_CLIP,
        "optimizer": "adam",
        "lr": args.lr,
        "batch": args.batch,
        "grad_clip_norm": GRAD_CLIP_NORM,
        "seed": args.seed,
        "data": f"copy_task(batch, (1, max_length), generator=seed * {TRAIN_SEED_STRIDE} + step)",
        "steps": steps_trained,
        "stop_rule": stop_rule(args),
    }


def build_model(args) -> NTM:
    """The recipe-(B) NTM, its weights drawn from ``seed_everything(args.seed)``."""
    seed_everything(args.seed)
    return NTM(
        WIDTH + 1,
        WIDTH,
        N=args.N,
        M=args.M,
        controller="lstm",
        d_ctrl=args.controller,
        n_read=1,
        n_write=1,
        shift=1,
        mem_init="constant",
        clip=OUTPUT_CLIP,
    )


def train_batch(args, step: int):
    return copy_task(
        args.batch,
        (MIN_LENGTH, args.max_length),
        width=WIDTH,
        generator=args.seed * TRAIN_SEED_STRIDE + step,
    )


def loss_fn(model, batch) -> torch.Tensor:
    x, y = batch
    logits, _, _ = model(x)
    return copy_loss(logits, y)


class Evaluator:
    """Bit errors and cost per sequence on fixed seeded test batches, one per length."""

    def __init__(self):
        self.batches = {
            L: copy_task(EVAL_BATCH, L, width=WIDTH, generator=EVAL_SEED_BASE + L)
            for L in EVAL_LENGTHS
        }

    @torch.no_grad()
    def __call__(self, model) -> dict[str, float]:
        was_training = model.training
        model.eval()
        result = {}
        for L, (x, y) in self.batches.items():
            logits, _, _ = model(x)
            result[f"bit_errors_L{L}"] = bit_errors_per_sequence(logits, y)
            result[f"eval_bits_L{L}"] = float(bits_per_sequence(copy_loss(logits, y)))
        model.train(was_training)
        return result


# --- provenance ---------------------------------------------------------------------------------


def _git(*command: str) -> str:
    try:
        out = subprocess.run(
            ["git", *command], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def portable(path) -> str:
    """A path as the record keeps it: relative to the repository when inside it, otherwise
    only its last part, so that no record names the machine's folders."""
    path = Path(path)
    if not path.is_absolute():
        return str(path)
    if path.resolve().is_relative_to(ROOT):
        return str(path.resolve().relative_to(ROOT))
    return f"<outside the repository>/{path.name}"


def provenance() -> dict:
    """The command, the git commit and what was uncommitted in src/, scripts/ at the start."""
    python = Path(sys.executable)
    if python.is_relative_to(Path.cwd()):
        python = python.relative_to(Path.cwd())
    words = [python, *sys.argv]
    command = " ".join(shlex.quote(portable(a) if Path(a).is_absolute() else str(a)) for a in words)
    uncommitted = _git("status", "--porcelain", "--", "src", "scripts")
    return {
        "command": command,
        "cwd": portable(Path.cwd()),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_uncommitted_src_scripts": uncommitted.splitlines() if uncommitted else [],
        "script_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }


# --- snapshots and the CSV ------------------------------------------------------------------------


def _atomic_save(obj, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def save_snapshot(path: Path, model, optimizer, run: dict) -> None:
    _atomic_save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), **run}, path)


def truncate_csv(path: Path, last_step: int) -> None:
    """Drop rows written after the snapshot (a crash between the row and the snapshot)."""
    if not path.is_file():
        return
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(r["step"]) <= last_step]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def append_csv(path: Path, row: dict) -> None:
    new = not path.is_file()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow({k: _fmt(row.get(k)) for k in CSV_COLUMNS})
        f.flush()
        os.fsync(f.fileno())


def _fmt(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def log(message: str) -> None:
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {message}", flush=True)


def describe(row: dict) -> str:
    errors = " ".join(f"{L}:{row[f'bit_errors_L{L}']:.3g}" for L in EVAL_LENGTHS)
    train = "  n/a " if row.get("train_bits") is None else f"{row['train_bits']:6.2f}"
    per_step = "" if row.get("sec_per_step") is None else f", {row['sec_per_step']:.3f} s/step"
    return (
        f"step {row['step']:6d}  {row['seconds']:8.0f} s{per_step}  train {train} bits/seq  "
        f"bit errors/seq by L {errors}"
    )


# --- the run ------------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    out_dir = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, snapshot_path = out_dir / "learning_curve.csv", out_dir / "snapshot.pt"
    settings = {k: getattr(args, k) for k in WEIGHT_SETTINGS}

    model = build_model(args)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    n_parameters = sum(p.numel() for p in model.parameters())
    evaluate = Evaluator()
    origin = provenance()

    if args.resume and not snapshot_path.is_file():
        log(f"--resume: no snapshot {snapshot_path} yet, so the run starts from step 0")
        csv_path.unlink(missing_ok=True)
    if args.resume and snapshot_path.is_file():
        snap = torch.load(snapshot_path, map_location="cpu", weights_only=True)
        if snap["settings"] != settings:
            log(f"--resume: the snapshot was made with {snap['settings']}, not {settings}")
            return 1
        model.load_state_dict(snap["model"])
        optimizer.load_state_dict(snap["optimizer"])
        run = {k: v for k, v in snap.items() if k not in ("model", "optimizer")}
        run["commands"] = [*run["commands"], origin["command"]]
        truncate_csv(csv_path, run["step"])
        log(f"resumed {snapshot_path} at step {run['step']} ({run['seconds']:.0f} s so far)")
    else:
        if snapshot_path.exists() or csv_path.exists():
            log(f"{out_dir} already holds a run; pass --resume or choose another --out-dir")
            return 1
        run = {
            "settings": settings,
            "step": 0,
            "seconds": 0.0,
            "recent_bits": [],
            "solved_streak": 0,
            "commands": [origin["command"]],
            "provenance": origin,
            "model_code_sha256_at_start": model_code_sha256(model),
        }
    log(
        f"NTM copy, recipe (B): {n_parameters:,} parameters, N={args.N} M={args.M} "
        f"controller={args.controller} batch={args.batch} lr={args.lr:g} L in 1..{args.max_length}"
        f", up to {args.steps:,} steps, seed {args.seed}, {torch.get_num_threads()} thread(s), "
        f"torch {torch.__version__}; git {origin['git_commit'][:12]}; out-dir {out_dir}"
    )

    started = time.perf_counter() - run["seconds"]
    recent = deque(run["recent_bits"], maxlen=RECENT)
    if run["step"] == 0 and not csv_path.exists():  # the untrained model: chance level
        t0 = time.perf_counter()
        row = {"step": 0, "seconds": 0.0, **evaluate(model)}
        row["eval_seconds"] = time.perf_counter() - t0
        append_csv(csv_path, row)
        log(describe(row))
        save_snapshot(snapshot_path, model, optimizer, run)

    solved, failure = False, None
    while run["step"] < args.steps and not solved:
        start_step = run["step"]
        chunk = min(args.eval_every - start_step % args.eval_every, args.steps - start_step)
        t0 = time.perf_counter()
        history = fit(
            model,
            lambda i, s=start_step: train_batch(args, s + i),
            loss_fn,
            steps=chunk,
            optimizer=optimizer,
            clip_mode="norm",
            clip_at=GRAD_CLIP_NORM,
            on_nonfinite="stop",
            progress=False,
        )
        train_seconds = time.perf_counter() - t0
        if history.stopped:  # the NaN guard: the optimizer never took the bad step
            failure = f"{history.stopped} of the chunk starting at step {start_step}"
            failure += f" (global step {start_step + history.steps})"
            log(f"NON-FINITE: {failure}; the last good snapshot is {snapshot_path}")
            break
        bits = [float(bits_per_sequence(loss)) for loss in history.loss]
        recent.extend(bits)
        run["step"] = start_step + history.steps
        t1 = time.perf_counter()
        metrics = evaluate(model)
        eval_seconds = time.perf_counter() - t1
        run["seconds"] = time.perf_counter() - started
        row = {
            "step": run["step"],
            "seconds": run["seconds"],
            "train_bits": sum(bits) / len(bits),
            "grad_norm_mean": sum(history.grad_norm) / len(history.grad_norm),
            "grad_norm_max": max(history.grad_norm),
            "sec_per_step": train_seconds / history.steps,
            **metrics,
            "eval_seconds": eval_seconds,
        }
        append_csv(csv_path, row)
        log(describe(row))
        if metrics[f"bit_errors_L{SOLVED_LENGTH}"] == 0:
            run["solved_streak"] += 1
        else:
            run["solved_streak"] = 0
        recent_cost = sum(recent) / len(recent)
        if (
            args.stop_when_solved
            and run["solved_streak"] >= args.solved_evals
            and len(recent) == RECENT
            and recent_cost < args.solved_cost
        ):
            solved = True
            log(
                f"solved: L = {SOLVED_LENGTH} error-free at {run['solved_streak']} evaluations "
                f"in a row, training cost of the last {RECENT} steps {recent_cost:.4f} "
                "bits/sequence"
            )
        run["recent_bits"] = list(recent)
        save_snapshot(snapshot_path, model, optimizer, run)

    if failure is not None:
        return 2
    if run["step"] == 0:
        log("nothing trained")
        return 1

    seconds = time.perf_counter() - started
    extra = {"solved": solved}
    config = copy_config(args, run["step"])
    return finish(model, build_model(args), args, config, run, recent, seconds, extra, out_dir)


def finish(model, fresh, args, config, run, recent, seconds, extra, out_dir) -> int:
    """The end of a training run (this script's and train_lstm_copy.py's): evaluate, write the
    checkpoint with its summary, reload it into ``fresh`` (a new model of the same kind) as a
    check, and copy the record to the out-dir."""
    evaluate = Evaluator()
    final = evaluate(model)
    summary = {
        "steps": run["step"],
        "max_steps": args.steps,
        "sequences": run["step"] * args.batch,
        **extra,
        "seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / run["step"], 4),
        "final_train_bits_last_100_steps": round(sum(recent) / len(recent), 6),
        "bit_errors_per_sequence": {str(L): final[f"bit_errors_L{L}"] for L in EVAL_LENGTHS},
        "eval_bits_per_sequence": {
            str(L): round(final[f"eval_bits_L{L}"], 6) for L in EVAL_LENGTHS
        },
        "eval": f"{EVAL_BATCH} sequences per length, generator {EVAL_SEED_BASE} + L",
        "seed": args.seed,
        "parameters": sum(p.numel() for p in model.parameters()),
        "command": run["commands"][0],
        "commands": run["commands"],
        **{k: v for k, v in run["provenance"].items() if k != "command"},
        "model_code_sha256_at_start": run["model_code_sha256_at_start"],
        "threads": args.threads,
        "torch": torch.__version__,
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
        "learning_curve": portable(out_dir / "learning_curve.csv"),
    }
    record = save_checkpoint(model, args.name, config, summary, seconds)
    load_checkpoint(fresh, args.name, config)
    if not math.isclose(evaluate(fresh)["eval_bits_L20"], final["eval_bits_L20"], rel_tol=1e-6):
        log("the reloaded checkpoint evaluates differently")
        return 1
    (out_dir / "summary.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    log(
        f"wrote checkpoint {args.name!r} (weights {record['weights_sha256'][:12]}…) and "
        f"{out_dir / 'summary.json'}: {run['step']:,} steps, {seconds:.0f} s, bit errors per "
        f"sequence {summary['bit_errors_per_sequence']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
