"""The arena's models: every memory of the book, built for a task by name (Chapter 10).

``build(name, task)`` returns a module whose ``forward(x)`` maps inputs (B, L, d_in) to the
outputs of every step (B, L, d_out). The models themselves live in ``rnnbook.models``;
this module only chooses their sizes and puts a read-out on those that lack one.

Sizes follow two budgets (stated in every table row): **small**, about 3k-7.5k parameters on
the copying task, the scale of the thesis's LSTM (SRN, LSTM, GRU, Clockwork RNN, the frozen
orthogonal RNN); **medium**, about 18k-86k, the scale of its DNC (LMU, NTM, DNC, the
Transformer). The trained orthogonal RNN (19k, of which its generator A carries 8k degrees of
freedom) and the recurrent Transformer (3k, for its cost) fall between. With fewer input
channels (delayed recall, the adding problem) every model is smaller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from rnnbook.models.clockwork import CWRNN
from rnnbook.models.dnc import DNC
from rnnbook.models.gru import GRUCell
from rnnbook.models.lmu import ParallelLMU
from rnnbook.models.lstm import LSTMCell
from rnnbook.models.ntm import NTM
from rnnbook.models.recurrent import unroll
from rnnbook.models.srn import SRNCell
from rnnbook.models.transformer import CausalTransformer, RecurrentTransformer
from rnnbook.models.unitary import OrthogonalRNN


class CellReadout(nn.Module):
    """A recurrent cell of the book looped over the sequence, and a linear read-out of ``h_t``."""

    def __init__(self, cell: nn.Module, d_out: int):
        super().__init__()
        self.cell = cell
        self.readout = nn.Linear(cell.hidden_size, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = unroll(self.cell, x)
        return self.readout(h)


class FirstOutput(nn.Module):
    """A model of the book that answers with a tuple ``(outputs, ...)``; keeps the outputs,
    and passes them through ``head`` when one is given."""

    def __init__(self, model: nn.Module, head: nn.Module | None = None):
        super().__init__()
        self.model, self.head = model, head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(x)
        out = out[0] if isinstance(out, tuple) else out
        return out if self.head is None else self.head(out)


@dataclass(frozen=True)
class Entry:
    """One model of the arena: its label, the mechanism it stands for, how to build it, the
    gradient-norm clip of its recipe, and the input encoding it needs (None: the task's)."""

    label: str
    mechanism: str
    build: Callable[[object], nn.Module]
    clip: float = 1.0
    encoding: str | None = None


def _lstm(task) -> nn.Module:
    return CellReadout(
        LSTMCell(task.d_in, 36 if task.d_in > 1 else 40, forget_bias=1.0), task.d_out
    )


def _lmu(task) -> nn.Module:
    # the delay network's window is the task's lag: theta = T + K on the memory task
    core = ParallelLMU(
        task.d_in, task.d_in, d=64, theta=float(task.lag), d_o=64, return_sequences=True
    )
    return FirstOutput(core, nn.Linear(64, task.d_out))


def _orthogonal(task, frozen: bool) -> nn.Module:
    model = OrthogonalRNN(task.d_in, task.d_out, d_h=128, frozen=frozen)
    model.A.lr_scale = 0.1  # expRNN's rate for the generator A (read by :func:`optimizer`)
    return FirstOutput(model)


def _time_channel(task):
    return getattr(task, "time_channel", None)


MODELS: dict[str, Entry] = {
    "srn": Entry("SRN", "recurrence", lambda t: CellReadout(SRNCell(t.d_in, 76), t.d_out)),
    "lstm": Entry("LSTM", "gates", _lstm),
    "lstm-scalar": Entry("LSTM, scalar input", "gates", _lstm, encoding="scalar"),
    "gru": Entry("GRU", "gates", lambda t: CellReadout(GRUCell(t.d_in, 42), t.d_out)),
    "cwrnn": Entry(
        "Clockwork RNN",
        "clocked skipping",
        lambda t: FirstOutput(CWRNN(t.d_in, 64, t.d_out, periods=(1, 2, 4, 8, 16, 32, 64, 128))),
    ),
    "urnn": Entry(
        "orthogonal RNN",
        "norm preservation",
        lambda t: _orthogonal(t, frozen=False),
    ),
    "urnn-frozen": Entry(
        "orthogonal RNN, frozen W",
        "norm preservation",
        lambda t: _orthogonal(t, frozen=True),
    ),
    "lmu": Entry("parallel LMU", "optimal linear memory", _lmu),
    "ntm": Entry(
        "NTM",
        "external memory",
        lambda t: FirstOutput(NTM(t.d_in, t.d_out, N=64, M=16, d_ctrl=100)),
        clip=50.0,
    ),
    "dnc": Entry(
        "DNC",
        "external memory",
        lambda t: FirstOutput(DNC(t.d_in, t.d_out, N=64, W=16, R=4, d_ctrl=100)),
        clip=50.0,
    ),
    "transformer": Entry(
        "Transformer",
        "attention",
        lambda t: FirstOutput(
            CausalTransformer(
                t.d_in,
                t.d_out,
                d_model=32,
                heads=4,
                d_ff=64,
                layers=2,
                time_channel=_time_channel(t),
            )
        ),
    ),
    "recurrent-transformer": Entry(
        "recurrent Transformer",
        "attention",
        lambda t: FirstOutput(RecurrentTransformer(t.d_in, t.d_out, time_channel=_time_channel(t))),
    ),
}


def task_for(name: str, task):
    """``task`` with the input encoding model ``name`` needs (the scalar LSTM's)."""
    entry = entry_of(name)
    if entry.encoding is None or getattr(task, "encoding", None) == entry.encoding:
        return task
    if not hasattr(task, "encoding"):
        raise ValueError(f"model {name!r} needs {entry.encoding} inputs, which {task.name} lacks")
    from dataclasses import replace

    return replace(task, encoding=entry.encoding)


def entry_of(name: str) -> Entry:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; the arena has {sorted(MODELS)}")
    return MODELS[name]


def build(name: str, task, seed: int = 0) -> nn.Module:
    """Model ``name`` for ``task`` (already in the model's encoding), its weights drawn from
    ``seed``."""
    entry = entry_of(name)
    torch.manual_seed(seed)
    return entry.build(task)


def optimizer(parameters, lr: float = 1e-3) -> torch.optim.Adam:
    """Adam at ``lr``; a parameter with an ``lr_scale`` attribute (the orthogonal RNN's
    generator A, 0.1 as expRNN recommends) gets ``lr * lr_scale``."""
    parameters = list(parameters)
    scales = sorted({getattr(p, "lr_scale", 1.0) for p in parameters})
    groups = [
        {"params": [p for p in parameters if getattr(p, "lr_scale", 1.0) == s], "lr": lr * s}
        for s in scales
    ]
    return torch.optim.Adam(groups, lr=lr)
