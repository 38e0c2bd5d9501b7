"""The instructors' gradebook: run each submitted notebook, grade its answers in a clean process.

Usage::

    python -m rnnbook.grade SUBMISSIONS OUT [--fast] [--jobs 2] [--profile quick]
        [--timeout 900] [--cell-timeout 120] [--chapter-cell-timeout 600]
        [--check-timeout 120] [--points FILE]

SUBMISSIONS holds the student edition notebooks the students handed in, at any depth: one
folder per student (``ada/06_sba.ipynb``, ``sec1/ada/Copy of 06_sba.ipynb``: the student is
the folder's path) or flat, the student's name beside the chapter's (``06_sba-ada.ipynb``,
``ada-06_sba.ipynb``). A notebook is matched to its chapter by its content (the chapter's
label, ``(ch-sba)=``, above its title), else by a chapter's file name inside its own, so
``07_zoneout (1).ipynb`` and ``Copy of 06_sba.ipynb`` are found; what cannot be matched is
reported, not graded. Two notebooks of one chapter by one student: the newest is graded and
the feedback says so.

Grading a notebook has two steps.

1. **Run.** The notebook is copied into a fresh temporary directory, which is its kernel's
   working directory, and executed there by nbclient in a separate process
   (:mod:`rnnbook.grade.runner`), in the ``quick`` profile unless ``--profile`` says
   otherwise. Every code cell runs, the exercise cells too (the book tags them
   ``skip-execution``), errors allowed, each under a time limit: ``--chapter-cell-timeout``
   for a cell that is the chapter's own, ``--cell-timeout`` for the others. A cell that runs
   over it is interrupted and named in the feedback by its first line, and the notebook
   goes on. With ``--fast`` only the setup cells, the exercise cells and the cells that the
   answers need (what they read, found by name) run, not the chapter's experiments.
   After each cell that may define an answer, and at the end, the answer (what the exercise
   passes to its checker) is taken out of the kernel with cloudpickle: so the *last*
   definition is graded, wherever it stands.
2. **Clean re-check.** Each answer is loaded in a new process that the notebook never
   touched, in an empty folder, and the book's checker is called on it there
   (:mod:`rnnbook.grade.recheck`): a fork of one warm process per class, which imported
   the checkers and has run no student's code. Its verdict is the grade. What the checker printed in
   the notebook stays in the feedback, but a ✓ printed by hand, a replaced, wrapped or
   patched checker, a redefined ``CheckFailed`` or an answer that passed only thanks to
   state an earlier cell left behind do not pass; the feedback says when the notebook
   showed a pass that the clean re-check did not confirm.

Each exercise gets one status: ``passed``, ``failed`` (the checker raised CheckFailed),
``not attempted`` (the stub still raises NotImplementedError, or the exercise cell is the
chapter's unchanged), ``crashed (...)`` (another exception, a time-out, a dead kernel, an
answer that cannot leave the notebook) or ``missing``. OUT receives ``gradebook.csv`` (one
row per student: per chapter the notebook's status, per exercise its status and points,
the chapter's points and maximum, and the student's total), ``feedback/<student>.md``,
``executed/<student>/<chapter>.ipynb`` (outputs capped), ``warnings.txt`` and
``results.json`` (everything, one record per notebook).

Why not nbgrader or otter-grader: the book's checkers already are the autograder (they test
the answer and word the hint), and the chapters mark exercises with MyST directives and a
checker call, not with the cell metadata, course database and release/collect workflow that
nbgrader needs, nor with the separate test files that otter-grader reads.

This is not a security sandbox: the temporary working directory keeps relative paths away
from the instructor's files and the clean re-check keeps the notebook's state away from the
checker, but the student's code runs with the grader's rights (an absolute path, the memory,
an answer that sabotages the checker from inside the clean process are not stopped); grade
untrusted submissions inside a container or as another user.
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

from rnnbook.grade import recheck
from rnnbook.grade.exercises import (
    CHECKER_CALL,
    Exercise,
    cell_names,
    chapter_label,
    checked_exercises,
    exercises,
    first_line,
    locate,
    names_in,
    needed_cells,
    same_code,
    source_of,
)
from rnnbook.grade.runner import PASS_MARK

__all__ = [
    "Exercise",
    "Outcome",
    "Run",
    "Submission",
    "checked_exercises",
    "exercises",
    "find_submissions",
    "grade_folder",
    "grade_notebook",
    "main",
]

PASSED, FAILED, NOT_ATTEMPTED, MISSING = "passed", "failed", "not attempted", "missing"
COMPLETED = "completed"
DEFAULT_TIMEOUT = 900  # seconds per notebook, wall clock
DEFAULT_CELL_TIMEOUT = 120  # seconds per cell that is not the chapter's own
DEFAULT_CHAPTER_CELL_TIMEOUT = 600  # seconds per chapter cell (the book build's own limit)
DEFAULT_CHECK_TIMEOUT = 120  # seconds per answer in the clean re-check
DEFAULT_MAX_OUTPUT = 200_000  # characters of output kept per cell
DEFAULT_PROFILE = "quick"
HARVEST_TIMEOUT = 60  # seconds to take the answers out of the kernel after a cell
FORGED = (
    "Your notebook showed a pass (✓) for this exercise, but the book's checker, run by the "
    "grader on the same answer in a fresh process, did not pass it. The pass in the notebook "
    "came from something the notebook did: state an earlier cell left behind (a file, a "
    "changed setting or library function), a replaced, wrapped or patched checker, or a ✓ "
    "printed by hand. Make the answer work on its own."
)


# --- which notebook is which --------------------------------------------------------------


@dataclass
class Submission:
    """One submitted notebook, matched to a student and a chapter."""

    student: str
    chapter: str
    path: Path
    note: str = ""  # e.g. that a newer notebook of the same chapter was graded instead


_DECORATION = re.compile(r"^(copy of\s+)+|\s*\(\d+\)$|\s*-\s*copy$", re.I)


def _clean_name(text: str) -> str:
    """A file name's leftover part with Colab's and the browser's decorations removed."""
    previous = None
    while previous != text:
        previous = text
        text = _DECORATION.sub("", text.strip()).strip(" -_.")
    return text


def _chapter_from_name(stem: str, chapters: list[str]) -> tuple[str, str] | None:
    """(chapter, the rest of the name) if a chapter's file name is part of ``stem``."""
    for chapter in sorted(chapters, key=len, reverse=True):
        at = stem.lower().find(chapter.lower())
        if at >= 0:
            return chapter, (stem[:at] + " " + stem[at + len(chapter) :]).strip()
    return None


def find_submissions(
    submissions: Path, reference: dict[str, dict] | None = None
) -> tuple[list[Submission], list[str]]:
    """The submissions under ``submissions`` matched to (student, chapter), and warnings.

    ``reference`` maps each chapter (``06_sba``) to its reference notebook. A notebook is
    matched by the chapter label in its first cells, else by a chapter's name inside its file
    name; without a reference, flat files are ``<chapter>-<student>.ipynb`` and files in a
    folder are named after their chapter. Checkpoint folders and hidden files are ignored.
    """
    submissions = Path(submissions)
    reference = reference or {}
    by_label = {chapter_label(nb): chapter for chapter, nb in reference.items()}
    by_label.pop(None, None)
    found: list[Submission] = []
    warnings: list[str] = []
    for path in sorted(submissions.rglob("*.ipynb")):
        relative = path.relative_to(submissions)
        if any(part.startswith(".") for part in relative.parts):
            continue
        folder = "/".join(relative.parts[:-1])
        notebook = _read_notebook(path)
        chapter = by_label.get(chapter_label(notebook)) if notebook else None
        named = _chapter_from_name(path.stem, list(reference))
        if chapter is None and named is not None:
            chapter = named[0]
        if chapter is None and not reference:
            if folder:
                chapter = _clean_name(path.stem)
            elif "-" in path.stem:
                chapter, rest = path.stem.split("-", 1)
                named = (chapter, rest)
        if chapter is None:
            why = (
                "it is not a notebook"
                if notebook is None
                else "no chapter's label in its first cells, no chapter's name in its file name"
            )
            warnings.append(f"{relative}: not graded ({why}).")
            continue
        if folder:
            student = folder
        else:
            rest = named[1] if named and named[0] == chapter else path.stem
            student = _clean_name(rest) or ""
            if not student:
                warnings.append(
                    f"{relative}: not graded (no student's name in the file name; "
                    "put it in a folder named after the student)."
                )
                continue
        found.append(Submission(student, chapter, path))
    # Two notebooks of one chapter by one student: the newest is graded.
    chosen: dict[tuple[str, str], list[Submission]] = {}
    for s in found:
        chosen.setdefault((s.student, s.chapter), []).append(s)
    result = []
    for (student, chapter), group in sorted(chosen.items()):
        group.sort(key=lambda s: (s.path.stat().st_mtime, str(s.path)))
        newest = group[-1]
        if len(group) > 1:
            others = ", ".join(f"`{s.path.relative_to(submissions)}`" for s in group[:-1])
            newest.note = (
                f"{len(group)} notebooks were handed in for {chapter}: the newest, "
                f"`{newest.path.relative_to(submissions)}`, was graded, not {others}."
            )
            warnings.append(f"{student}, {chapter}: {newest.note}")
        result.append(newest)
    return result, warnings


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


# --- one notebook -----------------------------------------------------------------------------


@dataclass
class Outcome:
    """The result of one exercise of one student."""

    student: str
    chapter: str
    label: str
    title: str
    status: str
    message: str = ""
    points: float = 0.0
    max_points: float = 1.0


@dataclass
class Run:
    """What happened to one submitted notebook."""

    student: str
    chapter: str
    path: str
    status: str
    seconds: float = 0.0
    recheck_seconds: float = 0.0
    outcomes: list[Outcome] = field(default_factory=list)
    cell_errors: list = field(default_factory=list)  # [first line, error] of cells that raised
    notes: list[str] = field(default_factory=list)


def _kill_group(pid: int | None) -> None:
    if not pid:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _norm(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines() if line.strip())


def _plan(notebook: dict, located: list[Exercise], reference: dict | None, options: dict):
    """Per code cell: its time limit and whether it runs; the answers to take out of the
    kernel and after which cells."""
    cells = notebook["cells"]
    sources = {i: source_of(c) for i, c in enumerate(cells) if c.get("cell_type") == "code"}
    own = {
        _norm(source_of(c))
        for c in (reference or {}).get("cells", [])
        if c.get("cell_type") == "code"
    }
    exercise_cells = {e.cell for e in located if e.cell is not None}
    answers = {e.label: e for e in located if e.args}
    names = {label: set().union(*(names_in(a) for a in e.args)) for label, e in answers.items()}
    after: dict[str, list[str]] = {}
    for index, source in sources.items():
        bound = cell_names(source)
        for label, e in answers.items():
            if e.cell is not None and index < e.cell:
                continue  # the exercise cell rebinds the answer: what stands above it is gone
            calls = any(m["name"] == e.checker for m in CHECKER_CALL.finditer(source))
            if bound is None:
                touches = any(re.search(rf"\b{re.escape(n)}\b", source) for n in names[label])
            else:
                touches = bool(bound.binds & names[label])
            if calls or touches:
                after.setdefault(str(index), []).append(label)
    if options["fast"]:
        lead = []
        for index, cell in enumerate(cells[1:], 1):
            if cell.get("cell_type") != "code":
                break
            lead.append(index)
        needs = set().union(*names.values()) if names else set()
        run = needed_cells(sources, set(lead) | exercise_cells, needs)
    else:
        run = set(sources)
    plan = {}
    for index, source in sources.items():
        chapter_cell = bool(own) and _norm(source) in own and index not in exercise_cells
        limit = options["chapter_cell_timeout"] if chapter_cell else options["cell_timeout"]
        plan[str(index)] = {"run": index in run, "timeout": limit}
    return plan, answers, after


def grade_notebook(
    student: str,
    chapter: str,
    path: Path,
    wanted: list[Exercise] | None,
    *,
    reference: dict | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    cell_timeout: float = DEFAULT_CELL_TIMEOUT,
    chapter_cell_timeout: float = DEFAULT_CHAPTER_CELL_TIMEOUT,
    max_output: int = DEFAULT_MAX_OUTPUT,
    kernel: str = "python3",
    executed: Path | None = None,
    fast: bool = False,
    profile: str | None = DEFAULT_PROFILE,
    points: dict[str, float] | None = None,
    check_timeout: float = DEFAULT_CHECK_TIMEOUT,
    pool: recheck.CleanPool | None = None,
) -> Run:
    """Run one submission in a fresh directory and a separate process, then re-check its
    answers in a clean one; never raises for anything the notebook does. ``reference`` is
    the chapter's own notebook (its cells get the chapter's time limit)."""
    start = time.monotonic()
    points = points or {}
    notebook = _read_notebook(path)
    if notebook is None:
        run = Run(student, chapter, str(path), "invalid notebook")
        run.outcomes = [
            Outcome(
                student,
                chapter,
                e.label,
                e.title,
                MISSING,
                "the file is not a notebook.",
                0.0,
                points.get(e.label, 1.0),
            )
            for e in wanted or []
        ]
        return run
    stubs = {e.label: e.source for e in wanted} if wanted is not None else {}
    located = locate(notebook, wanted) if wanted is not None else checked_exercises(notebook)
    options = {
        "fast": fast,
        "cell_timeout": cell_timeout,
        "chapter_cell_timeout": chapter_cell_timeout,
    }
    plan, answers, after = _plan(notebook, located, reference, options)
    workdir = Path(tempfile.mkdtemp(prefix="rnnbook-grade-work-"))
    private = Path(tempfile.mkdtemp(prefix="rnnbook-grade-run-"))
    try:
        copy = workdir / path.name
        shutil.copyfile(path, copy)
        (private / "answers").mkdir()
        paths = {label: str(private / "answers" / f"{n}.pkl") for n, label in enumerate(answers)}
        spec = {
            "notebook": str(copy),
            "workdir": str(workdir),
            "results": str(private / "results.json"),
            "executed": str(private / "executed.ipynb"),
            "cells": plan,
            "answers": {
                label: {"args": e.args, "path": paths[label]} for label, e in answers.items()
            },
            "harvest_after": after,
            "harvest_timeout": HARVEST_TIMEOUT,
            "max_output": max_output,
            "kernel": kernel,
        }
        (private / "spec.json").write_text(json.dumps(spec))
        runner = (
            "import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location('rnnbook_grade_runner', sys.argv[1])\n"
            "module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            "module.run(sys.argv[2])\n"
        )
        env = {**os.environ, "MPLBACKEND": "Agg", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        if profile:
            env["RNNBOOK_PROFILE"] = profile
        with open(private / "runner.log", "wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    runner,
                    str(Path(__file__).resolve().parent / "runner.py"),
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
        elif not record.get("status"):
            _kill_group(record.get("kernel_pid"))
        harvests = {}
        for label in answers:
            meta = Path(paths[label] + ".json")
            harvests[label] = json.loads(meta.read_text()) if meta.exists() else None
        # The clean re-check, of every answer that left the kernel, unless it is the one
        # whose cell ran out of time in the notebook (it would only do so again).
        timed_out = set(record.get("timed_out", []))
        jobs = [
            {"label": label, "checker": answers[label].checker, "path": paths[label]}
            for label, h in harvests.items()
            if h and "digest" in h and h.get("since") not in timed_out
        ]
        began = time.monotonic()
        verdicts = recheck.recheck(jobs, check_timeout, pool=pool) if jobs else {}
        recheck_seconds = time.monotonic() - began
        run = _run_of(student, chapter, path, notebook, record, killed, process, timeout, located)
        run.recheck_seconds = round(recheck_seconds, 1)
        context = {
            "record": record,
            "killed": killed,
            "timeout": timeout,
            "cell_timeout": cell_timeout,
            "notebook": notebook,
        }
        for exercise in located:
            status, message = _outcome(
                exercise,
                stubs.get(exercise.label),
                harvests.get(exercise.label),
                verdicts.get(exercise.label),
                context,
            )
            weight = float(points.get(exercise.label, 1.0))
            run.outcomes.append(
                Outcome(
                    student,
                    chapter,
                    exercise.label,
                    exercise.title,
                    status,
                    message,
                    weight if status == PASSED else 0.0,
                    weight,
                )
            )
        skipped = [i for i, p in plan.items() if not p["run"]]
        if skipped:
            run.notes.append(
                f"Fast mode: {len(plan) - len(skipped)} of {len(plan)} code cells ran (the "
                "setup, the exercise cells and the cells their answers need)."
            )
        if executed is not None and (private / "executed.ipynb").exists():
            executed.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(private / "executed.ipynb", executed)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
    run.seconds = round(time.monotonic() - start, 1)
    return run


def _cell_name(notebook: dict, index) -> str:
    try:
        return f'the cell "{first_line(source_of(notebook["cells"][int(index)]))}"'
    except (IndexError, ValueError, TypeError):
        return "a cell"


def _run_of(student, chapter, path, notebook, record, killed, process, timeout, located) -> Run:
    """The notebook's status, with the cells that raised or ran out of time."""
    exercise_cells = {e.cell for e in located if e.cell is not None}
    errors = []
    for index, entry in sorted(record.get("cells", {}).items(), key=lambda kv: int(kv[0])):
        if entry.get("ename") and int(index) not in exercise_cells:
            name = _cell_name(notebook, index)
            if int(index) in record.get("timed_out", []):
                errors.append([name, "ran out of time and was interrupted"])
            else:
                errors.append([name, f"{entry['ename']}: {entry.get('evalue', '')[:300]}"])
    running = record.get("running")
    if killed:
        status = f"time-out after {timeout:g} s"
        if running is not None and running >= 0:
            status += f" (in {_cell_name(notebook, running)})"
    elif record.get("status") == "kernel died":
        status = "kernel died"
        if running is not None and running >= 0:
            status += f" (in {_cell_name(notebook, running)})"
    elif record.get("status"):
        status = record["status"]
    else:
        status = f"grader error (exit code {process.returncode})"
    if status == COMPLETED and errors:
        status = f"{COMPLETED}, {len(errors)} cell{'s' * (len(errors) > 1)} raised"
    return Run(student, chapter, str(path), status, cell_errors=errors)


def _notebook_said(exercise: Exercise, record: dict) -> str:
    """What the exercise's cell showed in the notebook: its error or its checker's lines."""
    if exercise.cell is None:
        return ""
    entry = record.get("cells", {}).get(str(exercise.cell), {})
    printed = record.get("printed", {}).get(str(exercise.cell), [])
    if entry.get("ename"):
        return f"{entry['ename']}: {entry.get('evalue', '')}"
    return "\n".join(printed)


def _outcome(exercise, stub, harvest, verdict, context):
    """The status and message of one exercise, from the clean re-check's verdict (the
    grade) and what the notebook did (the feedback)."""
    record, notebook = context["record"], context["notebook"]
    cell = exercise.cell
    said = _notebook_said(exercise, record)
    if harvest is None or "digest" not in harvest:
        return _no_answer(exercise, harvest, context, said)
    since = harvest.get("since")
    if verdict is None:  # not re-checked: the cell that defined it ran out of time
        return "crashed (time-out)", (
            f"{_cell_name(notebook, since)} ran longer than {context['cell_timeout']:g} s "
            "and was interrupted."
        )
    status, message = verdict["status"], verdict.get("message", "")
    showed_pass = PASS_MARK in said and not record.get("cells", {}).get(str(cell), {}).get("ename")
    showed_pass = showed_pass or any(
        PASS_MARK in line
        for index, lines in record.get("printed", {}).items()
        for line in lines
        if exercise.checker.rsplit(".", 1)[-1] in line or int(index) == cell
    )
    unchanged = stub is not None and cell is not None and same_code(exercise.source, stub)
    if status not in (PASSED, NOT_ATTEMPTED) and unchanged and since == cell:
        return NOT_ATTEMPTED, "the exercise cell is unchanged from the chapter."
    notes = []
    if status != PASSED and showed_pass:
        notes.append(FORGED)
    if cell is not None and since not in (cell, -1, None):
        notes.append(
            f"Graded: the answer as {_cell_name(notebook, since)} (below the "
            "exercise) left it, its last definition."
        )
    if said and said.removeprefix("CheckFailed: ").strip() != message.strip() and not showed_pass:
        notes.append(f"In your notebook the cell showed:\n{said}")
    return status, "\n\n".join([message, *notes]).strip()


def _no_answer(exercise, harvest, context, said):
    """The status of an exercise whose answer never left the kernel."""
    record, notebook, cell = context["record"], context["notebook"], exercise.cell
    running, timed_out = record.get("running"), record.get("timed_out", [])
    error = (harvest or {}).get("error", "")
    if cell is None and (harvest is None or error.startswith("NameError")):
        return MISSING, f"no cell of the notebook calls checks.{exercise.checker}(...)."
    if context["killed"] and running == cell:
        return "crashed (time-out)", (
            f"the notebook hit its time limit of {context['timeout']:g} s in this cell"
            + (" (it ignored the interrupt)." if cell in timed_out else ".")
        )
    if cell in timed_out:
        return "crashed (time-out)", (
            f"the cell ran longer than {context['cell_timeout']:g} s and was interrupted."
        )
    entry = record.get("cells", {}).get(str(cell)) if cell is not None else None
    if harvest and harvest.get("pickle"):
        return "crashed (answer not picklable)", (
            f"the grader could not take the answer out of the notebook: {error}. Answers must "
            "be plain functions and values."
        )
    if entry and entry.get("ename"):
        return f"crashed ({entry['ename']})", said
    if entry is None:
        if context["killed"]:
            return "crashed (not run)", (
                f"the notebook hit its time limit of {context['timeout']:g} s before this cell."
            )
        if record.get("status") == "kernel died":
            if running == cell:
                return "crashed (kernel died)", "the kernel died while this cell ran."
            return "crashed (not run)", (
                f"the kernel died in {_cell_name(notebook, running)}, before this cell."
            )
        return "crashed (not run)", f"the cell did not run ({record.get('status') or 'grader'})."
    return "crashed (no answer)", f"the answer could not be read in the notebook: {error}"


# --- the class ----------------------------------------------------------------------------


def _columns(chapters: list[str], labels: dict[str, list[tuple[str, str]]]):
    """The CSV's columns, and per (chapter, label) the name of its status column; a label
    that two chapters share is prefixed with its chapter, so no two columns share a name."""
    seen: dict[str, int] = {}
    for chapter in chapters:
        for label, _ in labels[chapter]:
            seen[label] = seen.get(label, 0) + 1
    columns, names = ["student"], {}
    for chapter in chapters:
        columns.append(f"{chapter} notebook")
        for label, _ in labels[chapter]:
            name = label if seen[label] == 1 else f"{chapter}:{label}"
            names[chapter, label] = name
            columns += [name, f"{name} points"]
        columns += [f"{chapter} points", f"{chapter} max"]
    columns += ["points", "max"]
    if len(set(columns)) != len(columns):  # a chapter named like a label, say
        raise ValueError(f"two gradebook columns share a name: {columns}")
    return columns, names


def _number(x: float) -> str:
    return f"{x:g}"


def grade_folder(
    submissions,
    out,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    cell_timeout: float = DEFAULT_CELL_TIMEOUT,
    chapter_cell_timeout: float = DEFAULT_CHAPTER_CELL_TIMEOUT,
    reference=None,
    jobs: int = 1,
    max_output: int = DEFAULT_MAX_OUTPUT,
    kernel: str = "python3",
    fast: bool = False,
    profile: str | None = DEFAULT_PROFILE,
    points: dict[str, float] | None = None,
    check_timeout: float = DEFAULT_CHECK_TIMEOUT,
    quiet: bool = False,
) -> list[dict[str, str]]:
    """Grade every notebook in ``submissions``; write ``out/gradebook.csv``,
    ``out/feedback/<student>.md``, ``out/executed/``, ``out/warnings.txt`` and
    ``out/results.json``; return the gradebook's rows (one dict per student, keyed by the
    CSV's columns).

    ``reference`` is the folder of the chapters (default: the book's ``chapters/``): it fixes
    the exercises of each chapter, their untouched stubs and which cells are the chapter's
    own. A chapter not found there takes its exercises from the submissions themselves.
    ``points`` maps an exercise's label to its points (default 1 each).
    """
    submissions, out = Path(submissions), Path(out)
    reference = Path(reference) if reference is not None else _default_reference()
    in_reference = reference is not None and reference.is_dir()
    chapters_found = sorted(reference.glob("*.ipynb")) if in_reference else []
    references = {p.stem: nb for p in chapters_found if (nb := _read_notebook(p)) is not None}
    found, warnings = find_submissions(submissions, references)
    if not quiet:
        for warning in warnings:
            print(f"warning: {warning}", flush=True)
    chapters = sorted({s.chapter for s in found})
    students = sorted({s.student for s in found})
    wanted: dict[str, list[Exercise] | None] = {
        chapter: checked_exercises(references[chapter]) if chapter in references else None
        for chapter in chapters
    }

    def grade(submission: Submission) -> Run:
        run = grade_notebook(
            submission.student,
            submission.chapter,
            submission.path,
            wanted[submission.chapter],
            reference=references.get(submission.chapter),
            timeout=timeout,
            cell_timeout=cell_timeout,
            chapter_cell_timeout=chapter_cell_timeout,
            max_output=max_output,
            kernel=kernel,
            executed=out / "executed" / _safe(submission.student) / f"{submission.chapter}.ipynb",
            fast=fast,
            profile=profile,
            points=points,
            check_timeout=check_timeout,
            pool=pool,
        )
        if submission.note:
            run.notes.insert(0, submission.note)
        if not quiet:
            n = sum(o.status == PASSED for o in run.outcomes)
            print(
                f"{submission.student} {submission.chapter}: {run.status}, {n}/"
                f"{len(run.outcomes)} passed ({run.seconds:g} s, clean re-check "
                f"{run.recheck_seconds:g} s)",
                flush=True,
            )
        return run

    # One warm process for the class: each notebook's clean re-check is forked from it.
    with recheck.CleanPool() as pool, ThreadPoolExecutor(max_workers=max(1, jobs)) as threads:
        runs = list(threads.map(grade, found))

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
    columns, names = _columns(chapters, labels)
    weight = {
        label: float((points or {}).get(label, 1.0)) for c in chapters for label, _ in labels[c]
    }

    by_key = {(r.student, r.chapter): r for r in runs}
    rows = []
    for student in students:
        row = {"student": student}
        total = maximum = 0.0
        for chapter in chapters:
            run = by_key.get((student, chapter))
            row[f"{chapter} notebook"] = run.status if run else MISSING
            outcomes = {o.label: o for o in run.outcomes} if run else {}
            got = most = 0.0
            for label, _ in labels[chapter]:
                o = outcomes.get(label)
                row[names[chapter, label]] = o.status if o else MISSING
                row[f"{names[chapter, label]} points"] = _number(o.points if o else 0.0)
                got += o.points if o else 0.0
                most += weight[label]
            row[f"{chapter} points"], row[f"{chapter} max"] = _number(got), _number(most)
            total, maximum = total + got, maximum + most
        row["points"], row["max"] = _number(total), _number(maximum)
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
    (out / "warnings.txt").write_text("".join(f"{w}\n" for w in warnings), encoding="utf-8")
    (out / "results.json").write_text(
        json.dumps(
            {"warnings": warnings, "runs": [asdict(r) for r in runs]},
            indent=1,
            ensure_ascii=False,
            default=str,
        ),
        encoding="utf-8",
    )
    return rows


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name) or "_"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.strip().splitlines())


def _feedback(student: str, chapters, labels, by_key) -> str:
    """The student's feedback: per exercise its status, points and the checker's message and
    hint (the checkers word their hints never to give the solution away)."""
    lines = [f"# Feedback for {student}", ""]
    for chapter in chapters:
        run = by_key.get((student, chapter))
        lines += [f"## {chapter}", ""]
        if run is None:
            lines += ["No notebook was submitted for this chapter.", ""]
            continue
        outcomes = {o.label: o for o in run.outcomes}
        got = sum(o.points for o in run.outcomes)
        most = sum(o.max_points for o in run.outcomes)
        lines += [f"Notebook: {run.status}. Points: {_number(got)} of {_number(most)}.", ""]
        lines += [note for n in run.notes for note in (n, "")]
        for label, title in labels[chapter]:
            o = outcomes.get(label)
            status = o.status if o else MISSING
            lines += [f"### {title or label} (`{label}`): {status}", ""]
            message = o.message if o else "the exercise was not found in the notebook."
            if message:
                lines += [_quote(message), ""]
        if run.cell_errors:
            lines += ["Other cells that raised an error (they may explain a crash above):", ""]
            lines += [f"- {name}: {error}" for name, error in run.cell_errors[:20]]
            if len(run.cell_errors) > 20:
                lines.append(f"- and {len(run.cell_errors) - 20} more")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rnnbook.grade", description=__doc__.splitlines()[0]
    )
    parser.add_argument("submissions", type=Path, help="the handed-in notebooks, at any depth")
    parser.add_argument("out", type=Path, help="where gradebook.csv and feedback/ go")
    parser.add_argument(
        "--fast",
        action="store_true",
        help="run only the setup, the exercise cells and what the answers need",
    )
    parser.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help="RNNBOOK_PROFILE of the notebooks (default: quick)",
    )
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="wall-clock seconds per notebook"
    )
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=DEFAULT_CELL_TIMEOUT,
        help="seconds per cell that is not the chapter's own",
    )
    parser.add_argument(
        "--chapter-cell-timeout",
        type=float,
        default=DEFAULT_CHAPTER_CELL_TIMEOUT,
        help="seconds per cell of the chapter's own",
    )
    parser.add_argument(
        "--check-timeout",
        type=float,
        default=DEFAULT_CHECK_TIMEOUT,
        help="seconds per answer in the clean re-check",
    )
    parser.add_argument(
        "--points", type=Path, help="a JSON file: {exercise label: points}; 1 each by default"
    )
    parser.add_argument("--reference", type=Path, help="the chapters (default: the book's)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks run at the same time")
    parser.add_argument(
        "--max-output", type=int, default=DEFAULT_MAX_OUTPUT, help="characters kept per cell"
    )
    parser.add_argument("--kernel", default="python3", help="the Jupyter kernel to run")
    args = parser.parse_args(argv)
    points = json.loads(args.points.read_text()) if args.points else None
    if points is not None and not (
        isinstance(points, dict)
        and all(isinstance(v, int | float) and v >= 0 for v in points.values())
    ):
        parser.error(f"--points: expected a JSON object of label: number >= 0, got {points!r}")
    started = time.monotonic()
    rows = grade_folder(
        args.submissions,
        args.out,
        args.timeout,
        cell_timeout=args.cell_timeout,
        chapter_cell_timeout=args.chapter_cell_timeout,
        reference=args.reference,
        jobs=args.jobs,
        max_output=args.max_output,
        kernel=args.kernel,
        fast=args.fast,
        profile=args.profile or None,
        points=points,
        check_timeout=args.check_timeout,
    )
    print(
        f"{len(rows)} student(s) graded in {time.monotonic() - started:.0f} s: "
        f"{args.out / 'gradebook.csv'}"
    )
