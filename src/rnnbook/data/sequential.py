"""Images read one pixel per time step, in a fixed shuffled order: psMNIST and psDigits.

A fixed random permutation of the pixels destroys the local structure that makes the
unpermuted task easy (neighbouring pixels arrive at neighbouring steps), so the model must
remember information across the whole sequence.

* psMNIST: MNIST's 28 x 28 images as sequences of 784 pixels, split 50k / 10k / 10k
  (the last 10k training images are the validation set). The permutation is ours, drawn
  once with NumPy's ``default_rng(2021)`` and stored beside this file, so it never changes
  with a library version. It is *not* the permutation of Chandar et al. or Voelker et al.
* psDigits: scikit-learn's 8 x 8 digits (1,797 images, shipped inside scikit-learn) as
  sequences of 64 pixels, split 1,400 / 397 with a fixed shuffle: a psMNIST small enough
  for CI.

Every loader returns ``x`` (N, T, 1) float32 in [0, 1] and labels ``y`` (N,) int64.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from rnnbook._validate import check_choice, check_positive_int
from rnnbook.data.mnist import load_mnist

PERMUTATION_FILE = Path(__file__).with_name("psmnist_permutation.npy")
PSMNIST_SPLITS = ("train", "valid", "test")
PSDIGITS_TRAIN = 1400


def psmnist_permutation() -> np.ndarray:
    """The book's fixed permutation of the 784 pixel positions (int64)."""
    perm = np.load(PERMUTATION_FILE).astype(np.int64)
    if sorted(perm.tolist()) != list(range(784)):
        raise ValueError(f"{PERMUTATION_FILE} does not hold a permutation of 0..783")
    return perm


def permute_pixels(images: torch.Tensor, permutation) -> torch.Tensor:
    """Flatten ``images`` (N, H, W) and reorder their pixels: a (N, H*W, 1) sequence batch."""
    if not isinstance(images, torch.Tensor) or images.dim() != 3:
        shape = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(f"images must be a tensor of shape (N, H, W), got {shape}")
    flat = images.reshape(images.shape[0], -1)
    permutation = torch.as_tensor(np.asarray(permutation), dtype=torch.long)
    if sorted(permutation.tolist()) != list(range(flat.shape[1])):
        raise ValueError(
            f"permutation must reorder all {flat.shape[1]} pixels, got {permutation.numel()} "
            "indices that are not a permutation of them"
        )
    return flat[:, permutation].unsqueeze(-1)


def load_psmnist(split: str = "train", limit: int | None = None):
    """psMNIST ``x`` (N, 784, 1) in [0, 1] and ``y`` (N,) for ``split`` train/valid/test.

    ``limit`` keeps only the first ``limit`` examples of the split (a smaller experiment,
    for example an exercise on a slow machine).
    """
    check_choice(split, "split", PSMNIST_SPLITS)
    if limit is not None:
        check_positive_int(limit, "limit")
    images, labels = load_mnist("test" if split == "test" else "train")
    if split == "train":
        images, labels = images[:50_000], labels[:50_000]
    elif split == "valid":
        images, labels = images[50_000:], labels[50_000:]
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    x = permute_pixels(images.float() / 255.0, psmnist_permutation())
    return x, labels


def load_psdigits(split: str = "train", perm_seed: int = 42):
    """psDigits ``x`` (N, 64, 1) in [0, 1] and ``y`` (N,): 1,400 train or 397 test images.

    The shuffle that splits the data and the pixel permutation both come from
    ``numpy.random.default_rng(perm_seed)``.
    """
    from sklearn.datasets import load_digits  # scikit-learn ships these 1,797 images

    check_choice(split, "split", ("train", "test"))
    if isinstance(perm_seed, bool) or not isinstance(perm_seed, int):
        raise ValueError(f"perm_seed must be an integer, got {perm_seed!r}")
    digits = load_digits()
    rng = np.random.default_rng(perm_seed)
    order = rng.permutation(len(digits.target))
    permutation = rng.permutation(64)
    keep = order[:PSDIGITS_TRAIN] if split == "train" else order[PSDIGITS_TRAIN:]
    images = torch.tensor(digits.images[keep] / 16.0, dtype=torch.float32)
    return permute_pixels(images, permutation), torch.tensor(digits.target[keep], dtype=torch.long)
