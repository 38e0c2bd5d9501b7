"""The instructors' gradebook: run every submitted notebook, collect what its checkers said.

Usage::

    python -m rnnbook.grade SUBMISSIONS OUT [--timeout 900] [--cell-timeout 120] [--jobs 1]

SUBMISSIONS holds the student edition notebooks the students handed in, one per student and
chapter, either as ``SUBMISSIONS/<student>/<chapter>.ipynb`` (the main layout: one folder per
student, the chapter files keep the names the book gives them) or flat as
``SUBMISSIONS/<chapter>-<student>.ipynb`` (the chapter is everything before the first ``-``).
Every notebook is copied into a fresh temporary directory, which is the kernel's working
directory, and executed there by nbclient in a separate process with a wall-clock limit;
every cell runs (errors allowed), the exercise cells too although the book tags them
``skip-execution``. Each exercise gets one status: ``passed``, ``failed`` (its checker raised
CheckFailed), ``not attempted`` (``raise NotImplementedError`` still there, or the exercise
cell unchanged from the chapter), ``crashed (...)`` (another exception, a time-out, a dead
kernel) or ``missing``. OUT receives ``gradebook.csv`` (one row per student),
``feedback/<student>.md`` (the checkers' messages and hints), ``executed/<student>/`` (the
executed notebooks, outputs capped) and ``results.json`` (everything, one record per exercise).

Why not nbgrader or otter-grader: the book's checkers already are the autograder (they test
the answer and word the hint), and the chapters mark exercises with MyST directives and a
checker call, not with the cell metadata, course database and release/collect workflow that
nbgrader needs, nor with the separate test files that otter-grader reads. Either would mean
rewriting every exercise for the tool, while this command only runs the notebooks the students
already have; use nbgrader if a course needs its hand-grading interface and LMS exchange.

This is not a security sandbox: the temporary working directory keeps relative paths away
from the instructor's files, but code that names an absolute path, or forges a checker's
output, is not stopped; grade untrusted submissions inside a container or as another user.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

# This module runs in two roles: the grader (``grade_folder``) and, in a subprocess per
# notebook, the runner (``_run_one``). The runner loads this file by path, without importing
# the package (whose ``__init__`` imports torch), so it must import nothing from rnnbook.

PASSED, FAILED, NOT_ATTEMPTED, MISSING = "passed", "failed", "not attempted", "missing"
NOT_IMPLEMENTED = "not implemented yet"  # in the message of rnnbook.checks.grading.call
PASS_MARK = "✓"  # rnnbook.checks.grading.passed prints "✓ name: ..."
DEFAULT_TIMEOUT = 900  # seconds per notebook, wall clock
DEFAULT_CELL_TIMEOUT = 120  # seconds per exercise cell, then the kernel is interrupted
DEFAULT_MAX_OUTPUT = 200_000  # characters of output kept per cell
MESSAGE_CAP = 4_000  # characters of an error message kept in the feedback

EXERCISE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{exercise\}[ \t]*(?P<title>[^\n]*)\n(?P<options>(?::[^\n]*\n)*)",
    re.M,
)
LABEL = re.compile(r"^:label:\s*(?P<label>\S+)", re.M)
CHECKER_CALL = re.compile(r"\bchecks\.(?P<name>\w+(?:\.\w+)*)\s*\(")


# --- the exercises of a notebook ------------------------------------------------------------


@dataclass
class Exercise:
    label: str
    title: str
    checker: str | None  # "sba.sba_select": the checker its code cell calls, None = written
    cell: int | None = None  # the index of its code cell in the notebook it was found in
    source: str = ""  # that cell's source


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def exercises(notebook: dict) -> list[Exercise]:
    """The exercises of a notebook, in order. An exercise's code cell is the first code cell
    after its statement, and before the next statement, that calls a checker (``checks.``);
    an exercise without one (a proof, a question) has ``checker=None``."""
    found: list[Exercise] = []
    for index, cell in enumerate(notebook.get("cells", [])):
        text = _source(cell)
        if cell.get("cell_type") == "markdown":
            for match in EXERCISE.finditer(text):
                label = LABEL.search(match["options"])
                if label:
                    found.append(Exercise(label["label"], match["title"].strip(), None))
        elif cell.get("cell_type") == "code" and found and found[-1].checker is None:
            call = CHECKER_CALL.search(text)
            if call:
                found[-1].checker, found[-1].cell, found[-1].source = call["name"], index, text
    return found


def checked_exercises(notebook: dict) -> list[Exercise]:
    return [e for e in exercises(notebook) if e.checker is not None]


def _locate(notebook: dict, wanted: list[Exercise]) -> list[Exercise]:
    """The wanted exercises (from the reference chapter) in a submission: by label, else by the
    checker call (a student may have deleted or moved the statement); ``cell=None`` if absent."""
    own = {e.label: e for e in checked_exercises(notebook)}
    located = []
    for exercise in wanted:
        if exercise.label in own and own[exercise.label].checker == exercise.checker:
            located.append(own[exercise.label])
            continue
        cell = next(
            (
                i
                for i, c in enumerate(notebook.get("cells", []))
                if c.get("cell_type") == "code"
                and any(m["name"] == exercise.checker for m in CHECKER_CALL.finditer(_source(c)))
            ),
            None,
        )
        source = _source(notebook["cells"][cell]) if cell is not None else ""
        located.append(Exercise(exercise.label, exercise.title, exercise.checker, cell, source))
    return located


def _same_code(a: str, b: str) -> bool:
    def norm(s: str) -> list[str]:
        return [line.rstrip() for line in s.strip().splitlines() if line.strip()]

    return norm(a) == norm(b)


# --- the runner: one notebook, in its own process -------------------------------------------


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _make_client(nb, spec: dict, record: dict, results: Path):
    """An nbclient NotebookClient that records, per exercise cell, the error, the checker's
    pass line and a time-out, and keeps at most ``max_output`` characters per cell."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_output

    exercise_cells = set(spec["cells"])
    cap = spec["max_output"]

    class GradingClient(NotebookClient):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._kept: dict[int, int] = {}
            self._dropped: dict[int, int] = {}

        async def async_start_new_kernel(self, **kwargs):
            await super().async_start_new_kernel(**kwargs)
            pid = getattr(getattr(self.km, "provisioner", None), "pid", None)
            record["kernel_pid"] = pid
            _write_json(results, record)

        async def _async_handle_timeout(self, timeout, cell=None):
            if record.get("running") is not None:
                record["timed_out"].append(record["running"])
                _write_json(results, record)
            return await super()._async_handle_timeout(timeout, cell)

        def output(self, outs, msg, display_id, cell_index):
            content = msg.get("content", {})
            text = content.get("text")
            if text is None:
                text = "".join(
                    v if isinstance(v, str) else json.dumps(v)
                    for v in content.get("data", {}).values()
                )
                if "traceback" in content:
                    text += "\n".join(content["traceback"])
            plain = content.get("text") or content.get("data", {}).get("text/plain", "")
            if cell_index in exercise_cells and isinstance(plain, str) and PASS_MARK in plain:
                kept_lines = record["passes"].setdefault(str(cell_index), [])
                for line in plain.splitlines():
                    line = line.strip().strip("'\"")[:MESSAGE_CAP]  # the checker's return value
                    if PASS_MARK in line and line not in kept_lines and len(kept_lines) < 5:
                        kept_lines.append(line)
            kept = self._kept.get(cell_index, 0)
            room = cap - kept
            if len(text) > room:
                if msg["msg_type"] == "stream" and room > 0:
                    msg = {**msg, "content": {**content, "text": content["text"][:room]}}
                    self._dropped[cell_index] = self._dropped.get(cell_index, 0) + len(text) - room
                    self._kept[cell_index] = cap
                elif msg["msg_type"] != "error":  # an error is always kept (capped below)
                    self._dropped[cell_index] = self._dropped.get(cell_index, 0) + len(text)
                    return None
            else:
                self._kept[cell_index] = kept + len(text)
            if msg["msg_type"] == "error":
                msg = {
                    **msg,
                    "content": {
                        **content,
                        "evalue": str(content.get("evalue", ""))[:MESSAGE_CAP],
                        "traceback": [t[:MESSAGE_CAP] for t in content.get("traceback", [])[-20:]],
                    },
                }
            return super().output(outs, msg, display_id, cell_index)

    def on_cell_execute(cell, cell_index):
        record["running"] = cell_index
        _write_json(results, record)

    def on_cell_executed(cell, cell_index, execute_reply):
        dropped = client._dropped.pop(cell_index, 0)
        if dropped:
            note = f"\n[the grader dropped {dropped:,} characters of output]\n"
            cell.outputs.append(new_output("stream", name="stderr", text=note))
        content = (execute_reply or {}).get("content", {})
        entry = {"status": content.get("status", "unknown")}
        if content.get("status") == "error":
            entry["ename"] = str(content.get("ename", ""))[:200]
            entry["evalue"] = str(content.get("evalue", ""))[:MESSAGE_CAP]
        if cell_index in exercise_cells:
            record["cells"][str(cell_index)] = entry
        elif "ename" in entry and len(record["other_errors"]) < 20:
            record["other_errors"].append([cell_index, entry["ename"], entry["evalue"][:300]])
        record["running"] = None
        _write_json(results, record)

    def timeout_for(cell) -> int | None:
        return spec["cell_timeout"] if cell.metadata.get("grader_exercise") else None

    client = GradingClient(
        nb,
        timeout=None,
        timeout_func=timeout_for,
        interrupt_on_timeout=True,
        allow_errors=True,
        kernel_name=spec["kernel"],
        skip_cells_with_tag="skip-execution",
        record_timing=False,
        shutdown_kernel="immediate",  # nothing to save in a kernel that is thrown away
        resources={"metadata": {"path": spec["workdir"]}},
        on_cell_execute=on_cell_execute,
        on_cell_executed=on_cell_executed,
    )
    return client


KERNEL_START_ATTEMPTS = 3  # a kernel that dies before its first reply is started again
KERNEL_START_FAILURE = "Kernel died before replying to kernel_info"


def _run_one(spec_path: str) -> None:
    """Execute one notebook as described by the JSON file ``spec_path`` (the runner)."""
    import nbformat
    from nbclient.exceptions import DeadKernelError

    spec = json.loads(Path(spec_path).read_text())
    results = Path(spec["results"])
    record: dict = {
        "status": None,
        "running": None,
        "kernel_pid": None,
        "cells": {},
        "passes": {},
        "timed_out": [],
        "other_errors": [],
    }
    nb = nbformat.read(spec["notebook"], as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None  # no stale output from the student's run
        if index in spec["cells"]:  # exercise cells run although the book skips them
            tags = cell.metadata.get("tags", [])
            cell.metadata["tags"] = [t for t in tags if t != "skip-execution"]
            cell.metadata["grader_exercise"] = True
    try:
        for attempt in range(KERNEL_START_ATTEMPTS):
            client = _make_client(nb, spec, record, results)
            try:
                client.execute()
                break
            except RuntimeError as error:
                # Two kernels started at once can pick the same free port; the loser dies
                # before it answers (a known race of parallel kernel launches). Nothing has
                # run yet, so the notebook is simply started again in a new kernel.
                started = record["running"] is not None or record["cells"]
                if started or KERNEL_START_FAILURE not in str(error):
                    raise
                if attempt == KERNEL_START_ATTEMPTS - 1:
                    raise
        record["status"] = "completed"
    except DeadKernelError:
        record["status"] = "kernel died"
    except Exception as error:  # noqa: BLE001 - reported, not raised: grade the others
        record["status"] = f"grader error: {type(error).__name__}: {str(error)[:500]}"
    for cell in nb.cells:
        cell.metadata.pop("grader_exercise", None)
    nbformat.write(nb, spec["executed"])
    _write_json(results, record)


def _kill_group(pid: int | None) -> None:
    if not pid:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# --- the grader -----------------------------------------------------------------------------


@dataclass
class Outcome:
    """The result of one exercise of one student."""

    student: str
    chapter: str
    label: str
    title: str
    status: str
    message: str = ""


@dataclass
class Run:
    """What happened to one submitted notebook."""

    student: str
    chapter: str
    path: str
    status: str
    seconds: float = 0.0
    outcomes: list[Outcome] = field(default_factory=list)
    other_errors: list = field(default_factory=list)


def find_submissions(submissions: Path) -> list[tuple[str, str, Path]]:
    """(student, chapter, path) for ``<student>/<chapter>.ipynb`` and ``<chapter>-<student>
    .ipynb``; checkpoint folders and hidden files are ignored."""
    found = []
    for path in sorted(submissions.rglob("*.ipynb")):
        relative = path.relative_to(submissions)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if len(relative.parts) == 2:
            found.append((relative.parts[0], path.stem, path))
        elif len(relative.parts) == 1 and "-" in path.stem:
            chapter, student = path.stem.split("-", 1)
            found.append((student, chapter, path))
        else:
            print(f"skipped {relative}: not <student>/<chapter>.ipynb or <chapter>-<student>.ipynb")
    return found


def _default_reference() -> Path | None:
    here = Path(__file__).resolve()
    for folder in here.parents:
        if (folder / "_config.yml").is_file() and (folder / "chapters").is_dir():
            return folder / "chapters"
    return None


def _read_notebook(path: Path) -> dict | None:
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        return notebook if isinstance(notebook.get("cells"), list) else None
    except (OSError, ValueError, AttributeError):
        return None


def _outcome(exercise: Exercise, stub: str | None, record: dict, killed: bool, spec: dict):
    """The status and message of one exercise from what the runner recorded."""
    if exercise.cell is None:
        return MISSING, f"no cell of the notebook calls checks.{exercise.checker}(...)."
    verdict, message = _run_outcome(exercise, record, killed, spec)
    if verdict != NOT_ATTEMPTED and stub is not None and _same_code(exercise.source, stub):
        return NOT_ATTEMPTED, "the exercise cell is unchanged from the chapter."
    return verdict, message


def _run_outcome(exercise: Exercise, record: dict, killed: bool, spec: dict):
    key = str(exercise.cell)
    if killed and record.get("running") == exercise.cell:
        return "crashed (time-out)", (
            f"the notebook hit its time limit of {spec['timeout']:g} s in this cell"
            + (
                " (it ignored the interrupt)."
                if exercise.cell in record.get("timed_out", [])
                else "."
            )
        )
    if exercise.cell in record.get("timed_out", []):
        return (
            "crashed (time-out)",
            f"the cell ran longer than {spec['cell_timeout']:g} s and was interrupted.",
        )
    if key in record.get("cells", {}):
        entry = record["cells"][key]
        ename, evalue = entry.get("ename"), entry.get("evalue", "")
        if ename == "CheckFailed":
            if NOT_IMPLEMENTED in evalue:
                return NOT_ATTEMPTED, evalue
            return FAILED, evalue
        if ename == "NotImplementedError":
            return NOT_ATTEMPTED, "the cell raised NotImplementedError."
        if ename:
            return f"crashed ({ename})", f"{ename}: {evalue}"
        passes = record.get("passes", {}).get(key)
        if passes:
            return PASSED, "\n".join(passes)
        return FAILED, "the cell ran without error, but its checker reported no pass."
    status = record.get("status")
    if killed:
        return "crashed (not run)", f"the notebook hit its time limit of {spec['timeout']:g} s."
    if status == "kernel died":
        if record.get("running") == exercise.cell:
            return "crashed (kernel died)", "the kernel died while this cell ran."
        return "crashed (not run)", "the kernel died in an earlier cell."
    return "crashed (not run)", f"the cell did not run ({status or 'the grader failed'})."


def grade_notebook(
    student: str,
    chapter: str,
    path: Path,
    wanted: list[Exercise] | None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    cell_timeout: float = DEFAULT_CELL_TIMEOUT,
    max_output: int = DEFAULT_MAX_OUTPUT,
    kernel: str = "python3",
    executed: Path | None = None,
) -> Run:
    """Execute one submission in a fresh directory and a separate process; never raises for
    anything the notebook does."""
    start = time.monotonic()
    notebook = _read_notebook(path)
    if notebook is None:
        run = Run(student, chapter, str(path), "invalid notebook")
        run.outcomes = [
            Outcome(student, chapter, e.label, e.title, MISSING, "the file is not a notebook.")
            for e in wanted or []
        ]
        return run
    stubs = {e.label: e.source for e in wanted} if wanted is not None else {}
    located = _locate(notebook, wanted) if wanted is not None else checked_exercises(notebook)
    workdir = Path(tempfile.mkdtemp(prefix="rnnbook-grade-work-"))
    private = Path(tempfile.mkdtemp(prefix="rnnbook-grade-run-"))
    try:
        copy = workdir / path.name
        shutil.copyfile(path, copy)
        spec = {
            "notebook": str(copy),
            "workdir": str(workdir),
            "results": str(private / "results.json"),
            "executed": str(private / "executed.ipynb"),
            "cells": sorted({e.cell for e in located if e.cell is not None}),
            "cell_timeout": cell_timeout,
            "timeout": timeout,
            "max_output": max_output,
            "kernel": kernel,
        }
        (private / "spec.json").write_text(json.dumps(spec))
        runner = (
            "import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location('rnnbook_grade_runner', sys.argv[1])\n"
            "module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            "module._run_one(sys.argv[2])\n"
        )
        env = {**os.environ, "MPLBACKEND": "Agg", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        with open(private / "runner.log", "wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    runner,
                    str(Path(__file__).resolve()),
                    str(private / "spec.json"),
                ],
                cwd=private,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group, killed as one
            )
            killed = False
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                killed = True
        results = private / "results.json"
        record = json.loads(results.read_text()) if results.exists() else {}
        if killed:
            _kill_group(record.get("kernel_pid"))  # the kernel has a session of its own
            _kill_group(process.pid)
            process.wait()
            status = f"time-out after {timeout:g} s"
        elif record.get("status"):
            status = record["status"]
        else:
            log = (private / "runner.log").read_text(errors="replace")[-1000:]
            status = f"grader error (exit code {process.returncode}): {log.strip()}"
            _kill_group(record.get("kernel_pid"))
        if status == "kernel died" and record.get("running") is not None:
            status = f"kernel died (cell {record['running']})"
        run = Run(student, chapter, str(path), status, other_errors=record.get("other_errors", []))
        for exercise in located:
            verdict, message = _outcome(exercise, stubs.get(exercise.label), record, killed, spec)
            run.outcomes.append(
                Outcome(student, chapter, exercise.label, exercise.title, verdict, message)
            )
        if executed is not None and (private / "executed.ipynb").exists():
            executed.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(private / "executed.ipynb", executed)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
    run.seconds = round(time.monotonic() - start, 1)
    return run


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name) or "_"


def grade_folder(
    submissions,
    out,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    cell_timeout: float = DEFAULT_CELL_TIMEOUT,
    reference=None,
    jobs: int = 1,
    max_output: int = DEFAULT_MAX_OUTPUT,
    kernel: str = "python3",
    quiet: bool = False,
) -> list[dict[str, str]]:
    """Grade every notebook in ``submissions``; write ``out/gradebook.csv``,
    ``out/feedback/<student>.md``, ``out/executed/`` and ``out/results.json``; return the
    gradebook's rows (one dict per student, keyed by the CSV's columns).

    ``reference`` is the folder of the chapters (default: the book's ``chapters/``): it fixes
    the exercises of each chapter and their untouched stubs. A chapter not found there takes
    its exercises from the submissions themselves.
    """
    submissions, out = Path(submissions), Path(out)
    reference = Path(reference) if reference is not None else _default_reference()
    found = find_submissions(submissions)
    chapters = sorted({chapter for _, chapter, _ in found})
    students = sorted({student for student, _, _ in found})
    wanted: dict[str, list[Exercise] | None] = {}
    for chapter in chapters:
        ref = reference / f"{chapter}.ipynb" if reference else None
        notebook = _read_notebook(ref) if ref and ref.is_file() else None
        wanted[chapter] = checked_exercises(notebook) if notebook else None

    def grade(item):
        student, chapter, path = item
        run = grade_notebook(
            student,
            chapter,
            path,
            wanted[chapter],
            timeout=timeout,
            cell_timeout=cell_timeout,
            max_output=max_output,
            kernel=kernel,
            executed=out / "executed" / _safe(student) / f"{_safe(chapter)}.ipynb",
        )
        if not quiet:
            n = sum(o.status == PASSED for o in run.outcomes)
            print(f"{student} {chapter}: {run.status}, {n}/{len(run.outcomes)} passed "
                  f"({run.seconds:g} s)", flush=True)  # fmt: skip
        return run

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        runs = list(pool.map(grade, found))

    # The columns: per chapter its status, then its exercises in the chapter's order.
    labels: dict[str, list[tuple[str, str]]] = {}
    for chapter in chapters:
        if wanted[chapter] is not None:
            labels[chapter] = [(e.label, e.title) for e in wanted[chapter]]
        else:
            seen: dict[str, str] = {}
            for run in runs:
                if run.chapter == chapter:
                    for o in run.outcomes:
                        seen.setdefault(o.label, o.title)
            labels[chapter] = list(seen.items())
    columns = ["student"]
    for chapter in chapters:
        columns += [f"{chapter} notebook"] + [label for label, _ in labels[chapter]]
    columns.append("passed")

    by_key = {(r.student, r.chapter): r for r in runs}
    rows = []
    for student in students:
        row = {"student": student}
        passed = 0
        for chapter in chapters:
            run = by_key.get((student, chapter))
            row[f"{chapter} notebook"] = run.status if run else MISSING
            outcomes = {o.label: o for o in run.outcomes} if run else {}
            for label, _ in labels[chapter]:
                status = outcomes[label].status if label in outcomes else MISSING
                row[label] = status
                passed += status == PASSED
        row["passed"] = str(passed)
        rows.append(row)

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "gradebook.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    (out / "feedback").mkdir(exist_ok=True)
    for student in students:
        text = _feedback(student, chapters, labels, by_key)
        (out / "feedback" / f"{_safe(student)}.md").write_text(text, encoding="utf-8")
    (out / "results.json").write_text(
        json.dumps([asdict(r) for r in runs], indent=1, ensure_ascii=False), encoding="utf-8"
    )
    return rows


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.strip().splitlines())


def _feedback(student: str, chapters, labels, by_key) -> str:
    """The student's feedback: per exercise its status and the checker's message and hint
    (the checkers word their hints never to give the solution away)."""
    lines = [f"# Feedback for {student}", ""]
    for chapter in chapters:
        run = by_key.get((student, chapter))
        lines += [f"## {chapter}", ""]
        if run is None:
            lines += ["No notebook was submitted for this chapter.", ""]
            continue
        outcomes = {o.label: o for o in run.outcomes}
        n = sum(o.status == PASSED for o in run.outcomes)
        lines += [f"Notebook: {run.status}. Exercises passed: {n} of {len(labels[chapter])}.", ""]
        for label, title in labels[chapter]:
            o = outcomes.get(label)
            status = o.status if o else MISSING
            lines += [f"### {title or label} (`{label}`): {status}", ""]
            message = o.message if o else "the exercise was not found in the notebook."
            if message:
                lines += [_quote(message), ""]
        if run.other_errors:
            lines += ["Other cells that raised an error (they may explain a crash above):", ""]
            lines += [f"- cell {i}: {name}: {value}" for i, name, value in run.other_errors[:10]]
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rnnbook.grade", description=__doc__.splitlines()[0]
    )
    parser.add_argument("submissions", type=Path, help="<student>/<chapter>.ipynb files")
    parser.add_argument("out", type=Path, help="where gradebook.csv and feedback/ go")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="wall-clock seconds per notebook"
    )
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=DEFAULT_CELL_TIMEOUT,
        help="seconds per exercise cell before the kernel is interrupted",
    )
    parser.add_argument("--reference", type=Path, help="the chapters (default: the book's)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks run at the same time")
    parser.add_argument(
        "--max-output", type=int, default=DEFAULT_MAX_OUTPUT, help="characters kept per cell"
    )
    parser.add_argument("--kernel", default="python3", help="the Jupyter kernel to run")
    args = parser.parse_args(argv)
    rows = grade_folder(
        args.submissions,
        args.out,
        args.timeout,
        cell_timeout=args.cell_timeout,
        reference=args.reference,
        jobs=args.jobs,
        max_output=args.max_output,
        kernel=args.kernel,
    )
    print(f"{len(rows)} student(s) graded: {args.out / 'gradebook.csv'}")


if __name__ == "__main__":
    main()
