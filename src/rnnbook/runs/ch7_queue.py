"""The queue of Chapter 7's long runs (issue 34): the penalty sweep and the zoneout grid, one
run at a time, resumable.

``python -m rnnbook.runs.ch7_queue`` walks through :func:`jobs` in order and, for each run
not yet finished, calls ``python -m rnnbook.runs penalty|zgrid ... --resume`` in a child
process with one torch thread: a run killed half-way continues from its last snapshot
(:mod:`rnnbook.longrun`), a finished one is skipped. A run is finished when its folder
``<root>/<name>/`` holds ``summary.json``; its learning curve is then in the book's
``checkpoints/<name>.curve.csv`` (copied again if it is missing) and its weights and record in
``<root>/<name>/checkpoint/``. A run that ends on a NaN or inf (exit 2) leaves
``<root>/<name>/failed.txt`` and is skipped from then on. The file ``<root>/STOP`` stops the
queue after the run in progress.

Order: S_ic with R_CB, R_NS, then R_MSURE with u_target = 0.5; S_c (M = 2) the same; S_ic
with R_MSURE at u_target = 0.2, and with R_CB at lambda 0.1 for seeds 1 and 2 (``CB_SEEDS``);
the zoneout grid at p = 0.1, 0.3, 0.5, 0.7; R_NS at 0.05 and 100 (``EXTRA_NS``) for S_ic, then
R_MSURE with u_target = 0.2 and the same R_NS for S_c;
Chapter 7's levers on the rate (:func:`rnnbook.runs.penalty_sweep.levers`: the threshold, a
tempered surrogate, a penalty on the margins), three of them with two more seeds; R_NS at
lambda 1e3 and 1e4 (``NS_TO_WINDOW``); the zoneout grid at p = 0.2, 0.4, 0.6, 0.8, 0.9, but Z_c
at p = 0.2, which is Chapter 7's ``ptb-slice-zc`` (committed) under another name;
S_fc's sweep; last the grid at p = 1, which computes the LSTM exactly
(:mod:`rnnbook.runs.zoneout_grid`).

Two queues may run at once (one a core): a run in progress holds ``<root>/<name>/running.pid``
with its queue's process id, and a queue passes over a run whose holder is alive.

``--list`` prints every run's state (done, failed, at step N, pending) and exits; ``--table``
prints one line for every finished run (:func:`table_row`).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rnnbook.longrun import log, read_curve
from rnnbook.paths import checkpoint_dir, project_root
from rnnbook.runs import penalty_sweep, zoneout_grid

DEFAULT_ROOT = Path("runs") / "ch7"
# Beyond the spec's R_NS grid: R_NS / lambda grows from 0.006 after the first pass to about 0.4
# after the 11th (S_ic, lambda = 1e-3), so lambda = 100 puts RI near 1, where the source saw
# every network degrade.
EXTRA_NS = (100.0,)
CB_SEEDS = (1, 2)  # R_CB at lambda 0.1 on S_ic again, with these seeds
# R_NS on up the grid until its influence enters the source's window (0.017 at lambda = 100,
# about proportional to lambda), as the source chose its lambdas
NS_TO_WINDOW = (1e3, 1e4)


def _penalty(model, penalty, lams, u_target=None):
    return [("penalty", dict(model=model, penalty=penalty, lam=lam, u_target=u_target))
            for lam in lams]  # fmt: skip


def jobs() -> list[tuple[str, dict]]:
    """Every run of the queue, in order, as ``(task, keyword arguments)``."""
    main_ns = (1e-3, 1e-2, 1e-1, 1.0, 10.0)
    order = []
    for model in ("sba-ic", "sba-c2"):
        order += _penalty(model, "cb", penalty_sweep.LAMBDAS["cb"])
        order += _penalty(model, "ns", main_ns)
        order += _penalty(model, "msure", penalty_sweep.LAMBDAS["msure"], 0.5)
    # what decides Chapter 7's reading first: can R_MSURE pull S_ic's rate down to 0.2, and is
    # R_CB's best perplexity (lambda 0.1, seed 0) more than a seed's difference?
    order += _penalty("sba-ic", "msure", penalty_sweep.LAMBDAS["msure"], 0.2)
    order += [("penalty", dict(model="sba-ic", penalty="cb", lam=0.1, u_target=None, seed=s))
              for s in CB_SEEDS]  # fmt: skip
    order += [("zgrid", kw) for kw in zoneout_grid.grid((0.1, 0.3, 0.5, 0.7))]
    order += _penalty("sba-ic", "ns", (5e-2,) + EXTRA_NS)
    order += _penalty("sba-c2", "msure", penalty_sweep.LAMBDAS["msure"], 0.2)
    order += _penalty("sba-c2", "ns", (5e-2,) + EXTRA_NS)
    order += [("penalty", kw) for kw in penalty_sweep.levers()]
    order += [("penalty", kw) for kw in penalty_sweep.lever_seeds()]
    order += _penalty("sba-ic", "ns", NS_TO_WINDOW) + _penalty("sba-c2", "ns", NS_TO_WINDOW)
    second = zoneout_grid.grid((0.2, 0.4, 0.6, 0.8, 0.9))
    order += [("zgrid", kw) for kw in second if (kw["variant"], kw["p"]) != ("c", 0.2)]
    order += [("penalty", kw) for kw in penalty_sweep.grid(("sba-fc",))]
    order += [("zgrid", kw) for kw in zoneout_grid.grid((1.0,))]
    return order


def name_of(task: str, kwargs: dict) -> str:
    """The run's name (its folder and its curve's stem)."""
    if task == "penalty":
        return penalty_sweep.run_name(**kwargs)
    return zoneout_grid.run_name(**kwargs)


def command(task: str, kwargs: dict, folder: Path) -> list[str]:
    """The child process's command line: the run, resumed if it has a snapshot, one thread."""
    argv = [sys.executable, "-m", "rnnbook.runs", task]
    for key, value in kwargs.items():
        if value is not None and key != "seed":
            argv += [
                f"--{key.replace('_', '-')}",
                repr(value) if isinstance(value, float) else str(value),
            ]
    if kwargs.get("seed"):
        argv += ["--seed", str(kwargs["seed"])]
    return argv + ["--out-dir", str(folder), "--resume", "--threads", "1"]


def holder_of(folder: Path) -> int | None:
    """The process id of the live queue that is training this run, or None."""
    try:
        pid = int((folder / "running.pid").read_text())
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except (OSError, ValueError):
        return None
    return pid


def state_of(folder: Path) -> str:
    """``"done"``, ``"failed"``, ``"running (queue N)"``, ``"at step N"`` (a snapshot's curve)
    or ``"pending"``."""
    if (folder / "summary.json").is_file():
        return "done"
    if (folder / "failed.txt").is_file():
        return "failed"
    holder = holder_of(folder)
    if holder is not None and holder != os.getpid():
        return f"running (queue {holder})"
    curve = folder / "learning_curve.csv"
    if curve.is_file():
        rows = read_curve(curve)
        return f"at step {int(rows[-1]['step'])}" if rows else "pending"
    return "pending"


def ensure_curve(name: str, folder: Path) -> None:
    """Copy a finished run's curve into the book's checkpoint folder if it is not there."""
    target = checkpoint_dir() / f"{name}.curve.csv"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / "checkpoint" / f"{name}.curve.csv", target)
        log(f"{name}: copied its curve to checkpoints/")


def summarise(name: str, folder: Path) -> str:
    """One line on a finished run: its best validation pass and its last row."""
    rows = read_curve(folder / "learning_curve.csv")
    value, at = zoneout_grid.best_pass(rows)
    last = rows[-1]
    shown = [f"best valid_ppl {value:.2f} at pass {at}"]
    for key in ("valid_ppl_plain", "valid_u", "train_u", "ri", "train_penalty_raw"):
        if last.get(key) is not None:
            shown.append(f"{key} {last[key]:.4g} (pass {at}: {rows[at][key]:.4g})")
    return f"{name}: " + "; ".join(shown)


def table_row(name: str, rows: list[dict]) -> str:
    """A finished curve in one line: the best validation pass (ZO+M or SBA+M), the plain
    network (ZO+R, SBA+R) and the rate there, and for a penalty the influence RI (pen-ri)
    over the whole run (the mean of the passes', each of 90 iterations) and the training
    rate at the best pass."""
    value, at = zoneout_grid.best_pass(rows)
    best = rows[at]
    line = (f"{name:40s} best {value:7.2f} at pass {at:2d}  plain {best['valid_ppl_plain']:7.2f}"
            f"  valid_u {best['valid_u']:.3f}")  # fmt: skip
    if best.get("ri") is not None:
        ri = sum(row["ri"] for row in rows[1:]) / (len(rows) - 1)
        line += f"  train_u {best['train_u']:.3f}  RI {ri:.4f}"
    return line


def run_queue(root: Path, limit: int | None = None) -> int:
    """Train every unfinished run of :func:`jobs` in ``root``, one at a time; returns the
    number trained in this call."""
    trained = 0
    for task, kwargs in jobs():
        name = name_of(task, kwargs)
        folder = root / name
        state = state_of(folder)
        if state == "done":
            ensure_curve(name, folder)
            continue
        if state == "failed" or state.startswith("running"):
            continue
        if (root / "STOP").exists():
            log(f"found {root / 'STOP'}: the queue stops before {name}")
            break
        if limit is not None and trained >= limit:
            break
        folder.mkdir(parents=True, exist_ok=True)
        argv = command(task, kwargs, folder)
        log(f"{name}: {state}; starting {' '.join(argv[1:])}")
        before, tic = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        env = {**os.environ, "OMP_NUM_THREADS": "1", "RNNBOOK_PROGRESS": "0"}
        (folder / "running.pid").write_text(str(os.getpid()))
        try:
            code = subprocess.call(argv, env=env, cwd=project_root())
        finally:
            (folder / "running.pid").unlink(missing_ok=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        wall = time.perf_counter() - tic
        log(f"{name}: exit {code}, {cpu / 60:.1f} CPU minutes, {wall / 60:.1f} minutes wall")
        trained += 1
        if code == 0:
            log(summarise(name, folder))
        elif code == 2:
            (folder / "failed.txt").write_text(f"exit 2 (a NaN or inf), {time.ctime()}\n")
        else:
            log(f"{name}: exit {code}; the queue stops (see the lines above)")
            break
    return trained


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rnnbook.runs.ch7_queue",
        description="Train Chapter 7's penalty sweep and zoneout grid one run at a time.",
    )
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="the runs' folders")
    parser.add_argument("--list", action="store_true", help="print every run's state and exit")
    parser.add_argument("--table", action="store_true", help="one line per finished run")
    parser.add_argument("--limit", type=int, default=None, help="train at most this many runs")
    args = parser.parse_args(argv)
    root = args.root if args.root.is_absolute() else (project_root() or Path.cwd()) / args.root
    if args.list:
        for task, kwargs in jobs():
            name = name_of(task, kwargs)
            print(f"{name:45s} {state_of(root / name)}")
        return 0
    if args.table:
        for task, kwargs in jobs():
            name = name_of(task, kwargs)
            if state_of(root / name) == "done":
                print(table_row(name, read_curve(root / name / "learning_curve.csv")))
        return 0
    log(f"queue of {len(jobs())} runs in {root}")
    run_queue(root, args.limit)
    log("queue finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
