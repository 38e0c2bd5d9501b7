"""Execute the book's chapters, several at a time, into the cache the HTML build reads.

``make html`` runs this first and the Jupyter Book build second. The build is set to
``execute_notebooks: cache`` (``_config.yml``): it executes a chapter only if the cache in
``_build/.jupyter_cache`` holds no run of the chapter's present code, and otherwise renders the
cached outputs. This script fills that cache with a fresh run of every chapter, ``--jobs`` at a
time (each chapter computes on one thread, ``rnnbook.runtime``), so that the build itself
executes nothing. It empties the cache first: every ``make html`` still executes every chapter
once, with the package as it is now (the cache's key is the chapters' code alone, and would
not notice a change in ``src/rnnbook``). In this mode myst-nb 1.4 writes the chapters to
``_build/jupyter_execute`` without their outputs; ``book/_ext/executed_copies.py`` writes the
executed ones there, where the claims page, the status page and the student edition read them.

A chapter that fails stops nothing else; at the end the script prints each chapter's time,
the traceback of each failure, and exits 1 if any failed (the build then does not start).
The executions are the build's own: the same client (``single_nb_execution`` of
jupyter-cache, as myst-nb calls it), the chapter's folder as working directory, the cell
timeout and ``allow_errors`` of ``_config.yml``.

    python scripts/execute_chapters.py --jobs 2 [chapters/03_ntm.ipynb ...]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat
import yaml
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_build" / ".jupyter_cache"  # where myst-nb looks (next to _build/html)


def book_chapters(root: Path = ROOT) -> list[Path]:
    """The notebooks of ``_toc.yml``, in the book's order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    found: list[Path] = []

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                path = root / f"{entry['file']}.ipynb"
                if path.is_file():
                    found.append(path)
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return found


def execution_settings(root: Path = ROOT) -> dict:
    """The cell timeout and allow_errors of ``_config.yml``'s ``execute`` section."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    execute = config.get("execute", {})
    return {
        "timeout": int(execute.get("timeout", 600)),
        "allow_errors": bool(execute.get("allow_errors", False)),
    }


def execute(path: Path, timeout: int, allow_errors: bool):
    """Run one chapter top to bottom in its folder: (notebook, seconds, CPU seconds of its
    kernel, traceback or None). A worker runs one chapter at a time, so the CPU time its
    finished children used during the run is the chapter's kernel's."""
    notebook = nbformat.read(path, as_version=4)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = single_nb_execution(
        notebook,
        cwd=str(path.parent),
        timeout=timeout,
        allow_errors=allow_errors,
        meta_override=True,
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return notebook, seconds, cpu, (result.exc_string if result.err is not None else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="default: every chapter of _toc.yml")
    parser.add_argument("--jobs", type=int, default=2, help="chapters at a time (default 2)")
    parser.add_argument("--cache", type=Path, default=CACHE, help=f"default {CACHE}")
    parser.add_argument(
        "--keep-cache", action="store_true", help="add to the cache instead of emptying it first"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    chapters = [path.resolve() for path in args.chapters] or book_chapters()
    missing = [str(path) for path in chapters if not path.is_file()]
    if missing:
        parser.error(f"no notebook at {missing}")
    settings = execution_settings()
    if not args.keep_cache and args.cache.exists():
        shutil.rmtree(args.cache)
    cache = get_cache(str(args.cache))

    print(f"executing {len(chapters)} chapters, {args.jobs} at a time", flush=True)
    start, failures, times, cpu_times = time.perf_counter(), {}, {}, {}
    spawn = multiprocessing.get_context("spawn")  # fresh workers, none holding the cache's db
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=spawn) as pool:
        runs = {pool.submit(execute, path, **settings): path for path in chapters}
        for done in as_completed(runs):
            path = runs[done]
            name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            try:
                notebook, seconds, cpu, failure = done.result()
            except Exception as error:  # the kernel could not start, a worker died, ...
                notebook, seconds, cpu, failure = None, 0.0, 0.0, f"{type(error).__name__}: {error}"
            times[name], cpu_times[name] = seconds, cpu
            if failure is not None:
                failures[name] = failure
                print(f"  FAILED {name} after {seconds:.0f} s", flush=True)
                continue
            record = cache.add_nb_to_project(str(path))
            cache.cache_notebook_bundle(
                CacheBundleIn(notebook, record.uri, data={"execution_seconds": seconds}),
                check_validity=False,
                overwrite=True,
            )
            print(f"  {seconds:6.0f} s ({cpu:4.0f} s CPU)  {name}", flush=True)
    wall = time.perf_counter() - start
    print(
        f"{len(chapters)} chapters in {wall:.0f} s of wall time "
        f"({sum(times.values()):.0f} s of chapter time, {sum(cpu_times.values()):.0f} s of CPU "
        f"time in the kernels, {args.jobs} at a time)"
    )
    for name, failure in failures.items():
        print(f"\n== {name} failed:\n{failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
