"""Surprisal-based activation (Chapter 6): the two equations on hand-made activations, the
bound, the seven LSTM variants' all-update limit, exact copies, gradient routing, decay, the
three readings of the reference, SBA+R, determinism and bad input."""

import math

import pytest
import torch

from rnnbook.models import LanguageModel, LSTMCell, Recurrent, SRNCell
from rnnbook.models.sba import (
    VARIANTS,
    SBALSTMCell,
    SBARNNCell,
    module_surprisal,
    sba_decision,
)
from rnnbook.testing import assert_close_ulps

F64 = torch.float64


def test_hand_example():
    s_prev = module_surprisal(torch.zeros(1, 2, dtype=F64), 2)
    s = module_surprisal(torch.tensor([[1.0, 0.0]], dtype=F64), 2)
    assert_close_ulps(s_prev, torch.full((1, 2), math.log(2), dtype=F64))
    assert_close_ulps(s, torch.tensor([[math.log1p(math.exp(-1)), math.log1p(math.e)]], dtype=F64))
    assert sba_decision(s, s_prev, 1e-4).tolist() == [[0.0, 1.0]]  # the grown module keeps


def test_pooling_and_module_layout():
    v = torch.tensor([[1.0, 3.0, -2.0, 0.0, 5.0, 5.0]], dtype=F64)  # modules (1,3) (-2,0) (5,5)
    p_max, p_mean = torch.tensor([[3.0, 0.0, 5.0]]), torch.tensor([[2.0, -1.0, 5.0]])
    assert_close_ulps(module_surprisal(v, 3, "max"), -torch.log_softmax(p_max.double(), -1))
    assert_close_ulps(module_surprisal(v, 3, "mean"), -torch.log_softmax(p_mean.double(), -1))
    x = torch.randn(4, 8, dtype=F64)
    assert torch.equal(module_surprisal(x, 8, "max"), module_surprisal(x, 8, "mean"))  # M = H
    assert torch.equal(module_surprisal(x, 1), torch.zeros(4, 1, dtype=F64))  # one module: 0


def test_shift_invariance_and_threshold():
    x = torch.randn(3, 12, dtype=F64)
    assert_close_ulps(module_surprisal(x + 7.5, 4), module_surprisal(x, 4))
    s_prev = torch.tensor([[1.0, 1.0, 1.0]])
    s = torch.tensor([[1.0, 1.05, 1.2]])  # tie, rise below theta, rise above theta
    assert sba_decision(s, s_prev, 0.1).tolist() == [[0.0, 0.0, 1.0]]
    assert sba_decision(s, s_prev, 0.0).tolist() == [[0.0, 1.0, 1.0]]  # a tie never updates
    assert sba_decision(s, s_prev, -math.inf).tolist() == [[1.0, 1.0, 1.0]]
    big = torch.tensor([2.0, 3.0], dtype=torch.float32)
    assert torch.equal(sba_decision(big, big.clone(), 1e-7), torch.zeros(2))  # 1e-7 is 0 here


@pytest.mark.parametrize("M", [1, 2, 4, 16])
def test_at_most_m_minus_one_modules_update(M):
    torch.manual_seed(M)
    walk = torch.randn(500, 8, 16).cumsum(0)
    s = module_surprisal(walk.flatten(0, 1), M).view(500, 8, M)
    s_prev = torch.cat([torch.full((1, 8, M), math.log(M)), s[:-1]])
    assert int(sba_decision(s, s_prev, 0.0).sum(-1).max()) <= M - 1


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_variant_updating_everything_is_the_lstm(variant):
    x = torch.randn(3, 25, 4, dtype=F64)
    torch.manual_seed(0)
    lstm = LSTMCell(4, 8).double()
    torch.manual_seed(0)
    cell = SBALSTMCell(4, 8, variant=variant, M=4, theta=-math.inf).double()
    h_sba, state = Recurrent(cell)(x)
    h_lstm, (h_n, c_n) = Recurrent(lstm)(x)
    assert_close_ulps(h_sba, h_lstm)
    assert_close_ulps(state[1], c_n)
    assert cell.update_rate() == 1.0


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_bound_holds_in_every_variant(variant):
    torch.manual_seed(1)
    cell = SBALSTMCell(3, 8, variant=variant, M=2)
    cell.trace = []
    Recurrent(cell)(torch.randn(8, 100, 3))
    decisions = torch.stack(cell.trace)  # (T, B, M), or (T, 2, B, M) for S_ch
    assert int(decisions.sum(-1).max()) <= 1
    assert 0 < cell.update_rate() <= 0.5


def _one_step(variant, **kwargs):
    torch.manual_seed(2)
    cell = SBALSTMCell(3, 8, variant=variant, M=4, **kwargs).double()
    state = (
        torch.randn(5, 8, dtype=F64),
        torch.randn(5, 8, dtype=F64),
        module_surprisal(torch.randn(5, 8, dtype=F64), 4),
        module_surprisal(torch.randn(5, 8, dtype=F64), 4),
    )
    x_proj = cell.project_inputs(torch.randn(5, 3, dtype=F64))
    cell.trace = []
    new = cell.step(x_proj, state)
    return cell, state, x_proj, new


@pytest.mark.parametrize("variant", ["h", "c", "ic", "fc"])
def test_kept_modules_are_exact(variant):
    cell, (h0, c0, _, _), x_proj, (h, c, _, _) = _one_step(variant)
    kept = cell.trace[0].repeat_interleave(2, dim=1) == 0
    assert kept.any() and (~kept).any()
    plain = LSTMCell.step_gates(cell, x_proj, (h0, c0))
    if variant == "h":
        assert torch.equal(h[kept], h0[kept])  # a copy, to the last bit
        assert torch.equal(c, plain.c)
    if variant == "c":
        assert torch.equal(c[kept], c0[kept])
    if variant == "ic":  # input gate forced to 0: the cell only fades
        assert torch.equal(c[kept], (plain.forget_gate * c0)[kept])
    if variant == "fc":  # forget gate forced to 1
        assert torch.equal(c[kept], (c0 + plain.input_gate * plain.candidate)[kept])


def test_gradients_pass_kept_units_unchanged_and_skip_the_surprisal():
    cell, (h0, c0, s0, s1), x_proj, _ = _one_step("h")
    kept = cell.trace[0].repeat_interleave(2, dim=1)[0] == 0
    jacobian = torch.autograd.functional.jacobian(
        lambda h: cell.step(x_proj[:1], (h, c0[:1], s0[:1], s1[:1]))[0], h0[:1]
    )[0, :, 0, :]
    n = int(kept.sum())
    assert torch.equal(jacobian[kept][:, kept], torch.eye(n, dtype=F64))
    assert (jacobian[kept][:, ~kept] == 0).all()
    _, _, s_new, _ = cell.step(x_proj, (h0.requires_grad_(), c0, s0, s1))
    assert not s_new.requires_grad  # no gradient reaches the surprisal


def test_gradient_through_the_updated_branch_matches_finite_differences():
    torch.manual_seed(3)
    cell = SBALSTMCell(3, 6, variant="c", M=3).double()
    x = torch.randn(2, 12, 3, dtype=F64)
    weights = cell.weight_hh

    def loss_of(w):
        with torch.no_grad():
            weights.copy_(w)
        return Recurrent(cell)(x)[0].pow(2).sum()

    w0 = weights.detach().clone()
    loss_of(w0).backward()
    grad = weights.grad.clone()
    direction = torch.randn_like(w0)
    eps = 1e-6
    with torch.no_grad():
        numeric = float(loss_of(w0 + eps * direction) - loss_of(w0 - eps * direction)) / (2 * eps)
    # the decisions do not change for so small a step, so the loss is smooth there
    assert abs(float((grad * direction).sum()) - numeric) < 1e-6 * max(1.0, abs(numeric))


def test_decay_multiplies_kept_values():
    _, (h0, _, _, _), _, _ = _one_step("h")
    cell, _, _, (h, _, _, _) = _one_step("h", decay="const", alpha=0.25)
    kept = cell.trace[0].repeat_interleave(2, dim=1) == 0
    assert_close_ulps(h[kept], 0.75 * h0[kept])
    torch.manual_seed(4)
    cell = SBALSTMCell(3, 8, variant="h", M=8, decay="prob", alpha=0.5, p_decay=1.0)
    h_prev = torch.ones(2, 8)
    state = (h_prev, torch.zeros(2, 8), torch.zeros(2, 8), torch.zeros(2, 8))
    cell.trace = []
    h, *_ = cell.step(cell.project_inputs(torch.randn(2, 3)), state)
    kept = cell.trace[0] == 0
    assert torch.equal(h[kept], torch.full((int(kept.sum()),), 0.5))  # p_d = 1: always decayed


@pytest.mark.parametrize("dtype", [torch.float32, F64], ids=["float32", "float64"])
def test_prob_decay_is_built_in_the_models_dtype(dtype):
    # alpha = 0.1: 1 - alpha is 0.9 in float64 but 0.89999998 if rounded through float32 first
    torch.manual_seed(4)
    cell = SBALSTMCell(3, 8, variant="h", M=8, decay="prob", alpha=0.1, p_decay=1.0).to(dtype)
    h_prev = torch.ones(2, 8, dtype=dtype)
    high = torch.full((2, 8), 50.0, dtype=dtype)  # references no surprisal rises above
    state = (h_prev, torch.zeros(2, 8, dtype=dtype), high, high.clone())
    cell.trace = []
    h, *_ = cell.step(cell.project_inputs(torch.randn(2, 3, dtype=dtype)), state)
    kept = cell.trace[0] == 0
    assert kept.any() and h.dtype == dtype
    # exact by construction: a kept unit is 1 times the factor 1 - alpha of the model's dtype
    assert torch.equal(h[kept], torch.full((int(kept.sum()),), 1 - 0.1, dtype=dtype))


def test_last_update_reference_deadlocks_and_candidate_does_not():
    rates = {}
    for reference in ("candidate", "last_update"):
        torch.manual_seed(5)
        cell = SBALSTMCell(4, 16, variant="c", M=8, reference=reference)
        state = None
        blocks = []
        x = torch.randn(8, 600, 4)
        for block in x.split(100, dim=1):
            cell.reset_tally()
            _, state = Recurrent(cell)(block, state)
            blocks.append(cell.update_rate())
        rates[reference] = blocks
    assert min(rates["candidate"]) > 0.3
    assert rates["last_update"][-1] < rates["last_update"][0] / 4 < 0.1  # ever rarer records


def test_final_reference_is_the_surprisal_of_the_kept_value():
    cell, _, _, (_, c, s_ref, _) = _one_step("c", reference="final")
    assert_close_ulps(s_ref, module_surprisal(c, 4))


def test_sba_r_evaluates_as_the_plain_lstm():
    torch.manual_seed(6)
    lstm = LanguageModel(20, LSTMCell(8, 8), tie_weights=True).double()
    torch.manual_seed(6)
    sba = LanguageModel(20, SBALSTMCell(8, 8, "ic", M=8, eval_mode="plain"), True).double()
    tokens = torch.randint(0, 20, (3, 15))
    sba.eval(), lstm.eval()
    assert_close_ulps(sba(tokens)[0], lstm(tokens)[0])
    assert sba.cell.update_rate() == 1.0
    sba.train()
    sba.cell.reset_tally()
    sba(tokens)
    assert sba.cell.update_rate() < 1.0  # skipping again in training


def test_rnn_s_updating_everything_is_a_sigmoid_srn():
    torch.manual_seed(7)
    srn = SRNCell(3, 6).double()
    torch.manual_seed(7)
    cell = SBARNNCell(3, 6, M=3, theta=-math.inf).double()
    x = torch.randn(2, 10, 3, dtype=F64)
    h = torch.zeros(2, 6, dtype=F64)
    for t in range(10):
        h = torch.sigmoid(srn.project_inputs(x[:, t]) + h @ srn.weight_hh.T)
    assert_close_ulps(Recurrent(cell)(x)[0][:, -1], h)
    cell.theta = 1e-4
    cell.trace = []
    Recurrent(cell)(x)
    assert int(torch.stack(cell.trace).sum(-1).max()) <= 2


def test_training_is_deterministic_for_a_seed():
    losses = []
    for _ in range(2):
        torch.manual_seed(8)
        model = LanguageModel(30, SBALSTMCell(8, 8, "c", M=2, decay="prob"), tie_weights=True)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        tokens = torch.randint(0, 30, (4, 21))
        run = []
        for _ in range(5):
            optimizer.zero_grad()
            logits, _ = model(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
            loss.backward()
            optimizer.step()
            run.append(loss.item())
        losses.append(run)
    assert losses[0] == losses[1]  # the same computation repeated: bitwise


def test_bad_input_is_rejected_clearly():
    with pytest.raises(ValueError, match="must divide"):
        SBALSTMCell(3, 10, M=4)
    with pytest.raises(ValueError, match="variant"):
        SBALSTMCell(3, 8, variant="x")
    with pytest.raises(ValueError, match="pooling"):
        module_surprisal(torch.zeros(2, 4), 2, "sum")
    with pytest.raises(ValueError, match="reference"):
        SBALSTMCell(3, 8, reference="previous")
    with pytest.raises(ValueError, match="alpha"):
        SBALSTMCell(3, 8, decay="const", alpha=2.0)
    with pytest.raises(ValueError, match="same shape"):
        sba_decision(torch.zeros(2, 3), torch.zeros(2, 4), 0.0)
    with pytest.raises(ValueError, match="no step"):
        SBALSTMCell(3, 8).update_rate()
    with pytest.raises(ValueError, match="tuple of 4"):
        Recurrent(SBALSTMCell(3, 8))(torch.zeros(2, 5, 3), (torch.zeros(2, 8), torch.zeros(2, 8)))
