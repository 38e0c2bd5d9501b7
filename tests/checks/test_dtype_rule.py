"""One dtype rule for every checker of the book (``rnnbook.checks.dtypes``): a real-valued
answer comes back in the dtype of its real-valued inputs.

Each chapter's own reference solution is run through its checker twice more: once with its
real-valued results converted to the other float dtype (float64 <-> float32), which every
checker under the rule must refuse with the rule's hint, and once unchanged, which must pass.
Every checker the chapters call is listed here as under the rule or outside it (with the
reason), so that a new checker cannot escape the rule unnoticed.
"""

import functools
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from rnnbook import checks
from rnnbook.checks.dtypes import expect_dtype
from rnnbook.checks.grading import CheckFailed

sys.path.insert(0, str(Path(__file__).parents[1]))
from test_chapter_solutions import solutions  # noqa: E402

# checkers whose answer is a real-valued tensor (or a list or pair of them)
UNDER_THE_RULE = {
    "rnn_bptt.srn_step", "rnn_bptt.clip_by_global_norm", "rnn_bptt.lag_jacobian",
    "lstm_gru.gru_step", "lstm_gru.peephole_lstm_step",
    "ntm.write", "ntm.shift", "ntm.sharpen", "ntm.allocation",
    "lmu.fft_memory", "lmu.decode",
    "clockwork.sliced_step",
    "sba.module_surprisal", "sba.sba_select", "sba.s_ic_cell",
    "zoneout.zoneout_step", "zoneout.msure_ste", "zoneout.norm_stabiliser",
    "han.pointer_sum", "han.masked_softmax", "han.sens_step",
    "abs.forward_fill", "abs.bidirectional_fill",
}  # fmt: skip
OUTSIDE_THE_RULE = {
    "rnn_bptt.vanishing_despite_large_weights": "the answer is data, not a function",
    "lstm_gru.parameter_counts": "an integer",
    "lstm_gru.cho_to_seed": "a model, in the dtype of its own parameters",
    "ntm.copy_by_hand": "a controller, run by the checker",
    "lmu.ema_window": "an integer",
    "lmu.euler_min_theta": "a plain number",
    "clockwork.window_rate": "a plain number",
    "clockwork.cwrnn_parameters": "an integer",
    "han.effective_update_rate": "a plain number",
    "abs.predicted_update_rate": "a plain number",
    "abs.ranked_decisions": "0/1 decisions, exact in any dtype",
    "arena.memoryless_ce": "a plain number",
    "arena.recall_weights": "built from an integer T: no tensor in",
    "arena.recalled_symbols": "a plain number",
    "arena.copy_memory": "integer indices (torch.long)",
    "arena.arena_entry": "a model, in the dtype of its own parameters",
}


def _flip(value):
    """Real-valued tensors converted to the other float dtype; pairs and lists element-wise."""
    if isinstance(value, torch.Tensor) and value.dtype in (torch.float32, torch.float64):
        return value.to(torch.float32 if value.dtype == torch.float64 else torch.float64)
    if isinstance(value, list | tuple):
        return type(value)(_flip(v) for v in value)
    return value


def _flipping(fn):
    @functools.wraps(fn)
    def flipped(*args, **kwargs):
        return _flip(fn(*args, **kwargs))

    return flipped


def _run(code, wrap):
    """Execute a solution with each checker call routed through ``wrap(key, checker, args)``."""

    class Chapter:
        def __init__(self, module):
            self.module = module

        def __getattr__(self, attr):
            checker = getattr(self.module, attr)
            key = f"{self.module.__name__.rsplit('.', 1)[-1]}.{attr}"
            return functools.partial(wrap, key, checker)

    fake = types.SimpleNamespace(
        **{name: Chapter(getattr(checks, name)) for name in checks.__all__ if name != "CheckFailed"}
    )
    exec(code, {"torch": torch, "np": np, "checks": fake})


SOLUTIONS = list(solutions())


def test_every_checker_the_chapters_call_is_classified():
    called = set()
    for param in SOLUTIONS:
        _run(param.values[0], lambda key, checker, *args: called.add(key))
    assert not UNDER_THE_RULE & set(OUTSIDE_THE_RULE)
    assert called == UNDER_THE_RULE | set(OUTSIDE_THE_RULE), called ^ (
        UNDER_THE_RULE | set(OUTSIDE_THE_RULE)
    )


@pytest.mark.parametrize("code", SOLUTIONS)
def test_a_solution_in_the_other_dtype_is_refused_by_the_rule(code):
    refused = []

    def wrap(key, checker, *args):
        if key not in UNDER_THE_RULE:
            return
        with pytest.raises(CheckFailed) as failure:
            checker(*(_flipping(a) if callable(a) else a for a in args))
        refused.append((key, str(failure.value)))

    _run(code, wrap)
    if not refused:
        pytest.skip("no checker under the rule in this solution")
    for key, message in refused:  # refused for the dtype, naming both
        assert all(w in message for w in ("float32", "float64", "dtype")), (key, message)


def test_the_rule_names_each_way_of_losing_the_dtype():
    x = torch.ones(2, dtype=torch.float64)
    expect_dtype(x, torch.float64, "x")  # the right dtype passes
    for got, hint in (
        (x.float(), "torch.zeros_like"),  # float32 where float64 came in
        (x.float().double(), None),
        (x.to(torch.int64), r"\.to\(x\.dtype\)"),  # a count or a comparison
        (x > 0, r"\.to\(x\.dtype\)"),
    ):
        if hint is None:
            continue
        with pytest.raises(CheckFailed, match=hint):
            expect_dtype(got, torch.float64, "x")
    with pytest.raises(CheckFailed, match=r"(?s)float64, but the inputs are float32.*\.double\(\)"):
        expect_dtype(x, torch.float32, "x")
