"""The gradebook's parts without a class: the clean re-check of every chapter's reference
solutions, one real chapter graded end to end in the fast mode, the matching of renamed
submissions, the CSV's columns and the fast mode's choice of cells."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import time
from pathlib import Path

import cloudpickle
import nbformat
import numpy as np
import torch

from rnnbook import checks, grade
from rnnbook.grade import recheck
from rnnbook.grade.exercises import checker_args, needed_cells

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
# As in tests/test_chapter_solutions.py: a {solution} block holds one python block.
SOLUTION = re.compile(
    r"(?P<fence>`{3,})\{solution\}\s*(?P<label>\S+)(?P<body>.*?)\n(?P=fence)\s*$", re.S | re.M
)
PYTHON = re.compile(r"```python\n(?P<code>.*?)```", re.S)


def solutions(path: Path) -> dict[str, str]:
    """The code of each exercise's reference solution, by the exercise's label."""
    cells = json.loads(path.read_text())["cells"]
    text = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    found = {}
    for match in SOLUTION.finditer(text):
        code = PYTHON.findall(match["body"])
        if code:
            found[match["label"]] = code[0]
    return found


def test_every_reference_solution_passes_the_clean_recheck(tmp_path, capsys):
    """The chapters' own solutions as a class: each answer is taken out as the grader takes
    it out of a kernel (the checker call's arguments, cloudpickled by value) and graded in
    one clean process. An honest answer must pass there as it passes in the notebook."""
    jobs = []
    for path in CHAPTERS:
        for exercise in grade.checked_exercises(json.loads(path.read_text())):
            code = solutions(path)[exercise.label]
            namespace = {"__name__": "__main__", "torch": torch, "np": np, "checks": checks}
            if "zoo." in code:
                from rnnbook.arena import zoo

                namespace["zoo"] = zoo
            exec(code, namespace)  # the notebook's run: prints its ✓
            args = checker_args(code, exercise.checker) or exercise.args
            answer = tmp_path / f"{exercise.label}.pkl"
            answer.write_bytes(cloudpickle.dumps(tuple(eval(a, namespace) for a in args)))
            jobs.append({"label": exercise.label, "checker": exercise.checker, "path": str(answer)})
    assert capsys.readouterr().out.count("✓") == len(jobs)
    verdicts = recheck.recheck(jobs, timeout=300)
    failed = {k: v for k, v in verdicts.items() if v["status"] != "passed"}
    assert not failed and len(verdicts) == len(jobs) > 30


def test_a_clean_recheck_that_loops_or_dies_is_reported_and_the_rest_graded(tmp_path):
    """An answer that loops is stopped, one that ends its process is reported, and a new
    process grades the rest."""

    def loops(*args):
        while True:
            time.sleep(0.01)

    def dies(*args):
        os._exit(3)

    def right(margins, u_target, lam):  # rnnbook's own zoneout penalty is refused; write one
        u = (margins > 0).float() + margins - margins.detach()
        return lam * (u.mean() - u_target) ** 2

    jobs = []
    for label, fn in [("loops", loops), ("dies", dies), ("right", right)]:
        path = tmp_path / f"{label}.pkl"
        path.write_bytes(cloudpickle.dumps((fn,)))
        jobs.append({"label": label, "checker": "zoneout.msure_ste", "path": str(path)})
    with recheck.CleanPool() as pool:  # processes forked from a warm one, as for a class
        verdicts = recheck.recheck(jobs, timeout=15, pool=pool)
        assert not pool._failed  # they were forked, not started from scratch
    assert verdicts["loops"]["status"] == "crashed (time-out)"
    assert verdicts["dies"]["status"] == "crashed (grader process ended)"
    assert "the process ended" in verdicts["dies"]["message"]
    assert verdicts["right"]["status"] in ("passed", "failed")  # graded, whatever its merit


def _student_edition(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location(
        "student_book", ROOT / "scripts" / "student_book.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    notebook, removed = module.student_notebook(json.loads(path.read_text()))
    assert removed
    return notebook


def test_a_real_chapter_graded_in_the_fast_mode(tmp_path):
    """Chapter 6 of the student edition, handed in with the reference solutions (ada) and
    with a typical mistake in the first exercise (bob), is graded in the fast mode: the
    setup and the exercise cells run, none of the chapter's experiments."""
    path = ROOT / "chapters" / "06_sba.ipynb"
    answers = solutions(path)
    for student, mistake in [("ada", False), ("bob", True)]:
        notebook = _student_edition(path)
        for exercise in grade.checked_exercises(notebook):
            code = answers[exercise.label]
            if mistake and exercise.label == "ex-sba-surprisal":
                code = code.replace("-torch.log_softmax", "torch.log_softmax")
                assert code != answers[exercise.label]
            notebook["cells"][exercise.cell]["source"] = code
        folder = tmp_path / "submissions" / student
        folder.mkdir(parents=True)
        (folder / f"Copy of {path.name}").write_text(json.dumps(notebook))
    started = time.monotonic()
    rows = grade.grade_folder(
        tmp_path / "submissions", tmp_path / "out", timeout=600, fast=True, jobs=2, quiet=True
    )
    seconds = time.monotonic() - started
    labels = [e.label for e in grade.checked_exercises(json.loads(path.read_text()))]
    ada, bob = rows
    assert [ada[label] for label in labels] == ["passed"] * 3
    assert [bob[label] for label in labels] == ["failed", "passed", "passed"]
    assert (ada["06_sba notebook"], ada["points"], ada["max"]) == ("completed", "3", "3")
    feedback = (tmp_path / "out" / "feedback" / "ada.md").read_text()
    reference = json.loads(path.read_text())
    code = sum(c["cell_type"] == "code" for c in reference["cells"])
    ran = 3 + len(labels)  # the import cell, the parameters, the setup, the exercises
    assert f"Fast mode: {ran} of {code} code cells ran" in feedback, feedback
    assert seconds < 300  # a whole chapter in the quick profile takes minutes more


def _notebook(first: str, body: str = "x = 1") -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(first), nbformat.v4.new_code_cell(body)]
    return nbformat.writes(nb)


def test_renamed_submissions_are_matched_to_their_chapter(tmp_path):
    reference = {
        "06_sba": json.loads(_notebook("(ch-sba)=\n# SBA")),
        "07_zoneout": json.loads(_notebook("(ch-zoneout)=\n# Zoneout")),
    }
    files = {
        "ada/06_sba.ipynb": "(ch-sba)=\n# SBA",
        "ada/07_zoneout (1).ipynb": "(ch-zoneout)=\n# Zoneout",  # a second download
        "bob/Copy of 06_sba.ipynb": "(ch-sba)=\n# SBA",  # Colab's copy
        "student-06_sba.ipynb": "(ch-sba)=\n# SBA",  # flat: the student is "student"
        "06_sba-student D.ipynb": "(ch-sba)=\n# SBA",
        "e-06_sba.ipynb": "# no label, but the chapter's name",
        "06_sba_d.ipynb": "(ch-sba)=\n# SBA",
        "sec1/c/homework.ipynb": "(ch-zoneout)=\n# Zoneout",  # matched by its label
        "d/my work.ipynb": "# nothing to match",
        "ada/Copy of 07_zoneout.ipynb": "(ch-zoneout)=\n# Zoneout",  # older than the (1)
    }
    for n, (name, first) in enumerate(files.items()):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_notebook(first))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
    os.utime(tmp_path / "ada/Copy of 07_zoneout.ipynb", (1, 1))
    (tmp_path / "ada" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "ada/.ipynb_checkpoints/06_sba-checkpoint.ipynb").write_text(_notebook("x"))
    found, warnings = grade.find_submissions(tmp_path, reference)
    assert sorted((s.student, s.chapter, s.path.name) for s in found) == [
        ("ada", "06_sba", "06_sba.ipynb"),
        ("ada", "07_zoneout", "07_zoneout (1).ipynb"),
        ("bob", "06_sba", "Copy of 06_sba.ipynb"),
        ("d", "06_sba", "06_sba_d.ipynb"),
        ("e", "06_sba", "e-06_sba.ipynb"),
        ("sec1/c", "07_zoneout", "homework.ipynb"),
        ("student", "06_sba", "student-06_sba.ipynb"),
        ("student D", "06_sba", "06_sba-student D.ipynb"),
    ]
    assert any(w.startswith("d/my work.ipynb: not graded") for w in warnings)
    assert any("ada, 07_zoneout: 2 notebooks" in w for w in warnings)


def test_no_two_columns_share_a_name():
    labels = {"06_sba": [("ex-a", "A")], "07_zoneout": [("ex-a", "A"), ("ex-b", "B")]}
    columns, names = grade._columns(["06_sba", "07_zoneout"], labels)
    assert len(columns) == len(set(columns))
    assert names["06_sba", "ex-a"] == "06_sba:ex-a" and names["07_zoneout", "ex-b"] == "ex-b"


def test_the_fast_mode_runs_what_the_answers_need():
    sources = {
        1: "import torch\nfrom rnnbook import checks",
        2: "model = train(torch.randn(3))  # an experiment",
        3: "def helper(v):\n    return v * 2",
        4: "x = torch.zeros(3)\nmodel.eval()",
        5: "def answer(v):\n    return helper(v) + SCALE",
        6: "SCALE = 2.0",
        7: "checks.sba.sba_select(answer)",
        8: "scratch = model(x)",
    }
    run = needed_cells(sources, {1, 7}, {"answer"})
    assert run == {1, 3, 5, 6, 7}  # not the experiment, not x; SCALE's cell, read at the end
    assert needed_cells(sources, set(), {"model"}) == {1, 2, 4}  # model.eval() changes it
