"""The instructors' gradebook (``python -m rnnbook.grade``) on planted submissions.

A tiny chapter with two exercises that call real, cheap checkers
(``checks.sba.module_surprisal`` and ``checks.zoneout.zoneout_step``) is written to
``tmp_path`` together with one submission per kind of student, under the names students give
their files: all right, wrong answers, not attempted, an endless loop, a kernel that dies,
50 MB of printing and a looping scratch cell, answers written below the stubs, and three
students who forge a pass (a printed ✓, a replaced, wrapped or patched checker, a redefined
CheckFailed, an answer that needs a file an earlier cell wrote). They are graded once (the
module-scoped fixture below) and the tests read the gradebook, the feedback and the executed
notebooks. Timeouts are generous for a slow 2-core machine, except the cell time-out that
the endless loops have to reach.
"""

from __future__ import annotations

import csv
import json
import os
import threading
import time
from pathlib import Path

import nbformat
import pytest

from rnnbook import grade
from rnnbook.grade import runner

SETUP = "import torch\n\nfrom rnnbook import checks"
STUB_1 = """def layer_surprisal(v, M, pooling):
    raise NotImplementedError  # your code here


checks.sba.module_surprisal(layer_surprisal)"""
STUB_2 = """def zoneout_step(c_prev, h_prev, c_tilde, o, d_c, d_h):
    raise NotImplementedError  # your code here


checks.zoneout.zoneout_step(zoneout_step)"""

# The solutions: the feedback must never show a line of them.
RIGHT_1 = """def layer_surprisal(v, M, pooling):
    B, H = v.shape
    modules = v.reshape(B, M, H // M)
    p = modules.amax(-1) if pooling == "max" else modules.mean(-1)
    return -torch.log_softmax(p, dim=-1)


checks.sba.module_surprisal(layer_surprisal)"""
RIGHT_2 = """def zoneout_step(c_prev, h_prev, c_tilde, o, d_c, d_h):
    c_new = d_c * c_prev + (1 - d_c) * c_tilde
    h_new = d_h * h_prev + (1 - d_h) * (o * torch.tanh(c_tilde))
    return h_new, c_new


checks.zoneout.zoneout_step(zoneout_step)"""
SOLUTION_LINES = [
    "return -torch.log_softmax(p, dim=-1)",
    "c_new = d_c * c_prev + (1 - d_c) * c_tilde",
    "h_new = d_h * h_prev + (1 - d_h) * (o * torch.tanh(c_tilde))",
]

# Wrong answers whose mistakes the checkers recognise and name in a hint.
WRONG_1 = RIGHT_1.replace("-torch.log_softmax", "torch.log_softmax")  # the sign
WRONG_2 = RIGHT_2.replace("return h_new, c_new", "return c_new, h_new")  # the order
# It also tries to delete a file in the grader's working directory and to write one there.
VANDAL = """import os

for name in ("precious.txt", "gradebook.csv"):
    try:
        os.remove(name)
    except OSError:
        pass
with open("planted.txt", "w") as f:
    f.write("was here")"""

# An endless loop that sleeps, so that it leaves the CPU to the other students' notebooks.
LOOP_1 = "import time\n\n" + RIGHT_1.replace(
    "    B, H = v.shape", "    while True:\n        time.sleep(0.01)"
)
CRASH_2 = "import os\n\nos._exit(1)\n\n" + RIGHT_2
HUGE = 'for _ in range(50):\n    print("y" * 1_000_000)\n\n'


def exercise_statement(title: str, label: str, text: str) -> str:
    return f"```{{exercise}} {title}\n:label: {label}\n\n{text}\n```"


def chapter(cell_1: str = STUB_1, cell_2: str = STUB_2, extra=None, below=()):
    """The tiny chapter, as the student edition has it (tags and all), with the two exercise
    cells replaced by ``cell_1`` and ``cell_2``, ``extra`` (a cell or a list of cells) inserted
    after the setup and the cells ``below`` appended at the end."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    tags = {"tags": ["skip-execution", "nbval-skip"]}
    nb.cells = [
        nbformat.v4.new_markdown_cell("(ch-tiny)=\n# A tiny chapter"),
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_markdown_cell(
            exercise_statement("Module surprisal", "ex-tiny-surprisal", "Write it.")
        ),
        nbformat.v4.new_code_cell(cell_1, metadata=tags),
        nbformat.v4.new_markdown_cell(
            exercise_statement("A zoneout step", "ex-tiny-zoneout", "Write it too.")
        ),
        nbformat.v4.new_code_cell(cell_2, metadata=tags),
        nbformat.v4.new_markdown_cell(
            exercise_statement("Prove it", "ex-tiny-proof", "A written exercise, not checked.")
        ),
    ]
    for index, source in enumerate([extra] if isinstance(extra, str) else extra or []):
        nb.cells.insert(2 + index, nbformat.v4.new_code_cell(source))
    nb.cells += [nbformat.v4.new_code_cell(source) for source in below]
    return nb


# A scratch cell that loops (sleeping, to leave the CPU to the others) and one that raises.
SCRATCH_LOOP = "import time\n\nwhile True:  # trying something\n    time.sleep(0.01)"
TYPO = 'prnt("a typo")'
# The answers written in new cells below the untouched stubs: the first without a checker
# call of its own, the second with one.
BELOW_1 = RIGHT_1.split("\n\n\n")[0]
BELOW_2 = RIGHT_2
# Forged passes. mal prints a pass under the untouched stub, and replaces the second checker.
PRINTED_PASS = STUB_1 + '\nprint("✓ layer_surprisal: all 3 checks passed (shapes; values; M = 1).")'
REPLACED = (
    'checks.zoneout.zoneout_step = lambda fn: print("✓ zoneout_step: all checks passed.")\n\n'
    + WRONG_2
)
# max wraps the first checker to swallow its failure, and redefines CheckFailed for the second.
WRAPPED = (
    "_real = checks.sba.module_surprisal\n\n\n"
    "def _wrapped(fn):\n"
    "    try:\n"
    "        return _real(fn)\n"
    "    except Exception:\n"
    '        print("✓ layer_surprisal: all 3 checks passed.")\n\n\n'
    "checks.sba.module_surprisal = _wrapped\n\n" + WRONG_1
)
REDEFINED = (
    "from rnnbook.checks import grading\n\n"
    'grading.CheckFailed = type("CheckFailed", (UserWarning,), {})\n\n'
    + WRONG_2.replace(
        "checks.zoneout.zoneout_step(zoneout_step)",
        "try:\n    checks.zoneout.zoneout_step(zoneout_step)\nexcept UserWarning:\n"
        '    print("✓ zoneout_step: all checks passed.")',
    )
)
# pat leaves state behind in earlier cells: a patched torch.allclose (which once made the wrong
# surprisal pass the checker in the notebook; the checker now refuses to start and puts
# torch.allclose back) and a file the second answer reads.
PATCH = "import torch\n\ntorch.allclose = lambda *args, **kwargs: True"
WRITE_FILE = 'with open("order.txt", "w") as f:\n    f.write("hc")'
FROM_FILE = RIGHT_2.replace(
    "    return h_new, c_new",
    '    first = open("order.txt").read()[0]\n'
    '    return (h_new, c_new) if first == "h" else (c_new, h_new)',
)

# The grader runs the quick profile unless told otherwise (a GPU would choose the full one).
QUICK = 'import os\n\nassert os.environ["RNNBOOK_PROFILE"] == "quick"'

# Each student hands the notebook in under another of the names seen in real classes.
SUBMISSIONS = {
    "ada": ("ada/01_tiny.ipynb", chapter(RIGHT_1, RIGHT_2, extra=QUICK)),
    "bob": ("bob/01_tiny (1).ipynb", chapter(WRONG_1, WRONG_2, extra=VANDAL)),
    "cyd": ("cyd/Copy of 01_tiny.ipynb", chapter()),
    "dan": ("01_tiny-dan.ipynb", chapter(LOOP_1, RIGHT_2)),
    "eve": ("eve-01_tiny.ipynb", chapter(RIGHT_1, CRASH_2)),
    "sec1/gus": ("sec1/gus/homework.ipynb", chapter(below=[BELOW_1, BELOW_2])),
    "kim": ("kim/01_tiny.ipynb", chapter(RIGHT_1, RIGHT_2, extra=[HUGE, SCRATCH_LOOP, TYPO])),
    "mal": ("mal/01_tiny.ipynb", chapter(PRINTED_PASS, REPLACED)),
    "max": ("max/01_tiny.ipynb", chapter(WRAPPED, REDEFINED)),
    "pat": (
        "pat/01_tiny.ipynb",
        chapter(RIGHT_1.replace("-torch", "torch"), FROM_FILE, extra=[PATCH, WRITE_FILE]),
    ),  # fmt: skip
}
FORGERS = ["mal", "max", "pat"]
# the passes each forger's notebook showed: a checker refuses to start once a function of torch
# or of rnnbook was replaced (max's CheckFailed, pat's torch.allclose), in the notebook too
FORGED_PASSES = {"mal": 2, "max": 1, "pat": 1}
LABELS = ["ex-tiny-surprisal", "ex-tiny-zoneout"]
EXPECTED = {
    "ada": ("completed", "passed", "passed"),
    "bob": ("completed", "failed", "failed"),
    "cyd": ("completed", "not attempted", "not attempted"),
    "dan": ("completed", "crashed (time-out)", "passed"),
    "eve": ('kernel died (in the cell "import os")', "passed", "crashed (kernel died)"),
    "sec1/gus": ("completed", "passed", "passed"),
    "kim": ("completed, 2 cells raised", "passed", "passed"),
    "mal": ("completed", "not attempted", "failed"),
    "max": ("completed", "failed", "failed"),
    "pat": ("completed", "failed", "failed"),
}
CHAPTER = "01_tiny"
CELL_TIMEOUT = 20  # the endless loops are interrupted after this; a checker takes a few s at most
MAX_OUTPUT = 20_000
STUBBORN_TIMEOUT = 45  # the notebook time limit of the loop that ignores interrupts (a kernel
# can take 20 s to start on a loaded 2-core machine)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade the students once, and the two stubborn ones beside them; returns (the
    instructor's folder, out, rows, seconds, the stubborn run)."""
    root = tmp_path_factory.mktemp("grading")
    reference = root / "chapters"
    reference.mkdir()
    nbformat.write(chapter(), reference / f"{CHAPTER}.ipynb")
    submissions = root / "submissions"
    for name, nb in SUBMISSIONS.values():
        (submissions / name).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, submissions / name)
    # ada handed in an older version first: the newest is graded.
    older = submissions / "ada" / "Copy of 01_tiny.ipynb"
    nbformat.write(chapter(WRONG_1, WRONG_2), older)
    os.utime(older, (time.time() - 3600, time.time() - 3600))
    (submissions / "notes.ipynb").write_text("{}")  # matches no chapter
    # The grader runs from the instructor's folder, which holds a file worth keeping.
    instructor = root / "instructor"
    instructor.mkdir()
    (instructor / "precious.txt").write_text("keep me")
    out = instructor / "out"
    stubborn: dict = {}
    thread = threading.Thread(
        target=lambda: stubborn.update(grade_stubborn_students(root / "stubborn"))
    )
    thread.start()
    cwd = os.getcwd()
    os.chdir(instructor)
    try:
        started = time.monotonic()
        rows = grade.grade_folder(
            submissions,
            Path("out"),  # relative, as an instructor would type it
            timeout=240,
            cell_timeout=CELL_TIMEOUT,
            check_timeout=120,
            reference=reference,
            jobs=3,
            max_output=MAX_OUTPUT,
            quiet=True,
        )
        seconds = time.monotonic() - started
    finally:
        os.chdir(cwd)
        thread.join()
    return instructor, out, rows, seconds, stubborn


def read_csv(out: Path) -> list[dict[str, str]]:
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_every_cell_of_the_gradebook(graded):
    _, out, rows, *_ = graded
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
        header = next(csv.reader(f))
    assert header == [
        "student", f"{CHAPTER} notebook",
        LABELS[0], f"{LABELS[0]} points", LABELS[1], f"{LABELS[1]} points",
        f"{CHAPTER} points", f"{CHAPTER} max", "points", "max",
    ]  # fmt: skip
    table = read_csv(out)
    assert table == rows
    assert [row["student"] for row in table] == sorted(SUBMISSIONS)
    for row in table:
        status, first, second = EXPECTED[row["student"]]
        points = (first == "passed") + (second == "passed")
        assert row == {
            "student": row["student"],
            f"{CHAPTER} notebook": status,
            LABELS[0]: first,
            f"{LABELS[0]} points": str(int(first == "passed")),
            LABELS[1]: second,
            f"{LABELS[1]} points": str(int(second == "passed")),
            f"{CHAPTER} points": str(points),
            f"{CHAPTER} max": "2",
            "points": str(points),
            "max": "2",
        }, row["student"]


def feedback(out: Path, student: str) -> str:
    return (out / "feedback" / f"{grade._safe(student)}.md").read_text(encoding="utf-8")


def test_feedback_gives_the_hints_and_no_solution(graded):
    _, out, *_ = graded
    assert sorted(p.stem for p in (out / "feedback").glob("*.md")) == sorted(
        grade._safe(s) for s in SUBMISSIONS
    )
    bob = feedback(out, "bob")
    assert "failed" in bob
    assert "Hint: surprisal is minus the log of a probability." in bob
    assert "Hint: the order is (h, c)" in bob
    assert "In your notebook" not in bob  # the notebook said the same as the clean re-check
    for student in SUBMISSIONS:
        text = feedback(out, student)
        assert "Module surprisal" in text and "A zoneout step" in text
        for line in SOLUTION_LINES:
            assert line not in text, (student, line)


def test_feedback_says_why_a_notebook_crashed_or_was_not_attempted(graded):
    _, out, *_ = graded
    assert "not attempted yet" in feedback(out, "cyd")
    assert "interrupted" in feedback(out, "dan")
    assert "kernel died" in feedback(out, "eve")
    assert "✓ layer_surprisal" in feedback(out, "ada")


@pytest.mark.parametrize("student", FORGERS)
def test_a_forged_pass_does_not_count_and_the_feedback_says_why(graded, student):
    _, out, *_ = graded
    text = feedback(out, student)
    assert text.count("did not pass it") == FORGED_PASSES[student], text
    if FORGED_PASSES[student] < 2:  # the other exercise was refused in the notebook already
        assert "is not the one the checkers were imported with" in text, text
    assert "Points: 0 of 2" in text


def test_an_answer_that_needs_the_notebooks_state_fails_with_its_reason(graded):
    _, out, *_ = graded
    pat = feedback(out, "pat")
    assert "FileNotFoundError" in pat  # order.txt is not in the clean process's folder
    assert "state an earlier cell left behind" in pat


def test_the_last_definition_is_graded_wherever_it_stands(graded):
    _, out, *_ = graded
    gus = feedback(out, "sec1/gus")
    assert gus.count("Graded: the answer as the cell") == 2
    assert 'the cell "def layer_surprisal(v, M, pooling):" (below the exercise)' in gus


def test_a_looping_or_failing_cell_is_named_and_the_answers_still_graded(graded):
    _, out, *_ = graded
    kim = feedback(out, "kim")
    assert '- the cell "import time": ran out of time and was interrupted' in kim
    assert '- the cell "prnt("a typo")": NameError: name \'prnt\' is not defined' in kim


def test_the_newest_of_two_submissions_is_graded_and_said_so(graded):
    _, out, *_ = graded
    ada = feedback(out, "ada")
    assert "2 notebooks were handed in for 01_tiny: the newest, `ada/01_tiny.ipynb`" in ada
    warnings = (out / "warnings.txt").read_text()
    assert "notes.ipynb: not graded" in warnings and "ada, 01_tiny: 2 notebooks" in warnings


def test_an_untouched_stub_counts_as_not_attempted():
    # A stub whose checker fails without NotImplementedError (a value stub, say) is still
    # "not attempted" when the cell is the chapter's own and its answer came from that cell.
    reference = grade.checked_exercises(chapter())
    context = {"record": {"cells": {"3": {"status": "ok"}}}, "notebook": chapter(),
               "killed": False, "timeout": 1, "cell_timeout": 1}  # fmt: skip
    harvest = {"digest": "0", "since": 3}
    verdict = {"status": "failed", "message": "no"}
    outcome = grade._outcome(reference[0], STUB_1, harvest, verdict, context)
    assert outcome[0] == "not attempted"


def test_the_huge_output_is_capped(graded):
    _, out, *_ = graded
    executed = out / "executed" / "kim" / f"{CHAPTER}.ipynb"
    assert executed.stat().st_size < 10 * MAX_OUTPUT
    nb = nbformat.read(executed, as_version=4)
    assert nb.cells[2].source == HUGE  # no harvest cell left in the executed notebook
    text = "".join(o.get("text", "") for o in nb.cells[2].outputs)
    assert "dropped" in text and len(text) < 2 * MAX_OUTPUT
    assert len(nb.cells) == len(SUBMISSIONS["kim"][1].cells)


def test_executed_notebooks_hold_no_stale_outputs(graded):
    _, out, *_ = graded
    nb = nbformat.read(out / "executed" / "eve" / f"{CHAPTER}.ipynb", as_version=4)
    assert nb.cells[5].outputs == []  # the cell that killed the kernel


def test_a_submission_cannot_touch_the_graders_folder(graded):
    instructor, out, *_ = graded
    assert (instructor / "precious.txt").read_text() == "keep me"
    assert (out / "gradebook.csv").exists()
    assert not (instructor / "planted.txt").exists()
    assert not list(Path.cwd().glob("planted.txt"))


def grade_stubborn_students(root: Path) -> dict:
    """hal's loop swallows KeyboardInterrupt, so only the notebook's wall clock stops it; ivy
    (the flat layout too) is graded meanwhile. Run in a thread beside the others: it mostly
    waits. There is no reference chapter: the exercises come from the notebooks."""
    pid_file = root / "kernel.pid"
    stubborn = (
        "import os, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "while True:\n"
        "    try:\n"
        "        time.sleep(0.1)\n"
        "    except KeyboardInterrupt:\n"
        "        pass\n\n"
        "checks.nothing.here(1)"
    )
    quick = "checks.nothing.here(1)"  # NameError: no checks imported, and no such checker

    def notebook(code):
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        nb.cells = [
            nbformat.v4.new_markdown_cell(exercise_statement("Loop", "ex-loop", "Loop.")),
            nbformat.v4.new_code_cell(code, metadata={"tags": ["skip-execution"]}),
        ]
        return nb

    submissions = root / "submissions"
    submissions.mkdir(parents=True)
    nbformat.write(notebook(stubborn), submissions / "loop-hal.ipynb")  # the flat layout
    nbformat.write(notebook(quick), submissions / "loop-ivy.ipynb")
    rows = grade.grade_folder(
        submissions,
        root / "out",
        timeout=STUBBORN_TIMEOUT,
        cell_timeout=2,
        reference=root / "no-chapters",
        jobs=2,
        points={"ex-loop": 3},
        quiet=True,
    )
    return {"rows": rows, "pid_file": pid_file, "out": root / "out"}


def test_a_kernel_that_ignores_interrupts_meets_the_notebook_time_limit(graded):
    stubborn = graded[-1]
    assert [r["max"] for r in stubborn["rows"]] == ["3", "3"]  # the points it was given
    assert [(r["student"], r["loop notebook"], r["ex-loop"]) for r in stubborn["rows"]] == [
        ("hal", f'time-out after {STUBBORN_TIMEOUT} s (in the cell "import os, time")',
         "crashed (time-out)"),
        ("ivy", "completed", "crashed (no such checker)"),
    ]  # fmt: skip
    pid = int(stubborn["pid_file"].read_text())
    for _ in range(50):  # the kernel was killed; give its exit a moment
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z":
            break  # dead, waiting for init to reap it
        time.sleep(0.1)
    else:
        pytest.fail(f"the kernel {pid} still runs")
    hal = (stubborn["out"] / "feedback" / "hal.md").read_text()
    assert f"time limit of {STUBBORN_TIMEOUT} s in this cell (it ignored the interrupt)" in hal
    ivy = (stubborn["out"] / "feedback" / "ivy.md").read_text()
    assert "NameError: name 'checks' is not defined" in ivy  # what the notebook showed


def test_exercises_are_read_from_the_myst_directives():
    found = grade.exercises(chapter())
    assert [(e.label, e.title, e.checker, e.cell, e.args) for e in found] == [
        ("ex-tiny-surprisal", "Module surprisal", "sba.module_surprisal", 3, ["layer_surprisal"]),
        ("ex-tiny-zoneout", "A zoneout step", "zoneout.zoneout_step", 5, ["zoneout_step"]),
        ("ex-tiny-proof", "Prove it", None, None, []),
    ]


def test_exercises_of_the_real_chapters_are_found():
    chapters = sorted((Path(__file__).resolve().parents[1] / "chapters").glob("*.ipynb"))
    assert chapters
    for path in chapters:
        nb = json.loads(path.read_text())
        assert (grade.chapter_label(nb) or "").startswith("ch-"), path.name
        checked = grade.checked_exercises(nb)
        assert checked, path.name
        for e in checked:
            assert e.label.startswith("ex-") and "checks." in e.source, (path.name, e.label)
            assert e.args, (path.name, e.label)  # the answer the grader takes out


def test_the_worked_example_of_the_instructors_page_is_this_gradebook(graded):
    """book/instructors.md shows the gradebook of ada, bob and eve: it must be what the
    grader writes for them."""
    _, out, *_ = graded
    page = (Path(__file__).resolve().parents[1] / "book" / "instructors.md").read_text()
    block = page.split("student,01_tiny notebook,")[1].split("```")[0]
    shown = list(csv.reader(("student,01_tiny notebook," + block).strip().splitlines()))
    written = {row["student"]: row for row in read_csv(out)}
    assert shown[0] == list(written["ada"])
    assert [row[0] for row in shown[1:]] == ["ada", "bob", "eve"]
    for row in shown[1:]:
        assert row == list(written[row[0]].values()), row


def _run_with_failing_starts(tmp_path, monkeypatch, failures: int) -> tuple[dict, int]:
    """Run the runner on a one-cell notebook whose kernel 'dies before replying' at the
    first ``failures`` starts; returns the runner's record and the number of starts."""
    notebook = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), notebook)
    spec = {"results": str(tmp_path / "results.json"), "notebook": str(notebook), "cells": {},
            "answers": {}, "harvest_after": {}, "executed": str(tmp_path / "executed.ipynb")}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    starts = []

    class Client:
        def execute(self):
            starts.append(1)
            if len(starts) <= failures:
                raise RuntimeError(runner.KERNEL_START_FAILURE)

    monkeypatch.setattr(runner, "_make_client", lambda *args: Client())
    runner.run(str(tmp_path / "spec.json"))
    return json.loads((tmp_path / "results.json").read_text()), len(starts)


def test_a_kernel_that_dies_at_start_is_started_again(tmp_path, monkeypatch):
    record, starts = _run_with_failing_starts(tmp_path, monkeypatch, failures=1)
    assert record["status"] == "completed" and starts == 2


def test_a_kernel_that_never_starts_is_reported(tmp_path, monkeypatch):
    record, starts = _run_with_failing_starts(tmp_path, monkeypatch, failures=5)
    assert starts == runner.KERNEL_START_ATTEMPTS
    assert record["status"].startswith("grader error: RuntimeError: Kernel died before")
