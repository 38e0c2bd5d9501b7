"""The small helpers that chapters share: parameter counts, a torch LSTM with a forget bias,
and the first step of a curve below a level."""

import math

import pytest
import torch
from torch import nn

from rnnbook.models import LSTMCell, ParallelLMU, RecurrentModel, count_parameters, torch_lstm
from rnnbook.train import History, first_step_below


def test_count_parameters_matches_the_formulas():
    d_x, H = 3, 7
    assert count_parameters(nn.LSTM(d_x, H)) == 4 * H * (d_x + H) + 8 * H
    assert count_parameters(LSTMCell(d_x, H)) == 4 * H * (d_x + H) + 8 * H
    assert count_parameters(RecurrentModel(nn.GRU(d_x, H, batch_first=True), 2)) == (
        3 * H * (d_x + H) + 6 * H + 2 * H + 2
    )


def test_count_parameters_leaves_out_frozen_and_shared_weights():
    model = ParallelLMU(1, 1, d=8, theta=10, d_o=2)
    assert count_parameters(model) == sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = nn.Linear(4, 4)
    frozen.weight.requires_grad_(False)
    assert count_parameters(frozen) == 4
    shared = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    shared[1].weight = shared[0].weight
    assert count_parameters(shared) == 9 + 3 + 3
    with pytest.raises(TypeError, match="nn.Module"):
        count_parameters(torch.zeros(3))


def test_torch_lstm_sets_only_the_forget_bias():
    torch.manual_seed(0)
    reference = nn.LSTM(2, 5, batch_first=True)
    torch.manual_seed(0)
    lstm = torch_lstm(2, 5, forget_bias=2.0)
    assert lstm.batch_first
    assert torch.equal(lstm.weight_hh_l0, reference.weight_hh_l0)  # the same draws
    assert torch.equal(lstm.bias_hh_l0, torch.zeros(20))
    assert torch.equal(lstm.bias_ih_l0[5:10], torch.full((5,), 2.0))
    for gate in (slice(0, 5), slice(10, 20)):  # i, then g and o keep torch's init
        assert torch.equal(lstm.bias_ih_l0[gate], reference.bias_ih_l0[gate])
    with pytest.raises(TypeError, match="forget_bias"):
        torch_lstm(2, 5, forget_bias="2")


def test_first_step_below():
    assert first_step_below([3.0, 2.0, 0.5, 0.1], 1.0) == 2
    assert first_step_below([3.0, 2.0], 1.0) is None
    assert first_step_below([1.0, 0.9], 1.0) == 1  # strictly below
    assert first_step_below([math.nan, 0.5], 1.0) == 1  # NaN is never below
    assert first_step_below([2.0, 0.5], 1.0, steps=[100, 200]) == 200
    with pytest.raises(ValueError, match="same length"):
        first_step_below([1.0], 2.0, steps=[1, 2])
    with pytest.raises(ValueError, match="level"):
        first_step_below([1.0], None)


def test_history_first_below():
    history = History(loss=[2.0, 1.5, 0.4], evals={"error": [(0, 0.9), (10, 0.2)]})
    assert history.first_below("loss", 1.0) == 2
    assert history.first_below("error", 0.5) == 10
    assert history.first_below("error", 0.1) is None
    with pytest.raises(KeyError, match="accuracy"):
        history.first_below("accuracy", 0.5)
