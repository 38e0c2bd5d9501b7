"""Train the LSTM baseline on the copy task; write the checkpoint "lstm-copy" (spec ntm §5.3).

The baseline of Graves et al. (2014), Table 1: three stacked LSTM layers of 256 units
(``torch.nn.LSTM``, PyTorch's default initialisation) and a linear read-out of the 8 bits,
1,328,136 parameters (the paper counts 1,352,969; its LSTM layout is not fully specified).
It learns from the same data as the NTM of ``train_ntm_copy.py`` and with the same optimizer
recipe (B): Adam (lr 1e-3), batch 32, gradient clipping to global norm 50, lengths
L ~ U{1..20} with the batch of step t drawn from the generator ``seed * 10**9 + t``. (The
paper trained its LSTM with RMSProp at lr 3e-5; the book keeps one recipe for both models.)

The run has a fixed budget, 31,250 steps (10^6 sequences) by default, and no stop rule: the
LSTM is not expected to solve the task. Everything else follows ``train_ntm_copy.py``, whose
helpers it imports: the same evaluation every ``--eval-every`` steps (bit errors and cost per
sequence at L = 10, 20, 30, 50, 100, 120 on the same seeded test batches), the same columns
of ``<out-dir>/learning_curve.csv``, the same resumable ``<out-dir>/snapshot.pt`` and
``--resume``, the NaN guard of ``rnnbook.train.fit``, and at the end
``checkpoints/lstm-copy.pt`` and ``.json`` (into ``RNNBOOK_CHECKPOINTS`` if set), reloaded
as a check, with the record copied to ``<out-dir>/summary.json``. The checkpoint's config
is :func:`lstm_config`; the chapter passes the same dict to ``train_or_load("lstm-copy",
...)``.

Usage (from the repository root; about 0.07 s per step on one CPU thread, 40 minutes):

    .venv/bin/python scripts/train_lstm_copy.py --out-dir runs/lstm-copy
    .venv/bin/python scripts/train_lstm_copy.py --resume --out-dir runs/lstm-copy
    # a smoke test that leaves checkpoints/ alone:
    RNNBOOK_CHECKPOINTS=/tmp/ck .venv/bin/python scripts/train_lstm_copy.py --hidden 32 \\
        --layers 1 --max-length 5 --steps 100 --eval-every 50 --out-dir /tmp/lstm-smoke
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_ntm_copy as ntm  # noqa: E402  (the NTM run's data, evaluation, CSV and snapshots)

from rnnbook.checkpoints import (  # noqa: E402
    model_code_sha256,
)
from rnnbook.models.ntm import bits_per_sequence  # noqa: E402
from rnnbook.runtime import seed_everything  # noqa: E402
from rnnbook.train import fit  # noqa: E402

NAME = "lstm-copy"
# the arguments that determine the weights: a snapshot made with others is not resumed
WEIGHT_SETTINGS = ("seed", "batch", "lr", "hidden", "layers", "max_length")


class CopyLSTM(nn.Module):
    """Stacked ``nn.LSTM`` layers and a linear read-out: logits of every step, (B, T, d_y).

    ``forward(x, state=None, return_internals=False)`` answers like :class:`NTM`: it returns
    ``(logits, state_T, None)``, so the copy task's loss and evaluation serve both models.
    """

    def __init__(self, d_x: int, d_y: int, hidden: int = 256, layers: int = 3):
        super().__init__()
        self.lstm = nn.LSTM(d_x, hidden, num_layers=layers, batch_first=True)
        self.readout = nn.Linear(hidden, d_y)

    def forward(self, x: torch.Tensor, state=None, return_internals: bool = False):
        h, state = self.lstm(x, state)
        return self.readout(h), state, None


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=31_250, help="steps to train")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--hidden", type=int, default=256, help="units per LSTM layer")
    parser.add_argument("--layers", type=int, default=3, help="stacked LSTM layers")
    parser.add_argument("--max-length", type=int, default=20, help="train on L ~ U{1..this}")
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--out-dir", type=Path, default=Path("runs/lstm-copy"))
    parser.add_argument("--resume", action="store_true", help="continue <out-dir>/snapshot.pt")
    parser.add_argument("--name", default=NAME, help="checkpoint name (the book uses lstm-copy)")
    args = parser.parse_args(argv)
    for name in ("steps", "batch", "hidden", "layers", "max_length", "eval_every", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if not args.lr > 0:
        parser.error("--lr must be positive")
    return args


def lstm_config(args, steps_trained: int) -> dict:
    """Everything that determines the trained weights: the checkpoint's ``config``."""
    return {
        "task": "copy",
        "recipe": "B (Collier & Beel 2018), spec ntm §5.3, for the LSTM baseline",
        "width": ntm.WIDTH,
        "min_length": ntm.MIN_LENGTH,
        "max_length": args.max_length,
        "model": "nn.LSTM + linear read-out",
        "hidden": args.hidden,
        "layers": args.layers,
        "optimizer": "adam",
        "lr": args.lr,
        "batch": args.batch,
        "grad_clip_norm": ntm.GRAD_CLIP_NORM,
        "seed": args.seed,
        "data": (
            f"copy_task(batch, (1, max_length), generator=seed * {ntm.TRAIN_SEED_STRIDE} + step)"
        ),
        "steps": steps_trained,
        "stop_rule": None,
    }


def build_model(args) -> CopyLSTM:
    """The baseline, its weights drawn from ``seed_everything(args.seed)``."""
    seed_everything(args.seed)
    return CopyLSTM(ntm.WIDTH + 1, ntm.WIDTH, hidden=args.hidden, layers=args.layers)


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
    evaluate = ntm.Evaluator()
    origin = ntm.provenance()
    origin["train_ntm_copy_sha256"] = origin.pop("script_sha256")  # the imported helpers
    origin["script_sha256"] = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()

    if args.resume and not snapshot_path.is_file():
        ntm.log(f"--resume: no snapshot {snapshot_path} yet, so the run starts from step 0")
        csv_path.unlink(missing_ok=True)
    if args.resume and snapshot_path.is_file():
        snap = torch.load(snapshot_path, map_location="cpu", weights_only=True)
        if snap["settings"] != settings:
            ntm.log(f"--resume: the snapshot was made with {snap['settings']}, not {settings}")
            return 1
        model.load_state_dict(snap["model"])
        optimizer.load_state_dict(snap["optimizer"])
        run = {k: v for k, v in snap.items() if k not in ("model", "optimizer")}
        run["commands"] = [*run["commands"], origin["command"]]
        ntm.truncate_csv(csv_path, run["step"])
        ntm.log(f"resumed {snapshot_path} at step {run['step']} ({run['seconds']:.0f} s so far)")
    else:
        if snapshot_path.exists() or csv_path.exists():
            ntm.log(f"{out_dir} already holds a run; pass --resume or choose another --out-dir")
            return 1
        run = {
            "settings": settings,
            "step": 0,
            "seconds": 0.0,
            "recent_bits": [],
            "commands": [origin["command"]],
            "provenance": origin,
            "model_code_sha256_at_start": model_code_sha256(model),
        }
    ntm.log(
        f"LSTM copy baseline: {n_parameters:,} parameters, {args.layers} x {args.hidden} units, "
        f"batch={args.batch} lr={args.lr:g} L in 1..{args.max_length}, {args.steps:,} steps, "
        f"seed {args.seed}, {torch.get_num_threads()} thread(s), torch {torch.__version__}; "
        f"git {origin['git_commit'][:12]}; out-dir {out_dir}"
    )

    started = time.perf_counter() - run["seconds"]
    recent = list(run["recent_bits"])
    if run["step"] == 0 and not csv_path.exists():  # the untrained model: chance level
        t0 = time.perf_counter()
        row = {"step": 0, "seconds": 0.0, **evaluate(model)}
        row["eval_seconds"] = time.perf_counter() - t0
        ntm.append_csv(csv_path, row)
        ntm.log(ntm.describe(row))
        ntm.save_snapshot(snapshot_path, model, optimizer, run)

    while run["step"] < args.steps:
        start_step = run["step"]
        chunk = min(args.eval_every - start_step % args.eval_every, args.steps - start_step)
        t0 = time.perf_counter()
        history = fit(
            model,
            lambda i, s=start_step: ntm.train_batch(args, s + i),
            ntm.loss_fn,
            steps=chunk,
            optimizer=optimizer,
            clip_mode="norm",
            clip_at=ntm.GRAD_CLIP_NORM,
            on_nonfinite="stop",
            progress=False,
        )
        train_seconds = time.perf_counter() - t0
        if history.stopped:  # the NaN guard: the optimizer never took the bad step
            ntm.log(
                f"NON-FINITE: {history.stopped} of the chunk starting at step {start_step} "
                f"(global step {start_step + history.steps}); the last good snapshot is "
                f"{snapshot_path}"
            )
            return 2
        bits = [float(bits_per_sequence(loss)) for loss in history.loss]
        recent = (recent + bits)[-ntm.RECENT :]
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
        ntm.append_csv(csv_path, row)
        ntm.log(ntm.describe(row))
        run["recent_bits"] = recent
        ntm.save_snapshot(snapshot_path, model, optimizer, run)

    seconds = time.perf_counter() - started
    config = lstm_config(args, run["step"])
    return ntm.finish(model, build_model(args), args, config, run, recent, seconds, {}, out_dir)


if __name__ == "__main__":
    sys.exit(main())
