"""The arena's controls (Chapter 10): networks that remember nothing or exactly one step, and
LSTMs given the initialisation and the size that their critics ask for.

They join the registry ``rnnbook.arena.zoo.MODELS`` when ``rnnbook.arena`` is
imported, so ``zoo.build("mlp", task)`` works like any model's:

* ``mlp``: :class:`StepMLP`, the same two-layer tanh MLP on every step alone, no memory;
* ``mlp-2``: :class:`WindowMLP`, the same on ``x_t`` and ``x_{t-1}`` side by side, a memory
  of exactly one step and no state;
* ``lstm-chrono`` and ``lstm-chrono-64``: the arena's LSTM (36 units) and one of 64 units
  (20k parameters, the trained orthogonal RNN's and the Transformer's scale) with the chrono
  initialisation of Tallec & Ollivier (2018), :func:`chrono_initialise`.

They live apart from :mod:`rnnbook.arena.zoo` so that the code of the arena's committed
models, whose checkpoints record a hash of it, is unchanged by their arrival.
"""

from __future__ import annotations

import torch
from torch import nn

from rnnbook._validate import check_positive_int
from rnnbook.arena import zoo
from rnnbook.models.lstm import LSTMCell


class StepMLP(nn.Module):
    """A network without memory: the same two-layer tanh MLP applied to every step alone,
    ``y_t = W_3 tanh(W_2 tanh(W_1 x_t + b_1) + b_2) + b_3``. Whatever it scores, a task
    scores without remembering anything. Shapes: (B, L, d_in) -> (B, L, d_out)."""

    def __init__(self, d_in: int, d_out: int, d_hidden: int = 64):
        super().__init__()
        check_positive_int(d_in, "d_in")
        check_positive_int(d_out, "d_out")
        check_positive_int(d_hidden, "d_hidden")
        self.layers = nn.Sequential(
            nn.Linear(d_in, d_hidden),
            nn.Tanh(),
            nn.Linear(d_hidden, d_hidden),
            nn.Tanh(),
            nn.Linear(d_hidden, d_out),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)  # (B, L, d_out): each step on its own


class WindowMLP(StepMLP):
    """:class:`StepMLP` on a window: at step ``t`` it reads ``x_t, x_{t-1}, ..., x_{t-w+1}``
    side by side (the first step repeated before the sequence starts). A memory of exactly
    ``w - 1`` steps, and no state."""

    def __init__(self, d_in: int, d_out: int, window: int = 2, d_hidden: int = 64):
        check_positive_int(window, "window")
        super().__init__(d_in * window, d_out, d_hidden)
        self.window = window

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, L = self.window, x.shape[1]
        padded = torch.cat([x[:, :1].expand(-1, w - 1, -1), x], dim=1)  # (B, L + w - 1, d_in)
        steps = [padded[:, w - 1 - j : w - 1 - j + L] for j in range(w)]  # x_t, x_{t-1}, ...
        return self.layers(torch.cat(steps, dim=-1))  # (B, L, d_out)


def chrono_initialise(cell: LSTMCell, t_max: float) -> LSTMCell:
    """Tallec & Ollivier's (2018) chrono initialisation of an LSTM's gate biases:
    ``b_f = ln u`` with ``u ~ U[1, t_max - 1]`` per unit and ``b_i = -b_f``, so that the
    forget gates start with characteristic times spread up to ``t_max`` steps. The cell sums
    torch's two bias vectors, so the values go into ``bias_ih`` and the matching slices of
    ``bias_hh`` are zeroed. Draws from torch's global generator."""
    if isinstance(t_max, bool) or not isinstance(t_max, int | float) or not t_max > 2:
        raise ValueError(f"chrono initialisation needs t_max > 2 steps, got {t_max!r}")
    H = cell.hidden_size
    b_f = torch.log(torch.empty(H).uniform_(1.0, float(t_max) - 1.0))
    with torch.no_grad():
        cell.bias_ih[H : 2 * H] = b_f  # forget gate (rows i, f, g, o)
        cell.bias_ih[:H] = -b_f  # input gate
        cell.bias_hh[: 2 * H] = 0.0
    return cell


def _lstm_chrono(task, d_h: int) -> nn.Module:
    # the characteristic times reach the task's lag (T + K on the copying task); at least 3
    cell = LSTMCell(task.d_in, d_h)
    return zoo.CellReadout(chrono_initialise(cell, max(task.lag, 3)), task.d_out)


CONTROLS: dict[str, zoo.Entry] = {
    "mlp": zoo.Entry("MLP (no memory)", "none", lambda t: StepMLP(t.d_in, t.d_out)),
    "mlp-2": zoo.Entry(
        "MLP on x_t, x_t-1", "a window", lambda t: WindowMLP(t.d_in, t.d_out, window=2)
    ),
    "lstm-chrono": zoo.Entry("LSTM, chrono init", "gates", lambda t: _lstm_chrono(t, 36)),
    "lstm-chrono-64": zoo.Entry("LSTM-64, chrono init", "gates", lambda t: _lstm_chrono(t, 64)),
}
zoo.MODELS.update(CONTROLS)
