"""Profiles: one switch that scales every chapter (quick, full, paper).

- ``quick``: CI and CPU readers; each chapter runs in under 2 minutes on 2 cores.
- ``full``: the reader's default on a GPU; reproduces the chapter's claims in under 15 minutes.
- ``paper``: the source's exact configuration, however long it takes.

The profile is resolved from, in order: the chapter's papermill parameter ``profile``, the
environment variable ``RNNBOOK_PROFILE``, and the device (``full`` on a GPU, else ``quick``).
Chapters ask the profile for their sizes instead of branching by hand::

    sizes = prof.sizes(
        quick=dict(steps=300, hidden=32),
        full=dict(steps=3000, hidden=64),
        paper=dict(steps=20000, hidden=128),
    )
    sizes.steps
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch

PROFILES = ("quick", "full", "paper")
ENV_VAR = "RNNBOOK_PROFILE"


class Sizes:
    """Read-only attribute view of one profile's settings (``sizes.steps``)."""

    def __init__(self, profile: str, values: dict[str, Any]):
        object.__setattr__(self, "_profile", profile)
        object.__setattr__(self, "_values", MappingProxyType(dict(values)))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy and pickle probe for hooks before _values exists
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            known = ", ".join(sorted(self._values))
            raise AttributeError(
                f"profile {self._profile!r} defines no size {name!r}; it defines: {known}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("profile sizes are read-only; change them in the prof.sizes(...) call")

    def __reduce__(self):
        return (Sizes, (self._profile, dict(self._values)))

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"Sizes[{self._profile}]({inner})"


@dataclass(frozen=True)
class Profile:
    """The resolved profile: its ``name`` and where that choice came from (``source``)."""

    name: str
    source: str

    def pick(self, *, quick: Any, full: Any, paper: Any) -> Any:
        """Return the value given for this profile."""
        return {"quick": quick, "full": full, "paper": paper}[self.name]

    def sizes(self, *, quick: dict, full: dict, paper: dict) -> Sizes:
        """Return this profile's settings; all three profiles must name the same settings.

        Requiring the same keys catches a setting that was added to one profile and
        forgotten (or misspelt) in another.
        """
        given = {"quick": quick, "full": full, "paper": paper}
        for name, values in given.items():
            if not isinstance(values, dict):
                raise TypeError(f"sizes: {name}= must be a dict, got {type(values).__name__}")
        keys = {name: set(values) for name, values in given.items()}
        if not keys["quick"] == keys["full"] == keys["paper"]:
            everything = set.union(*keys.values())
            missing = {n: sorted(everything - k) for n, k in keys.items() if everything - k}
            raise ValueError(f"sizes: every profile must set the same names; missing: {missing}")
        return Sizes(self.name, given[self.name])

    def __str__(self) -> str:
        return self.name


def resolve_profile(requested: str | None = None, *, cuda_available: bool | None = None) -> Profile:
    """Resolve the profile: papermill parameter, then ``RNNBOOK_PROFILE``, then the device.

    Args:
        requested: the chapter's ``profile`` parameter; ``None`` or blank means "not given".
        cuda_available: override the device test (for tests); default ``torch.cuda.is_available()``.

    Raises:
        ValueError: a profile name that is not one of ``quick``, ``full``, ``paper``.
    """
    if requested is not None and not isinstance(requested, str):
        raise TypeError(f"profile must be a string or None, got {type(requested).__name__}")
    if requested and requested.strip():
        return Profile(_checked(requested, "the chapter's profile parameter"), "parameter")
    from_env = os.environ.get(ENV_VAR, "").strip()
    if from_env:
        return Profile(_checked(from_env, f"the environment variable {ENV_VAR}"), ENV_VAR)
    if cuda_available is None:
        cuda_available = torch.cuda.is_available()
    return Profile("full", "device: GPU") if cuda_available else Profile("quick", "device: CPU")


def _checked(name: str, where: str) -> str:
    value = name.strip().lower()
    if value not in PROFILES:
        raise ValueError(f"unknown profile {name!r} from {where}; expected one of {PROFILES}")
    return value
