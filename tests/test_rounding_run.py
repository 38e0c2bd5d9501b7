"""The second run of `make unit` leaves out only modules in which torch computes no float.

`make unit` runs the suite a second time with another ATEN_CPU_CAPABILITY, for the
comparisons of floats that torch computed; that run (``--rounding-run``) leaves out the
modules of ``ROUNDING_FREE`` in tests/conftest.py. These tests hold the list to its rule:
each listed module exists and says what it tests, none names torch in its code or in the code
it hands to a kernel or a subprocess, and the watch that runs every listed test in the first
run fails a test in which torch computes a float.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from conftest import ROUNDING_FREE, FloatKernelWatch, _fail_if_seen, listed_module

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# torch in a module's code or in code it writes for a kernel: an import, or an attribute of
# torch (a call, a dtype); and the float comparisons of rnnbook.testing.
NAMES_TORCH = re.compile(r"\bimport torch\b|\bfrom torch\b|\btorch\.\w|assert_close_ulps")


@pytest.mark.parametrize("module", sorted(ROUNDING_FREE))
def test_a_listed_module_exists_and_says_what_it_tests(module):
    path = TESTS / module
    assert path.is_file() and path.name.startswith("test_"), f"no test module {path}"
    assert listed_module(path) == module
    assert len(ROUNDING_FREE[module]) > 20, f"say what {module} tests instead of torch's floats"


@pytest.mark.parametrize("module", sorted(ROUNDING_FREE))
def test_a_listed_module_names_no_torch(module):
    """Also the code a listed module hands to a kernel or a subprocess, which the watch in the
    test's own process does not see: it is text in the module."""
    text = (TESTS / module).read_text(encoding="utf-8")
    found = sorted({m.group(0) for m in NAMES_TORCH.finditer(text)})
    assert not found, (
        f"{module} names {found} but is in ROUNDING_FREE (tests/conftest.py), which the second "
        "run of `make unit` leaves out: take it off the list"
    )


def test_a_module_that_is_not_listed_is_not_taken_for_one():
    assert listed_module(TESTS / "test_rounding_run.py") is None
    assert listed_module(TESTS / "models" / "test_lstm.py") is None
    assert listed_module(ROOT / "scripts" / "test_book_build.py") is None  # outside tests/


def test_the_watch_sees_a_float_computed_by_torch_and_nothing_else():
    with FloatKernelWatch() as watch:
        counts = torch.arange(6).reshape(2, 3).sum(0)  # integers: no rounding
        labels = torch.tensor([True, False]).logical_not()
    assert watch.seen == {} and counts.tolist() == [3, 5, 7] and labels.tolist() == [False, True]
    with FloatKernelWatch() as watch:
        torch.ones(3).sigmoid()
    assert "aten.sigmoid.default" in watch.seen


def test_the_watch_fails_a_listed_test_in_which_torch_computed_a_float():
    class Item:  # what _fail_if_seen reads of a test item
        path = TESTS / "test_book_build.py"

    with FloatKernelWatch() as watch:
        torch.zeros(2) + 1.5
    with pytest.raises(pytest.fail.Exception, match=r"test_book_build\.py is in ROUNDING_FREE"):
        _fail_if_seen(Item, watch, "test")
    _fail_if_seen(Item, FloatKernelWatch(), "test")  # nothing seen: nothing fails


def test_the_makefile_leaves_modules_out_of_the_second_run_only():
    """The run on another CPU's kernels, and only it, leaves out the listed modules; `make
    unit` and `make test` run both runs."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    runs = [line for line in makefile.splitlines() if "$(BIN)/pytest tests " in line]
    second = [line for line in runs if "ATEN_CPU_CAPABILITY=" in line]
    assert len(runs) == 2 and len(second) == 1, runs
    assert "--rounding-run" in second[0], second
    assert all("--rounding-run" not in line for line in runs if line not in second), runs
    assert "\nunit-rounding: setup\n\t@other=$(OTHER_KERNELS)" in makefile
    for target in ("unit", "test"):
        recipe = makefile.split(f"\n{target}:\n", 1)[-1].split(f"\n{target}: setup\n")[-1]
        recipe = recipe.split("\n\n", 1)[0]
        assert "unit-native" in recipe and "unit-rounding" in recipe, target


def test_make_test_runs_the_second_run_whole_in_its_two_parts():
    """`make test` splits the second run in two: `unit-rounding` without the checkpoints'
    module, and `unit-rounding-checkpoints` with that module alone, on the same kernels and
    with the same option. Together they are the whole run `make unit` makes."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    test = makefile.split("\ntest:\n", 1)[1].split("\n\n", 1)[0]
    assert "later $$rounding unit-rounding ROUNDING_LEAVE_OUT=--ignore=$(CHECKPOINT_TESTS)" in test
    assert test.count("later $$checkpoints unit-rounding-checkpoints") == 2  # browser or not
    assert "report unit-rounding-checkpoints $$checkpoints" in test
    part = makefile.split("\nunit-rounding-checkpoints: setup\n", 1)[1].split("\n\n", 1)[0]
    assert "ATEN_CPU_CAPABILITY=$$other $(BIN)/pytest $(CHECKPOINT_TESTS) " in part
    assert "--rounding-run" in part and "$(OTHER_KERNELS)" in part
    assert "\nCHECKPOINT_TESTS := tests/test_book_checkpoints.py\n" in makefile
    assert (ROOT / "tests" / "test_book_checkpoints.py").is_file()
    unit = makefile.split("\nunit: setup\n", 1)[1].split("\n\n", 1)[0]
    assert "ROUNDING_LEAVE_OUT" not in unit and "\nROUNDING_LEAVE_OUT ?=\n" in makefile
