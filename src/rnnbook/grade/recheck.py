"""The clean re-check: the book's own checker, imported fresh, called on a student's answer in a
process that the student's notebook never touched.

The runner stored each answer with cloudpickle (a function by value, with the globals it
uses; modules and the package's own functions by reference). :func:`recheck` starts a
process in an empty temporary folder, with the grader's own ``rnnbook`` first on the path,
and that process (:func:`main`) loads each answer, imports its checker and calls it. The
process is either a new ``python -I`` or, through a :class:`CleanPool`, a fork of a warm
process that imported torch and the checkers and never ran a student's code: the same
clean state, without starting Python and importing torch for every notebook.
Its verdict is the grade: a ✓ printed in the notebook, a checker replaced or wrapped there,
a patched ``CheckFailed`` or a state that an earlier cell left behind (a file, a changed
library function, a global setting) do not exist in this process.

What it cannot stop: the answer's own code runs in this process when the checker calls it
(and when it is unpickled), so an answer written to sabotage the checker from inside (patch
``rnnbook.checks`` while it runs, write a verdict, end the process) is not caught here. Grade
untrusted submissions in a container or as another user; ``book/instructors.md`` says so.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path

PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted"
OUTPUT_CAP = 4_000  # characters of the checker's printing kept
BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); from rnnbook.grade import recheck; "
    "recheck.main(sys.argv[2])"
)
BOOTSTRAP_SERVER = (
    "import sys; sys.path.insert(0, sys.argv[1]); from rnnbook.grade import recheck; "
    "recheck.serve()"
)
_SOURCE = str(Path(__file__).resolve().parents[2])  # the grader's own rnnbook, first on the path


def _check_one(job: dict) -> dict:
    """Load one answer, call its checker on it; the verdict as a dict."""
    import importlib

    import cloudpickle

    from rnnbook.checks import grading

    check_failed, not_attempted = grading.CheckFailed, grading.NotAttemptedYet  # before any
    # of the student's code runs here
    module, _, name = job["checker"].rpartition(".")
    try:
        checker = getattr(importlib.import_module(f"rnnbook.checks.{module}"), name)
    except (ImportError, AttributeError):
        return {
            "status": "crashed (no such checker)",
            "message": f"the book has no checker checks.{job['checker']}.",
        }
    try:
        with open(job["path"], "rb") as f:
            args = cloudpickle.load(f)
    except BaseException as error:  # noqa: BLE001 - the answer's own pickle may raise anything
        return {
            "status": "crashed (answer not loadable)",
            "message": f"the answer could not be loaded in a fresh process "
            f"({type(error).__name__}: {str(error)[:500]}): it needs something that exists "
            "only in the notebook.",
        }
    printed = io.StringIO()
    try:
        with redirect_stdout(printed):
            result = checker(*args)
    except check_failed as error:
        return {"status": FAILED, "message": str(error)[:OUTPUT_CAP]}
    except BaseException as error:  # noqa: BLE001 - a crash of the answer inside the checker
        return {
            "status": f"crashed ({type(error).__name__})",
            "message": f"{type(error).__name__}: {str(error)[:OUTPUT_CAP]}",
        }
    output = printed.getvalue().strip()[-OUTPUT_CAP:]
    if isinstance(result, not_attempted):
        return {"status": NOT_ATTEMPTED, "message": str(result)}
    if isinstance(result, str) and result.startswith("✓"):
        return {"status": PASSED, "message": result}
    return {
        "status": FAILED,
        "message": "the checker returned without a pass line" + (f": {output}" if output else "."),
    }


def main(spec_path: str) -> None:
    """The clean process: grade every job of the spec, one line of JSON per event."""
    spec = json.loads(Path(spec_path).read_text())
    with open(spec["log"], "a", buffering=1) as log:
        for job in spec["jobs"]:
            log.write(json.dumps({"label": job["label"], "event": "start"}) + "\n")
            log.flush()
            started = time.monotonic()
            verdict = _check_one(job)
            verdict.update(label=job["label"], event="done")
            verdict["seconds"] = round(time.monotonic() - started, 2)
            log.write(json.dumps(verdict) + "\n")
            log.flush()
            os.fsync(log.fileno())


CLEAN_ENV = {"MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # a
# checker is small work; one thread also keeps torch's thread pool out of the warm process,
# which forks


class _Spawned:
    """A clean process started from scratch (``python -I``)."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen

    def ended(self) -> str | None:
        code = self.popen.poll()
        return None if code is None else f"exit code {code}"

    def kill(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.popen.wait()


class _Forked:
    """A clean process forked from the warm one (:class:`CleanPool`), which reaps it."""

    def __init__(self, pid: int):
        self.pid = pid

    def ended(self) -> str | None:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return "the process ended"
        return None

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        for _ in range(200):
            if self.ended():
                return
            time.sleep(0.01)


def serve() -> None:
    """The warm process: import torch, every checker and cloudpickle once, then, for each
    request read from stdin (a JSON line: ``spec``, ``cwd``, ``stderr``), fork a child that
    runs :func:`main` on it, and answer with the child's pid. No student's code ever runs
    here, only in the children, each a copy of this untouched state: for the checker that is
    the same as a fresh import, without its seconds of start-up per notebook."""
    import traceback

    import cloudpickle  # noqa: F401 - imported once, for every child

    import rnnbook.checks  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the children are reaped by the kernel
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child
            code = 0
            try:
                os.setsid()  # its own process group, killed as one
                os.chdir(request["cwd"])
                err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                os.dup2(err, 2)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                main(request["spec"])
            except BaseException:  # noqa: BLE001 - reported through the log's absence
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()


class CleanPool:
    """Starts clean processes for :func:`recheck` by forking a warm process
    (:func:`serve`) instead of starting Python and importing torch for every notebook;
    where that is not possible (no ``os.fork``, the warm process died) it starts them from
    scratch. Use it as a context manager around a whole class."""

    def __init__(self, startup: float = 300.0):
        self._lock = threading.Lock()
        self._server: subprocess.Popen | None = None
        self._startup = startup
        self._failed = not hasattr(os, "fork")

    def __enter__(self) -> CleanPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._server is not None:
            try:
                self._server.stdin.close()
                os.killpg(self._server.pid, signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass
            self._server.wait()
            self._server = None

    def _start(self) -> None:
        self._server = subprocess.Popen(
            [sys.executable, "-I", "-c", BOOTSTRAP_SERVER, _SOURCE],
            cwd=tempfile.gettempdir(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **CLEAN_ENV},
            start_new_session=True,
            text=True,
        )
        ready = self._readline(self._startup)
        if ready != "ready":
            raise RuntimeError(f"the warm process did not start ({ready!r})")

    def _readline(self, timeout: float) -> str:
        import selectors

        with selectors.DefaultSelector() as selector:
            selector.register(self._server.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                return ""
        return self._server.stdout.readline().strip()

    def start(self, spec: Path, cwd: Path, stderr: Path):
        """A clean process checking ``spec``: forked if possible, else spawned."""
        with self._lock:
            if not self._failed:
                try:
                    if self._server is None or self._server.poll() is not None:
                        self.close()
                        self._start()
                    request = {"spec": str(spec), "cwd": str(cwd), "stderr": str(stderr)}
                    self._server.stdin.write(json.dumps(request) + "\n")
                    self._server.stdin.flush()
                    return _Forked(int(self._readline(60)))
                except (OSError, ValueError, RuntimeError):
                    self.close()
                    self._failed = True  # from now on, every process from scratch
        return _spawn(spec, cwd, stderr)


def _spawn(spec: Path, cwd: Path, stderr: Path) -> _Spawned:
    with open(stderr, "wb") as err:
        return _Spawned(
            subprocess.Popen(
                [sys.executable, "-I", "-c", BOOTSTRAP, _SOURCE, str(spec)],
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,  # the child holds its own copy
                env={**os.environ, **CLEAN_ENV},
                start_new_session=True,  # its own process group, killed as one
            )
        )


def recheck(
    jobs: list[dict], timeout: float, startup: float = 120.0, pool: CleanPool | None = None
) -> dict[str, dict]:
    """Grade ``jobs`` (``label``, ``checker``, ``path`` of the pickled answer) in clean
    processes; returns label -> verdict (``status``, ``message``, ``seconds``).

    One process checks them one after the other; an answer that runs longer than ``timeout``
    seconds, or ends the process, is reported as crashed and a new process takes the rest.
    With a ``pool`` the processes are forked from its warm process, else started from
    scratch.
    """
    verdicts: dict[str, dict] = {}
    pending = list(jobs)
    while pending:
        with tempfile.TemporaryDirectory(prefix="rnnbook-recheck-") as folder:
            folder = Path(folder)
            spec = {"jobs": pending, "log": str(folder / "log.jsonl")}
            (folder / "spec.json").write_text(json.dumps(spec))
            empty = folder / "cwd"
            empty.mkdir()
            stderr = folder / "stderr.txt"
            if pool is not None:
                process = pool.start(folder / "spec.json", empty, stderr)
            else:
                process = _spawn(folder / "spec.json", empty, stderr)
            began, started, crashed = time.monotonic(), {}, None
            while True:
                exited = process.ended()  # read the log after this, not before
                log = folder / "log.jsonl"
                text = log.read_text() if log.exists() else ""
                lines = text.split("\n")[:-1]  # whole lines only: the last may be half written
                for event in (json.loads(line) for line in lines if line.strip()):
                    if event["event"] == "start":
                        started.setdefault(event["label"], time.monotonic())
                    else:
                        verdicts[event["label"]] = event
                running = [label for label in started if label not in verdicts]
                if exited:
                    left = [job["label"] for job in pending if job["label"] not in verdicts]
                    if left:
                        crashed = (running[-1] if running else left[0], exited)
                    break
                now = time.monotonic()
                if running and now - started[running[-1]] > timeout:
                    process.kill()
                    verdicts[running[-1]] = {
                        "status": "crashed (time-out)",
                        "message": f"the answer ran longer than {timeout:g} s in the grader's "
                        "clean re-check and was stopped.",
                    }
                    break
                if not started and now - began > startup:
                    process.kill()
                    crashed = (pending[0]["label"], f"no answer checked within {startup:g} s")
                    break
                time.sleep(0.05)
            if crashed is not None:
                label, why = crashed
                log = stderr.read_text(errors="replace") if stderr.exists() else ""
                log = log.strip()[-500:]
                verdicts[label] = {
                    "status": "crashed (grader process ended)",
                    "message": f"the clean re-check ended while checking this answer ({why})"
                    + (f": {log}" if log else "."),
                }
        pending = [job for job in pending if job["label"] not in verdicts]
    return verdicts
