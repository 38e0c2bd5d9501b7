"""Where the book keeps things on disk: the project root, the dataset cache, checkpoints."""

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


def data_dir() -> Path:
    """The dataset cache: ``RNNBOOK_DATA_DIR``, else ``<root>/data``, else ``~/.cache/rnnbook``."""
    if os.environ.get("RNNBOOK_DATA_DIR"):
        return Path(os.environ["RNNBOOK_DATA_DIR"]).expanduser().resolve()
    root = project_root()
    return root / "data" if root else Path.home() / ".cache" / "rnnbook"


def checkpoint_dir() -> Path:
    """Trained checkpoints: ``RNNBOOK_CHECKPOINTS``, else ``<root>/checkpoints``."""
    if os.environ.get("RNNBOOK_CHECKPOINTS"):
        return Path(os.environ["RNNBOOK_CHECKPOINTS"]).expanduser().resolve()
    root = project_root()
    if root is None:
        raise FileNotFoundError(
            "checkpoints live in the book's repository (folder checkpoints/); clone it, or set "
            "RNNBOOK_CHECKPOINTS to a folder that holds them"
        )
    return root / "checkpoints"
