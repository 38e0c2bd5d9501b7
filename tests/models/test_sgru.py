"""SGRU and SENS-GRU (Chapters 8-9): SBA inside a GRU. The all-update limit is the GRU of
Eqs. 9.1-9.4, the no-update limit stays at h_0 = 0, the bound u <= 1/2 for M = 2, the
straight-through gradient of SENS through the surprisal (and the float32 pitfall), padding
that neither updates nor counts, the recorded decisions and bad input."""

import math

import pytest
import torch

from rnnbook.models import GRUCell, Recurrent, SBAGRUCell
from rnnbook.models.sba import module_surprisal
from rnnbook.testing import assert_close_ulps

F64 = torch.float64
MODES = ("module", "ensemble")


def _pair(mode, theta, dtype=F64, M=4, d_x=3, d_h=8, seed=0, **kwargs):
    torch.manual_seed(seed)
    gru = GRUCell(d_x, d_h, variant="seed").to(dtype)
    torch.manual_seed(seed)
    cell = SBAGRUCell(d_x, d_h, M, theta, mode=mode, **kwargs).to(dtype)
    return gru, cell


@pytest.mark.parametrize("theta", [-1e9, -math.inf])
@pytest.mark.parametrize("dtype", [F64, torch.float32])
@pytest.mark.parametrize("mode", MODES)
def test_updating_always_is_the_seed_gru(mode, dtype, theta):
    gru, cell = _pair(mode, theta, dtype)
    x = torch.randn(4, 30, 3, dtype=dtype)
    h_sba, (h_n, s_n) = Recurrent(cell)(x)
    h_gru, _ = Recurrent(gru)(x)
    # in float32 this catches the pitfall of spec han 2.5: (vote + d) - d with |d| ~ 1e9
    assert_close_ulps(h_sba, h_gru)
    assert cell.update_rate() == 1.0
    assert_close_ulps(s_n[0], module_surprisal(h_gru[:, -1], 4))  # the candidate reference


@pytest.mark.parametrize("theta", [1e9, math.inf])
@pytest.mark.parametrize("mode", MODES)
def test_never_updating_stays_at_zero(mode, theta):
    _, cell = _pair(mode, theta)
    h, (h_n, s_n) = Recurrent(cell)(torch.randn(4, 20, 3, dtype=F64))
    assert torch.equal(h, torch.zeros_like(h))
    assert cell.update_rate() == 0.0
    assert torch.equal(cell.initial_state(4, F64)[1], torch.full((4, 4), math.log(4), dtype=F64))


@pytest.mark.parametrize("theta", [0.0, 1e-7, 0.01])
def test_sgru_with_two_modules_updates_at_most_half(theta):
    torch.manual_seed(1)
    cell = SBAGRUCell(3, 8, 2, theta)
    cell.trace = []
    Recurrent(cell)(torch.randn(16, 60, 3))
    decisions = torch.stack(cell.trace)  # (T, B, M)
    assert int(decisions.sum(-1).max()) <= 1  # at most M - 1 modules per step
    assert 0 < cell.update_rate() <= 0.5


def test_sens_with_two_modules_updates_whenever_one_module_votes():
    torch.manual_seed(2)
    cell = SBAGRUCell(3, 8, 2, 0.0, mode="ensemble")
    cell.trace = []
    h, _ = Recurrent(cell)(torch.randn(8, 40, 3, dtype=torch.float32))
    votes = torch.stack(cell.trace, dim=1)  # (B, T, M)
    updated = (h[:, 1:] != h[:, :-1]).any(-1)  # the whole state moved
    assert torch.equal(updated, votes[:, 1:].sum(-1) >= 1)  # a tie (1 of 2) updates
    assert cell.update_rate() == float((votes.sum(-1) >= 1).double().mean())


def test_sgru_kept_modules_are_exact_copies_and_pass_the_gradient_unchanged():
    _, cell = _pair("module", 0.0, seed=3)
    h0 = torch.randn(1, 8, dtype=F64)
    state = (h0, module_surprisal(torch.randn(1, 8, dtype=F64), 4))
    x_proj = cell.project_inputs(torch.randn(1, 3, dtype=F64))
    cell.trace = []
    h, _ = cell.step(x_proj, state)
    kept = cell.trace[0].repeat_interleave(2, dim=1)[0] == 0
    assert kept.any() and (~kept).any()
    assert torch.equal(h[0, kept], h0[0, kept])
    jacobian = torch.autograd.functional.jacobian(lambda v: cell.step(x_proj, (v, state[1]))[0], h0)
    n = int(kept.sum())
    assert torch.equal(jacobian[0][kept][:, 0, kept], torch.eye(n, dtype=F64))


def _sens_grad(straight_through):
    torch.manual_seed(4)
    cell = SBAGRUCell(3, 8, 4, 0.0, mode="ensemble").double()
    cell.straight_through = straight_through
    x = torch.randn(3, 15, 3, dtype=F64, requires_grad=True)
    h, _ = Recurrent(cell)(x)
    h.pow(2).sum().backward()
    return x.grad, cell.update_rate()


def test_sens_gradient_reaches_the_input_through_the_surprisal():
    grad_ste, u = _sens_grad(True)
    grad_mask, u_mask = _sens_grad(False)
    assert u == u_mask and 0 < u < 1  # the same decisions forward
    assert grad_ste.abs().sum() > 0 and grad_mask.abs().sum() > 0
    # the difference is the straight-through path: far beyond rounding
    assert (grad_ste - grad_mask).abs().max() > 1e-3 * grad_mask.abs().max()


def test_sgru_decision_gets_no_gradient():
    torch.manual_seed(5)
    cell = SBAGRUCell(3, 8, 4, 0.0).double()
    x = torch.randn(1, 3, dtype=F64, requires_grad=True)
    h, s = cell(x, cell.initial_state(1, F64))
    assert h.requires_grad and not s.requires_grad


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reference", ["candidate", "final", "last_update"])
def test_padding_keeps_the_state_and_the_reference_and_is_never_counted(mode, reference):
    _, cell = _pair(mode, 0.0, M=4, seed=6, reference=reference)
    state = (torch.randn(5, 8, dtype=F64), module_surprisal(torch.randn(5, 8, dtype=F64), 4))
    x_proj = cell.project_inputs(torch.randn(5, 3, dtype=F64))
    valid = torch.tensor([True, False, True, False, False])
    cell.trace = []
    h, s = cell.step(x_proj, state, valid)
    assert torch.equal(h[~valid], state[0][~valid])
    assert torch.equal(s[~valid], state[1][~valid])
    assert torch.equal(cell.trace[0][~valid], torch.zeros(3, 4, dtype=F64))
    assert cell.possible == 2 * 8  # two real rows of H units
    h_all, s_all = cell.step(x_proj, state)
    assert_close_ulps(h[valid], h_all[valid])
    assert_close_ulps(s[valid], s_all[valid])


@pytest.mark.parametrize("mode", MODES)
def test_padding_inside_a_sequence_changes_nothing(mode):
    _, cell = _pair(mode, 0.01, M=4, seed=7)
    x = torch.randn(2, 10, 3, dtype=F64)
    padded = torch.zeros(2, 15, 3, dtype=F64)
    valid = torch.ones(15, dtype=torch.bool)
    valid[[1, 4, 8, 9, 13]] = False
    padded[:, valid] = x  # five PAD steps (zeros) between the ten real ones

    def run(xs, mask):
        state, out = cell.initial_state(2, F64), []
        cell.reset_tally()
        for t in range(xs.shape[1]):
            v = None if mask is None else mask[t].expand(2)
            state = cell.step(cell.project_inputs(xs[:, t]), state, v)
            out.append(state[0])
        return torch.stack(out, 1), cell.updates, cell.possible

    h_plain, updates, possible = run(x, None)
    h_padded, updates_p, possible_p = run(padded, valid)
    assert_close_ulps(h_padded[:, valid], h_plain)
    assert (updates_p, possible_p) == (updates, possible)


def test_forward_checks_its_arguments():
    cell = SBAGRUCell(3, 8, 4, 0.1)
    state = cell.initial_state(2)
    h, s = cell(torch.randn(2, 3), state, torch.tensor([True, False]))
    assert h.shape == (2, 8) and s.shape == (2, 4)
    with pytest.raises(ValueError, match="boolean mask of shape"):
        cell(torch.randn(2, 3), state, torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="boolean mask of shape"):
        cell(torch.randn(2, 3), state, torch.tensor([True, False, True]))
    with pytest.raises(ValueError, match="d_x"):
        cell(torch.randn(2, 4), state)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(M=3), ValueError, "must divide"),
        (dict(mode="sens"), ValueError, "mode must be one of"),
        (dict(reference="previous"), ValueError, "reference must be one of"),
        (dict(pooling="min"), ValueError, "pooling must be one of"),
        (dict(theta="0.1"), ValueError, "theta must be a number"),
    ],
)
def test_bad_arguments_are_refused(kwargs, error, message):
    arguments = dict(d_x=3, d_h=8, M=4, theta=0.1) | kwargs
    with pytest.raises(error, match=message):
        SBAGRUCell(**arguments)


def test_repr_names_the_mode():
    assert "mode=ensemble, M=4" in repr(SBAGRUCell(3, 8, 4, 0.1, mode="ensemble"))
