"""Argument checks with messages that say what was expected and what came."""

from __future__ import annotations

import torch


def check_tensor(x, name: str, *, ndim: int | tuple[int, ...] | None = None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if x.dim() not in allowed:
            want = " or ".join(str(n) for n in allowed)
            raise ValueError(f"{name} must have {want} dimensions, got shape {tuple(x.shape)}")
    return x


def check_size(x: torch.Tensor, name: str, dim: int, expected: int, meaning: str) -> None:
    if x.shape[dim] != expected:
        raise ValueError(
            f"{name} must have {meaning} = {expected} in dimension {dim}, "
            f"got shape {tuple(x.shape)}"
        )


def check_positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def check_choice(value, name: str, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")


def check_shape(x, name: str, expected: tuple[int, ...], letters: str) -> torch.Tensor:
    """``x`` must be a floating-point tensor of shape ``expected``; ``letters`` spells the
    shape in the message, e.g. ``"(B, N)"``."""
    check_tensor(x, name, ndim=len(expected))
    if tuple(x.shape) != tuple(expected):
        raise ValueError(
            f"{name} must have shape {letters} = {tuple(expected)}, got {tuple(x.shape)}"
        )
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}")
    return x
