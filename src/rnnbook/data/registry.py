"""The dataset registry: ``fetch(name)`` returns a folder of verified files.

Every file is named by its canonical URL and the SHA-256 of its *payload* (the bytes a
loader reads; for a ``.gz`` download, the decompressed bytes, which do not depend on which
gzip made the archive). ``fetch`` looks, in order, in

1. the cache (``data/<dataset>/``, or ``RNNBOOK_DATA_DIR``), re-checking the hash;
2. the offline mirror named by ``RNNBOOK_DATA_MIRROR`` (``<mirror>/<dataset>/<file>``, where
   a dataset may name another folder: the CBT datasets share ``<mirror>/cbt/``);
3. the canonical URL, downloaded with pooch, unless ``RNNBOOK_OFFLINE=1``.

A file is written to a temporary name beside its target, verified, and only then renamed,
so a failed download or a checksum mismatch never leaves a file behind. Nothing is ever
substituted: a dataset that cannot be had raises :class:`DataUnavailableError`.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from rnnbook.paths import data_dir, path_from_env

MIRROR_ENV_VAR = "RNNBOOK_DATA_MIRROR"
OFFLINE_ENV_VAR = "RNNBOOK_OFFLINE"


class DataError(RuntimeError):
    """A dataset could not be provided."""


class ChecksumError(DataError):
    """A file's payload does not have the SHA-256 the registry records."""


class DataUnavailableError(DataError):
    """A file is neither cached, nor in the mirror, nor downloadable."""


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset.

    Attributes:
        name: the payload's file name in the cache.
        url: the canonical URL.
        sha256: SHA-256 of the payload.
        url_gzipped: the URL serves the payload gzip-compressed.
        mirror_name: the file's name in the offline mirror (default: ``name + ".gz"``).
        url_hash: pooch-style hash of what the URL serves (``"md5:…"``), when known.
    """

    name: str
    url: str
    sha256: str
    url_gzipped: bool = False
    mirror_name: str | None = None
    url_hash: str | None = None

    @property
    def mirror_file(self) -> str:
        return self.mirror_name or f"{self.name}.gz"


@dataclass(frozen=True)
class Dataset:
    """A named set of files; ``mirror_folder`` is its folder in the mirror (default: ``name``)."""

    name: str
    files: tuple[RemoteFile, ...]
    license: str
    citation: str
    mirror_folder: str | None = None


REGISTRY: dict[str, Dataset] = {}


def register(dataset: Dataset) -> Dataset:
    """Add a dataset to the registry (a later registration of the same name replaces it)."""
    if not dataset.files:
        raise ValueError(f"dataset {dataset.name!r} lists no files")
    for f in dataset.files:
        if len(f.sha256) != 64 or any(c not in "0123456789abcdef" for c in f.sha256):
            raise ValueError(f"{dataset.name}/{f.name}: sha256 must be 64 lowercase hex digits")
    REGISTRY[dataset.name] = dataset
    return dataset


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(name: str) -> Path:
    """Return the cache folder of dataset ``name`` with every file present and verified."""
    if name not in REGISTRY:
        raise KeyError(f"unknown dataset {name!r}; the registry has: {sorted(REGISTRY)}")
    dataset = REGISTRY[name]
    folder = data_dir() / name
    folder.mkdir(parents=True, exist_ok=True)
    for remote in dataset.files:
        _ensure(dataset, remote, folder / remote.name)
    return folder


def _ensure(dataset: Dataset, remote: RemoteFile, target: Path) -> None:
    if target.is_file():
        if sha256_of(target) == remote.sha256:
            return
        target.unlink()  # a stale or damaged cache entry; fetch it again
    mirror = path_from_env(MIRROR_ENV_VAR)
    offline = os.environ.get(OFFLINE_ENV_VAR, "").strip().lower() not in ("", "0", "false", "no")
    wanted = f"{dataset.mirror_folder or dataset.name}/{remote.mirror_file}"
    if mirror:
        source = mirror / wanted
        if source.is_file():
            _install(source, source.suffix == ".gz", remote, target, origin=str(source))
            return
    if offline:
        advice = (
            f"The mirror {MIRROR_ENV_VAR}={mirror} has no {wanted}."
            if mirror
            else f"Set {MIRROR_ENV_VAR} to a folder holding {wanted}."
        )
        raise DataUnavailableError(
            f"{dataset.name}/{remote.name} is not cached at {target} and "
            f"{OFFLINE_ENV_VAR}=1 forbids downloading it from {remote.url}. {advice}"
        )
    _install(_download(remote, target.parent), remote.url_gzipped, remote, target, remote.url)


def _download(remote: RemoteFile, folder: Path) -> Path:
    import pooch

    scratch = Path(tempfile.mkdtemp(dir=folder, prefix=".download-"))
    try:
        path = pooch.retrieve(
            remote.url,
            known_hash=remote.url_hash,
            fname=Path(remote.url).name or remote.name,
            path=scratch,
            progressbar=False,
            downloader=pooch.HTTPDownloader(timeout=60),
        )
    except Exception as error:  # network errors, HTTP errors, pooch's hash mismatch
        shutil.rmtree(scratch, ignore_errors=True)
        raise DataUnavailableError(
            f"could not download {remote.name} from {remote.url}: {error}. Offline, set "
            f"{MIRROR_ENV_VAR} to a mirror folder (and {OFFLINE_ENV_VAR}=1 to skip the network)."
        ) from error
    return Path(path)


def _install(source: Path, gzipped: bool, remote: RemoteFile, target: Path, origin: str) -> None:
    """Copy (or decompress) ``source`` to a temporary file, verify it, then rename to ``target``."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        try:
            with os.fdopen(fd, "wb") as out, (gzip.open if gzipped else open)(source, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
        except (EOFError, gzip.BadGzipFile, zlib.error) as error:
            raise ChecksumError(
                f"{remote.name} from {origin} is not a valid gzip file ({error}); the file was "
                "not kept. The source is damaged or truncated."
            ) from error
        found = sha256_of(Path(tmp))
        if found != remote.sha256:
            raise ChecksumError(
                f"{remote.name} from {origin} has SHA-256 {found}, expected {remote.sha256}; "
                "the file was not kept. The source is damaged or not the registered dataset."
            )
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        if origin.startswith(("http://", "https://")):
            shutil.rmtree(source.parent, ignore_errors=True)  # pooch's scratch folder
