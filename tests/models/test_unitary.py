"""rnnbook.models.unitary: orthogonality of expm(A - A^T), norm preservation, modReLU,
the frozen (reservoir) variant, parameter groups and errors."""

from __future__ import annotations

import math

import pytest
import torch

from rnnbook.models.recurrent import count_parameters
from rnnbook.models.unitary import (
    OrthogonalRNN,
    cayley_init,
    henaff_init,
    modrelu,
    orthogonal,
    skew,
)


def _orth_error(W: torch.Tensor) -> float:
    return (W.T @ W - torch.eye(W.shape[0], dtype=W.dtype)).abs().max().item()


@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_orthogonal_of_random_matrix(n):
    g = torch.Generator().manual_seed(n)
    A = torch.randn(n, n, generator=g, dtype=torch.float64)
    W = orthogonal(A)
    assert _orth_error(W) < 1e-6
    assert torch.allclose(W @ W.T, torch.eye(n, dtype=torch.float64), atol=1e-6)


@pytest.mark.parametrize("init", [henaff_init, cayley_init])
@pytest.mark.parametrize("n", [6, 7])
def test_inits_give_intended_rotation_blocks(init, n):
    A = init(n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    S = skew(A)
    assert torch.equal(A, -A.T)  # A itself skew, holding s/2, so A - A^T = 2A
    W = orthogonal(A)
    assert _orth_error(W) < 1e-6
    for k in range(n // 2):
        s = S[2 * k, 2 * k + 1].item()
        bound = math.pi if init is henaff_init else 1.0
        assert -bound <= s <= (bound if init is henaff_init else 0.0)
        block = torch.tensor([[math.cos(s), math.sin(s)], [-math.sin(s), math.cos(s)]])
        assert torch.allclose(W[2 * k : 2 * k + 2, 2 * k : 2 * k + 2].float(), block, atol=1e-6)
    off_block = S.clone()
    for k in range(n // 2):
        off_block[2 * k : 2 * k + 2, 2 * k : 2 * k + 2] = 0
    assert torch.equal(off_block, torch.zeros_like(S))
    if n % 2:
        assert W[-1, -1].item() == pytest.approx(1.0)


def test_henaff_angles_spread_over_minus_pi_to_pi():
    S = skew(henaff_init(2000, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    s = S.diagonal(offset=1)[::2]
    assert s.min() < -3.0 and s.max() > 3.0  # the full range, not halved


def test_norm_preserved_over_1000_steps():
    g = torch.Generator().manual_seed(0)
    W = orthogonal(torch.randn(32, 32, generator=g, dtype=torch.float64))
    h = torch.randn(32, generator=g, dtype=torch.float64)
    norm0 = h.norm()
    for _ in range(1000):
        h = W @ h
    assert abs(h.norm() / norm0 - 1) < 1e-9


def test_modrelu_sign_threshold_and_shift():
    z = torch.tensor([-2.0, -0.3, 0.0, 0.3, 2.0, -1.0, 1.0], dtype=torch.float64)
    b = torch.tensor([-0.5, -0.5, 0.2, -0.5, -0.5, 0.4, 0.4], dtype=torch.float64)
    out = modrelu(z, b)
    expected = torch.tensor([-1.5, 0.0, 0.0, 0.0, 1.5, -1.4, 1.4], dtype=torch.float64)
    assert torch.equal(out, expected)
    g = torch.Generator().manual_seed(0)
    z = torch.randn(100, 8, generator=g)
    b = torch.randn(8, generator=g)
    out = modrelu(z, b)
    alive = z.abs() + b > 0
    assert (torch.sign(out[alive]) == torch.sign(z[alive])).all()  # sign kept
    assert (out[~alive] == 0).all()  # 0 when |z| + b <= 0
    assert torch.allclose(out[alive], (z + torch.sign(z) * b)[alive])  # z + sign(z) b


def test_forward_shapes_and_h0():
    m = OrthogonalRNN(3, 2, d_h=16, seed=0)
    x = torch.randn(4, 5, 3)
    y, h = m(x)
    assert y.shape == (4, 5, 2) and h.shape == (4, 16)
    # one step by hand from a given h0
    h0 = torch.randn(4, 16)
    y1, h1 = m(x[:, :1], h0)
    W = m.recurrent_weight()
    expected = modrelu(h0 @ W.T + x[:, 0] @ m.V.T, m.b)
    assert torch.allclose(h1, expected, atol=1e-6)
    assert torch.allclose(y1[:, 0], m.readout(expected), atol=1e-6)


def test_seed_reproducible():
    a, b = OrthogonalRNN(3, 2, 16, seed=5), OrthogonalRNN(3, 2, 16, seed=5)
    for (n, p), (_, q) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(p, q), n


def _train(model, steps=5, lr=1e-2, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 20, model.input_size, generator=g)
    t = torch.randn(8, 20, model.output_size, generator=g)
    opt = torch.optim.Adam(model.parameter_groups(lr))
    for _ in range(steps):
        y, _ = model(x)
        loss = ((y - t) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stays_orthogonal_after_adam_steps(seed):
    d_h = 32
    m = OrthogonalRNN(3, 2, d_h, seed=seed)
    A0 = m.A.detach().clone()
    _train(m, seed=seed)
    assert (m.A - A0).abs().max() > 1e-3  # trained A changed...
    # ...and W is still orthogonal to float32 accuracy (a direct step of this size on W
    # itself would leave an error ~1e-2)
    assert _orth_error(m.recurrent_weight().detach()) < 1e-6 * d_h


def test_frozen_count_and_no_change():
    d_x, d_y, d_h = 10, 9, 32
    m = OrthogonalRNN(d_x, d_y, d_h, frozen=True, seed=0)
    assert count_parameters(m) == d_h * d_x + d_h + d_h * d_y + d_y
    assert "A" in dict(m.named_buffers()) and "A" not in dict(m.named_parameters())
    assert "A" in m.state_dict()
    A0, V0 = m.A.clone(), m.V.detach().clone()
    _train(m)
    assert m.A.grad is None and not m.A.requires_grad
    assert torch.equal(m.A, A0)
    assert not torch.equal(m.V, V0)  # the rest does train
    trainable = OrthogonalRNN(d_x, d_y, d_h, seed=0)
    assert count_parameters(trainable) == count_parameters(m) + d_h * d_h


def test_parameter_groups():
    m = OrthogonalRNN(3, 2, 8, seed=0)
    groups = m.parameter_groups(1e-3)
    assert len(groups) == 2
    assert groups[1]["params"] == [m.A] and groups[1]["lr"] == pytest.approx(1e-4)
    assert groups[0]["lr"] == 1e-3
    rest = {id(p) for p in groups[0]["params"]}
    assert rest == {id(p) for n, p in m.named_parameters() if n != "A"}
    frozen = OrthogonalRNN(3, 2, 8, frozen=True).parameter_groups(1e-3)
    assert len(frozen) == 1 and len(frozen[0]["params"]) == 4  # V, b, U, c
    with pytest.raises(ValueError, match="lr"):
        m.parameter_groups(0.0)


def test_bad_inputs_rejected():
    with pytest.raises(ValueError, match="d_h"):
        OrthogonalRNN(3, 2, 0)
    with pytest.raises(ValueError, match="d_x"):
        OrthogonalRNN(2.5, 2)
    with pytest.raises(ValueError, match="init"):
        OrthogonalRNN(3, 2, 8, init="eye")
    with pytest.raises(TypeError, match="frozen"):
        OrthogonalRNN(3, 2, 8, frozen="yes")
    m = OrthogonalRNN(3, 2, 8)
    with pytest.raises(ValueError, match="dimensions"):
        m(torch.randn(5, 3))
    with pytest.raises(ValueError, match="input size d_x"):
        m(torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match="at least one time step"):
        m(torch.randn(2, 0, 3))
    with pytest.raises(ValueError, match="h0"):
        m(torch.randn(2, 5, 3), torch.zeros(2, 7))
    with pytest.raises(TypeError, match="floating-point"):
        m(torch.ones(2, 5, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="square"):
        skew(torch.zeros(2, 3))
    with pytest.raises(TypeError, match="torch.Tensor"):
        modrelu([1.0], torch.zeros(1))
