"""Datasets: ``fetch`` from the registry, loaders for the real data, seeded synthetic tasks."""

from rnnbook.data import catalog, synthetic
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

__all__ = [
    "REGISTRY",
    "ChecksumError",
    "DataError",
    "DataUnavailableError",
    "Dataset",
    "RemoteFile",
    "catalog",
    "fetch",
    "load_mnist",
    "load_ptb",
    "register",
    "synthetic",
]
