"""rnnbook.models.transformer: causal attention against torch's, parity of the encoder layer
with nn.TransformerEncoderLayer, causality, the time encoding, the recurrent attention against
a slow per-query loop, gradients and bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from rnnbook.models.transformer import (
    CausalTransformer,
    EncoderLayer,
    RecurrentAttention,
    RecurrentTransformer,
    causal_attention,
    recurrent_combine,
    sinusoidal_encoding,
)

MODELS = pytest.mark.parametrize(
    "cls", [CausalTransformer, RecurrentTransformer], ids=["transformer", "recurrent"]
)
SMALL = dict(d_model=8, heads=2, d_ff=12, layers=2)


def _close(actual, expected, tol=1e-12):
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


def _model(cls, seed=0, **kw):
    torch.manual_seed(seed)
    return cls(3, 2, **{**SMALL, **kw}).double()


def _x(B=2, T=6, d_x=3, seed=1):
    return torch.randn(
        B, T, d_x, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )


@MODELS
def test_shapes(cls):
    y, state = _model(cls)(_x(B=3, T=7))
    assert y.shape == (3, 7, 2) and state is None


def test_causal_attention_matches_torch():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 3, 9, 4, generator=g, dtype=torch.float64) for _ in range(3))
    out, weights = causal_attention(q, k, v)
    _close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    _close(weights.sum(-1), torch.ones(2, 3, 9, dtype=torch.float64))
    assert (weights.triu(1) == 0).all()  # exact zeros above the diagonal: s > t
    assert (weights[..., torch.ones(9, 9, dtype=torch.bool).tril()] > 0).all()


def test_encoder_layer_matches_torch():
    torch.manual_seed(3)
    ref = nn.TransformerEncoderLayer(
        8, 2, 12, dropout=0.0, activation="relu", batch_first=True, norm_first=True
    ).double()
    ours = EncoderLayer(8, 2, 12).double().load_from_torch(ref)
    x = _x(T=7, d_x=8)
    mask = nn.Transformer.generate_square_subsequent_mask(7, dtype=torch.float64)
    ref.eval()  # the same numbers in train mode at dropout 0; eval only picks torch's fast path
    with torch.no_grad():
        _close(ours(x), ref(x, src_mask=mask, is_causal=True))
        ref.train()
        _close(ours(x), ref(x, src_mask=mask, is_causal=True))


@MODELS
def test_causality(cls):
    model, x = _model(cls), _x(T=8)
    with torch.no_grad():
        y = model(x)[0]
        for t in range(8):
            x2 = x.clone()
            x2[:, t + 1 :] = torch.randn_like(x2[:, t + 1 :]) * 3
            y2 = model(x2)[0]
            # the same operations on the same numbers: exact up to the last bit
            torch.testing.assert_close(y2[:, : t + 1], y[:, : t + 1], rtol=0, atol=0)
            if t < 7:
                assert not torch.equal(y2[:, t + 1 :], y[:, t + 1 :])


def test_time_encoding():
    times = torch.tensor([[0.0, 1.5, 4.0]], dtype=torch.float64)
    pe = sinusoidal_encoding(times, 6)
    for i in range(3):
        freq = 10000.0 ** (-2 * i / 6)
        _close(pe[..., 2 * i], torch.sin(times * freq))
        _close(pe[..., 2 * i + 1], torch.cos(times * freq))
    assert sinusoidal_encoding(times, 5).shape == (1, 3, 5)


def test_times_from_interval_channel():
    regular = _model(CausalTransformer)
    irregular = _model(CausalTransformer, time_channel=1)
    x = _x(T=5)
    positions = torch.arange(1.0, 6.0, dtype=torch.float64).expand(2, 5)
    assert torch.equal(regular.times(x), positions)
    x[..., 1] = 1.0  # regular sampling: positions 1..T
    assert torch.equal(irregular.times(x), positions)
    with torch.no_grad():  # so the two models agree when given the same weights
        irregular.load_state_dict(regular.state_dict())
        _close(irregular(x)[0], regular(x)[0], 0)
    x[..., 1] = torch.tensor([0.5, 2.0, 0.25, 1.0, 3.0], dtype=torch.float64)
    _close(irregular.times(x)[0], torch.tensor([0.5, 2.5, 2.75, 3.75, 6.75], dtype=torch.float64))


def test_recurrent_attention_matches_slow_loop():
    torch.manual_seed(4)
    B, H, T, dh = 2, 3, 5, 2
    attention = RecurrentAttention(H * dh, H).double()
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(B, H, T, dh, generator=g, dtype=torch.float64) for _ in range(3))
    _, weights = causal_attention(q, k, v)
    fast = recurrent_combine(weights, v, attention.gru)
    slow = torch.empty_like(fast)
    with torch.no_grad():
        for b in range(B):
            for h in range(H):
                for t in range(T):
                    seq = weights[b, h, t, : t + 1, None] * v[b, h, : t + 1]  # alpha_ts v_s
                    out, _ = attention.gru(seq[None])  # from a zero state
                    slow[b, h, t] = out[0, -1]  # the state after s = t
    _close(fast, slow)


def test_recurrent_attention_gradients():
    torch.manual_seed(6)
    gru = nn.GRU(2, 2).double()
    g = torch.Generator().manual_seed(7)
    q, k, v = (
        torch.randn(2, 2, 4, 2, generator=g, dtype=torch.float64, requires_grad=True)
        for _ in range(3)
    )

    def f(q, k, v, *params):
        return recurrent_combine(causal_attention(q, k, v)[1], v, gru)

    assert torch.autograd.gradcheck(f, (q, k, v, *gru.parameters()))


@MODELS
def test_gradients_reach_all_parameters(cls):
    model = _model(cls, time_channel=0)
    model(_x())[0].square().sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@MODELS
def test_bad_input(cls):
    model = _model(cls)
    with pytest.raises(ValueError, match="d_x = 3"):
        model(_x(d_x=4))
    with pytest.raises(ValueError, match="3 dimensions"):
        model(torch.zeros(6, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="torch.Tensor"):
        model([[1.0, 2.0, 3.0]])
    with pytest.raises(TypeError, match="floating-point"):
        model(torch.zeros(1, 2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="divisible"):
        cls(3, 2, d_model=9, heads=2)
    with pytest.raises(ValueError, match="time_channel"):
        cls(3, 2, time_channel=3)
    with pytest.raises(ValueError, match="dropout"):
        cls(3, 2, dropout=1.0)
    with pytest.raises(ValueError, match="layers"):
        cls(3, 2, layers=0)
    with pytest.raises(ValueError, match="same shape"):
        causal_attention(torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 4, 2), torch.zeros(1, 1, 3, 2))
