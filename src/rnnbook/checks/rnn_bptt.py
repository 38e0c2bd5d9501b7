"""Checkers for the exercises of the chapter on RNNs and BPTT.

Each takes the student's answer, tests shapes, values and gradients on fresh random cases,
prints what passed, and raises :class:`~rnnbook.checks.grading.CheckFailed` with a hint
(never the solution) when something is wrong.
"""

from __future__ import annotations

import torch

from rnnbook.checks.dtypes import expect_dtype
from rnnbook.checks.grading import (
    call,
    close,
    expect_tensor,
    fail,
    not_attempted,
    own_random_state,
    passed,
)


def _reference_step(x_t, h_prev, W_xh, W_hh, b_h):
    return torch.tanh(x_t @ W_xh.T + h_prev @ W_hh.T + b_h)


@own_random_state
def srn_step(fn) -> str:
    """Exercise: ``fn(x_t, h_prev, W_xh, W_hh, b_h) -> h_t``, one tanh SRN step.

    The step is (rnn-R1)-(rnn-R2).
    """
    g = torch.Generator().manual_seed(1)
    d_x, d_h = 3, 4
    W_xh = torch.randn(d_h, d_x, generator=g, dtype=torch.float64)
    W_hh = torch.randn(d_h, d_h, generator=g, dtype=torch.float64) / 2
    b_h = torch.randn(d_h, generator=g, dtype=torch.float64)
    tests = []
    for B in (5, 1):
        x_t = torch.randn(B, d_x, generator=g, dtype=torch.float64)
        h_prev = torch.randn(B, d_h, generator=g, dtype=torch.float64).tanh()
        out = expect_tensor(
            call(fn, x_t, h_prev, W_xh, W_hh, b_h, name="srn_step"), (B, d_h), "h_t"
        )
        out = expect_dtype(out, x_t.dtype, "h_t")
        want = _reference_step(x_t, h_prev, W_xh, W_hh, b_h)
        if not close(out, want):
            only_input = _reference_step(x_t, torch.zeros_like(h_prev), W_xh, W_hh, b_h)
            if close(out, only_input):
                fail("h_t ignores the previous state.", "(rnn-R1) has a recurrent term in h_{t-1}.")
            pre = x_t @ W_xh.T + h_prev @ W_hh.T + b_h
            if close(out, pre):
                fail("h_t has the right pre-activation but no nonlinearity.", "apply (rnn-R2).")
            diagnoses = [
                (torch.tanh(x_t @ W_xh.T + h_prev @ W_hh + b_h), "the recurrent term",
                 "W_hh is (d_h, d_h) in torch's layout: the term is h_{t-1} @ W_hh.T."),
                (torch.tanh(x_t @ W_xh.T + h_prev @ W_hh.T), "the bias",
                 "(rnn-R1) adds b_h inside the nonlinearity."),
                (torch.tanh(x_t @ W_xh.T + h_prev @ W_hh.T) + b_h, "the bias",
                 "b_h goes inside the tanh, not after it."),
                (torch.relu(pre), "the nonlinearity", "the SRN of (rnn-R2) uses tanh."),
                (torch.sigmoid(pre), "the nonlinearity", "the SRN of (rnn-R2) uses tanh."),
            ]  # fmt: skip
            for wrong, part, hint in diagnoses:
                if close(out, wrong):
                    fail(f"h_t differs from (rnn-R1)-(rnn-R2) in {part}.", hint)
            fail(
                f"h_t differs from (rnn-R1)-(rnn-R2) for a batch of {B} (max error "
                f"{(out - want).abs().max():.3g}).",
                "compare term by term with (rnn-R1), then apply the tanh of (rnn-R2).",
            )
    tests.append("shapes for batches of 5 and 1")
    tests.append("values against (rnn-R1)-(rnn-R2)")
    W = W_hh.clone().requires_grad_(True)
    x_t = torch.randn(2, d_x, generator=g, dtype=torch.float64)
    h_prev = torch.randn(2, d_h, generator=g, dtype=torch.float64)
    out = call(fn, x_t, h_prev, W_xh, W, b_h, name="srn_step")
    if not out.requires_grad:
        fail("no gradient flows from h_t back to W_hh.", "stay in torch: no .detach(), .numpy().")
    (got,) = torch.autograd.grad(out.sum(), W)
    W_ref = W_hh.clone().requires_grad_(True)
    (want,) = torch.autograd.grad(_reference_step(x_t, h_prev, W_xh, W_ref, b_h).sum(), W_ref)
    if not close(got, want):
        fail("the gradient with respect to W_hh is wrong.", "compare your formula with (rnn-R1).")
    tests.append("gradient with respect to W_hh")
    return passed("srn_step", tests)


@own_random_state
def clip_by_global_norm(fn) -> str:
    """Exercise: ``fn(grads, c) -> clipped``: rescale a list of tensors jointly, (rnn-R12)."""
    g = torch.Generator().manual_seed(2)
    tests = []
    small = [torch.randn(3, 3, generator=g, dtype=torch.float64) * 0.01,
             torch.randn(3, generator=g, dtype=torch.float64) * 0.01]  # fmt: skip
    out = call(fn, [t.clone() for t in small], 1.0, name="clip_by_global_norm")
    if not isinstance(out, list | tuple) or len(out) != len(small):
        fail("return a list with one tensor per gradient.", "keep the order of the input.")
    _expect_like(out, small)
    if not all(close(a, b) for a, b in zip(out, small)):
        fail(
            "a gradient whose norm is below the threshold was changed.",
            "see the case split in (rnn-R12).",
        )
    tests.append("a small gradient is left alone")
    big = [torch.tensor([30.0, 40.0], dtype=torch.float64),
           torch.tensor([0.0, 0.0, 120.0], dtype=torch.float64)]  # joint norm 130  # fmt: skip
    out = call(fn, [t.clone() for t in big], 13.0, name="clip_by_global_norm")
    if not isinstance(out, list | tuple) or len(out) != len(big):
        fail("return a list with one tensor per gradient.", "keep the order of the input.")
    _expect_like(out, big)
    joint = torch.sqrt(sum((t**2).sum() for t in out))
    per_tensor = [t * min(1.0, 13.0 / float(t.norm())) for t in big]
    if all(close(a, b) for a, b in zip(out, per_tensor)):
        fail("each tensor was clipped on its own.", "(rnn-R12) uses one norm over all the tensors.")
    if abs(float(joint) - 13.0) > 1e-4:
        fail(f"after clipping the joint norm is {float(joint):.4g}, expected 13.", "rescale to c.")
    tests.append("a large gradient ends with norm c")
    flat_in = torch.cat([t.flatten() for t in big])
    flat_out = torch.cat([t.flatten() for t in out])
    if float(torch.nn.functional.cosine_similarity(flat_in, flat_out, dim=0)) < 1 - 1e-6:
        fail("clipping changed the direction of the gradient.", "multiply, do not clamp.")
    tests.append("the direction is kept")
    return passed("clip_by_global_norm", tests)


def _expect_like(out, grads) -> None:
    """Each clipped gradient has the shape and the dtype of its gradient (checks.dtypes)."""
    for k, (t, grad) in enumerate(zip(out, grads)):
        where = f"clipped gradient {k}"
        expect_dtype(expect_tensor(t, tuple(grad.shape), where), grad.dtype, where)


@own_random_state
def lag_jacobian(fn) -> str:
    """Exercise: ``fn(W_hh, a, k, t) -> dh_t/dh_k`` for a tanh SRN, by the product (rnn-R10).

    ``a`` (T, d_h) holds the pre-activations: ``a[i - 1]`` is ``a_i``.
    """
    g = torch.Generator().manual_seed(3)
    d_h, T = 3, 6
    W = torch.randn(d_h, d_h, generator=g, dtype=torch.float64)
    x = torch.randn(T, d_h, generator=g, dtype=torch.float64)
    hs, pre = [torch.zeros(d_h, dtype=torch.float64, requires_grad=True)], []
    for t in range(T):
        pre.append(hs[-1] @ W.T + x[t])
        hs.append(torch.tanh(pre[-1]))
    a = torch.stack(pre).detach()
    tests = []
    same = expect_tensor(call(fn, W, a, 4, 4, name="lag_jacobian"), (d_h, d_h), "dh_t/dh_k")
    same = expect_dtype(same, W.dtype, "dh_t/dh_t (no lag)")
    if not close(same, torch.eye(d_h, dtype=torch.float64)):
        fail("dh_t/dh_t should be the identity.", "an empty product is the identity matrix.")
    tests.append("zero lag gives the identity")
    for k, t in ((2, 3), (1, 5), (0, 6)):
        want = torch.stack(
            [torch.autograd.grad(hs[t][j], hs[k], retain_graph=True)[0] for j in range(d_h)]
        )
        got = expect_tensor(call(fn, W, a, k, t, name="lag_jacobian"), (d_h, d_h), "dh_t/dh_k")
        got = expect_dtype(got, W.dtype, f"dh_{t}/dh_{k}")
        if not close(got, want):
            reverse = torch.eye(d_h, dtype=torch.float64)
            for i in range(k + 1, t + 1):
                reverse = reverse @ (torch.diag(1 - torch.tanh(a[i - 1]) ** 2) @ W)
            if close(got, reverse):
                fail("the factors are multiplied in the wrong order.", "later factors on the left.")
            fail(f"dh_{t}/dh_{k} does not match autograd.", "each factor is diag(phi'(a_i)) W_hh.")
    tests.append("lags 1, 4 and 6 against autograd")
    return passed("lag_jacobian", tests)


@own_random_state
def vanishing_despite_large_weights(W_hh, x) -> str:
    """Exercise: a 2x2 ``W_hh`` with sigma_max >= 2 and inputs ``x`` (T, 2), T >= 50, for which
    the tanh SRN ``h_t = tanh(W_hh h_{t-1} + x_t)`` (h_0 = 0) has ||dh_T/dh_0|| < 1e-3."""
    W_hh = expect_tensor(torch.as_tensor(W_hh, dtype=torch.float64), (2, 2), "W_hh")
    x = torch.as_tensor(x, dtype=torch.float64)
    if not W_hh.any() and not x.any():  # the stub's zeros: reported, so that Run all goes on
        return not_attempted("vanishing_despite_large_weights", "W_hh and x are the stub's zeros")
    if x.dim() != 2 or x.shape[1] != 2 or x.shape[0] < 50:
        fail(f"x should have shape (T, 2) with T >= 50, got {tuple(x.shape)}.", "make it longer.")
    sigma = float(torch.linalg.matrix_norm(W_hh, ord=2))
    if sigma < 2 - 1e-9:
        fail(f"sigma_max(W_hh) = {sigma:.3g}, the exercise asks for at least 2.", "scale W_hh up.")
    linear = float(torch.linalg.matrix_norm(torch.linalg.matrix_power(W_hh, x.shape[0]), ord=2))
    if linear < 1:
        fail(
            f"W_hh vanishes on its own: ||W_hh^T|| = {linear:.3g} after T = {x.shape[0]} steps "
            "even without tanh (its spectral radius is below 1).",
            "choose a W_hh whose powers do not shrink (spectral radius >= 1), so that only the "
            "units' saturation can make the gradient vanish.",
        )
    h0 = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    h = h0
    for t in range(x.shape[0]):
        h = torch.tanh(W_hh @ h + x[t])
    jac = torch.stack([torch.autograd.grad(h[j], h0, retain_graph=True)[0] for j in range(2)])
    norm = float(torch.linalg.matrix_norm(jac, ord=2))
    if not norm < 1e-3:
        fail(
            f"||dh_T/dh_0|| = {norm:.3g}, not below 1e-3.",
            "the bound (rnn-R11) has a factor phi'(a_t) per step: what makes tanh' small?",
        )
    return passed(
        "vanishing_despite_large_weights",
        [f"sigma_max = {sigma:.3g} >= 2", f"||dh_T/dh_0|| = {norm:.2g} < 1e-3"],
    )
