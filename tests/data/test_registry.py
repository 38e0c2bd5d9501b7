"""rnnbook.data.registry: fetch() from the cache, the offline mirror or the network, verified.

The conftest points RNNBOOK_DATA_DIR into ``tmp_path`` and clears the other variables.
Downloads go to a local ``http.server`` on 127.0.0.1, never to the internet.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import os
import random
import re
import threading
from pathlib import Path

import pytest

from rnnbook.data import (
    REGISTRY,
    ChecksumError,
    Dataset,
    DataUnavailableError,
    RemoteFile,
    fetch,
    load_mnist,
    load_ptb,
    register,
)
from rnnbook.data.registry import MIRROR_ENV_VAR, OFFLINE_ENV_VAR

NAME = "rnnbook-unit-test-set"
PAYLOAD = b"the payload a loader reads\n" * 50
SHA = hashlib.sha256(PAYLOAD).hexdigest()
WRONG_SHA = hashlib.sha256(b"something else").hexdigest()
FILE = "payload.txt"


def _register(url: str = "http://127.0.0.1:9/unused/payload.txt", **kwargs) -> Dataset:
    kwargs.setdefault("sha256", SHA)
    return register(
        Dataset(
            name=NAME,
            files=(RemoteFile(FILE, url, **kwargs),),
            license="test",
            citation="test",
        )
    )


@pytest.fixture(autouse=True)
def _unregister():
    yield
    REGISTRY.pop(NAME, None)


@pytest.fixture
def cache() -> Path:
    """Where fetch() puts NAME's files (RNNBOOK_DATA_DIR is set by the conftest)."""
    return Path(os.environ["RNNBOOK_DATA_DIR"]) / NAME


@pytest.fixture
def tmp_mirror(tmp_path, monkeypatch) -> Path:
    """An empty mirror folder for NAME, announced through RNNBOOK_DATA_MIRROR."""
    folder = tmp_path / "mirror"
    (folder / NAME).mkdir(parents=True)
    monkeypatch.setenv(MIRROR_ENV_VAR, str(folder))
    return folder / NAME


def _files(folder: Path) -> list[str]:
    """Every entry of the cache folder, hidden ones included."""
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# --- the offline mirror and the cache --------------------------------------------------------


def test_mirror_hit_decompresses_verifies_and_caches(tmp_mirror, cache, monkeypatch):
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    (tmp_mirror / f"{FILE}.gz").write_bytes(gzip.compress(PAYLOAD))
    _register()
    folder = fetch(NAME)
    assert folder == cache
    assert (folder / FILE).read_bytes() == PAYLOAD
    assert _files(folder) == [FILE]


def test_second_fetch_uses_the_cache(tmp_mirror, cache, monkeypatch):
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    (tmp_mirror / f"{FILE}.gz").write_bytes(gzip.compress(PAYLOAD))
    _register()
    fetch(NAME)
    (tmp_mirror / f"{FILE}.gz").unlink()  # only the cache can serve it now
    assert (fetch(NAME) / FILE).read_bytes() == PAYLOAD


def test_plain_mirror_file_is_copied(tmp_mirror, monkeypatch):
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    (tmp_mirror / "payload.raw").write_bytes(PAYLOAD)
    _register(mirror_name="payload.raw")
    assert (fetch(NAME) / FILE).read_bytes() == PAYLOAD


def test_mirror_checksum_mismatch_names_file_and_hashes_and_keeps_nothing(
    tmp_mirror, cache, monkeypatch
):
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    (tmp_mirror / f"{FILE}.gz").write_bytes(gzip.compress(PAYLOAD))
    _register(sha256=WRONG_SHA)
    with pytest.raises(ChecksumError) as info:
        fetch(NAME)
    message = str(info.value)
    assert FILE in message
    assert SHA in message  # what was found
    assert WRONG_SHA in message  # what the registry expects
    assert "not kept" in message
    assert _files(cache) == []  # neither the target nor a *.part temporary


def _random_payload() -> tuple[bytes, str]:
    """Incompressible bytes, so that cutting the .gz in half really truncates it."""
    payload = random.Random(0).randbytes(20_000)
    return payload, hashlib.sha256(payload).hexdigest()


DAMAGED_GZ = {"truncated": lambda data: data[: len(data) // 2], "not gzip": lambda data: b"junk"}


@pytest.mark.parametrize("damage", list(DAMAGED_GZ))
def test_damaged_mirror_gzip_leaves_no_file(tmp_mirror, cache, monkeypatch, damage):
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    payload, sha = _random_payload()
    (tmp_mirror / f"{FILE}.gz").write_bytes(DAMAGED_GZ[damage](gzip.compress(payload)))
    _register(sha256=sha)
    with pytest.raises(ChecksumError):
        fetch(NAME)
    assert _files(cache) == []


@pytest.mark.parametrize("damage", list(DAMAGED_GZ))
def test_damaged_mirror_gzip_is_a_checksum_error_naming_the_file(tmp_mirror, monkeypatch, damage):
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    payload, sha = _random_payload()
    (tmp_mirror / f"{FILE}.gz").write_bytes(DAMAGED_GZ[damage](gzip.compress(payload)))
    _register(sha256=sha)
    source = tmp_mirror / f"{FILE}.gz"
    with pytest.raises(ChecksumError, match=re.escape(f"{FILE} from {source} is not a valid gzip")):
        fetch(NAME)


def test_damaged_cache_file_is_replaced(tmp_mirror, cache, monkeypatch):
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    (tmp_mirror / f"{FILE}.gz").write_bytes(gzip.compress(PAYLOAD))
    _register()
    cache.mkdir(parents=True)
    (cache / FILE).write_bytes(PAYLOAD[:-1] + b"!")
    assert (fetch(NAME) / FILE).read_bytes() == PAYLOAD
    assert _files(cache) == [FILE]


def test_damaged_cache_file_is_removed_when_no_source_has_it(cache, monkeypatch):
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    _register()
    cache.mkdir(parents=True)
    (cache / FILE).write_bytes(b"truncated")
    with pytest.raises(DataUnavailableError):
        fetch(NAME)
    assert _files(cache) == []


# --- offline misses --------------------------------------------------------------------------


def test_offline_without_mirror_names_file_url_and_variables(cache, monkeypatch):
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    url = "https://example.org/datasets/payload.txt"
    _register(url)
    with pytest.raises(DataUnavailableError) as info:
        fetch(NAME)
    message = str(info.value)
    assert f"{NAME}/{FILE}" in message
    assert url in message
    assert f"{OFFLINE_ENV_VAR}=1" in message
    assert f"Set {MIRROR_ENV_VAR}" in message
    assert _files(cache) == []


def test_offline_with_mirror_lacking_the_file_names_the_mirror(tmp_mirror, cache, monkeypatch):
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    url = "https://example.org/datasets/payload.txt"
    _register(url)
    with pytest.raises(DataUnavailableError) as info:
        fetch(NAME)
    message = str(info.value)
    assert url in message
    assert f"{OFFLINE_ENV_VAR}=1" in message
    assert f"{MIRROR_ENV_VAR}={tmp_mirror.parent}" in message
    assert f"{NAME}/{FILE}.gz" in message
    assert _files(cache) == []


@pytest.mark.parametrize("value", ["0", "", "false", "No"])
def test_offline_variable_zero_or_empty_allows_downloads(http_root, cache, monkeypatch, value):
    monkeypatch.setenv(OFFLINE_ENV_VAR, value)
    root, base = http_root
    (root / FILE).write_bytes(PAYLOAD)
    _register(f"{base}/{FILE}")
    assert (fetch(NAME) / FILE).read_bytes() == PAYLOAD


# --- downloads over loopback -----------------------------------------------------------------


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # keep the test output clean
        pass


@pytest.fixture
def http_root(tmp_path):
    """A folder served on 127.0.0.1 (any free port); yields ``(folder, base_url)``."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_download_plain_file(http_root, cache):
    root, base = http_root
    (root / FILE).write_bytes(PAYLOAD)
    _register(f"{base}/{FILE}")
    assert (fetch(NAME) / FILE).read_bytes() == PAYLOAD
    assert _files(cache) == [FILE]  # pooch's scratch folder is gone


def test_download_gzipped_file_is_decompressed(http_root, cache):
    root, base = http_root
    (root / f"{FILE}.gz").write_bytes(gzip.compress(PAYLOAD))
    _register(f"{base}/{FILE}.gz", url_gzipped=True)
    assert (fetch(NAME) / FILE).read_bytes() == PAYLOAD
    assert _files(cache) == [FILE]


def test_damaged_gzip_download_is_a_checksum_error_and_keeps_nothing(http_root, cache):
    root, base = http_root
    payload, sha = _random_payload()
    (root / f"{FILE}.gz").write_bytes(gzip.compress(payload)[:1000])
    _register(f"{base}/{FILE}.gz", sha256=sha, url_gzipped=True)
    with pytest.raises(ChecksumError, match=re.escape(f"{FILE} from {base}/{FILE}.gz")):
        fetch(NAME)
    assert _files(cache) == []  # no .part file and no .download-* folder


def test_download_with_known_url_hash(http_root, cache):
    root, base = http_root
    served = gzip.compress(PAYLOAD)
    (root / f"{FILE}.gz").write_bytes(served)
    url_hash = "md5:" + hashlib.md5(served).hexdigest()
    _register(f"{base}/{FILE}.gz", url_gzipped=True, url_hash=url_hash)
    assert (fetch(NAME) / FILE).read_bytes() == PAYLOAD


def test_download_with_wrong_sha256_raises_and_keeps_nothing(http_root, cache):
    root, base = http_root
    (root / FILE).write_bytes(PAYLOAD)
    _register(f"{base}/{FILE}", sha256=WRONG_SHA)
    with pytest.raises(ChecksumError, match=f"{FILE} from {base}/{FILE} has SHA-256 {SHA}"):
        fetch(NAME)
    assert _files(cache) == []


def test_download_with_wrong_url_hash_is_unavailable_and_keeps_nothing(http_root, cache):
    root, base = http_root
    (root / FILE).write_bytes(PAYLOAD)
    _register(f"{base}/{FILE}", url_hash="md5:" + "0" * 32)
    with pytest.raises(DataUnavailableError, match=f"could not download {FILE}"):
        fetch(NAME)
    assert _files(cache) == []


def test_download_404_is_unavailable_and_leaves_no_scratch_folder(http_root, cache):
    _, base = http_root
    url = f"{base}/missing/{FILE}"
    _register(url)
    with pytest.raises(DataUnavailableError) as info:
        fetch(NAME)
    message = str(info.value)
    assert f"could not download {FILE} from {url}" in message
    assert MIRROR_ENV_VAR in message and OFFLINE_ENV_VAR in message
    assert _files(cache) == []  # no .download-* folder, no .part file


def test_cached_download_is_not_fetched_again(http_root, cache):
    root, base = http_root
    (root / FILE).write_bytes(PAYLOAD)
    _register(f"{base}/{FILE}")
    fetch(NAME)
    (root / FILE).unlink()  # a second download would now fail with 404
    assert (fetch(NAME) / FILE).read_bytes() == PAYLOAD


# --- the registry itself ---------------------------------------------------------------------


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(KeyError, match=r"unknown dataset 'mnsit'.*'mnist'.*'ptb'"):
        fetch("mnsit")


@pytest.mark.parametrize(
    "sha256",
    ["abc", SHA.upper(), SHA[:-1] + "g", SHA + "0"],
    ids=["short", "uppercase", "not-hex", "long"],
)
def test_register_rejects_a_bad_sha256(sha256):
    with pytest.raises(ValueError, match=f"{NAME}/{FILE}: sha256 must be 64 lowercase hex digits"):
        _register(sha256=sha256)
    assert NAME not in REGISTRY


def test_register_rejects_a_dataset_without_files():
    with pytest.raises(ValueError, match="lists no files"):
        register(Dataset(name=NAME, files=(), license="test", citation="test"))


def test_register_returns_the_dataset_and_replaces_by_name():
    first = _register()
    assert REGISTRY[NAME] is first
    second = _register(url="http://127.0.0.1:9/other")
    assert REGISTRY[NAME] is second


# --- the real catalog, from the offline mirror -----------------------------------------------


@pytest.fixture
def offline_mirror(mirror, monkeypatch) -> Path:
    monkeypatch.setenv(MIRROR_ENV_VAR, str(mirror))
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    return mirror


def test_catalog_has_mnist_and_ptb():
    assert {"mnist", "ptb"} <= set(REGISTRY)


def test_fetch_ptb_from_the_mirror(offline_mirror):
    folder = fetch("ptb")
    assert sorted(p.name for p in folder.iterdir()) == [
        "ptb.test.txt",
        "ptb.train.txt",
        "ptb.valid.txt",
    ]


def test_ptb_valid_has_3370_lines(offline_mirror):
    assert len(load_ptb("valid").splitlines()) == 3370


def test_mnist_test_split_shapes_and_labels(offline_mirror):
    images, labels = load_mnist("test")
    assert images.shape == (10000, 28, 28)
    assert images.dtype.is_floating_point is False and int(images.max()) <= 255
    assert labels.shape == (10000,)
    counts = labels.bincount(minlength=10)
    assert counts.shape == (10,)
    assert int(counts.sum()) == 10000
    assert bool((counts > 800).all())  # every digit is well represented


@pytest.mark.parametrize("loader, split", [(load_ptb, "dev"), (load_mnist, "valid")])
def test_loaders_reject_unknown_splits(loader, split):
    with pytest.raises(ValueError, match=f"split must be one of .* got '{split}'"):
        loader(split)
