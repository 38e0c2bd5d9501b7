"""Causal Transformers for vector data, Chapter 10 (long-term memory benchmarks).

Two models from the thesis of seed "003":

* :class:`CausalTransformer` (model 6): a dense input projection, the sinusoidal encoding of
  possibly irregular times (ltm-time-encoding), a stack of pre-norm encoder layers with causal
  multi-head self-attention (ltm-attention), a final LayerNorm and a dense output projection,
  one output per input step.
* :class:`RecurrentTransformer` (model 7): the same, but inside each head the weighted value
  vectors ``alpha_ts v_s`` are fed through a GRU whose state replaces the weighted sum,
  (ltm-recurrent-attention).

The layers are *pre-norm* (``x + SA(LN(x))``, then ``x + FF(LN(x))``, as
``nn.TransformerEncoderLayer(norm_first=True)``), which trains more easily than post-norm
without a learning-rate warm-up; a final LayerNorm follows the last layer. Both models return
``(y, None)`` to keep the book's (output, state) convention: they carry no recurrent state.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rnnbook._validate import check_positive_int, check_size, check_tensor


def sinusoidal_encoding(times: torch.Tensor, d_model: int) -> torch.Tensor:
    """(ltm-time-encoding): ``PE(tau)_{2i} = sin(tau / 10000^{2i/d})``,
    ``PE(tau)_{2i+1} = cos(tau / 10000^{2i/d})``, at real-valued times.

    Shapes: ``times`` (B, T) float -> (B, T, d_model). An odd ``d_model`` drops the last cosine.
    """
    check_tensor(times, "times", ndim=2)
    check_positive_int(d_model, "d_model")
    if not times.is_floating_point():
        raise TypeError(f"times must be a floating-point tensor, got {times.dtype}")
    i2 = torch.arange(0, d_model, 2, dtype=times.dtype, device=times.device)  # 2i
    angle = times[..., None] / 10000.0 ** (i2 / d_model)  # (B, T, ceil(d/2))
    pe = torch.stack((torch.sin(angle), torch.cos(angle)), dim=-1)  # (B, T, ceil(d/2), 2)
    return pe.flatten(-2)[..., :d_model]


def _check_qkv(q, k, v) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(t, name, ndim=4)
    if q.shape != k.shape or q.shape[:3] != v.shape[:3]:
        raise ValueError(
            "q and k must have the same shape (B, H, T, d_head) and v the same (B, H, T), got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )


def causal_weights(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The attention weights of (ltm-attention): ``alpha_t = softmax_s(q_t . k_s / sqrt(d_k))``
    over ``s <= t``, exact zeros above the diagonal. Shapes: (B, H, T, d) -> (B, H, T, T)."""
    T, d_k = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, H, T, T)
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)  # s > t
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """(ltm-attention): ``a_t = sum_{s<=t} alpha_ts v_s``, from scratch.

    Shapes: ``q, k`` (B, H, T, d_k), ``v`` (B, H, T, d_v) -> ``(out, weights)``,
    ``out`` (B, H, T, d_v), ``weights`` (B, H, T, T) with rows summing to 1.
    Agrees with ``F.scaled_dot_product_attention(q, k, v, is_causal=True)``.
    """
    _check_qkv(q, k, v)
    weights = causal_weights(q, k)
    return weights @ v, weights


def recurrent_combine(weights: torch.Tensor, v: torch.Tensor, gru: nn.GRU) -> torch.Tensor:
    """(ltm-recurrent-attention): ``a_t = GRU(alpha_t0 v_0, ..., alpha_tt v_t)``, the GRU's
    state after step ``s = t``, from a zero initial state, for every query ``t``.

    ``gru`` is a one-layer ``nn.GRU(d_head, d_head)``; its weights are used with torch's GRU
    equations, written out so that two savings are exact:

    * the input term is linear, ``W_ih (alpha_ts v_s) = alpha_ts (W_ih v_s)``, so ``W_ih v_s``
      is computed once per ``s`` rather than once per ``(t, s)``;
    * query ``t`` needs only steps ``s <= t``; at step ``s`` only the queries ``t >= s`` are
      advanced and query ``s`` is read off and dropped. That is the diagonal ``s = t`` of the
      full (T, T) grid of states at half its cost, and nothing after ``t`` is ever read.

    Shapes: ``weights`` (B, H, T, T), ``v`` (B, H, T, d_head) -> (B, H, T, d_head).
    """
    B, H, T, dh = v.shape
    w_ih, w_hh = gru.weight_ih_l0, gru.weight_hh_l0  # (3 dh, dh), gate order r, z, n
    b_ih = gru.bias_ih_l0 if gru.bias else v.new_zeros(3 * dh)
    b_hh = gru.bias_hh_l0 if gru.bias else v.new_zeros(3 * dh)
    u = (v.reshape(B * H, T, dh) @ w_ih.T).transpose(0, 1).contiguous()  # (T_s, BH, 3dh)
    alpha = weights.reshape(B * H, T, T).permute(2, 1, 0).contiguous()  # (T_s, T_q, BH)
    out = _DiagonalGRU.apply(alpha, u, w_hh, b_ih, b_hh)  # (T, BH, dh): query t's a_t
    return out.transpose(0, 1).reshape(B, H, T, dh)


class _DiagonalGRU(torch.autograd.Function):
    """The loop of :func:`recurrent_combine` with a hand-written backward (BPTT), which keeps
    only ``h_{s-1}, r, z, n`` and ``W_hn h_{s-1} + b_hn`` per step: about half the time and
    memory of autograd's graph. Row ``i`` of the step-``s`` state is query ``t = s + i``."""

    @staticmethod
    def forward(ctx, alpha, u, w_hh, b_ih, b_hh):
        T, BH, dh3 = u.shape
        dh = dh3 // 3
        h = u.new_zeros(T, BH, dh)
        out = u.new_empty(T, BH, dh)
        saved = []
        for s in range(T):
            gi = torch.addcmul(b_ih, alpha[s, s:, :, None], u[s])  # (T - s, BH, 3dh)
            gh = torch.addmm(b_hh, h.view(-1, dh), w_hh.T).view(T - s, BH, dh3)
            r, z = torch.sigmoid(gi[..., : 2 * dh] + gh[..., : 2 * dh]).chunk(2, dim=-1)
            hn = gh[..., 2 * dh :]
            n = torch.tanh(torch.addcmul(gi[..., 2 * dh :], r, hn))
            h_new = torch.lerp(n, h, z)  # (1 - z) n + z h
            saved.append((h, r, z, n, hn))
            out[s] = h_new[0]  # query t = s is complete
            h = h_new[1:]
        # save_for_backward, not ctx attributes, so the steps are freed right after backward
        ctx.save_for_backward(alpha, u, w_hh, *(x for step in saved for x in step))
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_out):
        alpha, u, w_hh, *steps = ctx.saved_tensors
        T, BH, dh3 = u.shape
        dh = dh3 // 3
        d_alpha = torch.zeros_like(alpha)
        d_u = torch.empty_like(u)
        d_w_hh = torch.zeros_like(w_hh)
        d_b_ih = u.new_zeros(dh3)
        d_b_hh = u.new_zeros(dh3)
        carry = g_out.new_zeros(0, BH, dh)  # dL/dh for queries t > s, from step s + 1
        for s in range(T - 1, -1, -1):
            h, r, z, n, hn = steps[5 * s : 5 * s + 5]
            g = torch.cat((g_out[s][None], carry))  # dL/dh_s, (T - s, BH, dh)
            d_n = g * (1 - z)
            d_z = g * (h - n)
            d_h = g * z
            d_an = d_n * (1 - n * n)  # through tanh
            d_rz = torch.cat((d_an * hn * r * (1 - r), d_z * z * (1 - z)), dim=-1)
            d_gi = torch.cat((d_rz, d_an), dim=-1)  # (T - s, BH, 3dh)
            d_gh = torch.cat((d_rz, d_an * r), dim=-1)
            d_gh2 = d_gh.view(-1, dh3)
            d_h = d_h.view(-1, dh).addmm_(d_gh2, w_hh).view(T - s, BH, dh)
            d_w_hh.addmm_(d_gh2.T, h.reshape(-1, dh))
            d_b_hh += d_gh2.sum(0)
            d_b_ih += d_gi.sum((0, 1))
            d_alpha[s, s:] = (d_gi * u[s]).sum(-1)
            d_u[s] = (d_gi * alpha[s, s:, :, None]).sum(0)
            carry = d_h
        return d_alpha, d_u, d_w_hh, d_b_ih, d_b_hh


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention, (ltm-attention) per head.

    Parameters keep the layout of ``nn.MultiheadAttention`` (``in_proj`` holds ``W_q; W_k;
    W_v``, then ``out_proj``). Dropout, as in torch, acts on the attention weights.
    Shapes: ``x`` (B, T, d_model) -> (B, T, d_model).
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0):
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_positive_int(heads, "heads")
        if d_model % heads:
            raise ValueError(f"d_model = {d_model} must be divisible by heads = {heads}")
        self.d_model, self.heads, self.d_head = d_model, heads, d_model // heads
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def combine(self, weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(ltm-attention): ``a_t = sum_s alpha_ts v_s``.
        Shapes: (B, H, T, T), (B, H, T, d) -> (B, H, T, d)."""
        return weights @ v

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = (
            self.in_proj(x).view(B, T, 3, self.heads, self.d_head).permute(2, 0, 3, 1, 4)
        )  # each (B, H, T, d_head)
        weights = self.dropout(causal_weights(q, k))
        a = self.combine(weights, v)  # (B, H, T, d_head)
        return self.out_proj(a.transpose(1, 2).reshape(B, T, self.d_model))

    @torch.no_grad()
    def load_from_torch(self, mha: nn.MultiheadAttention) -> CausalSelfAttention:
        """Copy the weights of a batch-first ``nn.MultiheadAttention`` with biases."""
        if mha.embed_dim != self.d_model or mha.num_heads != self.heads:
            raise ValueError(
                f"nn.MultiheadAttention has embed_dim={mha.embed_dim}, num_heads={mha.num_heads}; "
                f"expected {self.d_model}, {self.heads}"
            )
        if mha.in_proj_weight is None or mha.in_proj_bias is None:
            raise ValueError("nn.MultiheadAttention must use a packed in_proj with bias")
        self.in_proj.weight.copy_(mha.in_proj_weight)
        self.in_proj.bias.copy_(mha.in_proj_bias)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        self.out_proj.bias.copy_(mha.out_proj.bias)
        return self

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, heads={self.heads}"


class RecurrentAttention(CausalSelfAttention):
    """Causal multi-head self-attention whose weighted values pass through a GRU,
    (ltm-recurrent-attention).

    One ``nn.GRU(d_head, d_head)`` is shared by all heads and all queries. For query ``t`` it
    reads ``alpha_t0 v_0, ..., alpha_tt v_t`` from a zero state; its state after step
    ``s = t`` replaces the weighted sum of (ltm-attention). In the thesis the attention is not
    causal (every query sees the whole sequence and the GRU reads all of it); this is the
    book's causal adaptation: ``alpha_ts = 0`` for ``s > t`` and the state is read at ``s = t``,
    so nothing after ``t`` enters ``a_t``.
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0):
        super().__init__(d_model, heads, dropout)
        self.gru = nn.GRU(self.d_head, self.d_head, batch_first=True)

    def combine(self, weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return recurrent_combine(weights, v, self.gru)


class EncoderLayer(nn.Module):
    """A pre-norm encoder layer: ``x + SA(LN1(x))``, then ``x + FF(LN2(x))`` with
    ``FF(x) = W_2 relu(W_1 x + b_1) + b_2``; the computation of
    ``nn.TransformerEncoderLayer(norm_first=True, activation="relu", batch_first=True)``
    with a causal mask. ``attention`` is the self-attention module (causal by default).
    """

    def __init__(
        self,
        d_model: int,
        heads: int,
        d_ff: int,
        dropout: float = 0.0,
        attention: CausalSelfAttention | None = None,
    ):
        super().__init__()
        check_positive_int(d_ff, "d_ff")
        self.self_attn = attention or CausalSelfAttention(d_model, heads, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.dropout1(self.self_attn(self.norm1(x)))
        ff = self.linear2(self.dropout(torch.relu(self.linear1(self.norm2(x)))))
        return x + self.dropout2(ff)

    @torch.no_grad()
    def load_from_torch(self, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """Copy the weights of an ``nn.TransformerEncoderLayer`` (same sizes)."""
        self.self_attn.load_from_torch(layer.self_attn)
        for name in ("norm1", "norm2", "linear1", "linear2"):
            ours, theirs = getattr(self, name), getattr(layer, name)
            for p in ("weight", "bias"):
                a, b = getattr(ours, p), getattr(theirs, p)
                if a.shape != b.shape:
                    raise ValueError(f"{name}.{p}: shape {tuple(b.shape)} != {tuple(a.shape)}")
                a.copy_(b)
        return self


class CausalTransformer(nn.Module):
    """A causal Transformer for vector sequences, one output per step.

    ``y_t = W_out LN(layers(W_in x_t + b_in + PE(tau_t))) + b_out``, with the times
    ``tau_t = sum_{s<=t} Delta_s`` of (ltm-time-encoding).

    Args:
        d_x, d_y: input and output sizes. d_model: model width. heads: attention heads
            (``d_model`` must be divisible by it). d_ff: feed-forward width. layers: encoder
            layers (pre-norm, causal, see :class:`EncoderLayer`). dropout: dropout rate.
        time_channel: index of the input channel holding the interval ``Delta_t`` since the
            previous step; the times are its cumulative sum. The channel also stays among the
            projected inputs. ``None``: regular positions ``tau_t = 1, ..., T``.

    ``forward(x)`` takes ``x`` (B, T, d_x) and returns ``(y, None)``, ``y`` (B, T, d_y).
    """

    attention_class = CausalSelfAttention

    def __init__(
        self,
        d_x: int,
        d_y: int,
        d_model: int = 32,
        heads: int = 4,
        d_ff: int = 64,
        layers: int = 2,
        dropout: float = 0.0,
        time_channel: int | None = None,
    ):
        super().__init__()
        check_positive_int(d_x, "d_x")
        check_positive_int(d_y, "d_y")
        check_positive_int(d_model, "d_model")
        check_positive_int(layers, "layers")
        if not isinstance(dropout, int | float) or not 0 <= dropout < 1:
            raise ValueError(f"dropout must be a number in [0, 1), got {dropout!r}")
        if time_channel is not None and (
            isinstance(time_channel, bool)
            or not isinstance(time_channel, int)
            or not 0 <= time_channel < d_x
        ):
            raise ValueError(
                f"time_channel must be None or an input channel index in [0, {d_x}), "
                f"got {time_channel!r}"
            )
        self.d_x, self.d_y, self.d_model, self.time_channel = d_x, d_y, d_model, time_channel
        self.input_proj = nn.Linear(d_x, d_model)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(
                d_model, heads, d_ff, dropout, self.attention_class(d_model, heads, dropout)
            )
            for _ in range(layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.output_proj = nn.Linear(d_model, d_y)

    def times(self, x: torch.Tensor) -> torch.Tensor:
        """(ltm-time-encoding): ``tau_t = sum_{s<=t} Delta_s`` from the interval channel, or
        ``1, ..., T`` without one. (B, T, d_x) -> (B, T)."""
        if self.time_channel is None:
            T = x.shape[1]
            return torch.arange(1, T + 1, dtype=x.dtype, device=x.device).expand(x.shape[0], T)
        return torch.cumsum(x[..., self.time_channel], dim=1)

    def forward(self, x: torch.Tensor):
        check_tensor(x, "x", ndim=3)
        check_size(x, "x", 2, self.d_x, "the input size d_x")
        if not x.is_floating_point():
            raise TypeError(f"x must be a floating-point tensor, got {x.dtype}")
        h = self.input_proj(x) + sinusoidal_encoding(self.times(x), self.d_model)
        h = self.dropout(h)
        for layer in self.layers:
            h = layer(h)
        return self.output_proj(self.norm(h)), None  # (B, T, d_y)

    def extra_repr(self) -> str:
        return f"d_x={self.d_x}, d_y={self.d_y}, time_channel={self.time_channel}"


class RecurrentTransformer(CausalTransformer):
    """The Recurrent Transformer: :class:`CausalTransformer` with :class:`RecurrentAttention`,
    (ltm-recurrent-attention), in the book's causal adaptation.

    The defaults (``d_model=16, heads=2, d_ff=32, layers=1``, so ``d_head = 8``) keep a
    training step at B=128, T=120 near a second on one CPU thread: the GRU runs over
    ``B * heads * T (T + 1) / 2`` (query, step) pairs per layer.
    """

    attention_class = RecurrentAttention

    def __init__(
        self,
        d_x: int,
        d_y: int,
        d_model: int = 16,
        heads: int = 2,
        d_ff: int = 32,
        layers: int = 1,
        dropout: float = 0.0,
        time_channel: int | None = None,
    ):
        super().__init__(d_x, d_y, d_model, heads, d_ff, layers, dropout, time_channel)
