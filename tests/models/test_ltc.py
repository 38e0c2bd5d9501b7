"""rnnbook.models.ltc: (ltm-ltc) by hand, the reversal-potential interval, and leaving it."""

from __future__ import annotations

import math

import pytest
import torch

from rnnbook.models.ltc import fused_step, ltc_rhs, ltc_trace, reversal_interval


def _network(n=4, seed=0, gamma_sign=1.0):
    g = torch.Generator().manual_seed(seed)
    dt = torch.float64
    return dict(
        w=torch.rand(n, n, generator=g, dtype=dt),  # conductances in [0, 1)
        gamma=gamma_sign * (1 + 4 * torch.rand(n, n, generator=g, dtype=dt)),
        mu=torch.randn(n, n, generator=g, dtype=dt) * 0.3,
        E=torch.empty(n, n, dtype=dt).uniform_(-1.0, 1.0, generator=g),
        g_leak=torch.full((n,), 0.5, dtype=dt),
        v_leak=torch.full((n,), -0.2, dtype=dt),
        C_m=torch.full((n,), 1.0, dtype=dt),
    )


def _start(B=3, n=4, seed=1, lo=-1.0, hi=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.empty(B, n, dtype=torch.float64).uniform_(lo, hi, generator=g)


def test_rhs_matches_hand_computation_one_neuron():
    v = torch.tensor([[0.3]], dtype=torch.float64)
    pre = torch.tensor([[0.8]], dtype=torch.float64)
    w, gamma, mu, E = 0.7, 2.0, 0.1, -0.5
    g_l, v_l, C_m, I = 0.4, -0.6, 2.0, 0.25
    sig = 1 / (1 + math.exp(-gamma * (0.8 - mu)))
    expected = (g_l * (v_l - 0.3) + w * sig * (E - 0.3) + I) / C_m
    got = ltc_rhs(v, pre, w, gamma, mu, E, g_l, v_l, C_m, current=I)
    assert got.shape == (1, 1)
    assert got.item() == pytest.approx(expected, rel=1e-12)
    no_leak = ltc_rhs(v, pre, w, gamma, mu, E, g_l, v_l, C_m, current=I, leak=False)
    assert no_leak.item() == pytest.approx((w * sig * (E - 0.3) + I) / C_m, rel=1e-12)


def test_rhs_shapes_and_feedforward_layer():
    p = _network(n=3)
    B, n_pre, n_post = 5, 2, 3
    v = torch.zeros(B, n_post, dtype=torch.float64)
    pre = torch.randn(B, n_pre, dtype=torch.float64)
    w = torch.ones(n_pre, n_post, dtype=torch.float64)
    out = ltc_rhs(v, pre, w, 1.0, 0.0, 1.0, p["g_leak"], p["v_leak"], p["C_m"])
    assert out.shape == (B, n_post)
    # sum over presynaptic neurons: with v = 0, E = 1, dv/dt = g_l v_l + sum_j sigma(pre_j)
    expected = 0.5 * -0.2 + torch.sigmoid(pre).sum(1, keepdim=True)
    assert torch.allclose(out, expected.expand(B, n_post))


def test_fused_step_is_the_documented_formula():
    p = _network(n=2)
    v = _start(B=2, n=2)
    dt = 0.3
    s = p["w"] * torch.sigmoid(p["gamma"] * (v.unsqueeze(-1) - p["mu"]))
    num = p["C_m"] * v / dt + p["g_leak"] * p["v_leak"] + (s * p["E"]).sum(1) + 0.1
    den = p["C_m"] / dt + p["g_leak"] + s.sum(1)
    assert torch.allclose(fused_step(v, v, dt, **p, current=0.1), num / den, atol=1e-14)


@pytest.mark.parametrize("dt", [0.01, 1.0, 100.0])
def test_fused_solver_stays_in_reversal_interval_any_dt(dt):
    p = _network()
    lo, hi = reversal_interval(p["E"], p["v_leak"])
    vs = ltc_trace(_start(lo=lo, hi=hi), 300, dt, **p, solver="fused")
    assert vs.shape == (301, 3, 4)
    assert vs.min() >= lo - 1e-12 and vs.max() <= hi + 1e-12


def test_euler_small_dt_stays_in_reversal_interval():
    p = _network()
    lo, hi = reversal_interval(p["E"], p["v_leak"])
    # the documented bound: dt <= C_m / (g_l + sum_j w_ij) for every neuron
    dt_max = (p["C_m"] / (p["g_leak"] + p["w"].sum(0))).min().item()
    vs = ltc_trace(_start(lo=lo, hi=hi), 500, dt_max, **p, solver="euler")
    assert vs.min() >= lo - 1e-12 and vs.max() <= hi + 1e-12


def test_euler_large_dt_can_overshoot():
    # one neuron, leak only: v <- v + dt g_l (v_leak - v) jumps past v_leak when dt g_l > 1
    v0 = torch.tensor([[0.5]], dtype=torch.float64)
    vs = ltc_trace(v0, 1, 3.0, w=0.0, gamma=1.0, mu=0.0, E=0.5, g_leak=1.0, v_leak=0.0)
    lo, _ = reversal_interval(0.5, 0.0)
    assert vs[-1].item() < lo


@pytest.mark.parametrize("solver", ["euler", "fused"])
def test_without_leak_constant_current_escapes_and_grows(solver):
    # synapses close as v rises (gamma < 0): nothing restrains a constant current I > 0
    p = _network(gamma_sign=-1.0)
    _, hi = reversal_interval(p["E"], p["v_leak"], leak=False)
    I, dt, steps = 0.5, 0.05, 2000
    vs = ltc_trace(_start(), steps, dt, **p, current=I, leak=False, solver=solver)
    assert vs[-1].min() > hi + 10  # far outside the interval of the E's
    late = vs[-200:]
    assert (late[1:] > late[:-1]).all()  # still rising at the end
    slope = (late[-1] - late[0]) / (199 * dt)
    assert torch.allclose(slope, torch.full_like(slope, I), rtol=0.05)  # dv/dt -> I / C_m
    # past every E the synaptic factor E - v is negative for every synapse
    assert (p["E"].max() - vs[-1] < 0).all()


def test_with_leak_no_current_contrast_same_network():
    p = _network(gamma_sign=-1.0)
    lo, hi = reversal_interval(p["E"], p["v_leak"])
    vs = ltc_trace(_start(lo=lo, hi=hi), 2000, 0.05, **p, solver="fused")
    assert vs.min() >= lo - 1e-12 and vs.max() <= hi + 1e-12


def test_per_step_current():
    p = _network(n=2)
    cur = torch.zeros(10, 3, 2, dtype=torch.float64)
    a = ltc_trace(_start(n=2), 10, 0.1, **p, current=cur)
    b = ltc_trace(_start(n=2), 10, 0.1, **p)
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="per-step current"):
        ltc_trace(_start(n=2), 10, 0.1, **p, current=torch.zeros(9, 3, 2))


def test_bad_inputs_rejected():
    p = _network(n=2)
    v = _start(n=2)
    with pytest.raises(ValueError, match="dimensions"):
        ltc_rhs(v[0], v, **p)
    with pytest.raises(ValueError, match="n_pre, n_post"):
        ltc_rhs(v, v[:, :1], **p)
    with pytest.raises(ValueError, match="nonnegative"):
        ltc_rhs(v, v, **{**p, "w": -p["w"]})
    with pytest.raises(ValueError, match="C_m must be positive"):
        ltc_rhs(v, v, **{**p, "C_m": 0.0})
    with pytest.raises(ValueError, match="n_post"):
        ltc_rhs(v, v, **{**p, "v_leak": torch.zeros(3, dtype=torch.float64)})
    with pytest.raises(ValueError, match="current must broadcast"):
        ltc_rhs(v, v, **p, current=torch.zeros(5, dtype=torch.float64))
    with pytest.raises(ValueError, match="dt"):
        ltc_trace(v, 5, 0.0, **p)
    with pytest.raises(ValueError, match="steps"):
        ltc_trace(v, 0, 0.1, **p)
    with pytest.raises(ValueError, match="solver"):
        ltc_trace(v, 5, 0.1, **p, solver="rk4")
