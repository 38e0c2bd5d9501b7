"""Run-time set-up shared by every chapter: profile, device, seed and thread count."""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass

import numpy as np
import torch

from rnnbook import claims
from rnnbook.plot import use_theme
from rnnbook.profiles import Profile, resolve_profile

THREADS_ENV_VAR = "RNNBOOK_THREADS"


@dataclass(frozen=True)
class Session:
    """What :func:`setup` decided: use ``session.profile.sizes(...)`` and ``session.device``."""

    profile: Profile
    device: torch.device
    seed: int
    threads: int

    def describe(self) -> str:
        return (
            f"profile {self.profile.name} (from {self.profile.source}), device {self.device}, "
            f"seed {self.seed}, {self.threads} CPU thread{'s' if self.threads != 1 else ''}, "
            f"torch {torch.__version__}"
        )


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch (CPU and CUDA); return a fresh CPU generator with ``seed``."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002  (seeds code that uses the global NumPy state)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return torch.Generator().manual_seed(seed)


def choose_device(prefer: str | None = None) -> torch.device:
    """``cuda`` when a GPU is visible, else ``cpu``; ``prefer`` forces one (e.g. ``"cpu"``)."""
    if prefer is not None:
        device = torch.device(prefer)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' was requested but torch sees no GPU")
        return device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def choose_threads() -> int:
    """CPU threads for torch: ``RNNBOOK_THREADS`` if set, else 1.

    The book's models are small; on a 2-core machine one thread is faster than two, because
    the per-step matrices are too small to split and the threads fight over the cores.
    """
    raw = os.environ.get(THREADS_ENV_VAR, "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{THREADS_ENV_VAR} must be a positive integer, got {raw!r}")
    return int(raw)


def on_colab() -> bool:
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def setup(profile: str | None = None, seed: int = 0, device: str | None = None) -> Session:
    """Resolve the profile, pick the device, seed everything, set threads and the plot theme.

    Prints one line saying what was chosen (and a hint when Colab runs without a GPU).
    """
    resolved = resolve_profile(profile)
    chosen = choose_device(device)
    threads = choose_threads()
    torch.set_num_threads(threads)
    seed_everything(seed)
    use_theme()
    session = Session(resolved, chosen, seed, threads)
    claims.set_profile(resolved.name)
    print(f"rnnbook {_version()}: {session.describe()}")
    if chosen.type == "cpu" and on_colab():
        print(
            "No GPU is selected. For the full profile choose Runtime > Change runtime type > "
            "GPU, then run the notebook again. The quick profile runs fine on the CPU."
        )
    return session


def _version() -> str:
    from rnnbook import __version__

    return __version__
