"""benchmarks/bench_clockwork.py's floor: the products it times are the sliced model's.

``sliced_products`` lists the matrix products of one forward and backward pass of the sliced
CWRNN; their multiply-adds over those of ``dense_products`` (the SRN's) must be what
``arithmetic()`` says, the read-out left out as it leaves it out. No time is measured here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from rnnbook.models import SRN
from rnnbook.models.clockwork import CWRNN

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_clockwork as bench  # noqa: E402

PERIOD_SETS = [bench.PERIODS, (1, 2, 3, 4, 5, 6, 7, 8)]  # the benchmark's, and several runs


def counted(products, dense) -> float:
    """The products' multiply-adds over the SRN's, the read-out left out."""
    return bench.multiply_adds(products, readout=False) / bench.multiply_adds(dense, False)


@pytest.mark.parametrize("periods", PERIOD_SETS)
@pytest.mark.parametrize("d_x", [1, "H"])
def test_products_count_the_arithmetic(periods, d_x):
    H, L, B = 16, 24, 3
    d_x = H if d_x == "H" else d_x
    products = bench.sliced_products(periods, H, L, B, d_x)
    dense = bench.dense_products(H, L, B, d_x)
    assert counted(products, dense) == pytest.approx(
        bench.arithmetic(periods, L, d_x, H), rel=1e-9, abs=0
    )
    # the read-out is the same in both, and it is all the two lists leave out of arithmetic()
    assert [p for p in products if p[0] == "readout"] == [p for p in dense if p[0] == "readout"]


def test_a_forgotten_product_fails_the_count():
    """Leaving out the backward pass's products to the state's gradient (or the forward's
    recurrent ones) moves the count far beyond the tolerance of the test above."""
    H, L, B, d_x = 16, 24, 3, 1
    products = bench.sliced_products(bench.PERIODS, H, L, B, d_x)
    dense = bench.dense_products(H, L, B, d_x)
    share = bench.arithmetic(bench.PERIODS, L, d_x, H)
    for part in ("grad_h", "recurrent", "grad_W", "input"):
        assert any(p[0] == part for p in products)
        wrong = [p for p in products if p[0] != part]
        assert counted(wrong, dense) != pytest.approx(share, rel=1e-9, abs=0), part
    # and so does a dense SRN that forgot its own
    assert counted(products, [p for p in dense if p[0] != "grad_h"]) != pytest.approx(
        share, rel=1e-9, abs=0
    )


def _addmm_(self_shape, a_shape, b_shape, out_shape=None, **kwargs) -> int:
    """FlopCounterMode's count of an in-place addmm_, which it leaves out by itself."""
    return 2 * a_shape[0] * a_shape[1] * b_shape[1]


def counted_by_torch(model, x, **forward) -> int:
    """Multiply-adds of the matrix products in one timed step (bench.step), as torch counts
    them (FlopCounterMode counts two flops per multiply-add)."""
    with FlopCounterMode(display=False, custom_mapping={torch.ops.aten.addmm_: _addmm_}) as c:
        bench.step(model, x, **forward)()
    return c.get_total_flops() // 2


@pytest.mark.parametrize("periods", PERIOD_SETS)
@pytest.mark.parametrize("d_x", [1, 16])
def test_products_are_those_the_models_perform(periods, d_x):
    """The sliced CWRNN performs the multiply-adds of sliced_products (in total: it takes its
    weight gradients tick by tick, the list one product per module); the book's SRN all of
    dense_products but one, the gradient to h0 at the first step, which nothing needs (the
    sliced model computes it)."""
    H, L, B = 16, 24, 3
    x = torch.randn(B, L, d_x)
    sliced = counted_by_torch(CWRNN(d_x, H, 1, periods), x, mode="sliced")
    assert sliced == bench.multiply_adds(bench.sliced_products(periods, H, L, B, d_x))
    srn = counted_by_torch(SRN(d_x, H, 1), x)
    assert srn == bench.multiply_adds(bench.dense_products(H, L, B, d_x)) - B * H * H


def test_the_products_run():
    """The timed callables run on their preallocated operands (small sizes)."""
    for products in (
        bench.sliced_products(bench.PERIODS, 16, 8, 2, 16),
        bench.dense_products(16, 8, 2, 16),
    ):
        run = bench.run_products(products)
        run()
        run()
