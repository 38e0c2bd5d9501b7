"""rnnbook.profiles: which profile runs, and the sizes each profile asks for."""

from __future__ import annotations

import copy
import pickle

import pytest

from rnnbook.profiles import ENV_VAR, PROFILES, Profile, Sizes, resolve_profile

SIZES = dict(
    quick=dict(steps=300, hidden=32),
    full=dict(steps=3000, hidden=64),
    paper=dict(steps=20000, hidden=128),
)


# --- resolve_profile -------------------------------------------------------------------------


@pytest.mark.parametrize("cuda, expected", [(True, "full"), (False, "quick")])
def test_device_decides_when_nothing_is_requested(cuda, expected):
    profile = resolve_profile(None, cuda_available=cuda)
    assert profile.name == expected
    assert profile.source.startswith("device")


@pytest.mark.parametrize("cuda", [True, False])
def test_environment_variable_beats_device(monkeypatch, cuda):
    monkeypatch.setenv(ENV_VAR, "paper")
    assert resolve_profile(None, cuda_available=cuda) == Profile("paper", ENV_VAR)


def test_parameter_beats_environment_variable(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "paper")
    assert resolve_profile("quick", cuda_available=True) == Profile("quick", "parameter")


@pytest.mark.parametrize("blank", ["", "   "])
def test_blank_parameter_means_not_given(monkeypatch, blank):
    monkeypatch.setenv(ENV_VAR, "full")
    assert resolve_profile(blank, cuda_available=False).name == "full"


def test_blank_environment_variable_means_not_set(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "   ")
    assert resolve_profile(None, cuda_available=False) == Profile("quick", "device: CPU")


@pytest.mark.parametrize("given", ["QUICK", " Full ", "paper\n", "PaPeR"])
def test_parameter_ignores_case_and_whitespace(given):
    assert resolve_profile(given, cuda_available=False).name == given.strip().lower()


@pytest.mark.parametrize("given", ["FULL", "  quick  "])
def test_environment_variable_ignores_case_and_whitespace(monkeypatch, given):
    monkeypatch.setenv(ENV_VAR, given)
    assert resolve_profile(None, cuda_available=True).name == given.strip().lower()


def test_unknown_parameter_names_the_parameter():
    with pytest.raises(
        ValueError, match=r"unknown profile 'fast' from the chapter's profile parameter"
    ):
        resolve_profile("fast", cuda_available=False)


def test_unknown_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "huge")
    with pytest.raises(ValueError, match=rf"'huge' from the environment variable {ENV_VAR}"):
        resolve_profile(None, cuda_available=False)


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"expected one of \('quick', 'full', 'paper'\)"):
        resolve_profile("medium", cuda_available=False)


def test_non_string_profile_is_a_type_error():
    with pytest.raises(TypeError, match="profile must be a string or None, got int"):
        resolve_profile(1, cuda_available=False)


def test_profile_prints_as_its_name():
    assert str(Profile("full", "parameter")) == "full"


# --- Profile.sizes and Sizes -----------------------------------------------------------------


@pytest.mark.parametrize("name", PROFILES)
def test_sizes_returns_the_profiles_values(name):
    sizes = Profile(name, "test").sizes(**SIZES)
    assert sizes.steps == SIZES[name]["steps"]
    assert sizes.hidden == SIZES[name]["hidden"]
    assert sizes.as_dict() == SIZES[name]


def test_sizes_with_mismatched_keys_lists_what_is_missing_where():
    with pytest.raises(ValueError, match="same names") as info:
        Profile("quick", "test").sizes(
            quick=dict(steps=1, hidden=2),
            full=dict(steps=1),
            paper=dict(steps=1, hidden=2, lr=0.1),
        )
    message = str(info.value)
    assert "'full': ['hidden', 'lr']" in message
    assert "'quick': ['lr']" in message


def test_sizes_requires_dicts():
    with pytest.raises(TypeError, match="full= must be a dict, got list"):
        Profile("quick", "test").sizes(quick={}, full=[], paper={})


def test_sizes_are_read_only():
    sizes = Profile("quick", "test").sizes(**SIZES)
    with pytest.raises(AttributeError, match="read-only"):
        sizes.steps = 1
    assert sizes.steps == 300


def test_sizes_dict_is_a_copy():
    quick = dict(steps=300, hidden=32)
    sizes = Profile("quick", "test").sizes(quick=quick, full=SIZES["full"], paper=SIZES["paper"])
    quick["steps"] = 1
    sizes.as_dict()["steps"] = 2
    assert sizes.steps == 300


def test_unknown_size_lists_the_known_names():
    sizes = Profile("full", "test").sizes(**SIZES)
    with pytest.raises(AttributeError, match="profile 'full' defines no size 'stpes'") as info:
        sizes.stpes  # noqa: B018
    assert "hidden, steps" in str(info.value)


def test_sizes_repr_names_profile_and_values():
    assert repr(Sizes("quick", {"steps": 3})) == "Sizes[quick](steps=3)"


@pytest.mark.parametrize("duplicate", [copy.copy, copy.deepcopy], ids=["copy", "deepcopy"])
def test_sizes_can_be_copied(duplicate):
    sizes = Profile("full", "test").sizes(**SIZES)
    assert duplicate(sizes).as_dict() == SIZES["full"]


def test_sizes_can_be_pickled():
    """DataLoader workers started with 'spawn' (macOS, Windows) pickle what they get."""
    sizes = Profile("full", "test").sizes(**SIZES)
    assert pickle.loads(pickle.dumps(sizes)).as_dict() == SIZES["full"]


# --- Profile.pick ----------------------------------------------------------------------------


@pytest.mark.parametrize("name, expected", [("quick", 1), ("full", 2), ("paper", 3)])
def test_pick_returns_the_value_for_the_profile(name, expected):
    assert Profile(name, "test").pick(quick=1, full=2, paper=3) == expected


def test_pick_requires_all_three_profiles():
    with pytest.raises(TypeError):
        Profile("quick", "test").pick(quick=1, full=2)
