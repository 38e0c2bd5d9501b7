"""The claims registry: a claim checks, prints, fails with its whole story, and is recorded."""

from __future__ import annotations

import math

import nbformat
import numpy as np
import pytest
import torch
from nbclient import NotebookClient

from rnnbook import claims


@pytest.fixture(autouse=True)
def fresh_profile():
    claims.set_profile("quick")
    yield
    claims.set_profile("?")


def test_a_claim_that_holds_prints_one_line_with_value_threshold_and_margin(capsys):
    claims.claim(
        "c-best", "Target c beats the LSTM", value=137.3, op="<", threshold=138.2, unit="ppl"
    )
    stated = claims.stated()[-1]
    line = capsys.readouterr().out.strip()
    assert line.startswith("✓ claim c-best: Target c beats the LSTM")
    assert "137.3 ppl < 138.2" in line and "margin 0.7%" in line
    assert stated.holds and stated.profile == "quick" and stated.kind == "measured"
    assert stated.margin == pytest.approx((138.2 - 137.3) / 138.2)


def test_a_failing_claim_raises_an_assertion_error_that_says_everything():
    with pytest.raises(AssertionError) as failed:
        claims.claim(
            "phase",
            "Starting the clock at t0 = 23 solves the task",
            value=0.44,
            op="<=",
            threshold=0.1,
            where="ch5-reber-phase",
            source=0.0,
            kind="measured",
        )
    message = str(failed.value)
    for part in ("phase", "t0 = 23", "measured 0.44", "<= 0.1", "kind measured", "quick",
                 "ch5-reber-phase", "source's value: 0"):  # fmt: skip
        assert part in message, part
    assert isinstance(failed.value, claims.ClaimFailed)
    assert not claims.stated()[-1].holds  # recorded all the same


@pytest.mark.parametrize(
    "value, op, threshold, expected",
    [
        (1.0, "<", 2.0, 0.5),
        (2.0, ">", 1.0, 0.5),
        (3.0, "<=", 2.0, -1 / 3),
        (0.0, ">=", 0.0, 0.0),
        (0.25, "in", (0.2, 0.5), 0.2),
        (0.45, "in", (0.2, 0.5), 0.1),
    ],
)
def test_the_margin_is_the_relative_distance_from_failing(value, op, threshold, expected):
    assert claims.margin(value, op, threshold) == pytest.approx(expected)


def test_claims_of_equality_have_no_margin():
    claims.claim("three", "3 of 3 seeds", value=3, op="==", threshold=3)
    assert claims.stated()[-1].margin is None


@pytest.mark.parametrize(
    "value", [torch.tensor(0.5), np.float32(0.5), np.array(0.5), 0.5, torch.tensor(True)]
)
def test_values_may_be_python_numpy_or_torch_scalars(value):
    claims.claim("x", "x", value=value, op="<=", threshold=1)
    assert math.isfinite(claims.stated()[-1].value)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(op="~", threshold=1), "op must be one of"),
        (dict(op="<", threshold=1, kind="guess"), "kind must be one of"),
        (dict(op="in", threshold=1), r"needs threshold=\(low, high\)"),
        (dict(op="in", threshold=(2, 1)), "is empty"),
        (dict(op="<", threshold="one"), "threshold must be a real number"),
        (dict(op="<", threshold=float("nan")), "threshold is NaN"),
    ],
)
def test_bad_claims_are_refused_with_a_clear_message(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        claims.claim("x", "x", value=0.5, **kwargs)


def test_a_vector_is_not_a_value():
    with pytest.raises(TypeError, match="value must be a real number"):
        claims.claim("x", "x", value=torch.ones(2), op="<", threshold=1)


def test_setup_sets_the_profile_and_forgets_earlier_claims():
    import rnnbook

    claims.claim("old", "old", value=0, op="<", threshold=1)
    rnnbook.setup("quick", 0)
    assert claims.stated() == []
    claims.claim("new", "new", value=0, op="<", threshold=1)
    assert [c.profile for c in claims.stated()] == ["quick"]


def test_a_notebook_records_its_claims_in_the_outputs_metadata():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "from rnnbook import claims\n"
            "claims.set_profile('full')\n"
            "claims.claim('a', 'First', value=1, op='<', threshold=2, where='ch-x')\n"
            "claims.claim('b', 'Second', value=5, op='in', threshold=(0, 10), kind='recorded',"
            " source=4.5)"
        )
    ]
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    records = claims.from_notebook(notebook)
    assert [r["id"] for r in records] == ["a", "b"]
    assert records[0]["profile"] == "full" and records[0]["where"] == "ch-x"
    assert records[1]["threshold"] == [0, 10] and records[1]["kind"] == "recorded"
    assert records[1]["source"] == 4.5 and records[1]["margin"] == pytest.approx(0.5)
    shown = [o["data"]["text/plain"] for o in notebook.cells[0].outputs]
    assert len(shown) == 2  # the last claim of the cell prints its line, not a repr
    assert shown[1].startswith("✓ claim b [recorded]: Second (5 in [0, 10], margin 50%")
