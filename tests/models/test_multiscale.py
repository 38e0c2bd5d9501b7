"""The leaky SRN, the RPN and the SCRN: their limits, their memories, the source's counts."""

import pytest
import torch

from rnnbook.models.multiscale import RPN, SCRN, LeakySRN

F64 = torch.float64


def _x(B=2, L=12, d_x=3):
    return torch.randn(B, L, d_x, generator=torch.Generator().manual_seed(0), dtype=F64)


def _srn_states(input_layer, recurrent, x, act=torch.tanh):
    h, states = torch.zeros(x.shape[0], recurrent.weight.shape[0], dtype=x.dtype), []
    for x_t in input_layer(x).unbind(1):
        h = act(x_t + recurrent(h))
        states.append(h)
    return torch.stack(states, 1)


def test_parameter_counts_of_the_source():
    assert RPN(7, 15, 7, n_context=5).n_parameters() == 1_357
    assert SCRN(7, 10, 5, 7).n_parameters() == 377
    assert LeakySRN(1, 64, 1).n_parameters() == 4_289  # the SRN's
    assert SCRN(7, 10, 5, 7, adaptive=True).n_parameters() == 377 + 5  # one leak per slow unit


def test_a_leaky_srn_without_leak_is_the_srn_and_with_full_leak_never_moves():
    torch.manual_seed(0)
    model = LeakySRN(3, 5, 2, alpha=0.0).double()
    x = _x()
    torch.testing.assert_close(model(x)[1], _srn_states(model.input, model.recurrent, x))
    model.alpha = 1.0
    h0 = torch.randn(2, 5, dtype=F64)
    assert torch.equal(model(x, h0)[1][:, -1], h0)  # 1 * h + 0 * (...): a copy


def test_an_rpn_with_one_context_and_no_hysteresis_is_the_srn():
    torch.manual_seed(0)
    model = RPN(3, 5, 2, n_context=1, hysteresis=0.0).double()
    x = _x()
    torch.testing.assert_close(model(x)[1], _srn_states(model.input, model.contexts[0], x))


def test_the_rpn_context_k_holds_the_smoothed_state_of_k_steps_ago():
    torch.manual_seed(0)
    model = RPN(3, 4, 2, n_context=3, hysteresis=0.5).double()
    x = _x(L=8)
    contexts = []
    state = None
    for t in range(8):
        _, _, state = model(x[:, t : t + 1], state)
        contexts.append(state)
    for t in range(3, 8):
        for k in (1, 2):  # c^(k+1)_t = c^(1)_{t-k}
            assert torch.equal(contexts[t][k], contexts[t - k][0])


def test_the_slow_group_of_an_scrn_with_alpha_one_stays_at_its_start():
    model = SCRN(3, 4, 2, 1, alpha=1.0).double()
    s0 = torch.randn(2, 2, dtype=F64)
    _, _, (h, s) = model(_x(), (torch.zeros(2, 4, dtype=F64), s0))
    assert torch.equal(s, s0)


@pytest.mark.parametrize("activation, act", [("sigmoid", torch.sigmoid), ("tanh", torch.tanh)])
def test_an_scrn_whose_slow_group_is_cut_off_is_an_srn_of_its_activation(activation, act):
    """Sigmoid by default, as Mikolov et al.'s paper and code; tanh on request."""
    torch.manual_seed(0)
    model = SCRN(3, 4, 2, 1, activation=activation).double()
    assert SCRN(3, 4, 2, 1).activation == "sigmoid"
    with torch.no_grad():
        model.slow_to_fast.weight.zero_()
    x = _x()
    torch.testing.assert_close(
        model(x)[1], _srn_states(model.input, model.recurrent, x, act), rtol=0, atol=1e-15
    )


def test_adaptive_leaks_start_at_alpha_and_learn():
    model = SCRN(3, 4, 2, 1, alpha=0.95, adaptive=True).double()
    torch.testing.assert_close(model.alpha, torch.full((2,), 0.95, dtype=F64))
    model(_x())[0].sum().backward()
    assert model.leak_logit.grad is not None and model.leak_logit.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: LeakySRN(3, 4, 1, alpha=1.5), "alpha"),
        (lambda: RPN(3, 4, 1, hysteresis=-0.1), "hysteresis"),
        (lambda: RPN(3, 4, 1, n_context=0), "n_context"),
        (lambda: SCRN(3, 4, 2, 1, alpha=1.0, adaptive=True), "adaptive"),
        (lambda: SCRN(3, 4, 2, 1, activation="relu"), "activation"),
        (lambda: LeakySRN(3, 4, 1)(torch.zeros(2, 5, 2)), "input size"),
    ],
)
def test_bad_arguments_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
