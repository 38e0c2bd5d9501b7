"""The arena's harness: task x model x seed -> one row of the chapter's table (Chapter 10).

Every model gets the same recipe: Adam at 1e-3, batches of 128, the same number of updates,
gradient-norm clipping at 1 (50 for the NTM and the DNC, whose recipe it is). The batch of
step ``t`` is drawn with the seed ``seed * 10**9 + t``, so every model of a seed sees the same
data in the same order; the test set is a fixed draw of its own seed.

* :func:`train` trains one model live with :func:`rnnbook.train.fit` and returns its
  :class:`Row` (the quick profile, for the cheap models);
* :func:`long_run` describes the same training as a :class:`rnnbook.longrun.LongRun`, which
  :func:`rnnbook.longrun.train_or_load` trains into a checkpoint (full) or loads (quick);
* :func:`row` measures a trained model: its metrics on a test set, its parameters, the
  memory its training step keeps for the backward pass.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from rnnbook._validate import check_positive_int
from rnnbook.arena import zoo
from rnnbook.models.recurrent import count_parameters
from rnnbook.train import fit

TRAIN_SEED_STRIDE = 10**9  # the batch of step t is drawn with seed * 10**9 + t
TEST_SEED = 7_000_000  # the held-out sequences of the learning curves
FRESH_SEED = 8_000_000  # the sequences a loaded checkpoint is verified on
BATCH = 128
LR = 1e-3


@dataclass
class Row:
    """One line of the arena's table."""

    task: str
    model: str
    label: str
    mechanism: str
    seed: int
    params: int
    steps: int
    seconds: float  # training time (0 when loaded from a checkpoint: see train_seconds)
    s_per_step: float
    activation_mb: float  # tensors saved for the backward pass of one training step
    baseline: float
    metrics: dict = field(default_factory=dict)

    def flat(self) -> dict:
        """The row as one flat dict (metrics as columns), for a table."""
        out = asdict(self)
        out.update(out.pop("metrics"))
        return out


def batch_source(task, batch: int = BATCH, seed: int = 0):
    """``step -> (x, y)``: the training batch of ``step``, from the seed ``seed * 10**9 + step``."""
    check_positive_int(batch, "batch")

    def batch_of(step: int):
        return task.batch(batch, seed * TRAIN_SEED_STRIDE + step)

    return batch_of


def test_set(task, n: int = 1000, seed: int = TEST_SEED, chunk: int = 500) -> list:
    """A fixed set of ``n`` sequences in batches of at most ``chunk``; a task with a test
    split of its own (the pendulum) gives that split instead, whatever ``n`` and ``seed``."""
    check_positive_int(n, "n")
    if hasattr(task, "test_batches"):
        return task.test_batches(chunk)
    sizes = [chunk] * (n // chunk) + ([n % chunk] if n % chunk else [])
    return [task.batch(size, seed + i) for i, size in enumerate(sizes)]


def trained_parameters(model: nn.Module) -> int:
    """The parameters a model trains: :func:`rnnbook.models.recurrent.count_parameters`,
    except that a submodule that counts its own (the Clockwork RNN's ``n_parameters``, which
    leaves out the weights its mask holds at zero) is counted its way."""
    total = count_parameters(model)
    for module in model.modules():
        if callable(getattr(module, "n_parameters", None)):
            total -= count_parameters(module) - module.n_parameters()
    return total


@torch.no_grad()
def evaluate(model: nn.Module, task, batches: list) -> dict[str, float]:
    """The task's metrics on ``batches``, averaged over sequences (eval mode)."""
    was_training = model.training
    model.eval()
    totals, count = {}, 0
    try:
        for x, y in batches:
            for name, value in task.metrics(model(x), y).items():
                totals[name] = totals.get(name, 0.0) + value * x.shape[0]
            count += x.shape[0]
    finally:
        model.train(was_training)
    return {name: total / count for name, total in totals.items()}


def activation_bytes(model: nn.Module, task, batch: int = BATCH) -> int:
    """Bytes of the tensors one training step keeps for its backward pass (each storage
    counted once): the memory that grows with the sequence length and the batch."""
    x, y = task.batch(batch, 0)
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = task.loss(model(x), y)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(seen.values())


def loss_function(task):
    """``loss_fn(model, (x, y))`` of the task, for the training loop."""

    def loss_fn(model, batch):
        x, y = batch
        return task.loss(model(x), y)

    return loss_fn


def row(
    name: str,
    task,
    model: nn.Module,
    *,
    steps: int,
    seconds: float,
    seed: int = 0,
    batches: list | None = None,
) -> Row:
    """The table row of model ``name`` trained on ``task`` (in the model's encoding)."""
    entry = zoo.entry_of(name)
    metrics = evaluate(model, task, batches if batches is not None else test_set(task))
    return Row(
        task=task.key,
        model=name,
        label=entry.label,
        mechanism=entry.mechanism,
        seed=seed,
        params=trained_parameters(model),
        steps=steps,
        seconds=round(seconds, 2),
        s_per_step=round(seconds / steps, 4) if steps else 0.0,
        activation_mb=round(activation_bytes(model, task) / 2**20, 2),
        baseline=task.baseline,
        metrics=metrics,
    )


def train(
    name: str,
    task,
    *,
    steps: int,
    seed: int = 0,
    batch: int = BATCH,
    lr: float = LR,
    progress: bool | None = None,
) -> tuple[nn.Module, Row]:
    """Train model ``name`` on ``task`` for ``steps`` updates with the arena's recipe."""
    check_positive_int(steps, "steps")
    task = zoo.task_for(name, task)
    entry = zoo.entry_of(name)
    model = zoo.build(name, task, seed)
    tic = time.perf_counter()
    fit(
        model,
        batch_source(task, batch, seed),
        loss_function(task),
        steps=steps,
        optimizer=zoo.optimizer(model.parameters(), lr),
        clip_mode="norm",
        clip_at=entry.clip,
        desc=f"{name} on {task.key}",
        progress=progress,
    )
    return model, row(name, task, model, steps=steps, seconds=time.perf_counter() - tic, seed=seed)


def run_name(name: str, task, seed: int = 0) -> str:
    """The checkpoint name of a long run: ``arena-memory100-lstm`` (``-seed1`` for seed 1).
    The task's key is the book's (one-hot) one, also for a model with an encoding of its own."""
    return f"arena-{task.key}-{name}" + (f"-seed{seed}" if seed else "")


def task_config(task) -> dict:
    """The task's settings as JSON data (its dataclass fields)."""
    return {k: v for k, v in asdict(task).items()}


def long_run(
    name: str,
    task,
    *,
    steps: int,
    seed: int = 0,
    batch: int = BATCH,
    lr: float = LR,
    eval_every: int = 250,
    test_n: int = 1000,
):
    """The arena's training of ``name`` on ``task`` as a :class:`rnnbook.longrun.LongRun`."""
    from rnnbook.longrun import LongRun

    run = run_name(name, task, seed)
    task = zoo.task_for(name, task)
    entry = zoo.entry_of(name)
    # the learning curve's data: fresh sequences of a seed of their own, or the task's
    # validation split (the pendulum's test split is kept for the chapter's table)
    if hasattr(task, "test_batches"):
        held_out, described = task.test_batches(split="val"), "the validation split"
    else:
        held_out = test_set(task, test_n)
        described = f"{test_n} sequences from seeds {TEST_SEED} + i, batches of 500"
    return LongRun(
        name=run,
        config={
            "model": name,
            "task": task_config(task),
            "seed": seed,
            "batch": batch,
            "lr": lr,
            "clip_norm": entry.clip,
            "optimizer": "Adam; the orthogonal RNN's generator A at lr/10",
            "data": f"task.batch(batch, seed * {TRAIN_SEED_STRIDE} + step)",
            "test": described,
        },
        build_model=lambda: zoo.build(name, task, seed),
        batch=batch_source(task, batch, seed),
        loss_fn=loss_function(task),
        evaluate=lambda model: evaluate(model, task, held_out),
        optimizer=lambda parameters: zoo.optimizer(parameters, lr),
        steps=steps,
        eval_every=eval_every,
        clip_mode="norm",
        clip_at=entry.clip,
    )
