"""rnnbook.arena.tasks.RecallTask: delayed recall's exact rules, its baseline and its metrics."""

from __future__ import annotations

import math

import pytest
import torch

from rnnbook.arena import zoo
from rnnbook.arena.tasks import IGNORE, RecallTask


@pytest.mark.parametrize(("T", "D"), [(2, 1), (10, 3), (100, 20), (100, 99)])
def test_every_answer_is_the_bit_d_steps_back(T, D):
    x, y = RecallTask(T=T, D=D).batch(16, 5)
    assert x.shape == (16, T, 1) and y.shape == (16, T) and y.dtype == torch.long
    assert set(x.unique().tolist()) <= {0.0, 1.0}
    assert (y[:, :D] == IGNORE).all()  # nothing to recall before step D
    assert torch.equal(y[:, D:], x[:, : T - D, 0].long())


def test_the_batch_is_a_function_of_the_seed():
    task = RecallTask(T=30, D=5)
    x1, y1 = task.batch(8, 3)
    x2, y2 = task.batch(8, 3)
    x3, _ = task.batch(8, 4)
    assert torch.equal(x1, x2) and torch.equal(y1, y2) and not torch.equal(x1, x3)


def test_the_bits_are_fair():
    x, _ = RecallTask(T=100, D=20).batch(1000, 0)
    assert abs(float(x.mean()) - 0.5) < 0.005  # 100,000 bits: 3 standard errors 0.0047


def test_properties():
    task = RecallTask(T=100, D=20)
    assert (task.key, task.length, task.lag, task.d_in, task.d_out) == (
        "recall100d20",
        100,
        20,
        1,
        2,
    )
    assert task.baseline == math.log(2) and task.metric == "ce"


def test_the_memoryless_guess_scores_the_baseline():
    task = RecallTask(T=50, D=10)
    x, y = task.batch(32, 1)
    guess = torch.zeros(32, 50, 2)  # equal logits: probability 1/2 for each bit
    metrics = task.metrics(guess, y)
    assert metrics["ce"] == pytest.approx(math.log(2), rel=1e-6)
    assert metrics["accuracy"] == float((y[:, 10:] == 0).float().mean())  # argmax ties -> 0


def test_a_perfect_recall_and_the_steps_without_a_target():
    task = RecallTask(T=40, D=7)
    x, y = task.batch(8, 2)
    perfect = torch.zeros(8, 40, 2)
    perfect[:, 7:].scatter_(2, y[:, 7:, None], 30.0)
    perfect[:, :7, 0] = -30.0  # wrong-looking outputs where nothing is asked are not counted
    metrics = task.metrics(perfect, y)
    assert metrics["accuracy"] == 1.0 and metrics["ce"] < 1e-10
    assert float(task.loss(perfect, y)) == metrics["ce"]


def test_the_loss_is_the_mean_over_answered_steps():
    task = RecallTask(T=12, D=4)
    _, y = task.batch(3, 0)
    logits = torch.randn(3, 12, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ce = torch.nn.functional.cross_entropy(
        logits[:, 4:].reshape(-1, 2), y[:, 4:].reshape(-1), reduction="none"
    )
    assert float(task.loss(logits, y)) == pytest.approx(float(ce.mean()), rel=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [(dict(T=10, D=10), "shorter"), (dict(T=10, D=0), "D"), (dict(T=0, D=1), "T")],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RecallTask(**kwargs)


def test_mismatched_outputs_are_refused():
    task = RecallTask(T=10, D=2)
    _, y = task.batch(2, 0)
    for wrong in (torch.zeros(2, 9, 2), torch.zeros(3, 10, 2)):
        with pytest.raises(ValueError, match="share B and L"):
            task.loss(wrong, y)
        with pytest.raises(ValueError, match="share B and L"):
            task.metrics(wrong, y)


def test_the_lmu_window_is_the_delay():
    """The arena gives the parallel LMU the task's lag as its window: theta = D here."""
    model = zoo.build("lmu", RecallTask(T=100, D=20))
    thetas = [m.theta for m in model.modules() if hasattr(m, "theta")]
    assert thetas and all(theta == 20 for theta in thetas)
