"""The one training loop every chapter uses, plus gradient clipping and truncated BPTT.

Nothing here knows a model family: a chapter passes its model, a source of batches and a
``loss_fn(model, batch)`` that returns a scalar loss.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import nn

from rnnbook._validate import check_choice, check_positive_int

# How fit shows its progress: RNNBOOK_PROGRESS=bar (the default: a live tqdm bar, left on
# screen when training ends), summary (no bar, one printed line when training ends: the
# book's build sets it, so that the executed pages show a line per training, not a row of
# finished bars; see the Makefile) or 0 (nothing).
PROGRESS_ENV_VAR = "RNNBOOK_PROGRESS"
PROGRESS_MODES = {
    "bar": "bar",
    "1": "bar",
    "": "bar",
    "summary": "summary",
    "0": "off",
    "off": "off",
}


class NonFiniteError(FloatingPointError):
    """Training produced a NaN or infinite loss or gradient; ``step`` says when."""

    def __init__(self, step: int, what: str, value: float):
        self.step, self.what, self.value = step, what, value
        super().__init__(
            f"the {what} became {value} at step {step}; training stopped before the optimizer "
            "used it. Lower the learning rate, clip the gradient, or check the inputs."
        )


@dataclass
class History:
    """What one call of :func:`fit` recorded (lists are indexed by step, from 0)."""

    loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)  # global norm *before* clipping
    evals: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    seconds: float = 0.0
    stopped: str | None = None  # why training ended early, if it did

    @property
    def steps(self) -> int:
        return len(self.loss)

    def last(self, metric: str) -> float:
        """The latest value of an evaluation metric."""
        if metric not in self.evals or not self.evals[metric]:
            raise KeyError(f"no evaluation recorded for {metric!r}; known: {sorted(self.evals)}")
        return self.evals[metric][-1][1]

    def first_below(self, metric: str, level: float) -> int | None:
        """The first step at which ``metric`` was below ``level``, or ``None`` if never.

        ``metric`` is ``"loss"`` (the training loss of every step) or the name of an
        evaluation; see :func:`first_step_below`."""
        if metric == "loss":
            return first_step_below(self.loss, level)
        if metric not in self.evals:
            raise KeyError(f"no evaluation recorded for {metric!r}; known: {sorted(self.evals)}")
        steps, values = zip(*self.evals[metric], strict=True) if self.evals[metric] else ((), ())
        return first_step_below(values, level, steps)

    def __repr__(self) -> str:
        tail = f", stopped: {self.stopped}" if self.stopped else ""
        final = f"{self.loss[-1]:.4g}" if self.loss else "n/a"
        return f"History({self.steps} steps, final loss {final}, {self.seconds:.1f} s{tail})"


def first_step_below(values, level: float, steps=None) -> int | None:
    """The step of the first value below ``level`` (strictly), or ``None`` if none is.

    ``values`` is a sequence of numbers (a loss curve, evaluations); ``steps`` gives the
    step of each value (by default its index). A NaN is never below the level. This is how
    the chapters ask "when did it learn?" of a curve: the first training step with a loss
    under a threshold, or the first evaluation with an error under one.
    """
    if isinstance(level, bool) or not isinstance(level, int | float) or math.isnan(level):
        raise ValueError(f"level must be a number, got {level!r}")
    values = [float(v) for v in values]
    steps = list(range(len(values))) if steps is None else [int(s) for s in steps]
    if len(steps) != len(values):
        raise ValueError(
            f"steps and values must have the same length, got {len(steps)} and {len(values)}"
        )
    return next((step for step, v in zip(steps, values, strict=True) if v < level), None)


def clip(parameters, mode: str | None = "norm", c: float = 1.0) -> float:
    """Clip gradients in place and return the global gradient norm *before* clipping.

    Implements (rnn-R12): ``mode="norm"`` rescales the gradient of all parameters
    jointly to norm ``c`` when it is larger (the direction is kept); ``mode="value"`` clamps
    each component to ``[-c, c]`` (the direction can change); ``None`` only measures.
    """
    check_choice(mode, "mode", ("norm", "value", None))
    if mode is not None and not (isinstance(c, int | float) and c > 0):
        raise ValueError(f"the clipping threshold c must be a positive number, got {c!r}")
    if isinstance(parameters, nn.Module):
        parameters = parameters.parameters()
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    if mode == "norm":
        scale = torch.clamp(c / (norm + 1e-12), max=1.0)
        for g in grads:
            g.mul_(scale)
    elif mode == "value":
        for g in grads:
            g.clamp_(-c, c)
    return float(norm)


def _batch_source(batches) -> Callable[[int], object]:
    if callable(batches):
        return batches
    if isinstance(batches, Iterable):
        iterator = iter(batches)

        def next_batch(step: int):
            try:
                return next(iterator)
            except StopIteration:
                raise ValueError(
                    f"the batches ran out after {step} steps; give at least `steps` of them"
                ) from None

        return next_batch
    raise TypeError(
        f"batches must be a function step -> batch or an iterable of batches, got {type(batches)}"
    )


class EpochBatches:
    """Mini-batches of aligned tensors, reshuffled at every epoch: a batch source for :func:`fit`.

    ``batches(step)`` returns batch ``step % per_epoch`` of epoch ``step // per_epoch`` as a
    tuple of slices of ``tensors`` (for example ``(x, y)``). Epoch ``e`` is shuffled with
    its own generator seeded from ``(seed, e)``, so any step can be asked for in any order.
    The last incomplete batch of an epoch is left out.
    """

    def __init__(self, *tensors: torch.Tensor, batch_size: int, seed: int):
        if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
            raise TypeError("EpochBatches needs one or more tensors, e.g. EpochBatches(x, y, ...)")
        n = tensors[0].shape[0]
        if any(t.shape[0] != n for t in tensors):
            sizes = [tuple(t.shape) for t in tensors]
            raise ValueError(f"the tensors must share their first (example) dimension, got {sizes}")
        check_positive_int(batch_size, "batch_size")
        if batch_size > n:
            raise ValueError(f"batch_size {batch_size} is larger than the {n} examples")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        self.tensors, self.batch_size, self.seed = tensors, batch_size, seed
        self.per_epoch = n // batch_size
        self._order: tuple[int, torch.Tensor] | None = None

    def steps(self, epochs: int) -> int:
        """The number of steps in ``epochs`` epochs."""
        check_positive_int(epochs, "epochs")
        return epochs * self.per_epoch

    def __call__(self, step: int) -> tuple[torch.Tensor, ...]:
        epoch, index = divmod(step, self.per_epoch)
        if self._order is None or self._order[0] != epoch:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._order = (epoch, torch.randperm(self.tensors[0].shape[0], generator=g))
        rows = self._order[1][index * self.batch_size : (index + 1) * self.batch_size]
        return tuple(t[rows] for t in self.tensors)


def progress_mode(enabled: bool | None = None) -> str:
    """How :func:`fit` shows its progress: ``"bar"``, ``"summary"`` or ``"off"``.

    ``enabled=False`` is ``"off"``; otherwise the environment variable ``RNNBOOK_PROGRESS``
    decides: ``bar`` (or ``1``, or unset) a live tqdm bar, for a reader who runs a chapter in
    Jupyter or Colab; ``summary`` one line when training ends, for the executed book (the
    Makefile sets it for ``make html`` and ``make notebooks``); ``0`` (or ``off``) nothing,
    unless ``enabled=True`` asks for a bar.
    """
    value = os.environ.get(PROGRESS_ENV_VAR, "bar").strip().lower()
    if value not in PROGRESS_MODES:
        raise ValueError(
            f"{PROGRESS_ENV_VAR} must be one of bar, summary or 0 (also 1, off), got {value!r}"
        )
    mode = PROGRESS_MODES[value]
    if enabled is False:
        return "off"
    if enabled is True and mode == "off":
        return "bar"
    return mode


def progress_bar(total: int, desc: str, enabled: bool | None = None):
    """A tqdm bar that works in Jupyter, in the static HTML (as a widget) and in a terminal;
    disabled unless :func:`progress_mode` is ``"bar"`` (``tqdm.notebook`` ignores
    ``TQDM_DISABLE``)."""
    from tqdm.auto import tqdm

    enabled = progress_mode(enabled) == "bar"
    return tqdm(total=total, desc=desc, unit="step", disable=not enabled, leave=True)


def summary_line(desc: str, history: History) -> str:
    """The one line the executed book shows for a training: ``trained LSTM: 2,000 steps in
    41 s, final loss 0.123`` (and why it stopped, if it stopped early)."""
    seconds = history.seconds
    took = f"{seconds:.1f} s" if seconds < 10 else f"{seconds:,.0f} s"
    name = "" if desc == "training" else f" {desc}"  # fit's default says nothing more
    line = f"trained{name}: {history.steps:,} steps in {took}"
    if history.loss:
        line += f", final loss {history.loss[-1]:.4g}"
    if history.stopped:
        line += f" (stopped: {history.stopped})"
    return line


def _finish_bar(bar, done: int) -> None:
    # A bar closed before reaching its total turns red in Jupyter; an early stop that we
    # report ourselves is not an error, so shrink the total to what was done.
    if bar.n < bar.total:
        bar.total = done
        container = getattr(bar, "container", None)
        if container is not None:
            container.children[1].max = done
    bar.close()


def fit(
    model: nn.Module,
    batches,
    loss_fn: Callable[[nn.Module, object], torch.Tensor],
    *,
    steps: int,
    lr: float = 1e-3,
    optimizer: torch.optim.Optimizer | None = None,
    clip_mode: str | None = None,
    clip_at: float = 1.0,
    evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
    eval_every: int | None = None,
    on_nonfinite: str = "raise",
    desc: str = "training",
    progress: bool | None = None,
) -> History:
    """Train ``model`` for ``steps`` optimizer updates and return its :class:`History`.

    Args:
        batches: a function ``step -> batch`` or an iterable of batches.
        loss_fn: ``loss_fn(model, batch)`` returns the scalar loss to minimise.
        optimizer: defaults to Adam with learning rate ``lr``.
        clip_mode, clip_at: gradient clipping, see :func:`clip`; the pre-clip norm is logged.
        evaluate: ``evaluate(model) -> {"metric": value}``, run without gradients every
            ``eval_every`` steps and after the last step.
        on_nonfinite: ``"raise"`` a :class:`NonFiniteError` naming the step when the loss or
            gradient is NaN/inf, or ``"stop"`` training there and record why in ``stopped``.
            Either way the optimizer never takes a non-finite step.
        desc, progress: the name of the training and whether to show its progress: a live
            bar, one :func:`summary_line` when it ends, or nothing (:func:`progress_mode`).
    """
    check_positive_int(steps, "steps")
    check_choice(on_nonfinite, "on_nonfinite", ("raise", "stop"))
    if eval_every is not None:
        check_positive_int(eval_every, "eval_every")
    next_batch = _batch_source(batches)
    if optimizer is None:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = History()
    start = time.perf_counter()
    summary = progress_mode(progress) == "summary"
    bar = progress_bar(steps, desc, progress)
    model.train()

    def run_evaluation(step: int) -> None:
        model.eval()
        with torch.no_grad():
            for key, value in evaluate(model).items():
                history.evals.setdefault(key, []).append((step, float(value)))
        model.train()

    try:
        for step in range(steps):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model, next_batch(step))
            if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                raise TypeError("loss_fn must return a scalar tensor (call .mean() on it?)")
            problem = None
            if not torch.isfinite(loss):
                problem = ("loss", loss.item())
            else:
                loss.backward()
                norm = clip(model.parameters(), clip_mode, clip_at)
                if not math.isfinite(norm):
                    problem = ("gradient norm", norm)
            if problem is not None:
                if on_nonfinite == "raise":
                    raise NonFiniteError(step, *problem)
                history.stopped = f"{problem[0]} became {problem[1]} at step {step}"
                break
            optimizer.step()
            history.loss.append(loss.item())
            history.grad_norm.append(norm)
            if evaluate is not None and eval_every and (step + 1) % eval_every == 0:
                run_evaluation(step)
            bar.update(1)
            if step % 25 == 0 or step == steps - 1:
                bar.set_postfix(loss=f"{history.loss[-1]:.4g}", refresh=False)
        evaluated_last = eval_every and history.steps % eval_every == 0 and not history.stopped
        if evaluate is not None and history.steps and not evaluated_last:
            run_evaluation(history.steps - 1)
    finally:
        _finish_bar(bar, history.steps)
        history.seconds = time.perf_counter() - start
    if summary:
        print(summary_line(desc, history), flush=True)
    return history


def _detach(state):
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.detach()
    return type(state)(_detach(s) for s in state)


def _check_streams(x: torch.Tensor, y: torch.Tensor) -> None:
    if x.dim() < 2 or y.dim() < 2 or x.shape[:2] != y.shape[:2]:
        raise ValueError(
            "x and y must be batch-first streams (B, N, ...) with the same B and N, "
            f"got {tuple(x.shape)} and {tuple(y.shape)}"
        )


class BPTTWindows:
    """Window ``step % per_epoch`` of the streams x, y (B, N, ...): a batch source for
    :func:`fit` and for long runs, a function of the step alone. A batch is
    ``(index, x_window, y_window)``, windows of ``k`` steps starting at 0, k, 2k, ...;
    the last one is shorter when k does not divide N."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, k: int):
        self.x, self.y, self.k = x, y, k
        self.per_epoch = -(-x.shape[1] // k)  # ceil(N / k)

    def length(self, index: int) -> int:
        return min(self.k, self.x.shape[1] - index * self.k)

    def __call__(self, step: int):
        index = step % self.per_epoch
        s = index * self.k
        return index, self.x[:, s : s + self.k], self.y[:, s : s + self.k]


class CarriedState:
    """A ``loss_fn`` for :func:`fit` over :class:`BPTTWindows` that carries the model's state.

    Window 0 of every epoch starts from ``initial``; every later window starts from the
    state the previous window ended in, detached, so backpropagation stops at the window's
    start (truncated BPTT with k1 = k2 = k).
    """

    def __init__(self, loss_fn, initial=None, carry: Callable = lambda state: state):
        self.loss_fn, self.initial, self.carry = loss_fn, initial, carry
        self.state = initial

    def __call__(self, model: nn.Module, batch) -> torch.Tensor:
        index, x, y = batch
        output, new_state = model(x, self.initial if index == 0 else self.state)
        self.state = _detach(self.carry(new_state))
        return self.loss_fn(output, y)


def tbptt_loop(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    k: int,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    state=None,
    carry: Callable = lambda state: state,
    clip_mode: str | None = None,
    clip_at: float = 1.0,
):
    """Truncated BPTT with k1 = k2 = k over one long batch-first stream (Chapter 1).

    The stream ``x`` (B, N, ...) and its targets ``y`` (B, N, ...) are cut into chunks of
    ``k`` steps. ``model(x_chunk, state)`` must return ``(output, new_state)``; ``carry``
    turns ``new_state`` into the next chunk's initial state (for a model that returns all
    hidden states, ``carry=lambda h: h[:, -1]``). The state is detached at every chunk
    boundary, so no gradient reaches further back than the start of the current chunk.
    One optimizer update per chunk, by :func:`fit`. Returns ``(chunk_losses, final_state)``;
    the gradients of the last chunk stay in ``.grad``. A non-finite loss or gradient raises
    :class:`NonFiniteError` naming the chunk (counted from 0) before the optimizer uses it.
    """
    check_positive_int(k, "k")
    _check_streams(x, y)
    if x.shape[1] == 0:
        return [], state
    windows, carried = BPTTWindows(x, y, k), CarriedState(loss_fn, state, carry)
    history = fit(
        model,
        windows,
        carried,
        steps=windows.per_epoch,
        optimizer=optimizer,
        clip_mode=clip_mode,
        clip_at=clip_at,
        progress=False,
    )
    return history.loss, carried.state


@torch.no_grad()
def stream_loss(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    k: int,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    state=None,
    carry: Callable = lambda state: state,
) -> float:
    """The mean of ``loss_fn`` over a whole stream, chunk by chunk as :func:`tbptt_loop`
    trains on it (the state carried from chunk to chunk), without gradients.

    Chunks are weighted by their length, so a short last chunk counts for what it holds.
    For a language model with a per-token cross-entropy, ``exp`` of this is the perplexity.
    """
    check_positive_int(k, "k")
    _check_streams(x, y)
    was_training = model.training
    model.eval()
    total, steps = 0.0, 0
    for start in range(0, x.shape[1], k):
        output, new_state = model(x[:, start : start + k], state)
        n = x[:, start : start + k].shape[1]
        total += float(loss_fn(output, y[:, start : start + k])) * n
        steps += n
        state = carry(new_state)
    model.train(was_training)
    return total / steps


# --- language models: next-token prediction over parallel streams of ids -------------------
#
# A language model is any ``model(tokens, state) -> (logits, state)`` with tokens (B, L) and
# logits (B, L, V), such as rnnbook.models.LanguageModel or ClockworkLM. ``stream`` is what
# rnnbook.data.ptb.batchify returns, ids (B, N); the model reads stream[:, t] and predicts
# stream[:, t + 1], in the windows of rnnbook.data.ptb.bptt_windows.

LN2 = math.log(2.0)


def token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy per token, ``-(1/BL) sum_{b,t} log softmax(z_{b,t})[y_{b,t}]``
    in nats, of logits (B, L, V) against target ids (B, L)."""
    return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())  # over B*L


def _check_lm_stream(stream, name: str = "stream") -> None:
    if (
        not isinstance(stream, torch.Tensor)
        or stream.dim() != 2
        or stream.dtype.is_floating_point
        or stream.dtype.is_complex
        or stream.shape[1] < 2
    ):
        if torch.is_tensor(stream):
            got = f"{stream.dtype} of shape {tuple(stream.shape)}"
        else:
            got = type(stream).__name__
        raise ValueError(
            f"{name} must hold integer ids of shape (B, N) with N >= 2 (see "
            f"rnnbook.data.ptb.batchify), got {got}"
        )


def fit_lm(
    model: nn.Module,
    train: torch.Tensor,
    *,
    epochs: int,
    k: int = 35,
    lr: float = 3e-3,
    optimizer: torch.optim.Optimizer | None = None,
    clip_at: float | None = 10.0,
    valid: torch.Tensor | None = None,
    report: str = "ppl",
    on_nonfinite: str = "raise",
    desc: str = "language model",
    progress: bool | None = None,
) -> History:
    """Train a language model on the streams ``train`` (B, N) for ``epochs`` epochs.

    Each epoch walks through the BPTT windows of ``k`` tokens (the last one shorter) with
    one update per window, by :func:`fit` (Adam with ``lr`` unless an ``optimizer`` is
    given; global-norm clipping at ``clip_at``, ``None`` for none; the NaN guard). The state
    is carried from window to window and detached at every window's start (truncated BPTT,
    Chapter 1); every epoch starts from the zero state. Part II's quick recipe
    (Chapters 5-7) is the default: Adam 3e-3, k = 35, clip 10.

    ``report`` is ``"ppl"`` (perplexity, for words) or ``"bpc"`` (bits per character): after
    every epoch ``history.evals`` gets ``train_<report>``, from the epoch's window losses
    weighted by their token counts, and, when ``valid`` (B', N') is given,
    ``valid_<report>`` from :func:`lm_loss`.
    """
    check_positive_int(epochs, "epochs")
    check_positive_int(k, "k")
    check_choice(report, "report", ("ppl", "bpc"))
    _check_lm_stream(train, "train")
    if valid is not None:
        _check_lm_stream(valid, "valid")
    convert = math.exp if report == "ppl" else (lambda loss: loss / LN2)
    windows = BPTTWindows(train[:, :-1], train[:, 1:], k)

    def evaluate(m: nn.Module) -> dict[str, float]:
        return {} if valid is None else {f"valid_{report}": convert(lm_loss(m, valid, k))}

    history = fit(
        model,
        windows,
        CarriedState(token_cross_entropy),
        steps=epochs * windows.per_epoch,
        lr=lr,
        optimizer=optimizer,
        clip_mode=None if clip_at is None else "norm",
        clip_at=1.0 if clip_at is None else clip_at,
        evaluate=evaluate,
        eval_every=windows.per_epoch,
        on_nonfinite=on_nonfinite,
        desc=desc,
        progress=progress,
    )
    train_metric = history.evals.setdefault(f"train_{report}", [])
    for first in range(0, history.steps, windows.per_epoch):
        steps = range(first, min(first + windows.per_epoch, history.steps))
        tokens = [windows.length(step % windows.per_epoch) for step in steps]
        total = sum(history.loss[step] * n for step, n in zip(steps, tokens, strict=True))
        train_metric.append((steps[-1], convert(total / sum(tokens))))
    return history


def lm_loss(model: nn.Module, stream: torch.Tensor, k: int = 35, state=None) -> float:
    """The mean cross-entropy per predicted token (nats) of a language model on ``stream``
    (B, N), window by window as :func:`fit_lm` trains, the state carried, no gradient.

    Every one of the B (N - 1) predictions counts once, whatever ``k``: windows are
    weighted by their length. See :func:`perplexity` and :func:`bits_per_char`.
    """
    _check_lm_stream(stream)
    return stream_loss(model, stream[:, :-1], stream[:, 1:], k, token_cross_entropy, state=state)


def perplexity(model: nn.Module, stream: torch.Tensor, k: int = 35, state=None) -> float:
    """``exp`` of the mean cross-entropy per token (:func:`lm_loss`): the size of a uniform
    choice that is as uncertain; a model that gives every one of V tokens 1/V scores V."""
    return math.exp(lm_loss(model, stream, k, state))


def bits_per_char(model: nn.Module, stream: torch.Tensor, k: int = 35, state=None) -> float:
    """The mean cross-entropy per character in bits, :func:`lm_loss` / ln 2 (bpc); a
    uniform guess among V characters scores log2 V."""
    return lm_loss(model, stream, k, state) / LN2


def unigram_perplexity(train: torch.Tensor, ids: torch.Tensor, vocab_size: int) -> float:
    """The perplexity on ``ids`` of the unigram model estimated on ``train``,
    ``p(w) = count_train(w) / N_train``: the baseline that a language model must beat.

    ``exp(-(1/N) sum_n log p(ids_n))``; infinite if ``ids`` holds a token absent from
    ``train``. Both are ids of any shape under a vocabulary of ``vocab_size`` tokens.
    """
    check_positive_int(vocab_size, "vocab_size")
    for name, t in (("train", train), ("ids", ids)):
        if not torch.is_tensor(t) or t.dtype.is_floating_point or t.numel() == 0:
            raise ValueError(f"{name} must be a non-empty tensor of integer ids, got {t!r}")
        if t.min() < 0 or t.max() >= vocab_size:
            raise ValueError(f"{name} must hold ids in [0, {vocab_size}), got {t.min()}..{t.max()}")
    counts = torch.bincount(train.flatten(), minlength=vocab_size).double()
    log_p = counts.log() - math.log(train.numel())  # (V,)
    return math.exp(-log_p[ids.flatten()].mean().item())


@torch.no_grad()
def sample(
    model: nn.Module,
    prompt: torch.Tensor,
    n: int,
    *,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    state=None,
) -> torch.Tensor:
    """Generate ``n`` ids after the ``prompt`` ids (L,) from a language model.

    The model reads the prompt (from ``state``, zero by default), then draws each next
    token from ``softmax(z / temperature)`` and reads it back (char-rnn's sampling):
    ``temperature`` 1 samples the model's distribution, below 1 sharpens it, above 1
    flattens it, and 0 takes the most likely token (greedy). ``generator`` makes the draw
    reproducible. Returns the new ids (n,), without the prompt; decode them with
    :func:`rnnbook.data.ptb.decode`. The model is run in eval mode and then put back.

    A model whose answer depends on where a call starts (ClockworkLM restarts its clock
    at every call) sees every sampled token as the start of a window.
    """
    check_positive_int(n, "n")
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not math.isfinite(temperature)
        or temperature < 0
    ):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if not torch.is_tensor(prompt) or prompt.dim() != 1 or prompt.numel() == 0:
        got = tuple(prompt.shape) if torch.is_tensor(prompt) else type(prompt).__name__
        raise ValueError(f"prompt must be a non-empty 1-d tensor of ids (L,), got {got}")
    if prompt.dtype.is_floating_point or prompt.dtype.is_complex:
        raise ValueError(f"prompt must hold integer ids, got {prompt.dtype}")
    was_training = model.training
    model.eval()
    try:
        logits, state = model(prompt.long().unsqueeze(0), state)  # (1, L, V)
        out = torch.empty(n, dtype=torch.long)
        for t in range(n):
            z = logits[0, -1]  # (V,)
            if temperature == 0:
                out[t] = z.argmax()
            else:
                p = torch.softmax(z.double() / temperature, dim=-1)
                out[t] = torch.multinomial(p, 1, generator=generator)[0]
            if t < n - 1:
                logits, state = model(out[t].view(1, 1), state)  # (1, 1, V)
    finally:
        model.train(was_training)
    return out
