"""The copying-memory task of Chapter 10: the data generator, the memoryless baseline
(ltm-copy-baseline), the weighted loss (ltm-weighted-loss), the recall metric, the parameter
counts the chapter reproduces from Brantner's thesis, and :class:`MemoryTask`.

Expected values are written out by hand (the category roles, the closed forms of the losses,
the parameter formulas), never taken from the function tested.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from rnnbook.arena import zoo
from rnnbook.arena.tasks import (
    MemoryTask,
    memoryless_ce,
    recall_weights,
    recalled_symbols,
    step_cross_entropy,
    weighted_cross_entropy,
)
from rnnbook.data.synthetic import copy_memory, copy_memory_symbols
from rnnbook.models.recurrent import count_parameters

F64 = torch.float64
K = 10  # the symbols to remember, in every test below


def roles(N: int, labels: str) -> tuple[list[int], int, int]:
    """(data symbols, blank, marker), written out from the two conventions."""
    if labels == "s003":  # the thesis and the text of Arjovsky et al.
        return list(range(0, N - 2)), N - 2, N - 1
    return list(range(1, N - 1)), 0, N - 1  # Arjovsky et al.'s code


def memoryless_logits(B: int, T: int, N: int = 10, labels: str = "s003") -> torch.Tensor:
    """Log-probabilities (B, T + 2K, N) of the memoryless predictor: the blank for certain
    until the recall, then uniform over the N - 2 data symbols. It never looks at x."""
    data, blank, _ = roles(N, labels)
    logp = torch.full((T + 2 * K, N), -math.inf, dtype=F64)
    logp[: T + K, blank] = 0.0
    logp[T + K :, data] = -math.log(len(data))
    return logp.expand(B, -1, -1).clone()


# --- the generator ------------------------------------------------------------------------


@pytest.mark.parametrize("labels", ["s003", "zero_blank"])
@pytest.mark.parametrize("N", [4, 10])
@pytest.mark.parametrize("T", [1, 5, 100])
def test_copy_memory_layout(T, N, labels):
    B = 64
    x, y = copy_memory(B, T, N, labels=labels, generator=T * 100 + N)
    data, blank, marker = roles(N, labels)
    assert x.shape == y.shape == (B, T + 2 * K)
    assert x.dtype == y.dtype == torch.long
    # exactly one marker per row, at T + K - 1 (the last step before the recall)
    assert torch.equal((x == marker).sum(dim=1), torch.ones(B, dtype=torch.long))
    assert torch.equal(x[:, T + K - 1], torch.full((B,), marker))
    # blanks everywhere but the K data steps and the marker
    rest = torch.ones(T + 2 * K, dtype=torch.bool)
    rest[:K] = False
    rest[T + K - 1] = False
    assert (x[:, rest] == blank).all()
    # the target: blank until the recall, then the data in their order
    assert (y[:, : T + K] == blank).all()
    assert torch.equal(y[:, T + K :], x[:, :K])
    # the data are data symbols, never the blank or the marker
    shown = x[:, :K]
    assert torch.isin(shown, torch.tensor(data)).all()
    assert not (shown == blank).any() and not (shown == marker).any()


@pytest.mark.parametrize("labels", ["s003", "zero_blank"])
@pytest.mark.parametrize("N", [4, 10])
def test_every_data_symbol_occurs_in_a_big_batch(N, labels):
    x, _ = copy_memory(2000, 1, N, labels=labels, generator=5)
    data, _, _ = roles(N, labels)
    assert x[:, :K].unique().tolist() == data
    # and roughly uniformly: each of N - 2 symbols about 20000 / (N - 2) times
    counts = torch.bincount(x[:, :K].flatten(), minlength=N)[data].double()
    expected = 2000 * K / len(data)
    assert ((counts - expected).abs() < 6 * math.sqrt(expected)).all()


@pytest.mark.parametrize("labels", ["s003", "zero_blank"])
@pytest.mark.parametrize("N", [3, 4, 10])
def test_copy_memory_symbols_roles(N, labels):
    out = copy_memory_symbols(N, labels)
    data, blank, marker = roles(N, labels)
    assert out["data"].tolist() == data
    assert (out["blank"], out["marker"]) == (blank, marker)


def test_copy_memory_is_seeded():
    a = copy_memory(16, 20, generator=3)
    b = copy_memory(16, 20, generator=3)
    c = copy_memory(16, 20, generator=4)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])
    # a generator and its seed give the same draw
    d = copy_memory(16, 20, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a[0], d[0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"N": 2}, "N >= 3"),
        ({"T": 0}, "T must be a positive integer"),
        ({"labels": "x"}, "labels must be one of"),
        ({"generator": None}, "seed"),
        ({"K": 0}, "K must be a positive integer"),
    ],
)
def test_copy_memory_rejects_bad_arguments(kwargs, message):
    args = {"B": 4, "T": 5, "N": 10, "K": K, "labels": "s003", "generator": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        copy_memory(**args)


# --- the memoryless baseline --------------------------------------------------------------


def test_memoryless_ce_values():
    # K ln(N - 2) / (T + 2K): 10 ln 8 / 120 at T = 100, the thesis's baseline 0.17329
    assert memoryless_ce(100, 10) == pytest.approx(0.17329, abs=1e-5)
    for T, value in [(200, 0.0945), (300, 0.0650), (500, 0.0400), (1000, 0.0204)]:
        assert memoryless_ce(T, 10) == pytest.approx(value, abs=1e-4)
    assert memoryless_ce(100, 10) == pytest.approx(10 * math.log(8) / 120, rel=1e-15)
    assert memoryless_ce(10, 3) == 0.0  # one data symbol: nothing to guess


def test_memoryless_ce_rejects_bad_arguments():
    for kwargs, message in [
        ({"T": 0}, "T must be a positive integer"),
        ({"N": 2}, "N >= 3"),
        ({"K": -1}, "K must be a positive integer"),
    ]:
        with pytest.raises(ValueError, match=message):
            memoryless_ce(**{"T": 100, "N": 10, **kwargs})


@pytest.mark.parametrize("labels", ["s003", "zero_blank"])
@pytest.mark.parametrize("T", [1, 100, 300])
def test_the_memoryless_predictor_scores_the_baseline(T, labels):
    task = MemoryTask(T=T, labels=labels)
    _, y = task.batch(32, generator=T)
    logits = memoryless_logits(32, T, labels=labels)
    ce = task.metrics(logits, y)["ce"]
    assert ce == pytest.approx(memoryless_ce(T), rel=1e-12, abs=0)
    assert task.baseline == memoryless_ce(T)
    # per step: 0 until the recall, ln 8 on every recall step
    per_step = step_cross_entropy(logits, y)
    assert per_step.shape == y.shape
    torch.testing.assert_close(per_step[:, : T + K], torch.zeros(32, T + K, dtype=F64))
    torch.testing.assert_close(per_step[:, T + K :], torch.full((32, K), math.log(8), dtype=F64))


# --- the weighted loss --------------------------------------------------------------------


@pytest.mark.parametrize("T", [50, 100, 300])
def test_weighted_loss_of_the_memoryless_predictor(T):
    x, y = copy_memory(8, T, generator=T)
    logits = memoryless_logits(8, T)
    # reading A: each recall step weighs T + K, so 10 (T + K) ln 8 / (11 (T + K))
    loss_a = weighted_cross_entropy(logits, y, recall_weights(T, "A").to(F64))
    assert float(loss_a) == pytest.approx(10 * math.log(8) / 11, abs=1e-6)
    # reading B: the K recall steps together weigh T + K, so (T + K) ln 8 / (2 (T + K))
    loss_b = weighted_cross_entropy(logits, y, recall_weights(T, "B").to(F64))
    assert float(loss_b) == pytest.approx(math.log(8) / 2, abs=1e-6)
    # no weighting: the unweighted baseline
    loss_none = weighted_cross_entropy(logits, y, recall_weights(T, "none"))
    assert float(loss_none) == pytest.approx(memoryless_ce(T), abs=1e-9)
    # and the task's loss is that weighted loss
    for weighting, value in [("A", loss_a), ("B", loss_b), ("none", loss_none)]:
        task = MemoryTask(T=T, weighting=weighting)
        assert float(task.loss(logits, y)) == pytest.approx(float(value), rel=1e-12)


def test_recall_weights_shapes_and_values():
    T = 7
    a, b, none = (recall_weights(T, w) for w in ("A", "B", "none"))
    for w in (a, b, none):
        assert w.shape == (T + 2 * K,)
    assert (a[: T + K] == 1).all() and (a[T + K :] == T + K).all()
    assert (b[: T + K] == 1).all() and torch.allclose(b[T + K :], torch.tensor((T + K) / K))
    assert (none == 1).all()
    assert recall_weights(T).equal(a)  # "A" is the default
    # reading B: the recall steps together weigh as much as the steps before them
    assert float(b[T + K :].sum()) == pytest.approx(float(b[: T + K].sum()))
    # another K
    w = recall_weights(5, "A", K=3)
    assert w.tolist() == [1.0] * 8 + [8.0] * 3


def test_bad_weighting_and_mismatched_weights_are_rejected():
    with pytest.raises(ValueError, match="weighting must be one of"):
        recall_weights(10, "C")
    with pytest.raises(ValueError, match="weighting must be one of"):
        MemoryTask(T=10, weighting="a")
    logits, y = memoryless_logits(2, 5), copy_memory(2, 5, generator=0)[1]
    with pytest.raises(ValueError, match="one weight per step"):
        weighted_cross_entropy(logits, y, torch.ones(5))
    with pytest.raises(ValueError, match="share B and L"):
        step_cross_entropy(logits[:, :-1], y)


# --- the recall metric --------------------------------------------------------------------


def _one_hot_logits(symbols: torch.Tensor, N: int = 10, scale: float = 10.0) -> torch.Tensor:
    return scale * F.one_hot(symbols, N).double()


def test_perfect_predictions_recall_every_symbol():
    _, y = copy_memory(50, 20, generator=1)
    assert recalled_symbols(_one_hot_logits(y), y) == 10.0
    assert MemoryTask(T=20).metrics(_one_hot_logits(y), y)["symbols"] == 10.0


def test_all_blank_predictions_recall_nothing():
    _, y = copy_memory(50, 20, generator=1)
    blank = torch.full_like(y, 8)
    assert recalled_symbols(_one_hot_logits(blank), y) == 0.0


def test_uniform_guesses_recall_an_eighth():
    B = 20_000
    _, y = copy_memory(B, 1, generator=2)
    g = torch.Generator().manual_seed(3)
    guesses = torch.randint(0, 8, (B, K), generator=g)  # s003: the data symbols are 0..7
    logits = _one_hot_logits(guesses)
    # the metric reads only the last K steps: pass just those
    assert recalled_symbols(logits, y[:, -K:]) == pytest.approx(10 / 8, abs=0.05)


def test_recall_counts_only_the_last_k_steps():
    _, y = copy_memory(4, 5, generator=0)
    logits = _one_hot_logits(y)
    logits[:, :-K] = 0  # the steps before the recall do not matter
    assert recalled_symbols(logits, y) == 10.0
    wrong = logits.clone()
    wrong[:, -3:] = _one_hot_logits(torch.full((4, 3), 9))  # the marker is never a target
    assert recalled_symbols(wrong, y) == 7.0
    assert recalled_symbols(logits, y, K=4) == 4.0


# --- the parameter counts the chapter reproduces ------------------------------------------


def keras_lstm_dense(d_in: int, H: int, d_out: int) -> int:
    """Keras LSTM(H) (one bias per gate) and Dense(d_out): 4 (H (d_in + H) + H) + H d_out + d_out."""
    return 4 * (H * (d_in + H) + H) + (H * d_out + d_out)


def test_the_thesis_lstm_and_the_books_lstm_scalar():
    assert keras_lstm_dense(1, 40, 10) == 7_130  # the thesis's LSTM(40) on scalar inputs
    task = zoo.task_for("lstm-scalar", MemoryTask())
    assert task.encoding == "scalar" and task.d_in == 1
    model = zoo.build("lstm-scalar", task)
    assert model.cell.input_size == 1 and model.cell.hidden_size == 40
    # the book's cell keeps torch's two bias vectors: one redundant bias of 4H more
    assert count_parameters(model) == 7_130 + 4 * 40 == 7_290
    assert count_parameters(model) == sum(p.numel() for p in model.parameters())


def eunn_params(d_h: int, d_in: int, d_out: int) -> int:
    """The thesis's complex EUNN with W fixed: complex input weights (2 d_h d_in real
    numbers), d_h modReLU biases, and a real read-out d_h d_out + d_out."""
    return 2 * d_h * d_in + d_h + (d_h * d_out + d_out)


def orthogonal_frozen_params(d_h: int, d_in: int, d_out: int) -> int:
    """The book's real orthogonal RNN with W frozen: V (d_h d_in), b (d_h), U and c."""
    return d_h * d_in + d_h + d_h * d_out + d_out


def test_the_frozen_orthogonal_rnn():
    # the thesis's EUNN on scalar inputs: 2 * 128 + 128 + 1,290 = 1,674 (the formula only:
    # the book has no complex RNN)
    assert eunn_params(128, 1, 10) == 2 * 128 + 128 + 1_290 == 1_674
    assert orthogonal_frozen_params(128, 10, 10) == 128 * 10 + 128 + 128 * 10 + 10 == 2_698
    task = zoo.task_for("urnn-frozen", MemoryTask())
    model = zoo.build("urnn-frozen", task)
    assert count_parameters(model) == 2_698
    # the 128 x 128 generator A is kept, but as a buffer: saved, never trained
    assert "model.A" in dict(model.named_buffers())
    assert "model.A" not in dict(model.named_parameters())
    # the trained urnn adds A's d_h^2 numbers
    urnn = zoo.build("urnn", zoo.task_for("urnn", MemoryTask()))
    assert count_parameters(urnn) == 2_698 + 128 * 128


# --- MemoryTask ---------------------------------------------------------------------------


def test_scalar_encoding_is_the_category_index():
    task = MemoryTask(T=5, encoding="scalar")
    assert task.d_in == 1 and task.d_out == 10
    x, y = task.batch(6, generator=11)
    symbols, target = copy_memory(6, 5, generator=11)
    assert x.shape == (6, 25, 1) and x.dtype == torch.float32
    assert torch.equal(x[..., 0], symbols.float())
    assert torch.equal(y, target)


def test_onehot_encoding():
    task = MemoryTask(T=5, N=6, labels="zero_blank")
    assert task.d_in == 6 and task.d_out == 6 and task.encoding == "onehot"
    x, y = task.batch(6, generator=11)
    symbols, target = copy_memory(6, 5, 6, labels="zero_blank", generator=11)
    assert x.shape == (6, 25, 6)
    assert (x.sum(dim=-1) == 1).all() and ((x == 0) | (x == 1)).all()
    assert torch.equal(x.argmax(dim=-1), symbols)
    assert torch.equal(y, target)


def test_memory_task_properties():
    task = MemoryTask()
    assert (task.T, task.N, task.K, task.weighting, task.labels) == (100, 10, 10, "A", "s003")
    assert task.key == "memory100"
    assert MemoryTask(encoding="scalar").key == "memory100-scalar"
    assert MemoryTask(T=3).key == "memory3"
    assert task.length == 120 and task.lag == 110
    assert task.baseline == pytest.approx(0.17329, abs=1e-5)
    assert MemoryTask(T=300, N=6, K=5).baseline == pytest.approx(5 * math.log(4) / 310)
    assert (task.name, task.metric) == ("memory", "ce")


@pytest.mark.parametrize("weighting", ["A", "B", "none"])
def test_memory_task_loss_is_the_weighted_cross_entropy(weighting):
    task = MemoryTask(T=4, weighting=weighting)
    _, y = task.batch(5, generator=0)
    logits = torch.randn(5, task.length, 10, generator=torch.Generator().manual_seed(1))
    expected = weighted_cross_entropy(logits, y, recall_weights(4, weighting))
    torch.testing.assert_close(task.loss(logits, y), expected, rtol=0, atol=0)
    # and written out: sum_t w_t CE_t / sum_t w_t, averaged over the batch
    w = recall_weights(4, weighting)
    ce = F.cross_entropy(logits.reshape(-1, 10), y.reshape(-1), reduction="none").view(5, -1)
    torch.testing.assert_close(task.loss(logits, y), ((ce * w).sum(1) / w.sum()).mean())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"T": 0}, "T must be a positive integer"),
        ({"K": 0}, "K must be a positive integer"),
        ({"N": 2}, "N >= 3"),
        ({"encoding": "binary"}, "encoding must be one of"),
        ({"labels": "x"}, "labels must be one of"),
    ],
)
def test_memory_task_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MemoryTask(**kwargs)


def test_the_blank_and_recall_parts_of_the_loss():
    T = 30
    task = MemoryTask(T=T)
    _, y = task.batch(64, 0)
    guess = torch.full((64, T + 20, 10), -math.inf, dtype=torch.float64)
    guess[:, : T + 10, 8] = 0.0  # the memoryless strategy
    guess[:, T + 10 :, :8] = -math.log(8)
    metrics = task.metrics(guess, y)
    assert metrics["ce_blank"] == 0.0
    assert math.isclose(metrics["ce_recall"], math.log(8), rel_tol=1e-12)
    # the two parts weighted by their steps make the whole
    whole = ((T + 10) * metrics["ce_blank"] + 10 * metrics["ce_recall"]) / (T + 20)
    assert math.isclose(whole, metrics["ce"], rel_tol=1e-12)
