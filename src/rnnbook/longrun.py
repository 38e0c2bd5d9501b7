"""The long-run trainer: training that takes longer than a chapter, checkpointed and resumable.

A chapter shows converged models by loading a small committed checkpoint in the quick and
the full profile (:func:`train_or_load`); a command line (``python -m rnnbook.runs``) makes
that checkpoint with this trainer, and the paper profile trains it again. A :class:`LongRun`
says what to train: how to build the model, the batch of each step, the loss, the held-out
evaluation that makes the learning curve, the optimizer, the budget and an optional stop
rule. :func:`train` then runs it in chunks of ``eval_every`` steps of
:func:`rnnbook.train.fit`, the book's one training loop, and after each chunk

* evaluates the model and appends a row to ``<out_dir>/learning_curve.csv``;
* overwrites ``<out_dir>/snapshot.pt`` (model, optimizer, step, the rows so far), so that a
  crash or a kill loses at most one chunk and ``resume=True`` continues from it;
* asks the stop rule whether the run is done.

Determinism: the batch of step ``t`` must be a function of ``t`` alone (a generator seeded
with ``t``), and the model's initial weights a function of the run's seed. The snapshot keeps
torch's global generator, so random masks drawn from it in training (dropout, zoneout) go on
where they stopped. Then a resumed run gives the weights of an uninterrupted one, bit for bit,
on the same machine with one thread.

The NaN guard is ``fit``'s: a non-finite loss or gradient stops the chunk before the
optimizer uses it; :func:`train` then raises :class:`rnnbook.train.NonFiniteError` and leaves
the last good snapshot as it was.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from rnnbook import checkpoints
from rnnbook._validate import check_positive_int
from rnnbook.checkpoints import as_json, load_checkpoint, model_code_sha256, save_checkpoint
from rnnbook.paths import checkpoint_dir, project_root
from rnnbook.profiles import Profile
from rnnbook.train import NonFiniteError, fit

CURVE_FILE = "learning_curve.csv"
SNAPSHOT_FILE = "snapshot.pt"
# the curve's columns that are not evaluation metrics (besides the run's train_column)
BOOKKEEPING = ("step", "seconds", "grad_norm_mean", "grad_norm_max", "sec_per_step", "eval_seconds")


class RunError(RuntimeError):
    """A run cannot start or resume as asked (an occupied folder, other settings)."""


@dataclass(frozen=True)
class LongRun:
    """What to train, and how to judge it. Every field but the functions is JSON data.

    Attributes:
        name: the checkpoint's name, unique in the book (``"ntm-copy"``).
        config: everything that determines the trained weights except the number of steps
            (sizes, seeds, optimizer settings, the data recipe): the checkpoint's ``config``
            is ``config`` plus ``"steps"``.
        build_model: ``build_model() -> nn.Module`` draws the initial weights from the seed.
        batch: ``batch(step) -> batch``, a function of the step alone.
        loss_fn: ``loss_fn(model, batch) -> scalar loss``.
        evaluate: ``evaluate(model) -> {column: value}`` on fixed held-out data, run without
            gradients after every chunk: the columns of the learning curve.
        optimizer: ``optimizer(parameters) -> torch.optim.Optimizer``.
        steps: the largest number of optimizer steps.
        eval_every: steps per chunk (between evaluations and snapshots).
        clip_mode, clip_at: gradient clipping, as in :func:`rnnbook.train.fit`.
        train_column: the curve's column of the mean training value since the last row.
        train_unit: turns a training loss into that column's unit (for the copy task, nats
            per step into bits per sequence).
        stop_rule: ``stop_rule(rows, recent) -> reason or None``, asked after each chunk
            with the curve's rows so far and the last ``recent`` training values (in
            ``train_unit``); a reason ends the run.
        recent: how many training values the stop rule and the summary look back on.
        rel_tol: how closely, relatively, the checkpoint must reproduce its recorded
            evaluation on another machine (:func:`reproduce`). Rounding differs between CPUs;
            a model with discrete decisions (SBA) turns a rounding difference into a flipped
            decision now and then, and needs more room than a smooth one.
    """

    name: str
    config: dict
    build_model: Callable[[], nn.Module]
    batch: Callable[[int], object]
    loss_fn: Callable[[nn.Module, object], torch.Tensor]
    evaluate: Callable[[nn.Module], dict[str, float]]
    optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]
    steps: int
    eval_every: int = 250
    clip_mode: str | None = "norm"
    clip_at: float = 1.0
    train_column: str = "train"
    train_unit: Callable[[float], float] = float
    stop_rule: Callable[[list[dict], list[float]], str | None] | None = None
    recent: int = 100
    rel_tol: float = 1e-4

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise ValueError(f"name must be a plain file-name stem, got {self.name!r}")
        check_positive_int(self.steps, "steps")
        check_positive_int(self.eval_every, "eval_every")
        check_positive_int(self.recent, "recent")
        if not (isinstance(self.rel_tol, float) and 0 < self.rel_tol < 1):
            raise ValueError(f"rel_tol must be a float in (0, 1), got {self.rel_tol!r}")
        if "steps" in self.config:
            raise ValueError("config must not hold 'steps': the trainer adds the steps it trained")
        as_json(self.config)

    def checkpoint_config(self, steps: int) -> dict:
        """The checkpoint's config after ``steps`` steps: ``config`` plus the steps."""
        return {**self.config, "steps": steps}


@dataclass
class Result:
    """What :func:`train` returns."""

    model: nn.Module
    steps: int
    seconds: float  # training and evaluation, summed over every session of the run
    rows: list[dict]  # the learning curve, one row per evaluation
    recent: list[float]  # the last training values, in the run's train_unit
    stopped: str | None  # the stop rule's reason, or None when the budget ran out
    commands: list[str] = field(default_factory=list)  # one per session (a resume adds one)
    provenance: dict = field(default_factory=dict)  # the first session's git commit and state
    out_dir: Path | None = None

    @property
    def curve(self) -> Path:
        return self.out_dir / CURVE_FILE


def run_parser(task: str, description: str, example: str) -> argparse.ArgumentParser:
    """The command line of ``python -m rnnbook.runs TASK``: the options every long run shares,
    ``--out-dir`` (the run's folder), ``--resume`` (continue ``<out-dir>/snapshot.pt``) and
    ``--threads``; the task adds its own. ``description`` says what the run trains and
    ``example`` gives the options of one call."""
    parser = argparse.ArgumentParser(
        prog=f"python -m rnnbook.runs {task}",
        description=f"{description}, and write its checkpoint (into RNNBOOK_CHECKPOINTS if "
        "set, else checkpoints/).",
        epilog=f"Example: python -m rnnbook.runs {task} {example} (add --resume to continue a "
        "run that was stopped).",
    )
    parser.add_argument("--out-dir", type=Path, required=True, help="the run's folder")
    parser.add_argument("--resume", action="store_true", help="continue <out-dir>/snapshot.pt")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    return parser


def check_run_arguments(parser, args, whole: Iterable[str], positive: Iterable[str]) -> None:
    """The checks every long run's command line shares: the options in ``whole`` are integers
    of at least 1, those in ``positive`` numbers above 0, and ``--seed`` is not negative;
    ``parser.error`` names the option and the value that came."""
    for key in whole:
        if getattr(args, key) < 1:
            parser.error(f"--{key.replace('_', '-')} must be at least 1, got {getattr(args, key)}")
    if args.seed < 0:
        parser.error(f"--seed must be a non-negative integer, got {args.seed}")
    for key in positive:
        if not getattr(args, key) > 0:
            parser.error(f"--{key.replace('_', '-')} must be positive, got {getattr(args, key)}")


def log(message: str) -> None:
    """One time-stamped line, flushed at once (a long run is read while it runs)."""
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {message}", flush=True)


# --- the learning curve and the snapshot ---------------------------------------------------


def _format(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def write_curve(path: Path, rows: list[dict]) -> None:
    """Write the learning curve (all rows) atomically, in the column order of the last row."""
    columns = []
    for row in reversed(rows):
        columns += [key for key in row if key not in columns]
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows({k: _format(row.get(k)) for k in columns} for row in rows)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_curve(path: Path) -> list[dict[str, float | None]]:
    """The rows of a learning curve as numbers (an empty cell is ``None``)."""
    with Path(path).open(newline="") as f:
        return [
            {k: (float(v) if v != "" else None) for k, v in row.items()}
            for row in csv.DictReader(f)
        ]


def _save_snapshot(path: Path, model, optimizer, state: dict) -> None:
    tmp = path.with_name(f".{path.name}.part")
    weights = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    # torch's global generator too: the masks of dropout or zoneout go on where they stopped
    torch.save({**weights, "torch_rng": torch.get_rng_state(), **state}, tmp)
    os.replace(tmp, path)


# --- where a run came from -------------------------------------------------------------------


def portable(path) -> str:
    """A path as a record keeps it: relative to the repository when inside it, otherwise only
    its last part, so that no record names the machine's folders."""
    path = Path(path)
    root = project_root()
    if not path.is_absolute():
        return str(path)
    if root is not None and path.resolve().is_relative_to(root):
        return str(path.resolve().relative_to(root))
    return f"<outside the repository>/{path.name}"


def _git(*command: str) -> str:
    root = project_root()
    try:
        out = subprocess.run(
            ["git", *command], cwd=root, capture_output=True, text=True, check=True, timeout=30
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance() -> dict:
    """The command that runs, the git commit, and what was uncommitted in src/ at the start."""
    words = [Path(sys.executable).name, *sys.argv]
    command = " ".join(shlex.quote(portable(w) if Path(w).is_absolute() else w) for w in words)
    uncommitted = _git("status", "--porcelain", "--", "src")
    return {
        "command": command,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_uncommitted_src": uncommitted.splitlines() if uncommitted else [],
    }


# --- the run ---------------------------------------------------------------------------------


def train(
    run: LongRun,
    out_dir: Path | str,
    *,
    model: nn.Module | None = None,
    resume: bool = False,
    threads: int = 1,
    report: Callable[[str], None] | None = log,
) -> Result:
    """Train ``run`` in ``out_dir`` (created if needed); see the module's docstring.

    Args:
        model: a freshly built model to train in place (``train_or_load`` passes its own);
            default ``run.build_model()``.
        resume: continue ``<out_dir>/snapshot.pt``; without a snapshot the run starts afresh.
            Without ``resume``, a folder that already holds a run is refused.
        threads: torch CPU threads during the run (restored afterwards).
        report: where the progress lines go (``None``: nowhere).
    """
    say = report or (lambda message: None)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    curve_path, snapshot_path = out_dir / CURVE_FILE, out_dir / SNAPSHOT_FILE
    if model is None:
        model = run.build_model()
    optimizer = run.optimizer(model.parameters())
    origin = provenance()

    if resume and snapshot_path.is_file():
        snapshot = torch.load(snapshot_path, map_location="cpu", weights_only=True)
        if snapshot["config"] != as_json(run.config):
            raise RunError(
                f"the snapshot in {portable(out_dir)} was made with config {snapshot['config']}, "
                f"not {as_json(run.config)}; choose another folder"
            )
        model.load_state_dict(snapshot["model"])
        optimizer.load_state_dict(snapshot["optimizer"])
        if "torch_rng" in snapshot:  # snapshots written before it was kept have none
            torch.set_rng_state(snapshot["torch_rng"])
        state = {k: v for k, v in snapshot.items() if k not in ("model", "optimizer", "torch_rng")}
        state["commands"] = [*state["commands"], origin["command"]]
        write_curve(curve_path, state["rows"])  # drop rows written after the snapshot
        say(f"resumed {portable(snapshot_path)} at step {state['step']}")
    else:
        if not resume and (snapshot_path.exists() or curve_path.exists()):
            raise RunError(
                f"{portable(out_dir)} already holds a run; resume it or choose another folder"
            )
        state = {
            "config": as_json(run.config),
            "step": 0,
            "seconds": 0.0,
            "rows": [],
            "recent": [],
            "stopped": None,
            "commands": [origin["command"]],
            "provenance": origin,
            "model_code_sha256": model_code_sha256(model),
        }

    previous_threads, previous_denormal = torch.get_num_threads(), torch.set_flush_denormal(True)
    torch.set_num_threads(threads)
    started = time.perf_counter() - state["seconds"]
    parameters = sum(p.numel() for p in model.parameters())
    say(
        f"{run.name}: {parameters:,} parameters, up to {run.steps:,} steps, "
        f"{torch.get_num_threads()} thread(s), torch {torch.__version__}"
    )
    try:
        if not state["rows"]:  # the untrained model: where the curve starts
            tic = time.perf_counter()
            row = {"step": 0, "seconds": 0.0, **_evaluate(run, model)}
            row["eval_seconds"] = time.perf_counter() - tic
            state["rows"].append(row)
            write_curve(curve_path, state["rows"])
            _save_snapshot(snapshot_path, model, optimizer, state)
            say(_describe(row, run.train_column))
        while state["step"] < run.steps and state["stopped"] is None:
            _train_chunk(run, model, optimizer, state, started, say)
            write_curve(curve_path, state["rows"])
            _save_snapshot(snapshot_path, model, optimizer, state)
    finally:
        torch.set_num_threads(previous_threads)
        torch.set_flush_denormal(previous_denormal)
    return Result(
        model=model,
        steps=state["step"],
        seconds=time.perf_counter() - started,
        rows=state["rows"],
        recent=state["recent"],
        stopped=state["stopped"],
        commands=state["commands"],
        provenance=state["provenance"],
        out_dir=out_dir,
    )


def _evaluate(run: LongRun, model: nn.Module) -> dict[str, float]:
    was_training = model.training
    model.eval()
    with torch.no_grad():
        metrics = {key: float(value) for key, value in run.evaluate(model).items()}
    model.train(was_training)
    return metrics


def _train_chunk(run, model, optimizer, state, started, say) -> None:
    """Up to ``eval_every`` steps of ``fit``, then one evaluation row and the stop rule."""
    first = state["step"]
    chunk = min(run.eval_every - first % run.eval_every, run.steps - first)
    try:
        history = fit(
            model,
            lambda i: run.batch(first + i),
            run.loss_fn,
            steps=chunk,
            optimizer=optimizer,
            clip_mode=run.clip_mode,
            clip_at=run.clip_at,
            progress=False,
        )
    except NonFiniteError as error:  # the optimizer never took the bad step
        say(
            f"NON-FINITE: the {error.what} became {error.value} at step {first + error.step}; "
            "the last good snapshot stays as it was"
        )
        raise NonFiniteError(first + error.step, error.what, error.value) from error
    values = [run.train_unit(loss) for loss in history.loss]
    state["recent"] = (state["recent"] + values)[-run.recent :]
    state["step"] = first + history.steps
    tic = time.perf_counter()
    metrics = _evaluate(run, model)
    row = {
        "step": state["step"],
        "seconds": time.perf_counter() - started,
        run.train_column: sum(values) / len(values),
        "grad_norm_mean": sum(history.grad_norm) / len(history.grad_norm),
        "grad_norm_max": max(history.grad_norm),
        "sec_per_step": history.seconds / history.steps,
        **metrics,
        "eval_seconds": time.perf_counter() - tic,
    }
    state["seconds"] = row["seconds"]
    state["rows"].append(row)
    say(_describe(row, run.train_column))
    if run.stop_rule is not None:
        state["stopped"] = run.stop_rule(state["rows"], state["recent"])
        if state["stopped"]:
            say(f"stopped: {state['stopped']}")


def _describe(row: dict, train_column: str) -> str:
    shown = [f"step {int(row['step']):7,d}", f"{row['seconds']:8.0f} s"]
    if row.get(train_column) is not None:
        shown.append(f"{train_column} {row[train_column]:.4g}")
    skip = {*BOOKKEEPING, train_column}
    shown += [f"{k} {v:.4g}" for k, v in row.items() if k not in skip]
    return "  ".join(shown)


# --- from a run to a checkpoint --------------------------------------------------------------


def summary(run: LongRun, result: Result, extra: dict | None = None) -> dict:
    """The checkpoint record's summary: budget, time, final evaluation, and where it came from."""
    final = result.rows[-1]
    return as_json(
        {
            "steps": result.steps,
            "max_steps": run.steps,
            "stopped": result.stopped,
            "seconds": round(result.seconds, 1),
            "seconds_per_step": round(result.seconds / max(result.steps, 1), 4),
            "final_train_recent": round(sum(result.recent) / len(result.recent), 6)
            if result.recent
            else None,
            "final_eval": {
                k: v for k, v in final.items() if k not in {*BOOKKEEPING, run.train_column}
            },
            "parameters": sum(p.numel() for p in result.model.parameters()),
            "commands": result.commands,
            "git_commit": result.provenance.get("git_commit"),
            "git_uncommitted_src": result.provenance.get("git_uncommitted_src"),
            "torch": torch.__version__,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            **(extra or {}),
        }
    )


def publish(run: LongRun, result: Result, extra: dict | None = None) -> dict:
    """Write ``result`` as the checkpoint ``run.name`` with its learning curve beside it.

    The weights and record go through :func:`rnnbook.checkpoints.save_checkpoint`; the curve
    is copied to ``<checkpoints>/<name>.curve.csv``. The checkpoint is then loaded into a
    freshly built model, which must evaluate as the trained one did. Returns the record.
    """
    config = run.checkpoint_config(result.steps)
    record = save_checkpoint(
        result.model, run.name, config, summary(run, result, extra), result.seconds
    )
    write_curve(checkpoint_dir() / f"{run.name}.curve.csv", result.rows)
    fresh = run.build_model()
    load_checkpoint(fresh, run.name, config)
    trained, reloaded = _evaluate(run, result.model), _evaluate(run, fresh)
    for key, value in trained.items():
        if not math.isclose(reloaded[key], value, rel_tol=1e-6, abs_tol=1e-9):
            raise RunError(
                f"the reloaded checkpoint evaluates {key} as {reloaded[key]}, not {value}"
            )
    return record


def run_and_publish(
    run: LongRun,
    out_dir: Path,
    *,
    resume: bool,
    threads: int,
    extra: Callable[[Result], dict] = lambda result: {},
) -> int:
    """What every ``python -m rnnbook.runs TASK`` does with its run: :func:`train` it in
    ``out_dir``, :func:`publish` the checkpoint and write ``<out_dir>/summary.json``.

    ``extra(result)`` adds entries to the record's summary (the threads and the learning
    curve's place are always there). Returns the exit code: 0 when the checkpoint is
    written, 1 when the run is refused, 2 on a NaN or inf.
    """
    try:
        result = train(run, out_dir, resume=resume, threads=threads)
    except RunError as error:
        log(f"refused: {error}")
        return 1
    except NonFiniteError:
        return 2
    details = {"threads": threads, **extra(result), "learning_curve": portable(result.curve)}
    record = publish(run, result, details)
    (Path(out_dir) / "summary.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    log(
        f"wrote checkpoint {run.name!r} after {result.steps:,} steps, {result.seconds:.0f} s; "
        f"{record['summary']['final_eval']}"
    )
    return 0


def reproduce(run: LongRun, *, abs_tol: float = 1 / 64, rel_tol: float | None = None):
    """Load checkpoint ``run.name`` into a fresh model and evaluate it as the run did.

    Returns ``(model, record, mismatches)``: every metric of the record's ``final_eval`` that
    the loaded model does not reproduce within ``abs_tol`` or ``rel_tol`` (default
    ``run.rel_tol``; rounding differs between CPUs: a count averaged over a batch may move by
    one in 64), as ``{metric:
    (recorded, now)}``. A warning about changed code is not raised here: the caller decides.
    """
    model = run.build_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        record = load_checkpoint(model, run.name, run.checkpoint_config(run.steps))
    now = _evaluate(run, model)
    mismatches = {}
    for metric, recorded in record["summary"].get("final_eval", {}).items():
        tolerance = run.rel_tol if rel_tol is None else rel_tol
        if not math.isclose(now[metric], recorded, rel_tol=tolerance, abs_tol=abs_tol):
            mismatches[metric] = (recorded, now[metric])
    if not record["summary"].get("final_eval"):
        mismatches["final_eval"] = ("missing from the record", None)
    return model, record, mismatches


def train_or_load(
    run: LongRun,
    *,
    profile: Profile,
    out_dir: Path | str | None = None,
    steps: int | None = None,
    report: Callable[[str], None] | None = log,
):
    """A chapter's way to a long run: load its committed checkpoint, or train it (paper).

    The quick and the full profile load ``<checkpoints>/<run.name>`` made after ``steps`` steps
    (default ``run.steps``), refusing one made otherwise: a long run takes longer than a
    chapter may take in either (the full profile promises a chapter in 15 minutes on a GPU),
    and its command line (``python -m rnnbook.runs``) is how the checkpoint is made. The paper
    profile trains with :func:`train` in ``out_dir`` (default a temporary folder; resumable
    there) and leaves the book's checkpoints alone. Returns
    :class:`rnnbook.checkpoints.Trained`.
    """
    steps = run.steps if steps is None else steps
    folder = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="rnnbook-"))

    def train_model(model: nn.Module) -> dict:
        result = train(run, folder, model=model, resume=out_dir is not None, report=report)
        if result.steps != steps:
            raise RunError(
                f"{run.name} stopped after {result.steps} steps ({result.stopped}), but the "
                f"checkpoint is to be made after {steps}"
            )
        return summary(run, result)

    return checkpoints.train_or_load(
        run.name,
        run.build_model(),
        train_model,
        profile=profile,
        config=run.checkpoint_config(steps),
        train_in=("paper",),
    )
