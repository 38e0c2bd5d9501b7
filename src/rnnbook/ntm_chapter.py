"""What the two pages of Chapter 3 share: the book's trained copy-task models, where their
learning curves are, and the fresh test sequences the chapter's claims are measured on.

The models are the copy-task NTM of the chapter, one step of which is (ntm-step): reading
(ntm-read), writing (ntm-write) and the four addressing steps (ntm-content) to
(ntm-sharpen); and its LSTM baseline, trained on the same batches.
``rnnbook.runs.copy.BOOK_RUNS`` defines both runs. The first page (``chapters/03_ntm.ipynb``)
tests how far the two models generalise; the second (``chapters/03_ntm_at_work.ipynb``)
looks inside the NTM and reads the learning curves. Each page runs on its own (Colab opens
one notebook), so each loads the models through :func:`load_book_runs`. In the ``paper``
profile both pages train in the same run folders (:func:`run_folder`); the trainer resumes a
run folder, so the page that runs second finds the runs finished instead of training them
again.
"""

from __future__ import annotations

from pathlib import Path

import torch

from rnnbook import longrun
from rnnbook.checkpoints import Trained
from rnnbook.data.synthetic import copy_task
from rnnbook.paths import checkpoint_dir, project_root
from rnnbook.profiles import Profile
from rnnbook.runs import copy as copy_runs

BOOK_RUN_NAMES = ("ntm-copy", "lstm-copy")  # the NTM, then its LSTM baseline
FRESH_SEED_BASE = 9_000_000  # the fresh test sequences of length L: generator 9,000,000 + L


def run_folder(name: str, profile: Profile) -> Path:
    """The folder in which the ``paper`` profile trains the book run ``name``:
    ``runs/<name>-<profile>`` in the book's checkout."""
    return project_root() / "runs" / f"{name}-{profile.name}"


def curve_file(name: str, profile: Profile) -> Path:
    """The learning curve of a copy run: beside its checkpoint, or, for a book run in the
    ``paper`` profile, in its run folder (that profile leaves the book's checkpoints alone)."""
    if profile.name == "paper" and name in copy_runs.BOOK_RUNS:
        return run_folder(name, profile) / longrun.CURVE_FILE
    return checkpoint_dir() / f"{name}.curve.csv"


def load_book_runs(profile: Profile, device: str | torch.device = "cpu") -> tuple[Trained, ...]:
    """The trained NTM and LSTM of ``rnnbook.runs.copy.BOOK_RUNS``, in that order, through
    :func:`rnnbook.longrun.train_or_load`: the quick and full profiles load the committed
    checkpoints (and refuse ones made otherwise), the ``paper`` profile trains in
    :func:`run_folder`."""
    return tuple(
        longrun.train_or_load(
            copy_runs.BOOK_RUNS[name](device=device),
            profile=profile,
            out_dir=run_folder(name, profile),
        )
        for name in BOOK_RUN_NAMES
    )


def fresh_batch(L: int) -> tuple[torch.Tensor, torch.Tensor]:
    """64 fresh copy-task sequences of length ``L``, ``(x, y)`` as ``copy_task`` returns them,
    drawn with the generator 9,000,000 + L: no training batch, no test batch of the runs' own
    evaluation (7,000,000 + L) and no choice between runs used them."""
    return copy_task(copy_runs.EVAL_BATCH, L, generator=FRESH_SEED_BASE + L)
