"""rnnbook.data.sequential: pixel permutations, psDigits and psMNIST (spec lmu §4.1, §5).

psMNIST reads MNIST from the offline mirror and is skipped where the mirror is absent.
"""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np
import pytest
import torch

from rnnbook.data.mnist import load_mnist
from rnnbook.data.registry import MIRROR_ENV_VAR, OFFLINE_ENV_VAR
from rnnbook.data.sequential import (
    load_psdigits,
    load_psmnist,
    permute_pixels,
    psmnist_permutation,
)

# --- permute_pixels ----------------------------------------------------------------------------


def test_permute_pixels_hand_built_example():
    images = torch.tensor([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]])
    out = permute_pixels(images, [3, 0, 2, 1])
    assert out.shape == (2, 4, 1)
    torch.testing.assert_close(
        out[..., 0], torch.tensor([[4.0, 1.0, 3.0, 2.0], [8.0, 5.0, 7.0, 6.0]]), rtol=0, atol=0
    )


@pytest.mark.parametrize(
    "permutation",
    [np.array([2, 0, 1, 5, 3, 4]), torch.tensor([2, 0, 1, 5, 3, 4]), [2, 0, 1, 5, 3, 4]],
    ids=["numpy", "tensor", "list"],
)
def test_permute_pixels_accepts_any_sequence_of_indices(permutation):
    images = torch.arange(12.0).view(2, 2, 3)
    expected = torch.tensor([[2.0, 0.0, 1.0, 5.0, 3.0, 4.0], [8.0, 6.0, 7.0, 11.0, 9.0, 10.0]])
    torch.testing.assert_close(
        permute_pixels(images, permutation)[..., 0], expected, rtol=0, atol=0
    )


def test_identity_permutation_is_row_major_flattening():
    images = torch.rand(3, 4, 5, generator=torch.Generator().manual_seed(0))
    out = permute_pixels(images, range(20))
    torch.testing.assert_close(out[..., 0], images.reshape(3, 20), rtol=0, atol=0)


@pytest.mark.parametrize(
    "images, permutation, match",
    [
        (
            torch.zeros(4, 4),
            range(4),
            r"images must be a tensor of shape \(N, H, W\), got \(4, 4\)",
        ),
        (
            torch.zeros(1, 2, 2, 1),
            range(4),
            r"images must be a tensor of shape \(N, H, W\), got \(1, 2, 2, 1\)",
        ),
        (np.zeros((1, 2, 2)), range(4), r"images must be a tensor .* got ndarray"),
        (torch.zeros(1, 2, 2), [0, 1, 2], "must reorder all 4 pixels, got 3 indices"),
        (torch.zeros(1, 2, 2), [0, 1, 1, 2], "must reorder all 4 pixels, got 4 indices"),
        (torch.zeros(1, 2, 2), [1, 2, 3, 4], "must reorder all 4 pixels, got 4 indices"),
    ],
    ids=["2-D", "4-D", "numpy images", "too short", "repeated index", "out of range"],
)
def test_permute_pixels_rejects_bad_input(images, permutation, match):
    with pytest.raises(ValueError, match=match):
        permute_pixels(images, permutation)


# --- the psMNIST permutation -------------------------------------------------------------------

# sha256 of the 784 entries as little-endian int64
PSMNIST_PERMUTATION_SHA256 = "0e64ecdef293eb878c33d86eefbafa135df4750614c79c10a584556313ed6697"


def test_psmnist_permutation_is_a_permutation_of_784_pixels():
    perm = psmnist_permutation()
    assert perm.shape == (784,) and perm.dtype == np.int64
    np.testing.assert_array_equal(np.sort(perm), np.arange(784))


def test_psmnist_permutation_is_pinned():
    """The stored permutation never changes: its first entries and its digest are fixed."""
    perm = psmnist_permutation()
    np.testing.assert_array_equal(perm[:8], [455, 351, 36, 179, 445, 767, 534, 405])
    digest = hashlib.sha256(perm.astype("<i8").tobytes()).hexdigest()
    assert digest == PSMNIST_PERMUTATION_SHA256


def test_psmnist_permutation_is_the_documented_draw():
    """The module says it was drawn once with NumPy's default_rng(2021)."""
    np.testing.assert_array_equal(
        psmnist_permutation(), np.random.default_rng(2021).permutation(784)
    )


# --- psDigits ----------------------------------------------------------------------------------


def _digits():
    from sklearn.datasets import load_digits

    digits = load_digits()
    return digits.images.reshape(len(digits.target), 64) / 16.0, digits.target


def _keys(x: torch.Tensor, y: torch.Tensor) -> Counter:
    """Each image as its sorted pixels (which a permutation does not change) and its label."""
    pixels = np.sort(x[..., 0].double().numpy(), axis=1)
    return Counter((row.tobytes(), int(label)) for row, label in zip(pixels, y.tolist()))


@pytest.fixture(scope="module")
def psdigits():
    return {split: load_psdigits(split) for split in ("train", "test")}


@pytest.mark.parametrize("split, n", [("train", 1400), ("test", 397)])
def test_psdigits_shapes_and_values(psdigits, split, n):
    x, y = psdigits[split]
    assert x.shape == (n, 64, 1) and x.dtype == torch.float32
    assert y.shape == (n,) and y.dtype == torch.long
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    assert set(y.tolist()) == set(range(10))


def test_psdigits_splits_are_disjoint_and_cover_all_1797_images(psdigits):
    images, labels = _digits()
    everything = Counter((np.sort(row).tobytes(), int(label)) for row, label in zip(images, labels))
    assert _keys(*psdigits["train"]) + _keys(*psdigits["test"]) == everything


def _mean_per_step(x) -> np.ndarray:
    """The mean intensity at each time step (pixel position) over a set of images."""
    x = x[..., 0].double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    return x.mean(0)


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    """About 1 when two sets of digits are read in the same pixel order, about 0 otherwise."""
    return float(np.corrcoef(a, b)[0, 1])


def test_psdigits_pixels_are_permuted_the_same_way_in_both_splits(psdigits):
    train = _mean_per_step(psdigits["train"][0])
    assert _correlation(train, _mean_per_step(psdigits["test"][0])) > 0.95
    images, _ = _digits()
    assert abs(_correlation(train, _mean_per_step(images))) < 0.5  # not row-major order


def test_psdigits_same_seed_same_data(psdigits):
    x, y = load_psdigits("train", perm_seed=42)
    torch.testing.assert_close(x, psdigits["train"][0], rtol=0, atol=0)
    torch.testing.assert_close(y, psdigits["train"][1], rtol=0, atol=0)


def test_psdigits_other_seed_other_split_and_permutation(psdigits):
    x, y = load_psdigits("train", perm_seed=7)
    x42, y42 = psdigits["train"]
    assert x.shape == x42.shape
    assert _keys(x, y) != _keys(x42, y42)  # another split
    assert abs(_correlation(_mean_per_step(x), _mean_per_step(x42))) < 0.5


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"split": "valid"}, r"split must be one of \('train', 'test'\), got 'valid'"),
        ({"perm_seed": 4.2}, "perm_seed must be an integer, got 4.2"),
        ({"perm_seed": True}, "perm_seed must be an integer, got True"),
        ({"perm_seed": "42"}, "perm_seed must be an integer, got '42'"),
    ],
    ids=["split", "float seed", "bool seed", "str seed"],
)
def test_psdigits_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_psdigits(**kwargs)


# --- psMNIST: the splits, on a stand-in for MNIST ---------------------------------------------


@pytest.fixture
def numbered_mnist(monkeypatch):
    """Replace MNIST by blank images whose labels are their index in the MNIST file."""

    def fake_load_mnist(split):
        n = 60_000 if split == "train" else 10_000
        return torch.zeros(1, 28, 28, dtype=torch.uint8).expand(n, 28, 28), torch.arange(n)

    monkeypatch.setattr("rnnbook.data.sequential.load_mnist", fake_load_mnist)


@pytest.mark.parametrize(
    "split, first, n", [("train", 0, 50_000), ("valid", 50_000, 10_000), ("test", 0, 10_000)]
)
def test_psmnist_splits_are_50k_10k_10k(numbered_mnist, split, first, n):
    """train is MNIST's first 50k training images, valid the last 10k, test the test set."""
    x, y = load_psmnist(split)
    assert x.shape == (n, 784, 1)
    torch.testing.assert_close(y, torch.arange(first, first + n), rtol=0, atol=0)


def test_psmnist_limit_beyond_the_split_returns_the_split(numbered_mnist):
    assert load_psmnist("valid", limit=20_000)[0].shape == (10_000, 784, 1)


# --- psMNIST: the real pixels, from the offline mirror -----------------------------------------


@pytest.fixture(scope="module")
def mnist_cache(tmp_path_factory):
    """One dataset cache and one copy of MNIST for the module: decompressed and read once."""
    return tmp_path_factory.mktemp("mnist-cache"), {}


@pytest.fixture
def mnist(mirror, mnist_cache, monkeypatch):
    """MNIST's raw splits, from the mirror only (the test is skipped without it)."""
    folder, splits = mnist_cache
    monkeypatch.setenv(MIRROR_ENV_VAR, str(mirror))
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    monkeypatch.setenv("RNNBOOK_DATA_DIR", str(folder))
    if not splits:
        splits.update(train=load_mnist("train"), test=load_mnist("test"))
    return splits


def _permuted(images: torch.Tensor) -> torch.Tensor:
    """MNIST images (N, 28, 28) uint8 as psMNIST sequences, by hand."""
    perm = np.random.default_rng(2021).permutation(784)
    return (images.reshape(len(images), 784).double()[:, perm] / 255).float().unsqueeze(-1)


@pytest.mark.parametrize("split, first", [("train", 0), ("valid", 50_000), ("test", 0)])
def test_psmnist_pixels_are_mnists_permuted(mnist, split, first):
    x, y = load_psmnist(split, limit=7)
    assert x.shape == (7, 784, 1) and x.dtype == torch.float32
    assert y.shape == (7,) and y.dtype == torch.long
    images, labels = mnist["test" if split == "test" else "train"]
    torch.testing.assert_close(x, _permuted(images[first : first + 7]), rtol=0, atol=1e-7)
    torch.testing.assert_close(y, labels[first : first + 7], rtol=0, atol=0)


def test_psmnist_test_split_is_all_of_mnists_test_set(mnist):
    x, y = load_psmnist("test")
    images, labels = mnist["test"]
    assert x.shape == (10_000, 784, 1) and x.dtype == torch.float32
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    torch.testing.assert_close(y, labels, rtol=0, atol=0)
    torch.testing.assert_close(x[-3:], _permuted(images[-3:]), rtol=0, atol=1e-7)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"split": "validation"}, r"split must be one of \('train', 'valid', 'test'\)"),
        ({"limit": 0}, "limit must be a positive integer, got 0"),
        ({"limit": -5}, "limit must be a positive integer, got -5"),
        ({"limit": 2.5}, "limit must be a positive integer, got 2.5"),
        ({"limit": True}, "limit must be a positive integer, got True"),
    ],
    ids=["split", "limit=0", "limit<0", "float limit", "bool limit"],
)
def test_psmnist_rejects_bad_arguments(kwargs, match):
    """Checked before any data is read, so no mirror is needed."""
    with pytest.raises(ValueError, match=match):
        load_psmnist(**kwargs)
