"""book/_ext/api_docstrings.py: equation citations in docstrings become links; boilerplate goes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location(
    "api_docstrings", ROOT / "book/_ext/api_docstrings.py"
)
api_docstrings = importlib.util.module_from_spec(spec)
spec.loader.exec_module(api_docstrings)


def app_with(labels):
    env = SimpleNamespace(
        rnnbook_equation_labels=set(labels),
        rnnbook_torch_forward_doc=api_docstrings._torch_forward_doc(),
    )
    return SimpleNamespace(env=env)


def test_the_chapters_define_the_labels_the_package_cites_most():
    labels = api_docstrings.equation_labels(ROOT / "chapters")
    assert {"rnn-R1", "pen-ns", "pen-ste", "zo-lstm-h", "ntm-content", "cw-rnn"} <= labels


@pytest.mark.parametrize(
    "line, expected",
    [
        ("the cell (cw-rnn), with", "the cell :eq:`cw-rnn`, with"),
        ("equations (rnn-R1)-(rnn-R3).", "equations :eq:`rnn-R1`-:eq:`rnn-R3`."),
        ("shape (N, L) and (not-a-label)", "shape (N, L) and (not-a-label)"),
        ("``f(cw-rnn)`` stays code, (cw-rnn) not", "``f(cw-rnn)`` stays code, :eq:`cw-rnn` not"),
    ],
)
def test_citations_of_known_labels_become_links(line, expected):
    lines = [line]
    labels = {"cw-rnn", "rnn-R1", "rnn-R3"}
    api_docstrings.process_docstring(app_with(labels), "function", "f", None, {}, lines)
    assert lines == [expected]


def test_literal_blocks_are_left_alone():
    lines = ["Example::", "", "    step(x)  # (cw-rnn)", "", "After (cw-rnn)."]
    api_docstrings.process_docstring(app_with({"cw-rnn"}), "function", "f", None, {}, lines)
    assert lines[2] == "    step(x)  # (cw-rnn)" and lines[4] == "After :eq:`cw-rnn`."


def test_torch_forward_boilerplate_is_dropped_and_own_docstrings_kept():
    import inspect

    lines = inspect.getdoc(nn.Module.forward).splitlines()
    api_docstrings.process_docstring(app_with(set()), "method", "X.forward", None, {}, lines)
    assert lines == []
    own = ["Run the cell over ``x`` (cw-rnn)."]
    api_docstrings.process_docstring(app_with(set()), "method", "X.forward", None, {}, own)
    assert own == ["Run the cell over ``x`` (cw-rnn)."]
