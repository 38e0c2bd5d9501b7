"""Folders named by environment variables mean the same folder from the root and chapters/.

The README's commands run at the repository root, but a chapter's kernel runs in
``chapters/``: a relative ``RNNBOOK_DATA_MIRROR=../shared/data`` must not point elsewhere
there. These tests change the working directory to ``chapters/`` as the kernel does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rnnbook.data.registry import DataUnavailableError, fetch
from rnnbook.paths import checkpoint_dir, data_dir, path_from_env, project_root

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"


def test_project_root_is_the_checkout():
    assert project_root() == ROOT


@pytest.mark.parametrize("cwd", [ROOT, CHAPTERS], ids=["root", "chapters"])
@pytest.mark.parametrize(
    "variable, reader",
    [("RNNBOOK_DATA_DIR", data_dir), ("RNNBOOK_CHECKPOINTS", checkpoint_dir)],
    ids=["data-dir", "checkpoints"],
)
def test_a_relative_folder_is_taken_from_the_repository_root(monkeypatch, cwd, variable, reader):
    monkeypatch.chdir(cwd)
    monkeypatch.setenv(variable, "runs/some-folder")
    assert reader() == ROOT / "runs" / "some-folder"


def test_an_absolute_folder_is_kept(monkeypatch, tmp_path):
    monkeypatch.chdir(CHAPTERS)
    monkeypatch.setenv("RNNBOOK_CHECKPOINTS", str(tmp_path))
    assert checkpoint_dir() == tmp_path.resolve()


def test_unset_or_blank_is_none(monkeypatch):
    monkeypatch.delenv("RNNBOOK_DATA_MIRROR", raising=False)
    assert path_from_env("RNNBOOK_DATA_MIRROR") is None
    monkeypatch.setenv("RNNBOOK_DATA_MIRROR", "  ")
    assert path_from_env("RNNBOOK_DATA_MIRROR") is None


def test_a_home_folder_is_expanded(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RNNBOOK_DATA_DIR", "~/cache")
    assert data_dir() == (tmp_path / "cache").resolve()


def _relative_to_root(folder: Path) -> str:
    """``folder`` written relative to the repository root, with ``..`` where needed."""
    return os.path.relpath(folder, ROOT)


def test_a_relative_mirror_is_found_from_chapters(mirror, monkeypatch):
    """What broke ``make book``: the kernel in chapters/ with a mirror relative to the root."""
    monkeypatch.chdir(CHAPTERS)
    monkeypatch.setenv("RNNBOOK_OFFLINE", "1")
    monkeypatch.setenv("RNNBOOK_DATA_MIRROR", _relative_to_root(mirror))
    folder = fetch("ptb")
    assert (folder / "ptb.valid.txt").is_file()


def test_a_relative_mirror_that_is_wrong_names_the_resolved_folder(monkeypatch):
    monkeypatch.chdir(CHAPTERS)
    monkeypatch.setenv("RNNBOOK_OFFLINE", "1")
    monkeypatch.setenv("RNNBOOK_DATA_MIRROR", "no/such/mirror")
    with pytest.raises(DataUnavailableError, match="no/such/mirror"):
        fetch("ptb")


def test_a_kernel_started_in_chapters_sees_the_same_folder(tmp_path):
    """The same check in a fresh process started in chapters/, as jupyter-book starts a kernel."""
    code = "from rnnbook.paths import checkpoint_dir; print(checkpoint_dir())"
    env = {"RNNBOOK_CHECKPOINTS": "runs/from-a-kernel", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=CHAPTERS, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == ROOT / "runs" / "from-a-kernel"


def test_every_copy_of_the_repository_url_is_the_one_in_config():
    """_config.yml sets the URL; the Colab cell of each chapter and the clone line copy it."""
    command = [sys.executable, str(ROOT / "scripts" / "sync_repository_url.py"), "--check"]
    out = subprocess.run(command, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
