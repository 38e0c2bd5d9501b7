"""The arena's tasks (Chapter 10): a batch sampler, the training loss, the reported metrics and
the baseline a model must beat, for each long-term memory benchmark.

* :class:`MemoryTask`, the copying-memory task (ltm-copy-memory): trained with the weighted
  loss (ltm-weighted-loss), reported as the unweighted cross-entropy per step and the number of
  recalled symbols, against the memoryless baseline (ltm-copy-baseline);
* :class:`AddingTask`, the adding problem of Chapter 2, against the constant guess 1;
* :class:`RecallTask`, delayed recall: at every step the bit seen D steps earlier, against the
  memoryless guess (ln 2 nats, half the bits right);
* :class:`PendulumTask`, the irregularly sampled double pendulum that stands in for Walker2d,
  against the "no change" guess.

A task's inputs are float tensors (B, L, d_in); a model answers with (B, L, d_out).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from rnnbook._validate import check_choice, check_positive_int, check_tensor
from rnnbook.data.synthetic import adding_problem, copy_memory, copy_memory_symbols, delayed_echo

WEIGHTINGS = ("A", "B", "none")
ENCODINGS = ("onehot", "scalar")


# --- the copying-memory task's loss, metrics and baseline -----------------------------------


def memoryless_ce(T: int, N: int = 10, K: int = 10) -> float:
    """(ltm-copy-baseline) ``K ln(N - 2) / (T + 2K)``: the mean cross-entropy per step of a
    model that predicts the blank until the recall and then guesses uniformly."""
    check_positive_int(T, "T")
    check_positive_int(K, "K")
    if not isinstance(N, int) or N < 3:
        raise ValueError(f"the copying-memory task needs N >= 3 categories, got {N!r}")
    return K * math.log(N - 2) / (T + 2 * K)


def recall_weights(T: int, weighting: str = "A", K: int = 10) -> torch.Tensor:
    """The per-step loss weights ``w_t`` of (ltm-weighted-loss), shape (T + 2K,).

    ``"A"`` (the book's default, the thesis read literally): each of the K recall steps weighs
    as much as all T + K earlier steps together, ``w = T + K`` there and 1 elsewhere. ``"B"``:
    the K recall steps *together* weigh as much as the earlier steps, ``w = (T + K) / K``.
    ``"none"``: every step weighs 1.
    """
    check_positive_int(T, "T")
    check_positive_int(K, "K")
    check_choice(weighting, "weighting", WEIGHTINGS)
    w = torch.ones(T + 2 * K)
    if weighting == "A":
        w[T + K :] = T + K
    elif weighting == "B":
        w[T + K :] = (T + K) / K
    return w


def _check_logits(logits: torch.Tensor, y: torch.Tensor) -> None:
    check_tensor(logits, "logits", ndim=3)
    check_tensor(y, "y", ndim=2)
    if logits.shape[:2] != y.shape:
        raise ValueError(
            f"logits (B, L, N) and targets (B, L) must share B and L, got "
            f"{tuple(logits.shape)} and {tuple(y.shape)}"
        )


def step_cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The cross-entropy of every step, in nats, shape (B, L)."""
    _check_logits(logits, y)
    return F.cross_entropy(logits.transpose(1, 2), y, reduction="none")


def weighted_cross_entropy(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """(ltm-weighted-loss) ``sum_t w_t CE_t / sum_t w_t``, averaged over the batch."""
    ce = step_cross_entropy(logits, y)
    check_tensor(w, "w", ndim=1)
    if w.shape[0] != ce.shape[1]:
        raise ValueError(f"w must have one weight per step ({ce.shape[1]}), got {w.shape[0]}")
    w = w.to(ce)
    return (ce * w).sum(dim=1).mean() / w.sum()


def recalled_symbols(logits: torch.Tensor, y: torch.Tensor, K: int = 10) -> float:
    """Correctly memorised symbols: of the last ``K`` steps, how many have ``argmax = target``,
    averaged over the batch (0 to K)."""
    _check_logits(logits, y)
    check_positive_int(K, "K")
    hits = logits[:, -K:].argmax(dim=-1) == y[:, -K:]
    return float(hits.sum(dim=1).float().mean())


# --- the tasks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryTask:
    """The copying-memory task at memory length ``T`` with ``N`` categories.

    ``encoding``: ``"onehot"`` (N channels, the book's default) or ``"scalar"`` (the category
    index as one number, as the thesis's code fed it). ``weighting``: the training loss's
    weights, :func:`recall_weights`. The metrics are unweighted.
    """

    T: int = 100
    N: int = 10
    K: int = 10
    encoding: str = "onehot"
    weighting: str = "A"
    labels: str = "s003"
    name: str = field(default="memory", init=False)
    metric: str = field(default="ce", init=False)  # the headline metric; lower is better

    def __post_init__(self):
        check_positive_int(self.T, "T")
        check_positive_int(self.K, "K")
        check_choice(self.encoding, "encoding", ENCODINGS)
        check_choice(self.weighting, "weighting", WEIGHTINGS)
        copy_memory_symbols(self.N, self.labels)  # checks N and labels

    @property
    def key(self) -> str:
        """The task's short name in file names, ``memory100`` (``memory100-scalar`` for
        scalar inputs)."""
        return f"memory{self.T}" + ("-scalar" if self.encoding == "scalar" else "")

    @property
    def length(self) -> int:
        return self.T + 2 * self.K

    @property
    def lag(self) -> int:
        """How far back the answer lies; symbol j is recalled T + K steps after it was shown."""
        return self.T + self.K

    @property
    def d_in(self) -> int:
        return self.N if self.encoding == "onehot" else 1

    @property
    def d_out(self) -> int:
        return self.N

    @property
    def baseline(self) -> float:
        return memoryless_ce(self.T, self.N, self.K)

    def encode(self, symbols: torch.Tensor) -> torch.Tensor:
        """Category indices (B, L) as model inputs (B, L, d_in)."""
        if self.encoding == "onehot":
            return F.one_hot(symbols, self.N).float()
        return symbols.float().unsqueeze(-1)

    def batch(self, B: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, y)``: encoded inputs (B, L, d_in) and target categories (B, L)."""
        symbols, y = copy_memory(B, self.T, self.N, self.K, self.labels, generator)
        return self.encode(symbols), y

    def loss(self, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The training loss (ltm-weighted-loss) with this task's weighting."""
        return weighted_cross_entropy(outputs, y, recall_weights(self.T, self.weighting, self.K))

    def metrics(self, outputs: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        """``ce``: unweighted mean cross-entropy per step; ``symbols``: recalled (of K);
        ``ce_blank`` and ``ce_recall``: the mean cross-entropy of the T + K steps before the
        recall and of the K recall steps."""
        ce = step_cross_entropy(outputs, y)
        return {
            "ce": float(ce.mean()),
            "symbols": recalled_symbols(outputs, y, self.K),
            "ce_blank": float(ce[:, : self.T + self.K].mean()),
            "ce_recall": float(ce[:, self.T + self.K :].mean()),
        }


@dataclass(frozen=True)
class AddingTask:
    """The adding problem (Chapter 2): the sum of the two marked values, read at the last step.

    The answer is the model's output at the last step; the baseline is the constant guess 1,
    whose MSE is Var(U1 + U2) = 1/6.
    """

    T: int = 200
    name: str = field(default="adding", init=False)
    metric: str = field(default="mse", init=False)
    d_in: int = field(default=2, init=False)
    d_out: int = field(default=1, init=False)

    def __post_init__(self):
        if not isinstance(self.T, int) or self.T < 2:
            raise ValueError(f"the adding problem needs T >= 2, got {self.T!r}")

    @property
    def key(self) -> str:
        return f"adding{self.T}"

    @property
    def length(self) -> int:
        return self.T

    @property
    def lag(self) -> int:
        """The first marked value can lie up to T - 1 steps before the answer."""
        return self.T

    @property
    def baseline(self) -> float:
        return 1 / 6

    def batch(self, B: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
        return adding_problem(B, self.T, generator)

    def _answer(self, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        check_tensor(outputs, "outputs", ndim=3)
        if outputs.shape[0] != y.shape[0] or outputs.shape[2] != 1:
            raise ValueError(
                f"outputs must be (B, T, 1) with B = {y.shape[0]}, got {tuple(outputs.shape)}"
            )
        return outputs[:, -1, 0]

    def loss(self, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self._answer(outputs, y), y)

    def metrics(self, outputs: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        return {"mse": float(F.mse_loss(self._answer(outputs, y), y))}


IGNORE = -100  # the target of a step with nothing to recall (F.cross_entropy's ignore_index)


@dataclass(frozen=True)
class RecallTask:
    """Delayed recall (:func:`rnnbook.data.synthetic.delayed_echo`): a stream of ``T`` fair
    random bits, and at every step ``t >= D`` the answer is the bit of step ``t - D``.

    Where the copying task asks for ten symbols held unchanged over a long gap, this one asks
    for a window: the last ``D`` bits, all of them, at every step, each for exactly ``D``
    steps. Outputs are two logits per step; the first ``D`` steps have no target
    (``IGNORE``). A model that remembers nothing guesses each bit: ln 2 nats per step, half
    the bits right.
    """

    T: int = 100
    D: int = 20
    name: str = field(default="recall", init=False)
    metric: str = field(default="ce", init=False)
    d_in: int = field(default=1, init=False)
    d_out: int = field(default=2, init=False)

    def __post_init__(self):
        check_positive_int(self.T, "T")
        check_positive_int(self.D, "D")
        if self.D >= self.T:
            raise ValueError(f"the delay D must be shorter than the stream: D={self.D}, T={self.T}")

    @property
    def key(self) -> str:
        """``recall100d20``: the stream's length and the delay."""
        return f"recall{self.T}d{self.D}"

    @property
    def length(self) -> int:
        return self.T

    @property
    def lag(self) -> int:
        """Every answer lies exactly D steps back."""
        return self.D

    @property
    def baseline(self) -> float:
        return math.log(2)

    def batch(self, B: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, y)``: bits (B, T, 1) and targets (B, T), ``IGNORE`` at the first D steps."""
        x, y, mask = delayed_echo(B, self.T, self.D, generator)
        return x, y.masked_fill(~mask, IGNORE)

    def loss(self, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The mean cross-entropy over the steps with a target."""
        _check_logits(outputs, y)
        return F.cross_entropy(outputs.transpose(1, 2), y, ignore_index=IGNORE)

    def metrics(self, outputs: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        """``ce``: the mean cross-entropy per step with a target; ``accuracy``: the share of
        those steps whose bit is recalled (argmax = target)."""
        _check_logits(outputs, y)
        answered = y != IGNORE
        hits = outputs.argmax(dim=-1)[answered] == y[answered]
        return {"ce": float(self.loss(outputs, y)), "accuracy": float(hits.float().mean())}


@functools.lru_cache(maxsize=4)
def _pendulum_data(seed: int):
    from rnnbook.data.pendulum import make_dataset

    return make_dataset(seed=seed)


@dataclass(frozen=True)
class PendulumTask:
    """The Walker2d surrogate: next-state prediction on an irregularly sampled double
    pendulum (:mod:`rnnbook.data.pendulum`, (ltm-pendulum)); MSE in normalised units over
    every step of a window of 64, against the "no change" guess (persistence).

    Training batches are windows of the train split drawn at random; the metrics are taken
    on the test split (``test_windows`` of them, 0 for all).
    """

    data_seed: int = 0
    test_windows: int = 0
    name: str = field(default="pendulum", init=False)
    metric: str = field(default="mse", init=False)

    @property
    def data(self):
        return _pendulum_data(self.data_seed)

    @property
    def key(self) -> str:
        return "pendulum"

    @property
    def d_in(self) -> int:
        return self.data.d_in

    @property
    def d_out(self) -> int:
        return self.data.d_out

    @property
    def time_channel(self) -> int:
        return self.data.time_channel

    @property
    def length(self) -> int:
        return self.data.train[0].shape[1]

    @property
    def lag(self) -> int:
        return self.length

    @property
    def baseline(self) -> float:
        return float(self.data.persistence_mse("test"))

    def batch(self, B: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``B`` training windows drawn uniformly (with replacement) by ``generator``."""
        check_positive_int(B, "B")
        g = (
            generator
            if isinstance(generator, torch.Generator)
            else torch.Generator().manual_seed(int(generator))
        )
        x, y = self.data.train
        rows = torch.randint(0, x.shape[0], (B,), generator=g)
        return x[rows], y[rows]

    def test_batches(self, chunk: int = 500, split: str = "test") -> list:
        """A fixed split (``"test"`` or ``"val"``) in batches of ``chunk`` windows."""
        check_choice(split, "split", ("test", "val"))
        x, y = self.data.test if split == "test" else self.data.val
        if self.test_windows:
            x, y = x[: self.test_windows], y[: self.test_windows]
        return [(x[i : i + chunk], y[i : i + chunk]) for i in range(0, x.shape[0], chunk)]

    def loss(self, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        check_tensor(outputs, "outputs", ndim=3)
        if outputs.shape != y.shape:
            raise ValueError(
                f"outputs must have the targets' shape {tuple(y.shape)}, got {tuple(outputs.shape)}"
            )
        return F.mse_loss(outputs, y)

    def metrics(self, outputs: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        return {"mse": float(self.loss(outputs, y))}


@dataclass(frozen=True, eq=False)
class PendulumAnglesData:
    """The pendulum's windows with the velocities hidden and the thesis's target.

    ``train``, ``val``, ``test`` are ``(x, y)`` float32 tensors: ``x`` (n, window, 7) with
    channels ``[sin θ1, cos θ1, sin θ2, cos θ2 (normalised), τ_t / max_torque (2), Δt]``
    and ``y`` (n, window, 4) the normalised angle channels of the NEXT RECORDED step, one
    step of 0.02 s ahead whether or not that step was dropped from the inputs. The windows,
    trajectories and normalisation are those of :func:`rnnbook.data.pendulum.make_dataset`.
    """

    train: tuple[torch.Tensor, torch.Tensor]
    val: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]
    d_in: int = 7
    d_out: int = 4
    time_channel: int = 6

    def split(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        check_choice(name, "split", ("train", "val", "test"))
        return getattr(self, name)

    def persistence_mse(self, name: str = "test") -> float:
        """MSE of "no change": the current angle channels as the prediction."""
        x, y = self.split(name)
        return float(((x[..., : self.d_out] - y) ** 2).mean())

    def mean_mse(self, name: str = "test") -> float:
        """MSE of predicting the train mean (0 after normalising)."""
        _, y = self.split(name)
        return float((y**2).mean())


@functools.lru_cache(maxsize=2)
def _pendulum_angles_data(seed: int) -> PendulumAnglesData:
    """:func:`_pendulum_data`'s windows, re-targeted: the simulation is run again with
    ``make_dataset``'s defaults (deterministic given the seed) to read the observation and the
    action of every recorded step, dropped ones included."""
    from rnnbook.data.pendulum import observe, simulate

    data = _pendulum_data(seed)
    states, actions = simulate(600, 650, 0.02, seed, 0.01, max_torque=8.0)  # make_dataset's
    obs = torch.from_numpy(observe(states)[..., :4]).float()  # (n_traj, steps + 1, 4)
    torque = torch.from_numpy(actions).float() / data.action_scale  # (n_traj, steps, 2)
    mean, std = data.obs_mean[:4], data.obs_std[:4]
    out = {}
    for name in ("train", "val", "test"):
        x, _ = data.split(name)
        traj = data.trajectories[name][:, None]  # (n, 1)
        step = data.step_index[name]  # (n, window): the recorded step of each input row
        angles = x[..., :4]  # normalised sin/cos of the kept rows
        x_new = torch.cat([angles, torque[traj, step], x[..., data.time_channel :]], dim=-1)
        y_new = (obs[traj, step + 1] - mean) / std  # the next recorded step (the thesis's)
        out[name] = (x_new, y_new)
    return PendulumAnglesData(**out)


@dataclass(frozen=True)
class PendulumAnglesTask(PendulumTask):
    """The pendulum stand-in made to need memory: the model sees the joint angles (as sine
    and cosine), the torque applied at this step and ``Δt``, but not the velocities, and
    predicts the angles of the next recorded step (:class:`PendulumAnglesData`). Without the
    velocities the current input does not determine the next one: a model must estimate the
    motion from earlier samples, as Walker2d's positions alone would require. The baseline
    is "no change".
    """

    name: str = field(default="pendulum-angles", init=False)

    @property
    def data(self):
        return _pendulum_angles_data(self.data_seed)

    @property
    def key(self) -> str:
        return "pendulum-angles"
