"""Datasets: ``fetch`` from the registry, loaders for the real data, seeded synthetic tasks.

``sequential`` turns images into pixel-by-pixel sequences (psMNIST, psDigits). ``cbt`` reads
and builds cloze questions (the Children's Book Test); ``syncloze`` is its synthetic stand-in.
"""

from rnnbook.data import catalog, cbt, syncloze, synthetic
from rnnbook.data.mnist import load_mnist
from rnnbook.data.ptb import load_ptb
from rnnbook.data.registry import (
    REGISTRY,
    ChecksumError,
    DataError,
    Dataset,
    DataUnavailableError,
    RemoteFile,
    fetch,
    register,
)
from rnnbook.data.sequential import load_psdigits, load_psmnist, psmnist_permutation

__all__ = [
    "REGISTRY",
    "ChecksumError",
    "DataError",
    "DataUnavailableError",
    "Dataset",
    "RemoteFile",
    "catalog",
    "cbt",
    "fetch",
    "load_mnist",
    "load_psdigits",
    "load_psmnist",
    "load_ptb",
    "psmnist_permutation",
    "register",
    "syncloze",
    "synthetic",
]
