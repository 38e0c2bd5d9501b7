"""The grader's runner: execute one submitted notebook in a kernel and take its answers out.

The grader starts this file, by path, in a process of its own per notebook (``python -c ...
runner.py spec.json``); it imports nothing from ``rnnbook`` (whose ``__init__`` imports
torch), only nbclient, nbformat and the standard library. It

- runs the notebook's code cells in order in a fresh kernel, errors allowed, each with its
  own time limit (``grader_timeout`` in the spec); a cell that runs over it is interrupted
  and the notebook goes on; cells the fast mode leaves out are skipped;
- after every cell that may (re)define an exercise's answer, and once more at the end, runs a
  *harvest* cell that evaluates the answer (the arguments the exercise passes to its
  checker) in the student's namespace and stores it with cloudpickle, by value with the
  globals it uses, in the grader's private folder. The last good harvest of each answer is
  what the clean re-check (:mod:`rnnbook.grade.recheck`) grades;
- records, per cell, whether it raised and what (``ename``/``evalue``), the checkers' lines
  it printed (✓ passes, "not attempted yet"), and which cells ran out of time.

The harvest cells are removed again from the executed notebook that the instructor gets.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

PASS_MARK = "✓"  # rnnbook.checks.grading.passed prints "✓ name: ..."
NOT_ATTEMPTED_MARK = "not attempted yet"  # rnnbook.checks.grading.NOT_ATTEMPTED
MESSAGE_CAP = 4_000  # characters of an error message kept
KERNEL_START_ATTEMPTS = 3  # a kernel that dies before its first reply is started again
KERNEL_START_FAILURE = "Kernel died before replying to kernel_info"
SKIP_TAG = "grader-skip"

# Runs in the student's kernel, in a namespace of its own: ``_answers`` is a list of
# (label, [argument source, ...], path), ``_user`` the student's globals, ``_after`` the
# index of the cell it follows (-1: the end of the notebook).
HARVEST = """
import hashlib, json, os
import cloudpickle

for label, args, path in _answers:
    record = {"after": _after}
    try:
        values = tuple(eval(arg, _user) for arg in args)
    except BaseException as error:
        record["error"] = f"{type(error).__name__}: {error}"[:500]
    else:
        try:
            data = cloudpickle.dumps(values)
        except BaseException as error:
            record["error"] = f"it could not be pickled ({type(error).__name__}: {error})"[:500]
            record["pickle"] = True
        else:
            record["digest"] = hashlib.sha256(data).hexdigest()
            record["bytes"] = len(data)
    previous = {}
    if os.path.exists(path + ".json"):
        with open(path + ".json") as f:
            previous = json.load(f)
    if "error" in record:
        if "digest" in previous:  # keep the last good answer, note the failure
            previous["later_error"] = record
            record = previous
    else:
        if previous.get("digest") == record["digest"]:
            record["since"] = previous.get("since", _after)
        else:
            record["since"] = _after
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    with open(path + ".json.tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".json.tmp", path + ".json")
"""


def harvest_source(answers: list, after: int) -> str:
    """The code of a harvest cell; it uses only names it imports itself."""
    return (
        f"exec(compile({HARVEST!r}, '<grader>', 'exec'), "
        f"{{'__builtins__': __import__('builtins'), '_answers': {answers!r}, "
        f"'_user': globals(), '_after': {after}}})"
    )


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _make_client(nb, spec: dict, record: dict, results: Path):
    """An nbclient NotebookClient that records, per cell, its error and the checkers' lines it
    printed, notes time-outs, and keeps at most ``max_output`` characters per cell."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_output

    cap = spec["max_output"]

    def original(cell_index: int):
        """The index of the cell in the submission, or None for a harvest cell."""
        return nb.cells[cell_index].metadata.get("grader_index")

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
            index = original(cell_index)
            if index is not None and isinstance(plain, str):
                marks = (PASS_MARK, NOT_ATTEMPTED_MARK)
                if any(mark in plain for mark in marks):
                    kept_lines = record["printed"].setdefault(str(index), [])
                    for line in plain.splitlines():
                        line = line.strip().strip("'\"")[:MESSAGE_CAP]  # a checker's return value
                        if any(m in line for m in marks) and line not in kept_lines:
                            if len(kept_lines) < 5:
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
        index = original(cell_index)
        record["running"] = index if index is not None else -1  # -1: a harvest cell
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
        index = original(cell_index)
        if index is not None:
            record["cells"][str(index)] = entry
        elif "ename" in entry:
            record["harvest_errors"].append(f"{entry['ename']}: {entry['evalue'][:300]}")
        record["running"] = None
        _write_json(results, record)

    def timeout_for(cell) -> float | None:
        return cell.metadata.get("grader_timeout")

    client = GradingClient(
        nb,
        timeout=None,
        timeout_func=timeout_for,
        interrupt_on_timeout=True,
        allow_errors=True,
        kernel_name=spec["kernel"],
        skip_cells_with_tag=SKIP_TAG,
        record_timing=False,
        shutdown_kernel="immediate",  # nothing to save in a kernel that is thrown away
        resources={"metadata": {"path": spec["workdir"]}},
        on_cell_execute=on_cell_execute,
        on_cell_executed=on_cell_executed,
    )
    return client


def prepared(nb, spec: dict):
    """The notebook as the runner executes it: old outputs cleared, every code cell tagged
    with its index, time limit and whether it runs, and harvest cells inserted."""
    from nbformat.v4 import new_code_cell

    answers = spec["answers"]  # label -> {"args": [...], "path": ...}
    after = spec["harvest_after"]  # str(cell index) -> [labels]
    cells = []
    for index, cell in enumerate(nb.cells):
        cells.append(cell)
        if cell.cell_type != "code":
            continue
        plan = spec["cells"].get(str(index), {})
        cell.outputs, cell.execution_count = [], None  # no stale output from the student's run
        tags = [t for t in cell.metadata.get("tags", []) if t != "skip-execution"]
        if not plan.get("run", True):
            tags.append(SKIP_TAG)
        cell.metadata["tags"] = tags
        cell.metadata["grader_index"] = index
        cell.metadata["grader_timeout"] = plan.get("timeout")
        labels = after.get(str(index), [])
        if labels and plan.get("run", True):
            cells.append(_harvest_cell(new_code_cell, answers, labels, index, spec))
    if answers:
        cells.append(_harvest_cell(new_code_cell, answers, list(answers), -1, spec))
    nb.cells = cells
    return nb


def _harvest_cell(new_code_cell, answers, labels, after, spec):
    wanted = [[label, answers[label]["args"], answers[label]["path"]] for label in labels]
    cell = new_code_cell(harvest_source(wanted, after))
    cell.metadata["grader_harvest"] = True
    cell.metadata["grader_timeout"] = spec["harvest_timeout"]
    return cell


def run(spec_path: str) -> None:
    """Execute one notebook as described by the JSON file ``spec_path``."""
    import nbformat
    from nbclient.exceptions import DeadKernelError

    spec = json.loads(Path(spec_path).read_text())
    results = Path(spec["results"])
    record: dict = {
        "status": None,
        "running": None,
        "kernel_pid": None,
        "cells": {},
        "printed": {},
        "timed_out": [],
        "harvest_errors": [],
    }
    nb = prepared(nbformat.read(spec["notebook"], as_version=4), spec)
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
    nb.cells = [c for c in nb.cells if not c.metadata.get("grader_harvest")]
    for cell in nb.cells:
        for key in ("grader_index", "grader_timeout"):
            cell.metadata.pop(key, None)
        if SKIP_TAG in cell.metadata.get("tags", []):
            cell.metadata["tags"].remove(SKIP_TAG)
    nbformat.write(nb, spec["executed"])
    _write_json(results, record)


if __name__ == "__main__":
    run(sys.argv[1])
