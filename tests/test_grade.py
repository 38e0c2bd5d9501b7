"""The instructors' gradebook (``python -m rnnbook.grade``) on planted submissions.

A tiny chapter with two exercises that call real, cheap checkers
(``checks.sba.module_surprisal`` and ``checks.zoneout.zoneout_step``) is written to
``tmp_path`` together with one submission per kind of student: all right, wrong answers, not
attempted, an endless loop, a kernel that dies, 50 MB of printing. They are graded once (the
module-scoped fixture below) and the tests read the gradebook, the feedback and the executed
notebooks. Timeouts are generous for a slow 2-core machine, except the exercise cell time-out
that the endless loop has to reach.
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


def chapter(cell_1: str = STUB_1, cell_2: str = STUB_2, extra: str | None = None):
    """The tiny chapter, as the student edition has it (tags and all), with the two exercise
    cells replaced by ``cell_1`` and ``cell_2``."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    tags = {"tags": ["skip-execution", "nbval-skip"]}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A tiny chapter"),
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
    if extra is not None:
        nb.cells.insert(2, nbformat.v4.new_code_cell(extra))
    return nb


SUBMISSIONS = {
    "ada": chapter(RIGHT_1, RIGHT_2),
    "bob": chapter(WRONG_1, WRONG_2, extra=VANDAL),
    "cyd": chapter(),
    "dan": chapter(LOOP_1, RIGHT_2),
    "eve": chapter(RIGHT_1, CRASH_2),
    # the printing in a cell of its own: no exercise cell's time limit applies to it
    "fay": chapter(RIGHT_1, RIGHT_2, extra=HUGE),
}
LABELS = ["ex-tiny-surprisal", "ex-tiny-zoneout"]
EXPECTED = {
    "ada": ("completed", "passed", "passed", "2"),
    "bob": ("completed", "failed", "failed", "0"),
    "cyd": ("completed", "not attempted", "not attempted", "0"),
    "dan": ("completed", "crashed (time-out)", "passed", "1"),
    "eve": ("kernel died (cell 5)", "passed", "crashed (kernel died)", "1"),
    "fay": ("completed", "passed", "passed", "2"),
}
CHAPTER = "01_tiny"
CELL_TIMEOUT = 20  # the endless loop is interrupted after this; a checker takes a few s at most
MAX_OUTPUT = 20_000
STUBBORN_TIMEOUT = 12  # the notebook time limit of the loop that ignores interrupts


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade the six students once, and the two stubborn ones beside them; returns (the
    instructor's folder, out, rows, seconds, the stubborn run)."""
    root = tmp_path_factory.mktemp("grading")
    reference = root / "chapters"
    reference.mkdir()
    nbformat.write(chapter(), reference / f"{CHAPTER}.ipynb")
    submissions = root / "submissions"
    for student, nb in SUBMISSIONS.items():
        (submissions / student).mkdir(parents=True)
        nbformat.write(nb, submissions / student / f"{CHAPTER}.ipynb")
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
    table = read_csv(out)
    assert table == rows
    assert list(table[0]) == ["student", f"{CHAPTER} notebook", *LABELS, "passed"]
    assert [row["student"] for row in table] == sorted(SUBMISSIONS)
    for row in table:
        status, first, second, passed = EXPECTED[row["student"]]
        assert row == {
            "student": row["student"],
            f"{CHAPTER} notebook": status,
            LABELS[0]: first,
            LABELS[1]: second,
            "passed": passed,
        }, row["student"]


def feedback(out: Path, student: str) -> str:
    return (out / "feedback" / f"{student}.md").read_text(encoding="utf-8")


def test_feedback_gives_the_hints_and_no_solution(graded):
    _, out, *_ = graded
    assert sorted(p.stem for p in (out / "feedback").glob("*.md")) == sorted(SUBMISSIONS)
    bob = feedback(out, "bob")
    assert "failed" in bob
    assert "Hint: surprisal is minus the log of a probability." in bob
    assert "Hint: the order is (h, c)" in bob
    for student in SUBMISSIONS:
        text = feedback(out, student)
        assert "Module surprisal" in text and "A zoneout step" in text
        for line in SOLUTION_LINES:
            assert line not in text, (student, line)


def test_feedback_says_why_a_notebook_crashed_or_was_not_attempted(graded):
    _, out, *_ = graded
    assert "not implemented yet" in feedback(out, "cyd")
    assert "interrupted" in feedback(out, "dan")
    assert "kernel died" in feedback(out, "eve")
    assert "✓ layer_surprisal" in feedback(out, "ada")


def test_an_untouched_stub_counts_as_not_attempted(tmp_path):
    # A stub that runs without NotImplementedError (here: the checker is never reached)
    # is still "not attempted" when the cell is the chapter's own.
    reference = grade.checked_exercises(chapter())
    outcome = grade._outcome(
        reference[0], STUB_1, {"cells": {"3": {"status": "ok"}}}, False, {"timeout": 1}
    )
    assert outcome[0] == "not attempted"


def test_the_huge_output_is_capped(graded):
    _, out, *_ = graded
    executed = out / "executed" / "fay" / f"{CHAPTER}.ipynb"
    assert executed.stat().st_size < 10 * MAX_OUTPUT
    nb = nbformat.read(executed, as_version=4)
    text = "".join(o.get("text", "") for o in nb.cells[2].outputs)  # the extra cell
    assert "dropped" in text and len(text) < 2 * MAX_OUTPUT


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
    (the flat layout too) is graded meanwhile. Run in a thread beside the six students: it
    mostly waits."""
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
    quick = "checks.nothing.here(1)"  # NameError: no checks imported

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
        quiet=True,
    )
    return {"rows": rows, "pid_file": pid_file, "out": root / "out"}


def test_a_kernel_that_ignores_interrupts_meets_the_notebook_time_limit(graded):
    stubborn = graded[-1]
    assert stubborn["rows"] == [
        {
            "student": "hal",
            "loop notebook": f"time-out after {STUBBORN_TIMEOUT} s",
            "ex-loop": "crashed (time-out)",
            "passed": "0",
        },
        {
            "student": "ivy",
            "loop notebook": "completed",
            "ex-loop": "crashed (NameError)",
            "passed": "0",
        },
    ]
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


def test_exercises_are_read_from_the_myst_directives():
    found = grade.exercises(chapter())
    assert [(e.label, e.title, e.checker, e.cell) for e in found] == [
        ("ex-tiny-surprisal", "Module surprisal", "sba.module_surprisal", 3),
        ("ex-tiny-zoneout", "A zoneout step", "zoneout.zoneout_step", 5),
        ("ex-tiny-proof", "Prove it", None, None),
    ]


def test_exercises_of_the_real_chapters_are_found():
    chapters = sorted((Path(__file__).resolve().parents[1] / "chapters").glob("*.ipynb"))
    assert chapters
    for path in chapters:
        nb = json.loads(path.read_text())
        checked = grade.checked_exercises(nb)
        assert checked, path.name
        for e in checked:
            assert e.label.startswith("ex-") and "checks." in e.source, (path.name, e.label)


def test_both_layouts_are_accepted(tmp_path):
    (tmp_path / "ada").mkdir()
    (tmp_path / "ada" / "06_sba.ipynb").write_text("{}")
    (tmp_path / "07_zoneout-bob-smith.ipynb").write_text("{}")
    (tmp_path / "ada" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "ada" / ".ipynb_checkpoints" / "06_sba-checkpoint.ipynb").write_text("{}")
    found = [(s, c) for s, c, _ in grade.find_submissions(tmp_path)]
    assert sorted(found) == [("ada", "06_sba"), ("bob-smith", "07_zoneout")]


def test_the_worked_example_of_the_instructors_page_is_this_gradebook(graded):
    """book/instructors.md shows the gradebook of ada, bob and eve: it must be what the
    grader writes for them."""
    _, out, *_ = graded
    page = (Path(__file__).resolve().parents[1] / "book" / "instructors.md").read_text()
    block = page.split("student,01_tiny notebook,")[1].split("```")[0]
    shown = list(csv.reader(("student,01_tiny notebook," + block).strip().splitlines()))
    written = {row["student"]: row for row in read_csv(out)}
    assert [row[0] for row in shown[1:]] == ["ada", "bob", "eve"]
    for row in shown[1:]:
        assert row == list(written[row[0]].values()), row


def _run_with_failing_starts(tmp_path, monkeypatch, failures: int) -> tuple[dict, int]:
    """Run grade._run_one on a one-cell notebook whose kernel 'dies before replying' at the
    first ``failures`` starts; returns the runner's record and the number of starts."""
    import nbformat

    notebook = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), notebook)
    spec = {"results": str(tmp_path / "results.json"), "notebook": str(notebook), "cells": [],
            "executed": str(tmp_path / "executed.ipynb")}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    starts = []

    class Client:
        def execute(self):
            starts.append(1)
            if len(starts) <= failures:
                raise RuntimeError(grade.KERNEL_START_FAILURE)

    monkeypatch.setattr(grade, "_make_client", lambda *args: Client())
    grade._run_one(str(tmp_path / "spec.json"))
    return json.loads((tmp_path / "results.json").read_text()), len(starts)


def test_a_kernel_that_dies_at_start_is_started_again(tmp_path, monkeypatch):
    record, starts = _run_with_failing_starts(tmp_path, monkeypatch, failures=1)
    assert record["status"] == "completed" and starts == 2


def test_a_kernel_that_never_starts_is_reported(tmp_path, monkeypatch):
    record, starts = _run_with_failing_starts(tmp_path, monkeypatch, failures=5)
    assert starts == grade.KERNEL_START_ATTEMPTS
    assert record["status"].startswith("grader error: RuntimeError: Kernel died before")
