"""The full-profile verification records: the fingerprint, and that no record goes stale unsaid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rnnbook import verification
from rnnbook.paths import project_root

ROOT = project_root()


def make_tree(tmp_path: Path, files: dict[str, str], chapter_code: list[str]) -> Path:
    (tmp_path / "_config.yml").write_text("title: t\n")
    for name, text in files.items():
        path = tmp_path / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    cells = [{"cell_type": "markdown", "source": "# a chapter", "metadata": {}}]
    cells += [
        {"cell_type": "code", "source": code, "metadata": {}, "outputs": [], "execution_count": 1}
        for code in chapter_code
    ]
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "01_x.ipynb").write_text(json.dumps({"cells": cells}))
    return tmp_path


PACKAGE = {
    "rnnbook/__init__.py": "from rnnbook.profiles import Profile\n",
    "rnnbook/profiles.py": "X = 1\n",
    "rnnbook/models/__init__.py": "from .srn import SRN\n",
    "rnnbook/models/srn.py": "from rnnbook import skip\nSRN = 1\n",
    "rnnbook/skip.py": "from . import _validate\n",
    "rnnbook/_validate.py": "Y = 2\n",
    "rnnbook/unused.py": "Z = 3\n",
}


def test_package_files_follow_imports_transitively(tmp_path):
    root = make_tree(tmp_path, PACKAGE, ["import rnnbook\nfrom rnnbook.models import SRN"])
    names = [
        p.relative_to(root / "src").as_posix()
        for p in verification.package_files(
            verification.chapter_code(root / "chapters" / "01_x.ipynb"), root
        )
    ]
    assert names == sorted(
        [
            "rnnbook/__init__.py",
            "rnnbook/_validate.py",  # relative import inside skip
            "rnnbook/models/__init__.py",
            "rnnbook/models/srn.py",  # relative import inside a package's __init__
            "rnnbook/profiles.py",
            "rnnbook/skip.py",
        ]
    )  # unused.py is not imported


def test_a_changed_dependency_changes_the_fingerprint_and_names_the_file(tmp_path):
    root = make_tree(tmp_path, PACKAGE, ["from rnnbook.models import SRN\nprint(SRN)"])
    before = verification.fingerprint("01_x", root)
    (root / "src/rnnbook/unused.py").write_text("Z = 4\n")  # not a dependency
    assert verification.fingerprint("01_x", root) == before
    (root / "src/rnnbook/_validate.py").write_text("Y = 3\n")
    after = verification.fingerprint("01_x", root)
    assert after["sha256"] != before["sha256"]
    record = {"fingerprint": before}
    state = verification.Verification("01_x", record, after, None)
    assert state.stale_files == ["src/rnnbook/_validate.py"]
    assert not state.is_current


def test_a_changed_code_cell_changes_the_fingerprint_but_prose_does_not(tmp_path):
    root = make_tree(tmp_path, PACKAGE, ["x = 1"])
    before = verification.fingerprint("01_x", root)
    notebook = root / "chapters" / "01_x.ipynb"
    nb = json.loads(notebook.read_text())
    nb["cells"][0]["source"] = "# another title"
    notebook.write_text(json.dumps(nb))
    assert verification.fingerprint("01_x", root) == before
    nb["cells"][1]["source"] = "x = 2"
    notebook.write_text(json.dumps(nb))
    assert verification.fingerprint("01_x", root) != before


def test_summary_says_what_a_reader_needs(tmp_path):
    root = make_tree(tmp_path, PACKAGE, ["import rnnbook"])
    now = verification.fingerprint("01_x", root)
    record = {
        "commit": "0123456789abcdef",
        "date": "2026-11-28T10:00:00+00:00",
        "ok": True,
        "failed_cell": None,
        "seconds": 600.0,
        "machine": {"cores": 2},
        "fingerprint": now,
    }
    line = verification.Verification("01_x", record, now, None).summary()
    assert line == "full profile run at commit 0123456 on 2026-11-28: ok, 10 min on 2 CPU cores"
    stale = dict(now, files=dict(now["files"], **{"src/rnnbook/new.py": "0"}))
    line = verification.Verification("01_x", record, stale, "re-run queued").summary()
    assert "code changed since (src/rnnbook/new.py)" in line and line.endswith(
        "pending: re-run queued"
    )
    assert verification.Verification("01_x", None, now, None).summary() == (
        "full profile never verified"
    )


@pytest.mark.skipif(ROOT is None, reason="needs the book's checkout")
def test_no_chapter_record_is_stale_without_a_written_reason():
    """A chapter whose code changed since its full-profile verification, or that has none,
    must be listed in verification/pending.json with the reason; a listed chapter must really
    be out of date (so the list cannot hide a chapter that was re-verified)."""
    pending = verification.load_pending(ROOT)
    states = verification.status(ROOT)
    unsaid = [s.chapter for s in states if not s.is_current and s.pending is None]
    assert not unsaid, (
        f"the full-profile records of {unsaid} are missing or out of date: run "
        "`python scripts/verify_full.py CHAPTER`, or list the chapter in "
        "verification/pending.json with the reason"
    )
    current = [s.chapter for s in states if s.is_current and s.chapter in pending]
    assert not current, f"{current} are verified at the current code: remove them from pending.json"
    assert set(pending) <= {s.chapter for s in states}, "pending.json names unknown chapters"


@pytest.mark.skipif(ROOT is None, reason="needs the book's checkout")
def test_records_are_whole():
    for state in verification.status(ROOT):
        record = state.record
        if record is None:
            continue
        assert record["profile"] == "full" and record["chapter"] == state.chapter
        assert len(record["commit"]) == 40 and record["seconds"] > 0
        assert record["ok"] == (record["failed_cell"] is None)
        assert {"cpu", "cores", "torch"} <= set(record["machine"])
        assert record["cells"], "a record keeps each code cell's time and output"
