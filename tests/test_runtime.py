"""rnnbook.runtime: seeding, thread count and the chapter's setup() call."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import rnnbook
from rnnbook.runtime import THREADS_ENV_VAR, Session, choose_threads, seed_everything, setup


def _draw():
    # seed_everything seeds numpy's legacy global generator, so that is what we draw from.
    return random.random(), np.random.rand(3), torch.randn(4)  # noqa: NPY002


# --- seed_everything -------------------------------------------------------------------------


def test_same_seed_gives_same_numbers():
    seed_everything(123)
    py_a, np_a, torch_a = _draw()
    seed_everything(123)
    py_b, np_b, torch_b = _draw()
    assert py_a == py_b
    np.testing.assert_array_equal(np_a, np_b)
    torch.testing.assert_close(torch_a, torch_b, rtol=0, atol=0)


def test_different_seeds_give_different_numbers():
    seed_everything(1)
    first = torch.randn(4)
    seed_everything(2)
    assert not torch.equal(first, torch.randn(4))


def test_returned_generator_is_seeded():
    a = torch.randn(5, generator=seed_everything(7))
    b = torch.randn(5, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_large_seed_is_accepted_by_numpy():
    seed_everything(2**40)  # numpy only takes seeds below 2**32
    assert 0 <= np.random.rand() < 1  # noqa: NPY002


@pytest.mark.parametrize("seed", [-1, True, False, 1.5, "3", None])
def test_bad_seed_is_rejected(seed):
    with pytest.raises(ValueError, match="seed must be a non-negative int"):
        seed_everything(seed)


# --- choose_threads --------------------------------------------------------------------------


def test_threads_default_to_one():
    assert choose_threads() == 1


@pytest.mark.parametrize("raw, expected", [("3", 3), (" 2 ", 2), ("", 1)])
def test_threads_come_from_the_environment(monkeypatch, raw, expected):
    monkeypatch.setenv(THREADS_ENV_VAR, raw)
    assert choose_threads() == expected


@pytest.mark.parametrize("raw", ["0", "abc", "-2", "1.5"])
def test_bad_thread_count_is_rejected(monkeypatch, raw):
    monkeypatch.setenv(THREADS_ENV_VAR, raw)
    with pytest.raises(
        ValueError, match=rf"{THREADS_ENV_VAR} must be a positive integer, got '{raw}'"
    ):
        choose_threads()


# --- setup -----------------------------------------------------------------------------------


def test_setup_returns_a_session(monkeypatch):
    monkeypatch.setenv("RNNBOOK_PROFILE", "paper")
    session = setup(seed=5, device="cpu")
    assert isinstance(session, Session)
    assert session.profile.name == "paper"
    assert session.device == torch.device("cpu")
    assert session.seed == 5
    assert session.threads == 1


def test_setup_sets_the_torch_thread_count(monkeypatch):
    monkeypatch.setenv(THREADS_ENV_VAR, "2")
    session = setup("quick", device="cpu")
    assert session.threads == 2
    assert torch.get_num_threads() == 2


def test_setup_seeds_torch():
    setup("quick", seed=11, device="cpu")
    a = torch.randn(3)
    setup("quick", seed=11, device="cpu")
    torch.testing.assert_close(a, torch.randn(3), rtol=0, atol=0)


def test_setup_prints_one_line_naming_the_profile(capsys):
    setup("full", seed=0, device="cpu")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"rnnbook {rnnbook.__version__}:")
    assert "profile full (from parameter)" in lines[0]


def test_setup_rejects_unknown_profile():
    with pytest.raises(ValueError, match="unknown profile 'fastest'"):
        setup("fastest", device="cpu")


def test_setup_cuda_without_gpu_is_an_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="no GPU"):
        setup("quick", device="cuda")


def test_describe_uses_singular_for_one_thread():
    session = Session(rnnbook.Profile("quick", "test"), torch.device("cpu"), 0, 1)
    assert "1 CPU thread," in session.describe()
