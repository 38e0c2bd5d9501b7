"""Run chapters in the full profile, as a reader with a GPU would, and record what they gave.

    python scripts/verify_full.py 05_clockwork 09_abs     # run, then write verification/*.json
    python scripts/verify_full.py 01_rnn_bptt --executed OUT.ipynb --seconds 540 --commit SHA
                                                          # record a run made another way

Each chapter runs from a fresh ``git worktree`` of the commit (HEAD by default), so the
record names exactly the code that ran and the work tree may change meanwhile; papermill
executes it with ``-p profile full``, one torch thread, the offline data mirror
(``RNNBOOK_DATA_MIRROR``). The record (``rnnbook.verification``) keeps the commit, the
machine, the wall time, whether every cell ran (and where it stopped), each code cell's time
and printed output, every result claim it stated (``rnnbook.claims``), and the chapter's
fingerprint at that commit. Runs take from minutes to
hours on a CPU; ``--jobs 2`` runs two chapters at a time (one core each).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rnnbook import claims, verification  # noqa: E402

OUTPUT_CAP = 3000  # characters of printed output kept per cell


def machine(threads: int = 1) -> dict:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": threads,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def _text(output: dict) -> str:
    if output.get("output_type") == "stream":
        text = output.get("text", "")
    elif output.get("output_type") == "error":
        text = f"{output.get('ename')}: {output.get('evalue')}"
    else:
        text = output.get("data", {}).get("text/plain", "")
        if "image/png" in output.get("data", {}) or "application/vnd.jupyter.widget-view+json" in (
            output.get("data", {})
        ):
            return ""  # a figure or a widget: its repr says nothing
    return text if isinstance(text, str) else "".join(text)


def record_from_executed(
    chapter: str, executed: Path, seconds: float, commit: str, code_root: Path, note: str = ""
) -> dict:
    """A verification record from a notebook papermill executed (stopped or not)."""
    notebook = json.loads(Path(executed).read_text(encoding="utf-8"))
    cells, failed_cell, error = [], None, None
    for index, cell in enumerate(c for c in notebook["cells"] if c["cell_type"] == "code"):
        meta = cell.get("metadata", {}).get("papermill", {})
        outputs = cell.get("outputs", [])
        printed = "".join(_text(o) for o in outputs)
        cells.append(
            {
                "code_cell": index,
                "first_line": "".join(cell["source"]).strip().splitlines()[0][:100]
                if "".join(cell["source"]).strip()
                else "",
                "seconds": meta.get("duration"),
                "status": meta.get("status"),
                "output": printed[-OUTPUT_CAP:],
            }
        )
        if failed_cell is None and any(o.get("output_type") == "error" for o in outputs):
            failed_cell = index
            error = next(_text(o) for o in outputs if o.get("output_type") == "error")[-2000:]
        if meta.get("status") == "pending":  # never reached
            break
    ran_all = failed_cell is None and all(c["status"] == "completed" for c in cells)
    ended = notebook.get("metadata", {}).get("papermill", {}).get("end_time")
    return {
        "chapter": chapter,
        "profile": "full",
        "commit": commit,
        "date": ended or datetime.now(tz=timezone.utc).isoformat(timespec="seconds"),
        "machine": dict(machine(), load_average_at_record=[round(x, 1) for x in os.getloadavg()]),
        "note": note,
        "seconds": round(seconds, 1),
        "ok": ran_all,
        "failed_cell": failed_cell,
        "error": error,
        "gpu_minutes_expected": None,
        "cells": cells,
        "claims": claims.from_notebook(notebook),  # every result claim the run stated
        "fingerprint": verification.fingerprint(chapter, code_root),
    }


@contextlib.contextmanager
def worktree(commit: str):
    """A fresh, detached ``git worktree`` of ``commit``, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="verify-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit],
            check=True,
            capture_output=True,
        )
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                check=False,
                capture_output=True,
            )


def run_one(chapter: str, commit: str, out_dir: Path, note: str = "") -> dict:
    """Execute one chapter in the full profile in a fresh worktree of ``commit``."""
    with worktree(commit) as tree:
        env = dict(
            os.environ,
            PYTHONPATH=str(tree / "src"),
            RNNBOOK_THREADS="1",
            OMP_NUM_THREADS="1",
            MPLBACKEND="Agg",
        )
        env.setdefault("RNNBOOK_DATA_MIRROR", str((ROOT.parent / "shared" / "data").resolve()))
        executed = out_dir.resolve() / f"{chapter}.ipynb"  # papermill runs in the worktree
        start = time.time()
        command = [sys.executable, "-m", "papermill", f"{chapter}.ipynb", str(executed)]
        command += ["-p", "profile", "full", "--cwd", str(tree / "chapters"), "-k", "python3"]
        subprocess.run(command + ["--no-progress-bar"], cwd=tree / "chapters", env=env)
        seconds = time.time() - start
        return record_from_executed(chapter, executed, seconds, commit, tree, note)


def write(record: dict) -> dict:
    out = verification.records_dir(ROOT)
    out.mkdir(exist_ok=True)
    path = out / f"{record['chapter']}.json"
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="+", help="chapter names, e.g. 05_clockwork")
    parser.add_argument("--commit", default="HEAD", help="the commit to run (default HEAD)")
    parser.add_argument("--jobs", type=int, default=1, help="chapters at a time (default 1)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("_build/verify"),
        help="where the executed notebooks go (default _build/verify)",
    )
    parser.add_argument(
        "--executed",
        type=Path,
        help="record this executed notebook instead of running (one chapter)",
    )
    parser.add_argument("--seconds", type=float, help="with --executed: the run's wall time")
    parser.add_argument("--note", default="", help="said in the record (e.g. the machine's load)")
    args = parser.parse_args(argv)

    known = verification.chapters(ROOT)
    unknown = [c for c in args.chapters if c not in known]
    if unknown:
        parser.error(f"unknown chapters {unknown}; the book has {known}")
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.commit],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if args.executed:
        if len(args.chapters) != 1 or args.seconds is None:
            parser.error("--executed records one chapter and needs --seconds")
        with worktree(commit) as tree:
            record = record_from_executed(
                args.chapters[0], args.executed, args.seconds, commit, tree, args.note
            )
        records = [write(record)]
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            records = list(
                pool.map(lambda c: write(run_one(c, commit, args.out, args.note)), args.chapters)
            )
    failures = 0
    for record in records:
        path = verification.records_dir(ROOT) / f"{record['chapter']}.json"
        where = (
            "ran to the end" if record["ok"] else f"stopped at code cell {record['failed_cell']}"
        )
        print(f"{record['chapter']}: {where} in {record['seconds'] / 60:.1f} min -> {path}")
        failures += not record["ok"]
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
