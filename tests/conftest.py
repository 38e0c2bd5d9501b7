"""Shared set-up of the unit tests: CPU, one thread, Agg backend and a clean environment.

Every test starts with no ``RNNBOOK_*`` variable set (CI exports several), progress bars
off, and the dataset cache and checkpoint folder pointed into the test's ``tmp_path``, so no
test reads or writes the repository's ``data/`` or ``checkpoints/``.
"""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")  # before anything imports matplotlib

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

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
