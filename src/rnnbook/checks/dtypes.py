"""The one dtype rule of every exercise checker: a real-valued answer comes back in the dtype
of the real-valued inputs it was computed from.

Every checker of the book that gives the student's function tensors gives it float64 ones (a
few also float32 ones) and judges the answer as follows:

- **Real-valued results** (a state, a memory, a weighting, a probability, a penalty, a
  gradient, a Jacobian) must have the dtype of the real-valued inputs: float64 in, float64
  out; float32 in, float32 out. Any other dtype is refused with a hint that says where the
  dtype was lost (the classic: a tensor made without ``dtype=``, such as ``torch.zeros(B, H)``
  or ``torch.tensor([...])``, is float32, and so is everything written into it).
- **Exact small integers** (0/1 decisions, counts, indices, parameter counts) may come in any
  dtype that holds them exactly: bool, an integer dtype or a float dtype; targets that
  ``F.cross_entropy`` reads must be ``torch.long``, as it requires.
- **Plain numbers** (a rate, a window length, a mean cross-entropy) may be a Python number or
  a tensor of one element.
- A tensor built from plain numbers only (no tensor in, such as Chapter 10's recall weights
  of a length T) may have any float dtype; a model or a controller the student builds runs in
  the dtype of its own parameters.

Within the right dtype, an answer is compared with the reference within a tolerance (looser
for float32 than for float64), never bitwise, so any correct formulation passes.
"""

from __future__ import annotations

import torch

from rnnbook.checks.grading import allclose, fail

_LOST = (
    "every checker calls your function with {want} tensors and expects {want} back. A tensor "
    "made without a dtype (torch.zeros(B, H), torch.ones, torch.eye, torch.full, "
    "torch.tensor([...]), torch.arange) is float32, and so is everything written into it: "
    "make new tensors like the inputs (torch.zeros_like(x), or dtype=x.dtype), and do not "
    "convert with .float()."
)
_RAISED = (
    "the inputs are {want} here, so the result must be {want} too: something converted it to "
    "{got} (.double(), .to(torch.float64), or a tensor made with dtype=torch.{got}). Make new "
    "tensors with dtype=x.dtype."
)
_NOT_REAL = (
    "a comparison gives booleans, and a count or an index integers: turn them into the inputs' "
    "dtype with .to(x.dtype) before they enter the arithmetic of the result."
)


def expect_dtype(value: torch.Tensor, dtype: torch.dtype, where: str) -> torch.Tensor:
    """A real-valued result ``value`` must have the inputs' ``dtype``; fail with a hint that
    says how the dtype was lost otherwise."""
    if value.dtype == dtype:
        return value
    names = {"want": _name(dtype), "got": _name(value.dtype)}
    if not value.is_floating_point():
        hint = _NOT_REAL
    elif value.element_size() < torch.empty((), dtype=dtype).element_size():
        hint = _LOST.format(**names)
    else:
        hint = _RAISED.format(**names)
    fail(f"{where} is {names['got']}, but the inputs are {names['want']}.", hint)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def reject_float32_inside(got: torch.Tensor, want: torch.Tensor, where: str) -> None:
    """A float64 answer that misses the reference but agrees with it to float32 precision
    computed something in float32 on the way (type promotion then turned the result back into
    float64): fail with a hint that says so. Does nothing otherwise."""
    if got.dtype != torch.float64 or want.dtype != torch.float64:
        return
    if allclose(got, want, rtol=1e-5, atol=1e-6) and not allclose(
        got, want, rtol=1e-12, atol=1e-12
    ):
        fail(
            f"{where} agrees with the right answer only to float32 precision (largest "
            f"difference {float((got - want).abs().max()):.2g}).",
            "something on the way was float32: a tensor made without a dtype (torch.zeros(B, H), "
            "torch.tensor([...]), torch.full, torch.arange) is float32, and so is what is "
            "written into it; make new tensors with dtype=x.dtype or torch.zeros_like(x).",
        )
