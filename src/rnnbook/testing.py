"""Comparing two computations of the same numbers: bitwise, or within a few ulp.

Floating-point rounding is not the same on every CPU: a vectorised ``torch.sigmoid`` on a
non-contiguous slice may round differently from the same call on a contiguous one, and a
matrix product may sum in another order. So the book's tests follow one rule:

* **bitwise** (``rtol=0, atol=0``, ``torch.equal``) only where the *same* computation is
  repeated: a seed replayed, a run resumed, a copy of weights, integers and booleans, values
  that are exact by construction (a one-hot, an explicit zero);
* **a few ulp** (:func:`assert_close_ulps`) where two *different* computations are equal in
  exact arithmetic: our cell against ``torch.nn``'s, a peephole LSTM with zero peepholes
  against the plain LSTM, a loop against a vectorised formula.

A few ulp is tight: a wrong sign, a missing term or a transposed weight moves the result by
many orders of magnitude more.
"""

from __future__ import annotations

import numpy as np
import torch

ULPS = 8  # the default allowance: rounding differences accumulate over a few operations


def assert_close_ulps(actual, expected, ulps: int = ULPS, msg: str | None = None) -> None:
    """Assert ``actual`` equals ``expected`` up to ``ulps`` units in the last place.

    The allowance is ``ulps * eps`` of the dtype, relative to each expected value, with a
    floor of ``ulps * eps * max(1, max|expected|)`` for values that cancel to near zero: their
    rounding error is that of the terms that cancelled, of the order of the largest value (or
    of 1, the scale of the book's weights and inputs). The maximum is over the finite expected
    values, so an infinity cannot loosen the others; infinities must match exactly and NaN
    fails. Accepts torch tensors and NumPy arrays (float32 or float64); both must have one
    dtype.
    """
    actual_t = torch.as_tensor(np.asarray(actual)) if not torch.is_tensor(actual) else actual
    expected_t = (
        torch.as_tensor(np.asarray(expected)) if not torch.is_tensor(expected) else expected
    )
    if not actual_t.is_floating_point():
        raise TypeError(f"assert_close_ulps compares floating-point values, got {actual_t.dtype}")
    if actual_t.dtype != expected_t.dtype:
        raise TypeError(
            f"compare values of one dtype: actual is {actual_t.dtype}, expected {expected_t.dtype}"
        )
    eps = torch.finfo(actual_t.dtype).eps
    finite = expected_t.detach()[torch.isfinite(expected_t)]
    scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
    torch.testing.assert_close(
        actual_t, expected_t, rtol=ulps * eps, atol=ulps * eps * scale, msg=msg
    )
