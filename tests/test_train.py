"""rnnbook.train: the training loop, its NaN guard, clipping (R12) and truncated BPTT (§3.3)."""

from __future__ import annotations

import math
import re
import warnings

import pytest
import torch
from torch import nn

from rnnbook.data.synthetic import delayed_echo
from rnnbook.models.srn import SRN
from rnnbook.train import EpochBatches, History, NonFiniteError, clip, fit, tbptt_loop

# --- fixtures --------------------------------------------------------------------------------


def _regression(seed: int = 0):
    """A tiny linear regression: a model, one fixed batch and its MSE loss."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(32, 3, generator=g) + 0.1  # positive inputs (see the infinite-gradient test)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.3
    torch.manual_seed(seed)
    model = nn.Linear(3, 1)

    def loss_fn(model, batch):
        inputs, targets = batch
        return ((model(inputs) - targets) ** 2).mean()

    return model, (x, y), loss_fn


def _parameters(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _assert_same(left: list[torch.Tensor], right: list[torch.Tensor]) -> None:
    for a, b in zip(left, right, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


# --- fit -------------------------------------------------------------------------------------


def test_fit_reduces_the_loss():
    model, batch, loss_fn = _regression()
    history = fit(model, lambda step: batch, loss_fn, steps=200, lr=0.05)
    assert history.loss[-1] < 0.01 * history.loss[0]


def test_fit_accepts_an_iterable_of_batches():
    model, batch, loss_fn = _regression()
    history = fit(model, [batch] * 5, loss_fn, steps=5)
    assert history.steps == 5


def test_fit_uses_the_given_optimizer():
    model, batch, loss_fn = _regression()
    before = _parameters(model)
    history = fit(
        model,
        lambda step: batch,
        loss_fn,
        steps=3,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
    )
    assert history.steps == 3
    _assert_same(_parameters(model), before)


def test_history_records_one_loss_and_norm_per_step():
    model, batch, loss_fn = _regression()
    history = fit(model, lambda step: batch, loss_fn, steps=7)
    assert isinstance(history, History)
    assert history.steps == len(history.loss) == len(history.grad_norm) == 7
    assert all(math.isfinite(v) and v > 0 for v in history.loss + history.grad_norm)
    assert history.evals == {}
    assert history.stopped is None
    assert history.seconds > 0
    assert "7 steps" in repr(history)


def test_history_logs_the_pre_clip_gradient_norm():
    model, batch, loss_fn = _regression()
    model.zero_grad()
    loss_fn(model, batch).backward()
    expected = float(torch.cat([p.grad.flatten() for p in model.parameters()]).norm())
    assert expected > 1e-3  # so the clipping below changes something
    history = fit(model, lambda step: batch, loss_fn, steps=1, clip_mode="norm", clip_at=1e-3)
    assert history.grad_norm[0] == pytest.approx(expected, rel=1e-6)


def test_evaluate_runs_every_eval_every_steps_and_after_the_last():
    model, batch, loss_fn = _regression()
    calls = []

    def evaluate(model):
        calls.append((torch.is_grad_enabled(), model.training))
        return {"mse": float(loss_fn(model, batch)), "const": 1}

    history = fit(model, lambda step: batch, loss_fn, steps=10, evaluate=evaluate, eval_every=3)
    assert [step for step, _ in history.evals["mse"]] == [2, 5, 8, 9]
    assert history.evals["const"] == [(2, 1.0), (5, 1.0), (8, 1.0), (9, 1.0)]
    assert history.last("mse") == history.evals["mse"][-1][1]
    assert calls == [(False, False)] * 4  # no gradients, eval mode
    assert model.training  # back in training mode afterwards


def test_evaluate_is_not_repeated_when_the_last_step_was_evaluated():
    model, batch, loss_fn = _regression()
    history = fit(
        model, lambda step: batch, loss_fn, steps=10, evaluate=lambda m: {"x": 0}, eval_every=5
    )
    assert [step for step, _ in history.evals["x"]] == [4, 9]


def test_evaluate_without_eval_every_runs_once_at_the_end():
    model, batch, loss_fn = _regression()
    history = fit(model, lambda step: batch, loss_fn, steps=4, evaluate=lambda m: {"x": 2})
    assert history.evals == {"x": [(3, 2.0)]}


def test_last_of_unknown_metric_lists_the_known_ones():
    history = History(evals={"acc": [(0, 0.5)]})
    with pytest.raises(KeyError, match=r"no evaluation recorded for 'loss'; known: \['acc'\]"):
        history.last("loss")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(steps=0), "steps must be a positive integer"),
        (dict(steps=2, on_nonfinite="ignore"), "on_nonfinite must be one of"),
        (dict(steps=2, eval_every=0), "eval_every must be a positive integer"),
    ],
)
def test_fit_rejects_bad_arguments(kwargs, match):
    model, batch, loss_fn = _regression()
    with pytest.raises(ValueError, match=match):
        fit(model, lambda step: batch, loss_fn, **kwargs)


def test_fit_requires_a_scalar_loss():
    model, batch, _ = _regression()
    with pytest.raises(TypeError, match="scalar tensor"):
        fit(model, lambda step: batch, lambda m, b: m(b[0]), steps=1)


def test_fit_rejects_batches_that_are_neither_callable_nor_iterable():
    model, _, loss_fn = _regression()
    with pytest.raises(TypeError, match="batches must be a function"):
        fit(model, 42, loss_fn, steps=1)


def test_fit_says_when_an_iterable_of_batches_runs_out():
    model, batch, loss_fn = _regression()
    with pytest.raises(ValueError, match="ran out after 2 steps"):
        fit(model, [batch, batch], loss_fn, steps=5)


# --- the NaN guard ---------------------------------------------------------------------------


def _nan_at_step_3(snapshots):
    """A loss_fn whose loss is NaN at step 3; it records the parameters it was called with."""
    _, batch, loss_fn = _regression()

    def nan_loss(model, step):
        snapshots[step] = _parameters(model)
        loss = loss_fn(model, batch)
        return loss * float("nan") if step == 3 else loss

    return nan_loss


def test_nan_loss_raises_naming_the_step_and_skips_the_update():
    model, _, _ = _regression()
    snapshots = {}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(NonFiniteError, match="the loss became nan at step 3") as info:
        fit(model, lambda step: step, _nan_at_step_3(snapshots), steps=10, optimizer=optimizer)
    assert info.value.step == 3 and info.value.what == "loss"
    # The parameters are those after step 2: the optimizer did not use the NaN.
    _assert_same(_parameters(model), snapshots[3])
    with pytest.raises(AssertionError):  # ... and steps 0-2 did change them
        _assert_same(snapshots[0], snapshots[3])


def test_nan_loss_with_stop_records_why_and_keeps_the_finite_steps():
    model, _, _ = _regression()
    snapshots = {}
    history = fit(
        model, lambda step: step, _nan_at_step_3(snapshots), steps=10, lr=0.1, on_nonfinite="stop"
    )
    assert history.steps == 3
    assert "step 3" in history.stopped and "loss" in history.stopped
    assert "stopped" in repr(history)
    _assert_same(_parameters(model), snapshots[3])


def test_nan_loss_with_stop_still_evaluates_the_last_good_step():
    model, _, _ = _regression()
    history = fit(
        model,
        lambda step: step,
        _nan_at_step_3({}),
        steps=10,
        on_nonfinite="stop",
        evaluate=lambda m: {"x": 1},
        eval_every=2,
    )
    assert [step for step, _ in history.evals["x"]] == [1, 2]


@pytest.mark.parametrize("clip_mode", [None, "norm", "value"])
def test_infinite_gradient_is_caught(clip_mode):
    model, batch, loss_fn = _regression()

    def inf_grad_loss(model, step):
        inputs, targets = batch
        out = model(inputs)
        if step == 3:
            out.register_hook(lambda grad: torch.full_like(grad, float("inf")))
        return ((out - targets) ** 2).mean()

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(NonFiniteError, match="gradient norm became inf at step 3") as info:
        fit(
            model,
            lambda step: step,
            inf_grad_loss,
            steps=10,
            optimizer=optimizer,
            clip_mode=clip_mode,
        )
    assert info.value.value == math.inf
    assert all(torch.isfinite(p).all() for p in model.parameters())


# --- clip (R12) ------------------------------------------------------------------------------


def _with_grads(scale: float, seed: int = 0) -> nn.Module:
    """A float64 model whose gradients are set to random numbers of about ``scale``."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 5), nn.Linear(5, 3)).double()
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.grad = scale * torch.randn(p.shape, generator=g, dtype=torch.float64)
    return model


def _flat_grad(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def test_clip_norm_rescales_to_the_threshold_and_keeps_the_direction():
    model = _with_grads(10.0)
    before = _flat_grad(model).clone()
    returned = clip(model, mode="norm", c=1.0)
    after = _flat_grad(model)
    assert returned == pytest.approx(float(before.norm()), rel=1e-12)
    assert returned > 1.0
    assert float(after.norm()) <= 1.0 + 1e-6
    assert float(after.norm()) == pytest.approx(1.0, rel=1e-9)
    cosine = torch.nn.functional.cosine_similarity(before, after, dim=0)
    assert float(cosine) > 1 - 1e-12


def test_clip_norm_matches_torch_clip_grad_norm():
    ours, theirs = _with_grads(10.0), _with_grads(10.0)
    norm = clip(ours, mode="norm", c=2.5)
    torch_norm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), max_norm=2.5)
    assert norm == pytest.approx(float(torch_norm), rel=1e-12)
    torch.testing.assert_close(_flat_grad(ours), _flat_grad(theirs), rtol=1e-6, atol=0)


def test_clip_norm_leaves_a_small_gradient_alone():
    model = _with_grads(0.01)
    before = _flat_grad(model).clone()
    assert clip(model, mode="norm", c=1.0) == pytest.approx(float(before.norm()))
    torch.testing.assert_close(_flat_grad(model), before, rtol=0, atol=0)


def test_clip_value_bounds_every_component():
    model = _with_grads(3.0)
    before = _flat_grad(model).clone()
    returned = clip(model, mode="value", c=0.5)
    after = _flat_grad(model)
    assert returned == pytest.approx(float(before.norm()))
    assert float(after.abs().max()) <= 0.5
    inside = before.abs() <= 0.5
    torch.testing.assert_close(after[inside], before[inside], rtol=0, atol=0)
    torch.testing.assert_close(after[~inside], 0.5 * before[~inside].sign(), rtol=0, atol=0)


def test_clip_none_only_measures():
    model = _with_grads(10.0)
    before = _flat_grad(model).clone()
    assert clip(model, mode=None) == pytest.approx(float(before.norm()), rel=1e-12)
    torch.testing.assert_close(_flat_grad(model), before, rtol=0, atol=0)


def test_clip_accepts_an_iterable_of_parameters_and_skips_missing_grads():
    model = _with_grads(10.0)
    model[0].bias.grad = None
    expected = float(
        torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).norm()
    )
    assert clip(list(model.parameters()), mode=None) == pytest.approx(expected)


def test_clip_without_gradients_returns_zero():
    assert clip(nn.Linear(2, 2), mode="norm", c=1.0) == 0.0


@pytest.mark.parametrize(
    "mode, c, match",
    [
        ("l2", 1.0, r"mode must be one of \('norm', 'value', None\), got 'l2'"),
        ("norm", 0.0, "threshold c must be a positive number, got 0.0"),
        ("value", -1.0, "threshold c must be a positive number, got -1.0"),
        ("norm", "1", "threshold c must be a positive number, got '1'"),
    ],
)
def test_clip_rejects_bad_mode_or_threshold(mode, c, match):
    with pytest.raises(ValueError, match=match):
        clip(_with_grads(1.0), mode=mode, c=c)


# --- tbptt_loop (spec §3.3, test 6) ----------------------------------------------------------


def _srn(seed: int = 0, d_x: int = 2, d_h: int = 5, d_y: int = 2) -> SRN:
    torch.manual_seed(seed)
    return SRN(d_x, d_h, d_y).double()


def _sum_mse(output, target):
    return 0.5 * ((output - target) ** 2).sum()


def _last_hidden(h_all):
    return h_all[:, -1]


def _stream(B: int = 3, N: int = 9, d_x: int = 2, d_y: int = 2):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(B, N, d_x, generator=g, dtype=torch.float64)
    y = torch.randn(B, N, d_y, generator=g, dtype=torch.float64)
    return x, y


@pytest.mark.parametrize("k", [9, 10, 100])
def test_tbptt_with_k_at_least_N_equals_full_bptt(k):
    x, y = _stream(N=9)
    model = _srn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    losses, state = tbptt_loop(model, x, y, k, optimizer, _sum_mse, carry=_last_hidden)

    reference = _srn()
    out, h = reference(x)
    loss = _sum_mse(out, y)
    loss.backward()
    assert losses == [pytest.approx(loss.item(), rel=1e-14)]
    torch.testing.assert_close(state, h[:, -1].detach(), rtol=0, atol=1e-12)
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-12, msg=name)


def test_tbptt_with_short_chunks_carries_the_state_and_keeps_the_last_chunks_gradient():
    x, y = _stream(N=9)
    model = _srn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    losses, state = tbptt_loop(model, x, y, 4, optimizer, _sum_mse, carry=_last_hidden)
    assert len(losses) == 3  # chunks of 4, 4 and 1 steps

    reference = _srn()
    with torch.no_grad():
        _, h = reference(x)
    # With lr = 0 the forward pass is that of the whole stream ...
    torch.testing.assert_close(state, h[:, -1], rtol=0, atol=1e-12)
    # ... and .grad holds the last chunk's gradient, from the carried (detached) state.
    out, _ = reference(x[:, 8:], h[:, 7])
    _sum_mse(out, y[:, 8:]).backward()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-12)


def test_tbptt_updates_once_per_chunk():
    x, y = _stream(N=10)
    model = _srn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = []
    optimizer.register_step_post_hook(lambda opt, args, kwargs: steps.append(1))
    losses, _ = tbptt_loop(model, x, y, 3, optimizer, _sum_mse, carry=_last_hidden)
    assert len(losses) == len(steps) == 4


def _echo_setup(t: int, B: int = 4, N: int = 12, D: int = 5):
    """delayed_echo inputs (requiring grad) and targets whose loss lives at step ``t`` only.

    ``y[..., 0]`` is the class, ``y[..., 1]`` the weight of each step's loss. tbptt_loop
    slices ``y`` with ``x``, so the weight tells the chunk's loss which step counts.
    """
    x, target, mask = delayed_echo(B, N, D, 7)
    x = x.double().requires_grad_(True)
    weight = torch.zeros(B, N, dtype=torch.float64)
    weight[:, t] = 1.0
    assert mask[:, t].all()
    y = torch.stack([target.double(), weight], dim=-1)  # (B, N, 2)
    return x, y


def _weighted_ce(output, y):
    ce = nn.functional.cross_entropy(output.transpose(1, 2), y[..., 0].long(), reduction="none")
    return (y[..., 1] * ce).sum()


@pytest.mark.parametrize("t", range(5, 12))
def test_tbptt_with_k_below_D_gives_no_gradient_to_the_echoed_input(t):
    """Spec test 6: with k < D the loss at step t has exactly zero gradient w.r.t. x_{t-D}.

    The inputs require grad, so each chunk's backward pass leaves its input gradient in
    ``x.grad`` (the optimizer only owns the model's parameters); only the chunk holding t
    has a nonzero loss, so ``x.grad`` is the gradient of the loss at step t.
    """
    D, k = 5, 3
    x, y = _echo_setup(t, D=D)
    model = _srn(d_x=1, d_h=6, d_y=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    tbptt_loop(model, x, y, k, optimizer, _weighted_ce, carry=_last_hidden)
    grad = x.grad[..., 0]  # (B, N)
    assert torch.equal(grad[:, t - D], torch.zeros_like(grad[:, t - D]))
    chunk_start = t - t % k
    assert torch.equal(grad[:, :chunk_start], torch.zeros_like(grad[:, :chunk_start]))
    assert (grad[:, t] != 0).all()  # the loss at t does see x_t


def test_full_bptt_does_give_gradient_to_the_echoed_input():
    """The control for the test above: without truncation x_{t-D} does get a gradient."""
    D, t = 5, 10
    x, y = _echo_setup(t, D=D)
    model = _srn(d_x=1, d_h=6, d_y=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    tbptt_loop(model, x, y, x.shape[1], optimizer, _weighted_ce, carry=_last_hidden)
    assert (x.grad[:, t - D, 0] != 0).all()


def test_tbptt_nan_loss_names_the_chunk():
    x, y = _stream(N=6)
    y[:, 4] = float("nan")
    model = _srn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    with pytest.raises(NonFiniteError, match="at step 2"):
        tbptt_loop(model, x, y, 2, optimizer, _sum_mse, carry=_last_hidden)


@pytest.mark.parametrize(
    "x_shape, y_shape, k, error, match",
    [
        ((2, 6, 2), (2, 6, 2), 0, ValueError, "k must be a positive integer"),
        ((2, 6, 2), (2, 5, 2), 2, ValueError, "same B and N"),
        ((6,), (6,), 2, ValueError, r"batch-first streams \(B, N, ...\)"),
    ],
)
def test_tbptt_rejects_bad_arguments(x_shape, y_shape, k, error, match):
    model = _srn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    x = torch.zeros(x_shape, dtype=torch.float64)
    y = torch.zeros(y_shape, dtype=torch.float64)
    with pytest.raises(error, match=match):
        tbptt_loop(model, x, y, k, optimizer, _sum_mse, carry=_last_hidden)


@pytest.fixture
def all_warnings():
    """Record every warning, including those torch gives only once per process."""
    before = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    torch.set_warn_always(before)


def test_fit_nan_guard_emits_no_torch_warning(all_warnings):
    model, _, _ = _regression()
    fit(model, lambda step: step, _nan_at_step_3({}), steps=5, on_nonfinite="stop")
    assert [str(w.message) for w in all_warnings] == []


def test_tbptt_nan_guard_emits_no_torch_warning(all_warnings):
    x, y = _stream(N=4)
    y[:, 0] = float("nan")
    model = _srn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    with pytest.raises(NonFiniteError):
        tbptt_loop(model, x, y, 2, optimizer, _sum_mse, carry=_last_hidden)
    assert [str(w.message) for w in all_warnings] == []


def test_tbptt_infinite_gradient_is_caught_before_the_update():
    x, y = _stream(N=6)
    model = _srn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def inf_grad_loss(output, target):
        output = output.clone()
        output.register_hook(lambda grad: torch.full_like(grad, float("inf")))
        return _sum_mse(output, target)

    # inf flowing back through tanh meets 0 * inf, so the norm may come out inf or nan
    with pytest.raises(NonFiniteError, match=r"gradient norm became (inf|nan) at step 0"):
        tbptt_loop(model, x, y, 3, optimizer, inf_grad_loss, carry=_last_hidden)
    assert all(torch.isfinite(p).all() for p in model.parameters())


# --- EpochBatches ------------------------------------------------------------------------------


def test_epoch_batches_cover_every_example_once_per_epoch():
    x = torch.arange(10).float().unsqueeze(1)
    y = torch.arange(10)
    batches = EpochBatches(x, y, batch_size=3, seed=0)
    assert batches.per_epoch == 3 and batches.steps(2) == 6
    for epoch in range(2):
        seen = [batches(epoch * 3 + i) for i in range(3)]
        rows = torch.cat([b[1] for b in seen])
        assert len(set(rows.tolist())) == 9  # 9 distinct examples; the tenth is left out
        for bx, by in seen:
            assert torch.equal(bx[:, 0].long(), by)  # the tensors stay aligned


def test_epoch_batches_reshuffle_each_epoch_and_are_reproducible():
    x = torch.arange(100)
    one, two = EpochBatches(x, batch_size=10, seed=3), EpochBatches(x, batch_size=10, seed=3)
    first = torch.cat([one(i)[0] for i in range(10)])
    second = torch.cat([one(10 + i)[0] for i in range(10)])
    assert not torch.equal(first, second)  # a new order in epoch 2
    assert torch.equal(two(15)[0], one(15)[0])  # same seed, same batch, any access order
    assert not torch.equal(EpochBatches(x, batch_size=10, seed=4)(0)[0], one(0)[0])


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((), dict(batch_size=2, seed=0), TypeError, "one or more tensors"),
        (([1, 2],), dict(batch_size=2, seed=0), TypeError, "one or more tensors"),
        ((torch.zeros(4), torch.zeros(5)), dict(batch_size=2, seed=0), ValueError, "first"),
        ((torch.zeros(4),), dict(batch_size=0, seed=0), ValueError, "batch_size"),
        ((torch.zeros(4),), dict(batch_size=5, seed=0), ValueError, "larger than the 4"),
        ((torch.zeros(4),), dict(batch_size=2, seed=1.5), ValueError, "seed"),
    ],
)
def test_epoch_batches_reject_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        EpochBatches(*args, **kwargs)


def test_fit_trains_over_epoch_batches():
    torch.manual_seed(0)
    x = torch.randn(64, 3)
    y = x @ torch.tensor([1.0, -2.0, 0.5])
    model = nn.Linear(3, 1)
    batches = EpochBatches(x, y, batch_size=16, seed=0)
    history = fit(
        model,
        batches,
        lambda m, b: (m(b[0]).squeeze(-1) - b[1]).pow(2).mean(),
        steps=batches.steps(30),
        lr=0.05,
        progress=False,
    )
    assert history.steps == 120 and history.loss[-1] < 0.01 * history.loss[0]


def test_stream_loss_is_the_length_weighted_mean_over_chunks_with_the_state_carried():
    from rnnbook.train import stream_loss

    class Running(torch.nn.Module):  # output = running sum of the inputs: it needs the state
        def forward(self, x, state):
            total = x.cumsum(1) + (0 if state is None else state)
            return total, total[:, -1:]

    x = torch.ones(1, 5, 1)
    loss = stream_loss(Running(), x, torch.zeros(1, 5, 1), 2, lambda o, y: (o - y).mean())
    assert loss == pytest.approx((1 + 2 + 3 + 4 + 5) / 5)


# --- progress: a live bar for a reader, one line per training for the executed book ----------


@pytest.mark.parametrize(
    ("value", "mode"),
    [(None, "bar"), ("bar", "bar"), ("1", "bar"), ("summary", "summary"), ("0", "off"),
     ("off", "off"), (" Summary ", "summary")],
)  # fmt: skip
def test_progress_mode_follows_the_environment(monkeypatch, value, mode):
    from rnnbook.train import progress_mode

    if value is None:
        monkeypatch.delenv("RNNBOOK_PROGRESS")
    else:
        monkeypatch.setenv("RNNBOOK_PROGRESS", value)
    assert progress_mode() == mode
    assert progress_mode(False) == "off"  # a call that asks for no progress gets none
    assert progress_mode(True) == ("summary" if mode == "summary" else "bar")


def test_progress_mode_refuses_an_unknown_value(monkeypatch):
    from rnnbook.train import progress_mode

    monkeypatch.setenv("RNNBOOK_PROGRESS", "loud")
    with pytest.raises(ValueError, match="RNNBOOK_PROGRESS"):
        progress_mode()


def test_the_executed_book_prints_one_summary_line_per_training_and_no_bar(monkeypatch, capsys):
    monkeypatch.setenv("RNNBOOK_PROGRESS", "summary")
    model, batch, loss_fn = _regression()
    history = fit(model, [batch] * 30, loss_fn, steps=30, lr=0.05, desc="LSTM")
    out, err = capsys.readouterr()
    assert err == ""  # no tqdm bar: it writes to stderr
    lines = out.splitlines()
    assert len(lines) == 1
    assert re.fullmatch(r"trained LSTM: 30 steps in \d+\.\d s, final loss \S+", lines[0])
    assert lines[0].endswith(f"final loss {history.loss[-1]:.4g}")


def test_a_reader_sees_a_bar_and_no_summary_line(monkeypatch, capsys):
    monkeypatch.setenv("RNNBOOK_PROGRESS", "bar")
    model, batch, loss_fn = _regression()
    fit(model, [batch] * 5, loss_fn, steps=5, desc="LSTM")
    out, err = capsys.readouterr()
    assert out == ""
    assert "LSTM" in err and "5/5" in err  # tqdm's bar in a terminal (a widget in Jupyter)


def test_progress_off_shows_nothing(monkeypatch, capsys):
    monkeypatch.setenv("RNNBOOK_PROGRESS", "summary")
    model, batch, loss_fn = _regression()
    fit(model, [batch] * 5, loss_fn, steps=5, progress=False)
    assert capsys.readouterr() == ("", "")


def test_the_summary_says_when_and_why_training_stopped_early(monkeypatch, capsys):
    monkeypatch.setenv("RNNBOOK_PROGRESS", "summary")
    model = nn.Linear(1, 1)
    losses = iter([1.0, 0.5, float("nan")])

    def loss_fn(model, batch):
        return model.weight.sum() * 0 + next(losses)

    history = fit(model, [None] * 3, loss_fn, steps=3, on_nonfinite="stop", desc="SRN, seed 0")
    line = capsys.readouterr().out.strip()
    assert history.steps == 2
    assert line.startswith("trained SRN, seed 0: 2 steps in ")
    assert line.endswith("final loss 0.5 (stopped: loss became nan at step 2)")


def test_the_book_build_asks_for_one_line_per_training():
    """`make html` and `make notebooks` execute the chapters with RNNBOOK_PROGRESS=summary
    (unless the caller sets it): the executed pages show no rows of finished bars. So do
    `chapters` and `render`, the halves of `html` that `make test` runs."""
    from pathlib import Path

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert re.search(r"^html notebooks: export RNNBOOK_PROGRESS \?= summary$", makefile, re.M)
    assert re.search(r"^chapters render: export RNNBOOK_PROGRESS \?= summary$", makefile, re.M)
