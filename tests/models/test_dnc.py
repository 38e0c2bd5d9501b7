"""rnnbook.models.dnc: usage, allocation, temporal links and read weightings (spec ntm §6.2,
§8.2 test 10), against hand-computed values and NumPy loops over the equations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rnnbook.models.dnc import (
    allocation_weighting,
    backward_weighting,
    forward_weighting,
    oneplus,
    read_weighting,
    retention,
    update_links,
    update_precedence,
    update_usage,
    write_weighting,
)

F64 = torch.float64


def _t(values) -> torch.Tensor:
    return torch.tensor(np.asarray(values, dtype=float), dtype=F64)


def _close(actual, expected, atol, msg=None):
    if not isinstance(expected, torch.Tensor):
        expected = torch.tensor(np.asarray(expected, dtype=float))
    torch.testing.assert_close(actual, expected.to(actual.dtype), rtol=0, atol=atol, msg=msg)


def _onehot(i: int, N: int) -> torch.Tensor:
    w = torch.zeros(1, N, dtype=F64)
    w[0, i] = 1
    return w


def _rand(*shape, seed=0) -> torch.Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


# --- NumPy references ---------------------------------------------------------------------------


def np_allocation(u):
    """a[phi[j]] = (1 - u[phi[j]]) prod_{i<j} u[phi[i]], one example at a time."""
    a = np.zeros_like(u)
    for b in range(u.shape[0]):
        phi = np.argsort(u[b], kind="stable")
        product = 1.0
        for j in phi:
            a[b, j] = (1 - u[b, j]) * product
            product *= u[b, j]
    return a


def np_links(links, p, w):
    """L[i, j] = (1 - w[i] - w[j]) L[i, j] + w[i] p[j], and 0 on the diagonal."""
    B, N = w.shape
    out = np.zeros_like(links)
    for b in range(B):
        for i in range(N):
            for j in range(N):
                if i != j:
                    out[b, i, j] = (1 - w[b, i] - w[b, j]) * links[b, i, j] + w[b, i] * p[b, j]
    return out


# --- usage and allocation ----------------------------------------------------------------------


def test_allocation_of_the_spec_usage_is_e4():
    """u = (.9, .1, .5, 1, 0): the free row 4 takes everything."""
    u = _t([[0.9, 0.1, 0.5, 1.0, 0.0]])
    exact = allocation_weighting(u, eps=0)
    _close(exact, _onehot(4, 5), 0)
    _close(exact.sum(-1), [1.0], 1e-15)
    squashed = allocation_weighting(u)  # deepmind/dnc's eps = 1e-6
    _close(squashed, _onehot(4, 5), 2e-6)
    _close(squashed.sum(-1), [1.0], 1e-6)


def test_allocation_by_hand():
    """u = (.5, .2, .8): the free list is (1, 0, 2)."""
    u = _t([[0.5, 0.2, 0.8]])
    # row 1 first: 1 - .2 = .8; row 0: (1 - .5) * .2 = .1; row 2: (1 - .8) * .2 * .5 = .02
    _close(allocation_weighting(u, eps=0), [[0.1, 0.8, 0.02]], 1e-15)


@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_allocation_matches_numpy(eps):
    u = _rand(6, 9, seed=1)
    expected = np_allocation(eps + (1 - eps) * u.numpy())
    _close(allocation_weighting(u, eps=eps), expected, 1e-15)


def test_allocation_prefers_the_least_used_row_and_stays_a_subdistribution():
    u = _rand(50, 12, seed=2)
    a = allocation_weighting(u)
    assert torch.equal(a.argmax(-1), u.argmin(-1))
    assert a.min() >= 0 and (a.sum(-1) <= 1 + 1e-12).all()
    # the sum telescopes to 1 - prod(u)
    _close(a.sum(-1), 1 - torch.prod(1e-6 + (1 - 1e-6) * u, dim=-1), 1e-12)


def test_allocation_of_a_full_memory_is_nearly_zero():
    assert allocation_weighting(torch.ones(2, 4, dtype=F64)).max() < 1e-5


def test_allocation_gradient():
    u = (0.05 + 0.9 * _rand(2, 5, seed=3)).requires_grad_(True)
    assert torch.autograd.gradcheck(allocation_weighting, (u,), eps=1e-7, atol=1e-7)


def test_usage_update_by_hand():
    u_prev = _t([[0.0, 0.5, 1.0, 0.2]])
    w_prev = _t([[0.5, 0.5, 0.0, 0.0]])
    psi = _t([[1.0, 1.0, 1.0, 0.5]])
    # (u + w - u w) psi = (.5, .75, 1, .2 * .5)
    _close(update_usage(u_prev, w_prev, psi), [[0.5, 0.75, 1.0, 0.1]], 1e-15)


def test_full_write_sets_usage_to_one_and_full_free_to_zero():
    u_prev = _t([[0.3, 0.6, 0.1]])
    no_free = torch.ones(1, 3, dtype=F64)
    assert update_usage(u_prev, _onehot(2, 3), no_free)[0, 2] == 1
    w_read_prev = _onehot(1, 3).unsqueeze(1)  # (B, R=1, N): head 0 read row 1
    psi = retention(_t([[1.0]]), w_read_prev)
    _close(psi, [[1.0, 0.0, 1.0]], 0)
    _close(update_usage(u_prev, torch.zeros(1, 3, dtype=F64), psi), [[0.3, 0.0, 0.1]], 0)


def test_retention_matches_the_product_over_heads():
    f = _rand(3, 2, seed=4)
    w = torch.softmax(torch.randn(3, 2, 5, generator=torch.Generator().manual_seed(5)), -1)
    w = w.to(F64)
    expected = (1 - f[:, :1].numpy() * w[:, 0].numpy()) * (1 - f[:, 1:].numpy() * w[:, 1].numpy())
    _close(retention(f, w), expected, 1e-15)


def test_write_weighting_by_hand():
    a, c = _t([[1.0, 0.0, 0.0]]), _t([[0.0, 0.5, 0.5]])
    _close(write_weighting(a, c, _t([[0.25]]), _t([[0.8]])), [[0.2, 0.3, 0.3]], 1e-15)
    _close(write_weighting(a, c, _t([[1.0]]), _t([[0.0]])), [[0.0, 0.0, 0.0]], 0)


def test_oneplus_is_at_least_one():
    x = torch.linspace(-30, 30, 61, dtype=F64)
    y = oneplus(x)
    assert (y >= 1).all()
    # torch's softplus returns x itself above x = 20, where log(1 + e^x) - x < 2.1e-9
    _close(y, 1 + np.logaddexp(0, x.numpy()), 3e-9)


# --- temporal links ----------------------------------------------------------------------------


def test_precedence_by_hand():
    p = torch.zeros(1, 3, dtype=F64)
    p = update_precedence(p, _t([[0.5, 0.0, 0.0]]))
    _close(p, [[0.5, 0.0, 0.0]], 0)
    p = update_precedence(p, _t([[0.0, 0.6, 0.2]]))  # (1 - .8) * p + w
    _close(p, [[0.1, 0.6, 0.2]], 1e-15)


def test_links_after_writing_row_0_then_row_1():
    """Spec test 10: forward from e0 gives e1, backward from e1 gives e0."""
    N = 4
    links, p = torch.zeros(1, N, N, dtype=F64), torch.zeros(1, N, dtype=F64)
    for row in (0, 1):
        w = _onehot(row, N)
        links = update_links(links, p, w)  # uses p_{t-1}
        p = update_precedence(p, w)
    expected = torch.zeros(1, N, N, dtype=F64)
    expected[0, 1, 0] = 1  # row 1 was written right after row 0
    _close(links, expected, 0)
    _close(forward_weighting(links, _onehot(0, N).unsqueeze(1)), _onehot(1, N).unsqueeze(1), 0)
    _close(backward_weighting(links, _onehot(1, N).unsqueeze(1)), _onehot(0, N).unsqueeze(1), 0)


def test_links_of_a_non_adjacent_write_order():
    """Writes to rows 3, 0, 2: forward replays 3 -> 0 -> 2, whatever the layout."""
    N = 5
    links, p = torch.zeros(1, N, N, dtype=F64), torch.zeros(1, N, dtype=F64)
    for row in (3, 0, 2):
        links = update_links(links, p, _onehot(row, N))
        p = update_precedence(p, _onehot(row, N))
    w = _onehot(3, N).unsqueeze(1)
    w = forward_weighting(links, w)
    _close(w, _onehot(0, N).unsqueeze(1), 0)
    _close(forward_weighting(links, w), _onehot(2, N).unsqueeze(1), 0)
    _close(backward_weighting(links, _onehot(2, N).unsqueeze(1)), _onehot(0, N).unsqueeze(1), 0)


def test_links_match_numpy_and_stay_bounded_under_soft_writes():
    g = torch.Generator().manual_seed(6)
    B, N = 3, 6
    links, p = torch.zeros(B, N, N, dtype=F64), torch.zeros(B, N, dtype=F64)
    for step in range(8):
        strength = torch.rand(B, 1, generator=g, dtype=F64)  # sum w <= 1
        w = strength * torch.softmax(3 * torch.randn(B, N, generator=g, dtype=F64), -1)
        expected = np_links(links.numpy(), p.numpy(), w.numpy())
        links = update_links(links, p, w)
        p = update_precedence(p, w)
        _close(links, expected, 1e-15, msg=f"step {step}")
        assert (torch.diagonal(links, dim1=1, dim2=2) == 0).all()
        assert links.min() >= 0
        assert (links.sum(1) <= 1 + 1e-12).all() and (links.sum(2) <= 1 + 1e-12).all()
        assert (p.sum(-1) <= 1 + 1e-12).all()


def test_forward_and_backward_weightings_match_numpy():
    links = _rand(2, 5, 5, seed=7)
    w = torch.softmax(_rand(2, 3, 5, seed=8), -1)
    L, wn = links.numpy(), w.numpy()
    forward = np.stack([[L[b] @ wn[b, r] for r in range(3)] for b in range(2)])
    backward = np.stack([[L[b].T @ wn[b, r] for r in range(3)] for b in range(2)])
    _close(forward_weighting(links, w), forward, 1e-15)
    _close(backward_weighting(links, w), backward, 1e-15)


def test_read_weighting_mixes_by_the_modes():
    b, c, f = _rand(1, 2, 4, seed=9), _rand(1, 2, 4, seed=10), _rand(1, 2, 4, seed=11)
    modes = _t([[[1, 0, 0], [0.2, 0.3, 0.5]]])
    w = read_weighting(b, c, f, modes)
    _close(w[:, 0], b[:, 0], 0)
    _close(w[:, 1], 0.2 * b[:, 1] + 0.3 * c[:, 1] + 0.5 * f[:, 1], 1e-15)


# --- bad input ---------------------------------------------------------------------------------


def _bad_calls():
    w, u = torch.full((2, 4), 0.25), torch.zeros(2, 4)
    return [
        (
            "usage N",
            lambda: update_usage(u, w[:, :3], u),
            r"w_write_prev must have shape \(B, N\) = \(2, 4\), got \(2, 3\)",
        ),
        (
            "usage 1-D",
            lambda: update_usage(u[0], w, u),
            r"usage_prev must have 2 dimensions, got shape \(4,\)",
        ),
        (
            "eps",
            lambda: allocation_weighting(u, eps=1.0),
            r"eps must be a number in \[0, 1\), got 1.0",
        ),
        (
            "retention R",
            lambda: retention(torch.zeros(2, 2), w.unsqueeze(1)),
            r"w_read_prev must have shape \(B, R, N\) = \(2, 2, 4\)",
        ),
        (
            "write gate",
            lambda: write_weighting(w, w, torch.ones(2, 1), torch.ones(2)),
            r"write_gate must have 2 dimensions",
        ),
        (
            "precedence",
            lambda: update_precedence(u, w[:1]),
            r"w_write must have shape \(B, N\) = \(2, 4\), got \(1, 4\)",
        ),
        (
            "links N",
            lambda: update_links(torch.zeros(2, 4, 3), u, w),
            r"links_prev must have shape \(B, N, N\) = \(2, 4, 4\)",
        ),
        (
            "forward R",
            lambda: forward_weighting(torch.zeros(2, 4, 4), w),
            r"w_read_prev must have 3 dimensions",
        ),
        (
            "links square",
            lambda: backward_weighting(torch.zeros(2, 4, 5), w.unsqueeze(1)),
            r"links must have shape \(B, N, N\) = \(2, 4, 4\)",
        ),
        (
            "modes",
            lambda: read_weighting(*[w.unsqueeze(1)] * 3, torch.ones(2, 1, 2)),
            r"modes must have shape \(B, R, 3\) = \(2, 1, 3\)",
        ),
    ]


@pytest.mark.parametrize(
    "call, match", [c[1:] for c in _bad_calls()], ids=[c[0] for c in _bad_calls()]
)
def test_functions_reject_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_integer_usage_is_rejected():
    with pytest.raises(TypeError, match="usage must be a floating-point tensor, got torch.int64"):
        allocation_weighting(torch.zeros(2, 4, dtype=torch.long))
