"""Zoneout (Chapter 7): the limits p = 1 and z = 1, the expectation rule, the masks' layout
and rate, identity Jacobians of zoned units, the gate-level family equal to SBA's variants
with the same decisions, the three evaluation modes, and bad input."""

import pytest
import torch

from rnnbook.models import LSTMCell, Recurrent
from rnnbook.models.sba import SBALSTMCell
from rnnbook.models.zoneout import GATE_VARIANTS, GateZoneoutLSTMCell, ZoneoutLSTMCell
from rnnbook.testing import assert_close_ulps

F64 = torch.float64


def _inputs(B=3, T=12, d=4, seed=1):
    return torch.randn(B, T, d, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _pair(make_zoneout, forget_bias=0.0, d=4, H=6):
    """A zoneout cell and an LSTM cell drawn from the same seed: the same weights."""
    torch.manual_seed(0)
    lstm = LSTMCell(d, H, forget_bias=forget_bias).double()
    torch.manual_seed(0)
    return make_zoneout(d, H).double(), lstm


def test_no_zoneout_is_the_lstm():
    cell, lstm = _pair(lambda d, H: ZoneoutLSTMCell(d, H, z_c=0.0, z_h=0.0), forget_bias=1.0)
    x = _inputs()
    assert_close_ulps(Recurrent(cell)(x)[0], Recurrent(lstm)(x)[0])
    assert cell.update_rate() == 1.0


@pytest.mark.parametrize("variant", GATE_VARIANTS)
def test_update_probability_one_is_the_lstm(variant):
    cell, lstm = _pair(lambda d, H: GateZoneoutLSTMCell(d, H, variant=variant, p=1.0))
    x = _inputs()
    assert_close_ulps(Recurrent(cell)(x)[0], Recurrent(lstm)(x)[0])


def test_zoneout_one_freezes_both_states():
    cell = ZoneoutLSTMCell(4, 6, z_c=1.0, z_h=1.0).double()
    start = (torch.randn(3, 6, dtype=F64), torch.randn(3, 6, dtype=F64))
    outputs, (h, c) = Recurrent(cell)(_inputs(), start)  # final states (1, B, H)
    assert torch.equal(h[0], start[0]) and torch.equal(c[0], start[1])
    assert torch.equal(outputs, start[0].unsqueeze(1).expand_as(outputs))
    assert cell.update_rate() == 0.0


@pytest.mark.parametrize("variant", ["ch", "c", "h"])
def test_update_probability_zero_freezes_what_the_variant_keeps(variant):
    cell = GateZoneoutLSTMCell(4, 6, variant=variant, p=0.0).double()
    start = (torch.randn(3, 6, dtype=F64), torch.randn(3, 6, dtype=F64))
    _, (h, c) = Recurrent(cell)(_inputs(), start)  # final states (1, B, H)
    if variant in ("ch", "c"):
        assert torch.equal(c[0], start[1])
    if variant in ("ch", "h"):
        assert torch.equal(h[0], start[0])


def test_expectation_mode_is_the_mixture_of_zo_expect():
    cell = ZoneoutLSTMCell(4, 6, z_c=0.3, z_h=0.2).double().eval()
    x_proj = cell.project_inputs(torch.randn(2, 4, dtype=F64))
    state = (torch.randn(2, 6, dtype=F64), torch.randn(2, 6, dtype=F64))
    plain = LSTMCell.step_gates(cell, x_proj, state)
    h, c = cell.step(x_proj, state)
    assert_close_ulps(c, 0.3 * state[1] + 0.7 * plain.c)
    assert_close_ulps(h, 0.2 * state[0] + 0.8 * plain.h)  # from the un-zoned cell


def test_the_hidden_candidate_uses_the_unzoned_cell():
    torch.manual_seed(3)
    cell = ZoneoutLSTMCell(4, 6, z_c=0.5, z_h=0.0).double()
    x_proj = cell.project_inputs(torch.randn(2, 4, dtype=F64))
    state = (torch.randn(2, 6, dtype=F64), torch.randn(2, 6, dtype=F64))
    plain = LSTMCell.step_gates(cell, x_proj, state)
    h, c = cell.step(x_proj, state)
    assert not torch.equal(c, plain.c)  # some cells were zoned out ...
    assert torch.equal(h, plain.h)  # ... but h (never zoned here) is o * tanh of c-tilde


def test_masks_are_fresh_per_unit_sequence_and_step_with_mean_z():
    torch.manual_seed(0)
    cell = ZoneoutLSTMCell(4, 128, z_c=0.3, z_h=0.3)
    cell.trace = []
    with torch.no_grad():
        Recurrent(cell)(torch.randn(20, 35, 4))
    updates = torch.stack(cell.trace)  # (35, 20, 256): 1 = update
    assert abs(float(updates.mean()) - 0.7) < 0.01
    assert abs(cell.update_rate() - 0.7) < 0.01
    c_masks = updates[..., :128]
    assert not torch.equal(c_masks[0], c_masks[1])  # not shared over time
    assert not torch.equal(c_masks[:, 0], c_masks[:, 1])  # nor over the batch
    assert not torch.equal(c_masks, updates[..., 128:])  # nor between c and h


def test_a_shared_mask_zones_c_and_h_together():
    torch.manual_seed(0)
    cell = ZoneoutLSTMCell(4, 16, z_c=0.4, z_h=0.1, shared_mask=True)
    cell.trace = []
    with torch.no_grad():
        Recurrent(cell)(torch.randn(5, 10, 4))
    updates = torch.stack(cell.trace)
    assert torch.equal(updates[..., :16], updates[..., 16:])


def test_zoned_units_have_an_identity_jacobian():
    torch.manual_seed(5)
    cell = ZoneoutLSTMCell(3, 8, z_c=0.5, z_h=0.5).double()
    x_proj = cell.project_inputs(torch.randn(1, 3, dtype=F64))
    h_prev, c_prev = torch.randn(1, 8, dtype=F64), torch.randn(1, 8, dtype=F64)
    cell.trace = []
    torch.manual_seed(7)
    cell.step(x_proj, (h_prev, c_prev))
    kept_h = cell.trace[0][0, 8:] == 0

    def new_h(h):
        torch.manual_seed(7)  # the same masks
        return cell.step(x_proj, (h, c_prev))[0]

    jacobian = torch.autograd.functional.jacobian(new_h, h_prev)[0, :, 0, :]
    assert 0 < kept_h.sum() < 8
    assert torch.equal(jacobian[kept_h][:, kept_h], torch.eye(int(kept_h.sum()), dtype=F64))
    assert (jacobian[kept_h][:, ~kept_h] == 0).all()


SBA_OF = {"ch": None, "f": "ff", "i": "ic", "c": "c", "h": "h"}


@pytest.mark.parametrize("variant", ["f", "i", "c", "h"])
def test_gate_zoneout_is_sba_with_the_same_decisions(variant, monkeypatch):
    """The collapse: Z_f = S_ff, Z_i = S_ic, Z_c = S_c, Z_h = S_h once the decisions agree."""
    torch.manual_seed(0)
    zone = GateZoneoutLSTMCell(4, 6, variant=variant, p=0.5).double()
    torch.manual_seed(0)
    sba = SBALSTMCell(4, 6, variant=SBA_OF[variant], M=6).double()
    sba.load_state_dict(zone.state_dict())
    b = (torch.rand(3, 6, generator=torch.Generator().manual_seed(2)) < 0.5).to(F64)
    monkeypatch.setattr(zone, "decisions", lambda like: b)
    monkeypatch.setattr(sba, "_decide", lambda observed, s_ref: (s_ref, b, b))
    x_proj = zone.project_inputs(torch.randn(3, 4, dtype=F64))
    h0, c0 = torch.randn(3, 6, dtype=F64), torch.randn(3, 6, dtype=F64)
    s0 = torch.zeros(3, 6, dtype=F64)
    h_z, c_z = zone.step(x_proj, (h0, c0))
    h_s, c_s, _, _ = sba.step(x_proj, (h0, c0, s0, s0))
    assert_close_ulps(h_z, h_s)
    assert_close_ulps(c_z, c_s)


def test_z_ch_shares_one_mask_between_c_and_h():
    torch.manual_seed(0)
    cell = GateZoneoutLSTMCell(4, 6, variant="ch", p=0.5).double()
    x_proj = cell.project_inputs(torch.randn(3, 4, dtype=F64))
    h0, c0 = torch.randn(3, 6, dtype=F64), torch.randn(3, 6, dtype=F64)
    cell.trace = []
    h, c = cell.step(x_proj, (h0, c0))
    kept = cell.trace[0] == 0
    assert torch.equal(h[kept], h0[kept]) and torch.equal(c[kept], c0[kept])


@pytest.mark.parametrize("variant", GATE_VARIANTS)
def test_evaluation_modes(variant):
    torch.manual_seed(0)
    cell = GateZoneoutLSTMCell(4, 6, variant=variant, p=0.4).double()
    torch.manual_seed(0)
    lstm = LSTMCell(4, 6).double()
    x = _inputs()
    cell.eval()
    cell.eval_mode = "plain"  # ZO+R: the plain LSTM, u = 1
    cell.reset_tally()
    assert_close_ulps(Recurrent(cell)(x)[0], Recurrent(lstm)(x)[0])
    assert cell.update_rate() == 1.0
    cell.eval_mode = "expectation"  # deterministic
    assert torch.equal(Recurrent(cell)(x)[0], Recurrent(cell)(x)[0])
    cell.eval_mode = "stochastic"  # ZO+M: reproducible for a seed, different across seeds
    runs = []
    for seed in (1, 1, 2):
        torch.manual_seed(seed)
        runs.append(Recurrent(cell)(x)[0])
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], runs[2])


def test_expectation_of_z_f_and_z_i():
    torch.manual_seed(0)
    x_proj = torch.randn(2, 24, dtype=F64)
    state = (torch.randn(2, 6, dtype=F64), torch.randn(2, 6, dtype=F64))
    for variant in ("f", "i"):
        torch.manual_seed(0)
        cell = GateZoneoutLSTMCell(4, 6, variant=variant, p=0.3).double().eval()
        cell.eval_mode = "expectation"
        plain = LSTMCell.step_gates(cell, x_proj, state)
        i, f, g = plain.input_gate, plain.forget_gate, plain.candidate
        _, c = cell.step(x_proj, state)
        if variant == "f":  # f' = p f + (1 - p)
            assert_close_ulps(c, (0.3 * f + 0.7) * state[1] + i * g)
        else:  # i' = p i
            assert_close_ulps(c, f * state[1] + (0.3 * i) * g)


def test_gate_zoneout_update_rate_is_p():
    torch.manual_seed(0)
    cell = GateZoneoutLSTMCell(4, 128, variant="c", p=0.2)
    with torch.no_grad():
        Recurrent(cell)(torch.randn(20, 35, 4))
    assert abs(cell.update_rate() - 0.2) < 0.01


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: ZoneoutLSTMCell(3, 4, z_c=1.5), "z_c must be a probability"),
        (lambda: ZoneoutLSTMCell(3, 4, z_h=-0.1), "z_h must be a probability"),
        (lambda: ZoneoutLSTMCell(3, 4, eval_mode="mean"), "eval_mode"),
        (lambda: GateZoneoutLSTMCell(3, 4, variant="x"), "variant"),
        (lambda: GateZoneoutLSTMCell(3, 4, p=True), "p must be a probability"),
        (lambda: GateZoneoutLSTMCell(3, 4, decay="sometimes"), "decay"),
    ],
)
def test_bad_arguments_are_rejected(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_update_rate_needs_a_counted_step():
    cell = GateZoneoutLSTMCell(3, 4)
    with pytest.raises(ValueError, match="no step was counted"):
        cell.update_rate()


def test_z_ch_expectation_is_the_mean_over_masks():
    torch.manual_seed(0)
    cell = GateZoneoutLSTMCell(4, 6, variant="ch", p=0.3).double()
    x_proj = cell.project_inputs(torch.randn(2, 4, dtype=F64))
    state = (torch.randn(2, 6, dtype=F64), torch.randn(2, 6, dtype=F64))
    cell.eval()
    cell.eval_mode = "expectation"
    h_mean, c_mean = cell.step(x_proj, state)
    cell.eval_mode = "stochastic"  # exact mean over the two outcomes of each coin
    cell.decisions = lambda like: torch.ones_like(like)
    h_one, c_one = cell.step(x_proj, state)
    cell.decisions = lambda like: torch.zeros_like(like)
    h_zero, c_zero = cell.step(x_proj, state)
    assert_close_ulps(h_mean, 0.3 * h_one + 0.7 * h_zero)
    assert_close_ulps(c_mean, 0.3 * c_one + 0.7 * c_zero)
