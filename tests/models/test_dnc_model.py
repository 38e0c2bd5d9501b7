"""rnnbook.models.dnc: the trainable DNC (DNCCell, DNC) built from the addressing functions:
shapes, the parameter count, bad input, the invariants of usage, weightings and links over a
random sequence, gradients, a short training run without NaN, and determinism."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rnnbook.models import DNC, DNCCell, DNCState
from rnnbook.models.dnc import content_weighting_heads
from rnnbook.models.ntm import content_weighting

F64 = torch.float64
ULP = torch.finfo(F64).eps
SMALL = dict(N=8, W=5, R=2, d_ctrl=16)


def _model(seed=0, d_x=5, d_y=4, dtype=F64, **options) -> DNC:
    torch.manual_seed(seed)
    return DNC(d_x, d_y, **{**SMALL, **options}).to(dtype)


def _x(B=3, T=7, d_x=5, seed=1, dtype=F64) -> torch.Tensor:
    return torch.randn(B, T, d_x, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# --- shapes and size ----------------------------------------------------------------------------


def test_shapes_of_logits_state_and_internals():
    model = _model()
    B, T, N, W, R = 3, 7, 8, 5, 2
    logits, state, internals = model(_x(B, T), return_internals=True)
    assert logits.shape == (B, T, 4)
    assert isinstance(state, DNCState)
    assert [tuple(h.shape) for h in state.controller] == [(B, 16), (B, 16)]
    expected = {
        "reads": (B, R, W),
        "w_read": (B, R, N),
        "w_write": (B, N),
        "memory": (B, N, W),
        "usage": (B, N),
        "links": (B, N, N),
        "precedence": (B, N),
    }
    assert {name: tuple(getattr(state, name).shape) for name in expected} == expected
    assert {name: tuple(v.shape) for name, v in internals.items()} == {
        "usage": (B, T, N),
        "allocation": (B, T, N),
        "w_write": (B, T, N),
        "w_read": (B, T, R, N),
        "reads": (B, T, R, W),
        "free_gates": (B, T, R),
        "allocation_gate": (B, T, 1),
        "write_gate": (B, T, 1),
        "read_modes": (B, T, R, 3),
    }
    assert model(_x(B, T))[2] is None


def test_cell_step_and_sequence_agree():
    model = _model()
    x = _x()
    logits, state_T, _ = model(x)
    state = None
    for t in range(x.shape[1]):
        logits_t, state, _ = model.cell(x[:, t], state)
        torch.testing.assert_close(logits_t, logits[:, t], rtol=0, atol=0)
    for a, b in zip(state[1:], state_T[1:], strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_sequence_can_be_continued_from_its_final_state():
    model = _model()
    x = _x(T=8)
    whole, _, _ = model(x)
    first, state, _ = model(x[:, :5])
    second, _, _ = model(x[:, 5:], state)
    torch.testing.assert_close(torch.cat([first, second], 1), whole, rtol=0, atol=1e-14)


def test_parameter_count_of_the_training_configuration():
    cell = DNCCell(10, 10, N=64, W=16, R=4, d_ctrl=100)
    xi = 4 * 16 + 4 + 16 + 1 + 16 + 16 + 4 + 1 + 1 + 3 * 4  # 135
    lstm = 4 * 100 * (10 + 4 * 16 + 100) + 2 * 4 * 100
    expected = lstm + (100 * xi + xi) + ((100 + 4 * 16) * 10 + 10)
    assert expected == 85685
    assert sum(p.numel() for p in cell.parameters()) == expected
    assert cell.input_size == 10 and cell.output_size == 10


def test_forget_gate_bias_starts_one_higher():
    torch.manual_seed(0)
    cell = DNCCell(3, 2, d_ctrl=10)
    bias = cell.controller.bias_ih.detach()
    assert bias[10:20].min() >= 1 - 1 / 10**0.5 - 1e-6  # torch's U(-1/sqrt(H), 1/sqrt(H)) + 1
    assert bias[:10].max() <= 1 / 10**0.5 + 1e-6


def test_content_weighting_heads_is_the_ntm_lookup_head_by_head():
    g = torch.Generator().manual_seed(3)
    memory = torch.randn(2, 6, 4, generator=g, dtype=F64)
    keys = torch.randn(2, 3, 4, generator=g, dtype=F64)
    strengths = 1 + torch.rand(2, 3, 1, generator=g, dtype=F64) * 5
    together = content_weighting_heads(memory, keys, strengths)
    for i in range(3):
        alone = content_weighting(memory, keys[:, i], strengths[:, i])
        torch.testing.assert_close(together[:, i], alone, rtol=0, atol=4 * ULP)


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, match",
    [
        (torch.zeros(2, 5), "x must have 3 dimensions, got shape \\(2, 5\\)"),
        (torch.zeros(2, 3, 4), "x must have the input size d_x = 5 in dimension 2"),
        (torch.zeros(2, 0, 5), "at least one time step"),
    ],
)
def test_bad_sequences_are_rejected(x, match):
    with pytest.raises(ValueError, match=match):
        _model(dtype=torch.float32)(x)


def test_bad_steps_and_states_are_rejected():
    model = _model()
    cell = model.cell
    with pytest.raises(TypeError, match="x_t must be a torch.Tensor, got list"):
        cell([[0.0] * 5])
    with pytest.raises(ValueError, match="x_t must have the input size d_x = 5"):
        cell(torch.zeros(2, 6, dtype=F64))
    with pytest.raises(TypeError, match="state must be a DNCState, got tuple"):
        cell(torch.zeros(2, 5, dtype=F64), (None,))
    state = cell.initial_state(3, dtype=F64)
    with pytest.raises(ValueError, match=r"each controller state must have shape .* = \(2, 16\)"):
        cell(torch.zeros(2, 5, dtype=F64), state)
    bad_links = state._replace(links=torch.zeros(3, 8, 7, dtype=F64))
    with pytest.raises(ValueError, match=r"state.links must have shape \(B, N, N\) = \(3, 8, 8\)"):
        cell(torch.zeros(3, 5, dtype=F64), bad_links)
    with pytest.raises(ValueError, match="state.controller must be a tuple \\(h, c\\) of 2"):
        cell(torch.zeros(3, 5, dtype=F64), state._replace(controller=(state.controller[0],)))
    with pytest.raises(ValueError, match="B must be a positive integer, got 0"):
        cell.initial_state(0)


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(N=0), "N must be a positive integer, got 0"),
        (dict(W=2.5), "W must be a positive integer, got 2.5"),
        (dict(R=True), "R must be a positive integer, got True"),
        (dict(d_ctrl=-1), "d_ctrl must be a positive integer, got -1"),
        (dict(clip=0), "clip must be a positive finite number, got 0"),
        (dict(clip=float("inf")), "clip must be a positive finite number, got inf"),
    ],
)
def test_bad_options_are_rejected(options, match):
    with pytest.raises(ValueError, match=match):
        DNCCell(5, 4, **options)


# --- invariants ------------------------------------------------------------------------------------


def test_usage_weightings_and_links_stay_valid_over_a_random_sequence():
    model = _model(seed=4)
    x = 3 * _x(B=4, T=25, seed=5)  # large inputs: gates far from 1/2
    _, state, internals = model(x, return_internals=True)
    usage, w_write, w_read = internals["usage"], internals["w_write"], internals["w_read"]
    assert usage.min() >= 0 and usage.max() <= 1
    assert (w_write >= 0).all() and (w_write.sum(-1) <= 1 + 8 * ULP).all()
    assert (w_read >= 0).all() and (w_read.sum(-1) <= 1 + 8 * ULP).all()
    assert torch.allclose(internals["read_modes"].sum(-1), torch.ones((), dtype=F64))
    links = state.links
    assert (links >= 0).all()
    assert (links.diagonal(dim1=-2, dim2=-1) == 0).all()
    assert (links.sum(-1) <= 1 + 8 * ULP).all() and (links.sum(-2) <= 1 + 8 * ULP).all()
    assert (state.precedence >= 0).all() and (state.precedence.sum(-1) <= 1 + 8 * ULP).all()
    assert usage.max() > 0.1 and links.max() > 0.01  # the test did exercise writing and links


# --- gradients, training, determinism ---------------------------------------------------------------


def test_gradients_reach_every_parameter():
    model = _model()
    logits, _, _ = model(_x(T=6))
    logits.pow(2).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def _copy_batch(B=16, L=5, bits=4, seed=0):
    """L random bit vectors, a delimiter, then L + 1 blank steps; recall the bits after it."""
    g = torch.Generator().manual_seed(seed)
    T = 2 * L + 2
    x = torch.zeros(B, T, bits + 1)
    y = torch.randint(0, 2, (B, L, bits), generator=g).float()
    x[:, :L, :bits] = y
    x[:, L, bits] = 1.0
    return x, y, L


def test_a_short_training_run_stays_finite_and_lowers_the_loss():
    torch.manual_seed(0)
    model = DNC(5, 4, N=8, W=6, R=2, d_ctrl=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y, L = _copy_batch()
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        logits, _, _ = model(x)
        loss = F.binary_cross_entropy_with_logits(logits[:, L + 1 : 2 * L + 1], y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 50.0)
        assert torch.isfinite(loss) and torch.isfinite(norm)
        assert all(torch.isfinite(p.grad).all() for p in model.parameters())
        optimizer.step()
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < losses[0] - 0.005, losses


def test_same_seed_gives_bitwise_identical_outputs():
    x = _x(dtype=torch.float32)
    a = _model(seed=7, dtype=torch.float32)
    b = _model(seed=7, dtype=torch.float32)
    logits_a, state_a, _ = a(x)
    logits_b, state_b, _ = b(x)
    assert torch.equal(logits_a, logits_b) and torch.equal(state_a.memory, state_b.memory)
    again, _, _ = a(x)
    assert torch.equal(again, logits_a)
