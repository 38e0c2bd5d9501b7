"""rnnbook.arena.tasks.PendulumAnglesTask: the pendulum stand-in without the velocities, with the
thesis's target (the next recorded step). Its windows are the full task's windows; where the
next recorded step was kept, the target is the next row's angles, and the torque is the one
applied at the step.
"""

from __future__ import annotations

import pytest
import torch

from rnnbook.arena.tasks import PendulumAnglesTask, PendulumTask
from rnnbook.testing import assert_close_ulps


@pytest.fixture(scope="module")
def both():
    return PendulumTask().data, PendulumAnglesTask().data


def test_the_shapes_and_channels():
    task = PendulumAnglesTask()
    assert (task.d_in, task.d_out, task.time_channel, task.key) == (7, 4, 6, "pendulum-angles")
    x, y = task.data.test
    assert x.shape[:2] == y.shape[:2] and x.shape[2] == 7 and y.shape[2] == 4
    assert task.name == "pendulum-angles" and task.length == 64


@pytest.mark.parametrize("split", ["train", "val", "test"])
def test_the_inputs_are_the_full_tasks_without_the_velocities(both, split):
    full, angles = both
    (x_full, _), (x, _) = full.split(split), angles.split(split)
    assert torch.equal(x[..., :4], x_full[..., :4])  # sin and cos of both angles, copied
    assert torch.equal(x[..., 6], x_full[..., full.time_channel])  # the interval since the last


def test_the_target_is_the_next_recorded_step(both):
    full, angles = both
    (x_full, y_full), (x, y) = full.test, angles.test
    next_gap = x[:, 1:, 6]  # the interval before the next kept row
    one = next_gap == 1  # the next recorded step was kept: it is the next row
    assert 0.85 < float(one.float().mean()) < 0.95  # 10 % of the steps are dropped
    assert_close_ulps(y[:, :-1][one], x[:, 1:, :4][one], ulps=16)
    assert_close_ulps(y[:, :-1][one], y_full[:, :-1, :4][one], ulps=16)
    # where it was dropped, the thesis's target is one step ahead, the full task's two or more
    gap = ~one
    assert float((y[:, :-1][gap] - y_full[:, :-1, :4][gap]).abs().mean()) > 1e-3
    # a step's own torque: over a gap of one step the full task's mean torque is that torque
    assert_close_ulps(x[:, :-1, 4:6][one], x_full[:, :-1, 6:8][one], ulps=16)


def test_the_baseline_is_no_change():
    task = PendulumAnglesTask()
    x, y = task.data.test
    assert task.baseline == pytest.approx(float(((x[..., :4] - y) ** 2).mean()), rel=1e-12)
    with pytest.raises(ValueError, match="split"):
        task.data.split("dev")
