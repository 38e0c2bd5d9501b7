"""Full-profile verification records: what a chapter's full profile gave, and on which code.

CI executes every chapter in the quick profile. The full profile, which a reader with a GPU
gets by default, is run by hand (``python scripts/verify_full.py CHAPTER``, hours on a CPU)
and leaves a record in ``verification/<chapter>.json``: the commit, the profile, the machine,
the wall time, whether every cell ran, and the printed output of each cell (where the chapter
prints the values its asserts judge).

A record is only worth something while the code it ran is the code of the book. So each
record keeps the chapter's *fingerprint*: a SHA-256 over the chapter's code cells and every
file of the package that those cells import, directly or through other modules of the package
(found by reading the ``import`` statements, :func:`package_files`). When any of these
changes, the record is *stale*: the status page says so and names the files, and
``tests/test_verification.py`` fails unless the chapter is listed, with a reason, in
``verification/pending.json`` (so that a record can go out of date only where somebody wrote
down that it did).

What the fingerprint does not cover: the committed checkpoints (``tests/test_book_checkpoints.py``
ties each one to its run and its code), the data, and the versions of third-party packages (the
record names torch's).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from rnnbook.paths import project_root

PACKAGE = "rnnbook"
RECORD_DIR = "verification"
PENDING_FILE = "pending.json"


def _root(root: Path | None) -> Path:
    root = root or project_root()
    if root is None:
        raise FileNotFoundError("no checkout of the book found (a _config.yml beside src/rnnbook)")
    return Path(root)


def chapter_code(notebook: Path) -> list[str]:
    """The source of every code cell of a chapter, in order (outputs and metadata left out)."""
    if not Path(notebook).is_file():
        raise FileNotFoundError(f"no chapter notebook at {notebook}")
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    code = []
    for cell in cells:
        if cell["cell_type"] == "code":
            source = cell["source"]
            code.append(source if isinstance(source, str) else "".join(source))
    return code


def _module_file(src: Path, dotted: str) -> Path | None:
    """The file of module ``dotted`` under ``src`` (a package's ``__init__.py``), or None."""
    base = src.joinpath(*dotted.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


@functools.cache
def _imported_modules(source: str, current: str | None = None) -> frozenset[str]:
    """The dotted names of package modules that ``source`` may import.

    ``from rnnbook.x import y`` counts ``rnnbook.x`` and, in case ``y`` is a submodule,
    ``rnnbook.x.y`` (names that are not modules are dropped by the caller). ``current`` is the
    importing module's dotted name, for relative imports. Remembered per source text: the
    chapters import the same package files, which would otherwise be parsed once per chapter.
    """
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from .x import y
                if current is None:
                    continue
                parts = current.split(".")
                base_parts = parts[: len(parts) - node.level]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] != PACKAGE:
                continue
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    # importing a.b.c runs a/__init__ and a/b/__init__ first
    with_parents = set()
    for name in names:
        parts = name.split(".")
        with_parents.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return frozenset(with_parents)


def package_files(code: list[str], root: Path | None = None) -> list[Path]:
    """Every file of ``src/rnnbook`` that the code imports, directly or transitively, sorted."""
    src = _root(root) / "src"
    seen: dict[str, Path] = {}
    todo = set()
    for source in code:
        try:
            todo |= _imported_modules(source)
        except SyntaxError:  # a cell of shell or magic lines; it imports nothing we can read
            continue
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(src, name)
        if path is None:  # a name imported from a module, not a module
            continue
        seen[name] = path
        is_package = path.name == "__init__.py"
        current = name + ".__init__" if is_package else name
        todo |= _imported_modules(path.read_text(encoding="utf-8"), current) - set(seen)
    return sorted(seen.values())


def fingerprint(chapter: str, root: Path | None = None) -> dict:
    """The chapter's fingerprint: one hash over its code cells and the package files they use.

    Returns ``{"sha256": ..., "files": {relative path: sha256}}``, the chapter's code cells
    counted as the file ``chapters/<chapter>.ipynb (code cells)``.
    """
    root = _root(root)
    notebook = root / "chapters" / f"{chapter}.ipynb"
    code = chapter_code(notebook)
    files = {
        f"chapters/{chapter}.ipynb (code cells)": hashlib.sha256(
            "\n\0\n".join(code).encode()
        ).hexdigest()
    }
    for path in package_files(code, root):
        files[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    total = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    return {"sha256": total, "files": files}


@dataclass(frozen=True)
class Verification:
    """One chapter's verification state, as the status page shows it."""

    chapter: str
    record: dict | None  # the committed record, or None (never verified)
    current: dict  # the chapter's fingerprint now
    pending: str | None  # the reason given in pending.json, or None

    @property
    def stale_files(self) -> list[str]:
        """The files whose hash changed, appeared or disappeared since the record's run."""
        if self.record is None:
            return []
        then = self.record["fingerprint"]["files"]
        now = self.current["files"]
        return sorted(name for name in set(then) | set(now) if then.get(name) != now.get(name))

    @property
    def is_current(self) -> bool:
        return self.record is not None and not self.stale_files

    def summary(self) -> str:
        """One line for the status page."""
        if self.record is None:
            text = "full profile never verified"
        else:
            r = self.record
            outcome = "ok" if r["ok"] else f"stopped at code cell {r['failed_cell']}"
            minutes = r["seconds"] / 60
            text = (
                f"full profile run at commit {r['commit'][:7]} on {r['date'][:10]}: "
                f"{outcome}, {minutes:.0f} min on {r['machine']['cores']} CPU cores"
            )
            if not self.is_current:
                changed = ", ".join(self.stale_files[:4])
                more = len(self.stale_files) - 4
                text += f"; code changed since ({changed}{f' and {more} more' if more > 0 else ''})"
        if self.pending:
            text += f"; pending: {self.pending}"
        return text


def records_dir(root: Path | None = None) -> Path:
    return _root(root) / RECORD_DIR


def load_pending(root: Path | None = None) -> dict[str, str]:
    """``verification/pending.json``: chapter -> why its record is missing or out of date."""
    path = records_dir(root) / PENDING_FILE
    if not path.is_file():
        return {}
    pending = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(pending, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in pending.items()
    ):
        raise ValueError(f"{path} must map chapter names to non-empty reasons")
    return pending


def load_record(chapter: str, root: Path | None = None) -> dict | None:
    path = records_dir(root) / f"{chapter}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def chapters(root: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (_root(root) / "chapters").glob("[0-9][0-9]_*.ipynb"))


def status(root: Path | None = None) -> list[Verification]:
    """Every chapter's verification state."""
    pending = load_pending(root)
    return [
        Verification(name, load_record(name, root), fingerprint(name, root), pending.get(name))
        for name in chapters(root)
    ]
