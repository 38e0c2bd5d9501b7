"""MNIST from the registry, parsed from its IDX files into tensors."""

from __future__ import annotations

import numpy as np
import torch

from rnnbook._validate import check_choice
from rnnbook.data.registry import fetch


def _read_idx(path) -> np.ndarray:
    data = path.read_bytes()
    if data[:2] != b"\x00\x00" or data[2] != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte IDX file")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_mnist(split: str = "train") -> tuple[torch.Tensor, torch.Tensor]:
    """Images ``(N, 28, 28)`` as uint8 and labels ``(N,)`` as int64 for ``split`` train/test."""
    check_choice(split, "split", ("train", "test"))
    folder = fetch("mnist")
    prefix = "train" if split == "train" else "t10k"
    images = _read_idx(folder / f"{prefix}-images-idx3-ubyte")
    labels = _read_idx(folder / f"{prefix}-labels-idx1-ubyte")
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))
