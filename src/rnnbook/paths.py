"""Where the book keeps things on disk: the project root, the dataset cache, checkpoints.

Every folder named by an environment variable goes through :func:`path_from_env`, so a
relative value means the same folder from the repository root and from ``chapters/``.
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path | None:
    """The checkout that holds ``_config.yml`` and ``src/rnnbook``, or ``None`` (a pip install).

    Looks beside the package first (editable installs, Colab's clone), then above the cwd.
    """
    here = Path(__file__).resolve()
    for start in (here.parent, Path.cwd().resolve()):
        for folder in (start, *start.parents):
            if (folder / "_config.yml").is_file() and (folder / "src" / "rnnbook").is_dir():
                return folder
    return None


def path_from_env(name: str) -> Path | None:
    """The folder named by the environment variable ``name``, or ``None`` when it is unset.

    A relative value is taken relative to the repository root, where the README's commands
    run, whatever the working directory of the process that reads it: a chapter's kernel runs
    in ``chapters/``, and ``RNNBOOK_DATA_MIRROR=../shared/data`` must mean the same folder
    there as in the shell that started the build. Outside a checkout (a pip install) it is
    taken relative to the working directory.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = (project_root() or Path.cwd()) / path
    return path.resolve()


def data_dir() -> Path:
    """The dataset cache: ``RNNBOOK_DATA_DIR``, else ``<root>/data``, else ``~/.cache/rnnbook``."""
    chosen = path_from_env("RNNBOOK_DATA_DIR")
    if chosen is not None:
        return chosen
    root = project_root()
    return root / "data" if root else Path.home() / ".cache" / "rnnbook"


def checkpoint_dir() -> Path:
    """Trained checkpoints: ``RNNBOOK_CHECKPOINTS``, else ``<root>/checkpoints``."""
    chosen = path_from_env("RNNBOOK_CHECKPOINTS")
    if chosen is not None:
        return chosen
    root = project_root()
    if root is None:
        raise FileNotFoundError(
            "checkpoints live in the book's repository (folder checkpoints/); clone it, or set "
            "RNNBOOK_CHECKPOINTS to a folder that holds them"
        )
    return root / "checkpoints"
