"""Checkers for the exercises of the chapter on LSTM and GRU.

Each takes the student's answer, tests it on fresh random cases against the book's cells
(which are themselves tested against ``nn.LSTM``/``nn.GRU``), prints what passed, and raises
:class:`~rnnbook.checks.grading.CheckFailed` with a hint, never the solution.
"""

from __future__ import annotations

import torch

from rnnbook.checks.dtypes import expect_dtype
from rnnbook.checks.grading import call, close, equal, expect_tensor, fail, own_random_state, passed
from rnnbook.models.gru import GRUCell
from rnnbook.models.lstm import LSTMCell


def _random(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale


@own_random_state
def gru_step(fn) -> str:
    """Exercise: ``fn(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh) -> h_t``, one step
    of ``nn.GRU`` (gate order r, z, n; reset applied after the recurrent product)."""
    g = torch.Generator().manual_seed(21)
    d_x, H = 3, 4
    tests = []
    for B in (5, 1):
        reference = GRUCell(d_x, H).double()
        with torch.no_grad():
            for p in reference.parameters():
                p.copy_(_random(g, *p.shape, scale=0.8))
        weights = [reference.weight_ih, reference.weight_hh, reference.bias_ih, reference.bias_hh]
        weights = [w.detach() for w in weights]
        x_t, h_prev = _random(g, B, d_x), _random(g, B, H).tanh()
        out = expect_tensor(call(fn, x_t, h_prev, *weights, name="gru_step"), (B, H), "h_t")
        out = expect_dtype(out, x_t.dtype, "h_t")
        want = reference(x_t, h_prev).detach()
        if close(out, want):
            continue
        for variant, hint in (
            ("seed", "nn.GRU lets z keep the *old* state: h_t = (1 - z) * n + z * h_prev."),
            ("cho", "nn.GRU applies r after the recurrent product: r * (U_n h + b_hn)."),
        ):
            other = GRUCell(d_x, H, variant=variant).double()
            other.load_state_dict(reference.state_dict())
            if close(out, other(x_t, h_prev).detach()):
                fail(f"h_t follows the {variant!r} convention, not nn.GRU's.", hint)
        swapped = GRUCell(d_x, H).double()  # the same weights with the r and z rows swapped
        with torch.no_grad():
            for mine, theirs in zip(swapped.parameters(), reference.parameters()):
                r, z, n = theirs.chunk(3)
                mine.copy_(torch.cat([z, r, n]))
        flipped = GRUCell(d_x, H).double()  # z <-> 1 - z: the z rows negated
        with torch.no_grad():
            for mine, theirs in zip(flipped.parameters(), reference.parameters()):
                r, z, n = theirs.chunk(3)
                mine.copy_(torch.cat([r, -z, n]))
        if close(out, flipped(x_t, h_prev).detach()):
            fail(
                "h_t lets z gate the new candidate: h_t = (1 - z) * h_prev + z * n.",
                "nn.GRU lets z keep the *old* state: h_t = (1 - z) * n + z * h_prev.",
            )
        if close(out, swapped(x_t, h_prev).detach()):
            fail(
                "h_t reads the gates in the order (z, r, n).",
                "the rows of weight_ih are stacked (r, z, n): use .chunk(3) and keep that order.",
            )
        fail(
            f"h_t differs from nn.GRU for a batch of {B} (max error "
            f"{(out - want).abs().max():.3g}).",
            "compare with nn.GRU's equations term by term: r and z from both biases, "
            "n = tanh(W_n x + b_in + r * (U_n h + b_hn)), h = (1 - z) * n + z * h_prev.",
        )
    tests.append("values against nn.GRU for batches of 5 and 1")
    W = weights[1].clone().requires_grad_(True)
    out = call(fn, x_t, h_prev, weights[0], W, weights[2], weights[3], name="gru_step")
    if not out.requires_grad:
        fail("no gradient flows from h_t back to weight_hh.", "stay in torch: no .detach().")
    tests.append("gradient flows to weight_hh")
    return passed("gru_step", tests)


@own_random_state
def peephole_lstm_step(fn) -> str:
    """Exercise: ``fn(x_t, h_prev, c_prev, cell) -> (h_t, c_t)``: one step of
    (lstm-P1)-(lstm-P5) with ``sigma_h = tanh``, reading the weights from ``cell`` (an
    ``LSTMCell(peephole=True)``)."""
    g = torch.Generator().manual_seed(22)
    d_x, H = 3, 4
    tests = []
    for B in (5, 1):
        cell = LSTMCell(d_x, H, peephole=True).double()
        with torch.no_grad():
            for p in cell.parameters():
                p.copy_(_random(g, *p.shape, scale=0.8))
        x_t, h_prev, c_prev = _random(g, B, d_x), _random(g, B, H).tanh(), _random(g, B, H)
        out = call(fn, x_t, h_prev, c_prev, cell, name="peephole_lstm_step")
        if not isinstance(out, tuple | list) or len(out) != 2:
            fail("return the pair (h_t, c_t).", "the new cell state is needed by the next step.")
        h, c = (expect_tensor(v, (B, H), name) for v, name in zip(out, ("h_t", "c_t")))
        h, c = (expect_dtype(v, x_t.dtype, name) for v, name in ((h, "h_t"), (c, "c_t")))
        want_h, want_c = (v.detach() for v in cell(x_t, (h_prev, c_prev)))
        if not close(c, want_c):
            plain = LSTMCell(d_x, H).double()
            plain.load_state_dict(cell.state_dict(), strict=False)
            if close(c, plain(x_t, (h_prev, c_prev))[1].detach()):
                fail(
                    "c_t ignores the peepholes.",
                    "(lstm-P1) and (lstm-P2) add p ⊙ c_{t-1} inside σ.",
                )
            fail(
                f"c_t differs from (lstm-P3) (max error {(c - want_c).abs().max():.3g}).",
                "the forget and input gates peek at the *previous* cell state c_{t-1}.",
            )
        if not close(h, want_h):
            fail(
                f"h_t differs from (lstm-P4)-(lstm-P5) (max error {(h - want_h).abs().max():.3g}).",
                "the output gate peeks at the *new* cell state c_t, which you just computed.",
            )
    tests += [
        "c_t against (lstm-P1)-(lstm-P3)",
        "h_t against (lstm-P4)-(lstm-P5)",
        "batches of 5 and 1",
    ]
    # A step is only useful for training if the gradient flows to the peepholes.
    out = call(fn, x_t, h_prev, c_prev, cell, name="peephole_lstm_step")
    peepholes = [p for name, p in cell.named_parameters() if "peephole" in name]
    if not all(isinstance(v, torch.Tensor) and v.requires_grad for v in out):
        fail(
            "h_t and c_t carry no gradient: the step was computed outside autograd.",
            "compute with the cell's parameters directly, without torch.no_grad() or .detach().",
        )
    grads = torch.autograd.grad(out[0].sum() + out[1].sum(), peepholes, allow_unused=True)
    if any(g is None or not torch.isfinite(g).all() or g.abs().sum() == 0 for g in grads):
        fail(
            "no gradient reaches some peephole weights.",
            "use the cell's peephole parameters themselves, not copies of their values.",
        )
    tests.append("the gradient reaches every peephole")
    return passed("peephole_lstm_step", tests)


@own_random_state
def parameter_counts(fn) -> str:
    """Exercise: ``fn(kind, d_x, d_h, biases) -> int`` for ``kind`` in {"lstm", "gru"} and
    ``biases`` in {1, 2} (one bias per gate as in Keras, or two as in PyTorch)."""
    tests = []
    cases = [(kind, d_x, d_h) for kind in ("lstm", "gru") for d_x, d_h in ((1, 40), (5, 3), (7, 1))]
    for kind, d_x, d_h in cases:
        module = (LSTMCell if kind == "lstm" else GRUCell)(d_x, d_h)
        two = sum(p.numel() for p in module.parameters())
        gates = 4 if kind == "lstm" else 3
        for biases, want in ((2, two), (1, two - gates * d_h)):
            got = call(fn, kind, d_x, d_h, biases, name="parameter_count")
            if got != want:
                fail(
                    f"{kind.upper()} with d_x={d_x}, d_h={d_h} and {biases} bias vector(s): "
                    f"expected {want} parameters, got {got!r}.",
                    "each gate has an input matrix (d_h x d_x), a recurrent matrix (d_h x d_h) "
                    "and its bias vector(s) of size d_h.",
                )
    tests.append(f"{len(cases) * 2} cases of LSTM and GRU, one and two biases")
    readout = 40 * 10 + 10
    if call(fn, "lstm", 1, 40, 1, name="parameter_count") + readout != 7130:
        fail(
            "the benchmark appendix's LSTM(40) with a 10-way read-out should total 7,130.",
            "count the LSTM with one bias per gate, then add the read-out's 40 * 10 + 10.",
        )
    tests.append("the 7,130-parameter LSTM of the benchmark chapter")
    return passed("parameter_counts", tests)


@own_random_state
def cho_to_seed(fn) -> str:
    """Exercise: ``fn(cell) -> GRUCell``: given a ``GRUCell(variant="cho")``, return a
    ``GRUCell(variant="seed")`` that computes exactly the same function."""
    g = torch.Generator().manual_seed(23)
    cho = GRUCell(3, 4, variant="cho").double()
    with torch.no_grad():
        for p in cho.parameters():
            p.copy_(_random(g, *p.shape))
    before = {k: v.clone() for k, v in cho.state_dict().items()}
    seed = call(fn, cho, name="cho_to_seed")
    if not isinstance(seed, GRUCell) or seed.variant != "seed":
        fail("return a GRUCell with variant='seed'.", 'build it with GRUCell(3, 4, "seed").')
    if any(not equal(before[k], v) for k, v in cho.state_dict().items()):
        fail("the given cell was modified.", "copy its weights (state_dict) into a new cell.")
    x = _random(g, 6, 5, 3)

    def largest_difference():
        h_cho = h_seed = torch.zeros(6, 4, dtype=torch.float64)
        worst = 0.0
        with torch.no_grad():
            for t in range(x.shape[1]):
                h_cho = cho(x[:, t], h_cho)
                h_seed = seed(x[:, t].to(seed.weight_ih.dtype), h_seed.to(seed.weight_ih.dtype))
                worst = max(worst, float((h_cho - h_seed.double()).abs().max()))
        return worst

    worst = call(largest_difference, name="running the returned cell")
    tolerance = 1e-12 if seed.weight_ih.dtype == torch.float64 else 1e-5  # float32 rounding
    if worst > tolerance:
        fail(
            f"the two cells differ by up to {worst:.3g} over a 5-step sequence.",
            "σ(-a) = 1 - σ(a): which parameters feed the pre-activation of z?",
        )
    return passed("cho_to_seed", ["a new 'seed' cell, the old one untouched", "equal over 5 steps"])
