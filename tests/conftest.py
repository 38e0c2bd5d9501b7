"""Shared set-up of the unit tests: CPU, one thread, Agg backend and a clean environment.

Every test starts with no ``RNNBOOK_*`` variable set (CI exports several), progress bars
off, and the dataset cache and checkpoint folder pointed into the test's ``tmp_path``, so no
test reads or writes the repository's ``data/`` or ``checkpoints/``.

The second run of ``make unit`` (``--rounding-run``) leaves out the modules of
``ROUNDING_FREE`` below, in which torch computes no float: see the comment there.
"""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")  # before anything imports matplotlib

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from rnnbook.paths import path_from_env  # noqa: E402

torch.set_num_threads(1)

# The offline dataset mirror, read before the autouse fixture below clears the variable.
# CI sets RNNBOOK_DATA_MIRROR (a relative path is taken from the repository root); locally
# the mirror sits beside the repository.
MIRROR = (
    path_from_env("RNNBOOK_DATA_MIRROR")
    or (Path(__file__).resolve().parents[1] / ".." / "shared" / "data").resolve()
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("RNNBOOK_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RNNBOOK_PROGRESS", "0")
    monkeypatch.setenv("RNNBOOK_DATA_DIR", str(tmp_path / "data-cache"))
    monkeypatch.setenv("RNNBOOK_CHECKPOINTS", str(tmp_path / "checkpoints"))
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def mirror() -> Path:
    """The offline dataset mirror; the test is skipped where it is absent."""
    if not (MIRROR / "ptb").is_dir() or not (MIRROR / "mnist").is_dir():
        pytest.skip(
            f"the offline dataset mirror is not at {MIRROR}; set RNNBOOK_DATA_MIRROR to "
            "the shared/data folder to run this test"
        )
    return MIRROR


# --- the second run of `make unit` ------------------------------------------------------------
# `make unit` runs the suite twice at the same time, the second time with ATEN_CPU_CAPABILITY
# set to another set of torch's vector kernels, which round differently (tests/README.md). The
# second run is there for the comparisons of floats that torch computed, so it is started with
# --rounding-run and leaves out the modules listed here: torch computes no float in them, in
# the test's process or in any kernel or program the test starts. Each entry says what the
# module tests instead. Every module not listed runs in both runs (a new module too).
#
# Two checks hold the list to that rule:
# - in the first run, each test of a listed module runs under FloatKernelWatch (below), which
#   fails the test if a torch operator returns a floating-point tensor in its process;
# - tests/test_rounding_run.py reads each listed module, the code it hands to a kernel or a
#   subprocess included, and fails if it names torch (an import, ``torch.`` anything) or
#   rnnbook.testing's assert_close_ulps.
# A module whose test calls an exercise checker cannot be listed anyway: a checker refuses to
# run under a torch mode such as the watch (rnnbook.checks.grading), and it compares floats.
ROUNDING_FREE = {
    "test_book_build.py": "tiny books built by jupyter-book; their kernels assign Python floats",
    "test_verification.py": "the fingerprints and records of the full-profile runs (text, JSON)",
    "test_execute_chapters.py": "scripts/execute_chapters.py on notebooks of plain Python",
    "test_paths.py": "where rnnbook.paths puts folders, also in a fresh process in chapters/",
    "test_image_alt.py": "book/_ext/image_alt.py: the alt text of the built figures",
    "test_claims_in_chapters.py": "the claims the chapters state, read from their code cells",
    "test_plot_figures.py": "the figures' styles and text sizes (matplotlib, no tensor)",
    "test_profiles.py": "the profiles' settings",
    "test_timing.py": "rnnbook.timing's clocks and reports",
    "test_book_layout.py": "the table of contents and the pages' files",
    "test_runs_ch7_queue.py": "the queue of Chapter 7's long runs, with its commands faked",
    "test_student_edition.py": "the student edition's sources; a first cell that imports rnnbook",
    "data/test_registry.py": "the dataset registry: file names, sizes and hashes",
    "models/test_lmu_frequency.py": "the LMU's transfer function in NumPy and SciPy",
}
TESTS = Path(__file__).resolve().parent


def listed_module(path: Path) -> str | None:
    """The key of ``path`` in ROUNDING_FREE, or None if the module is not listed."""
    try:
        key = Path(path).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return None
    return key if key in ROUNDING_FREE else None


def pytest_addoption(parser):
    parser.addoption(
        "--rounding-run",
        action="store_true",
        help="the second run of `make unit` (another ATEN_CPU_CAPABILITY): leave out the "
        "modules in which torch computes no float (ROUNDING_FREE in tests/conftest.py)",
    )


def pytest_report_header(config):
    if config.getoption("rounding_run"):
        return (
            f"rounding run: {len(ROUNDING_FREE)} modules in which torch computes no float are "
            "left out (ROUNDING_FREE in tests/conftest.py)"
        )


def pytest_ignore_collect(collection_path, config):
    # Not collected at all, so not even imported: None leaves the decision to pytest.
    if config.getoption("rounding_run") and listed_module(collection_path):
        return True
    return None


class FloatKernelWatch(TorchDispatchMode):
    """Records every torch operator that returns a floating-point tensor while it is on."""

    def __init__(self):
        super().__init__()
        self.seen: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        results = out if isinstance(out, (tuple, list)) else [out]
        if any(isinstance(r, torch.Tensor) and r.is_floating_point() for r in results):
            self.seen[str(func)] = self.seen.get(str(func), 0) + 1
        return out


def _watched(item) -> bool:
    return not item.config.getoption("rounding_run") and listed_module(item.path) is not None


def _fail_if_seen(item, watch: FloatKernelWatch, when: str) -> None:
    if watch.seen:
        ops = ", ".join(f"{op} x{n}" for op, n in sorted(watch.seen.items()))
        pytest.fail(
            f"{listed_module(item.path)} is in ROUNDING_FREE (tests/conftest.py), which the "
            f"second run of `make unit` leaves out, but torch computed floats in its {when}: "
            f"{ops}. Take the module off the list, or the computation out of the module.",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    if not _watched(item):
        return (yield)
    with FloatKernelWatch() as watch:
        result = yield
    _fail_if_seen(item, watch, "fixtures")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not _watched(item):
        return (yield)
    with FloatKernelWatch() as watch:
        result = yield
    _fail_if_seen(item, watch, "test")
    return result
