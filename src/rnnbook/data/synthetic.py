"""Seeded synthetic tasks. Every generator takes a ``torch.Generator`` (or a seed).

Shapes are batch-first: inputs ``(B, T, d_x)``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rnnbook._validate import check_positive_int


def _generator(generator: torch.Generator | int | None) -> torch.Generator:
    if isinstance(generator, torch.Generator):
        return generator
    if generator is None:
        raise ValueError("pass a torch.Generator or an int seed: synthetic data is always seeded")
    return torch.Generator().manual_seed(int(generator))


def random_bits(B: int, T: int, generator) -> torch.Tensor:
    """Fair random bits as floats in {0, 1}, shape ``(B, T)``."""
    check_positive_int(B, "B")
    check_positive_int(T, "T")
    return torch.randint(0, 2, (B, T), generator=_generator(generator)).float()


def first_bit(B: int, T: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Many-to-one memory task: the label is the first bit of a random bit sequence.

    Returns ``x`` of shape ``(B, T, 1)`` with values in {-1, +1} and labels ``(B,)`` in {0, 1}.
    The label depends only on ``x_1``, so the lag between cue and answer is ``T - 1``.
    """
    bits = random_bits(B, T, generator)
    return (2 * bits - 1).unsqueeze(-1), bits[:, 0].long()


def delayed_echo(
    B: int, T: int, D: int, generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Aligned many-to-many task: at each step output the bit seen ``D`` steps earlier.

    Returns ``x`` ``(B, T, 1)`` of bits in {0, 1}, targets ``y`` ``(B, T)`` (long) with
    ``y_t = x_{t-D}``, and a boolean ``mask`` ``(B, T)`` that is False for ``t < D`` where
    the target is undefined (there ``y`` holds 0), and True from step ``D`` on (0-based).
    """
    check_positive_int(D, "D")
    if D >= T:
        raise ValueError(f"the delay D must be shorter than the sequence: D={D}, T={T}")
    bits = random_bits(B, T, generator)
    y = torch.zeros(B, T, dtype=torch.long)
    y[:, D:] = bits[:, :-D].long()
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[:, D:] = True
    return bits.unsqueeze(-1), y, mask


def adding_problem(B: int, T: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The adding problem (Hochreiter & Schmidhuber 1997; the Le et al. 2015 form).

    Channel 0 holds values from U(0, 1); channel 1 marks exactly two positions, the first
    uniform in [0, T/2) and the second in [T/2, T). The target is the sum of the two marked
    values. Returns ``x`` ``(B, T, 2)`` and ``y`` ``(B,)``. Predicting the constant 1 gives
    MSE = Var(U1 + U2) = 1/6.
    """
    check_positive_int(B, "B")
    if not isinstance(T, int) or T < 2:
        raise ValueError(f"the adding problem needs T >= 2, got {T!r}")
    g = _generator(generator)
    values = torch.rand(B, T, generator=g)
    half = T // 2
    first = torch.randint(0, half, (B,), generator=g)
    second = torch.randint(half, T, (B,), generator=g)
    marker = torch.zeros(B, T)
    rows = torch.arange(B)
    marker[rows, first] = 1.0
    marker[rows, second] = 1.0
    y = values[rows, first] + values[rows, second]
    return torch.stack([values, marker], dim=-1), y


def mackey_glass(
    n_steps: int,
    tau: float = 17.0,
    *,
    series: int | None = None,
    generator=None,
    beta: float = 0.2,
    gamma: float = 0.1,
    power: int = 10,
    dt: float = 0.1,
    history: float = 1.2,
    discard: int = 1000,
) -> torch.Tensor:
    """A Mackey-Glass series of ``n_steps`` samples, one per time unit, float64.

    ``dx/dt = beta x(t - tau) / (1 + x(t - tau)^power) - gamma x(t)``, integrated with RK4 at
    step ``dt`` from a constant history. The delayed value at an RK4 half-step is the mean
    of its two neighbouring grid points. The first ``discard`` samples (the transient) are
    dropped. This recipe is the book's; the LMU sources do not give theirs.

    With ``series=None`` the history is ``history`` and the result has shape (n_steps,): the
    chaos comes from the delay, not from a seed. With ``series=S`` it returns (S, n_steps):
    S series integrated side by side, each from its own constant history drawn uniformly
    from [0.5, 1.5] with ``generator`` (a ``torch.Generator`` or an int seed).
    """
    check_positive_int(n_steps, "n_steps")
    if isinstance(discard, bool) or not isinstance(discard, int) or discard < 0:
        raise ValueError(f"discard must be a non-negative integer, got {discard!r}")
    for value, name in ((dt, "dt"), (tau, "tau")):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        if not 0 < value < float("inf"):  # also rejects nan
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    per_sample = round(1 / dt)
    lag = round(tau / dt)
    if not (abs(per_sample * dt - 1) < 1e-9 and abs(lag * dt - tau) < 1e-9 and lag >= 1):
        raise ValueError(f"dt must divide 1 and tau, got dt={dt!r}, tau={tau!r}")
    if series is None:
        start = torch.full((1,), float(history), dtype=torch.float64)
    else:
        check_positive_int(series, "series")
        start = 0.5 + torch.rand(series, generator=_generator(generator), dtype=torch.float64)

    def slope(x, x_delayed):
        return beta * x_delayed / (1 + x_delayed**power) - gamma * x

    total = (n_steps + discard) * per_sample
    x = np.empty((lag + 1 + total, start.numel()))  # row lag is t = 0
    x[: lag + 1] = start.numpy()
    for k in range(lag, lag + total):
        delayed, delayed_next = x[k - lag], x[k - lag + 1]
        delayed_half = 0.5 * (delayed + delayed_next)
        k1 = slope(x[k], delayed)
        k2 = slope(x[k] + 0.5 * dt * k1, delayed_half)
        k3 = slope(x[k] + 0.5 * dt * k2, delayed_half)
        k4 = slope(x[k] + dt * k3, delayed_next)
        x[k + 1] = x[k] + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    samples = torch.from_numpy(x[lag + per_sample :: per_sample][discard : discard + n_steps].T)
    return samples[0].clone() if series is None else samples.contiguous()


def copy_task(
    B: int, L: int | tuple[int, int], width: int = 8, generator=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The copy task of the NTM (Graves et al. 2014, section 4.1; Chapter 3).

    ``L`` is the length shared by the whole batch, or a range ``(low, high)`` from which one
    length is drawn uniformly (both ends included) with ``generator``: ``(1, 20)`` is the
    book's training distribution. The content is L vectors of ``width`` fair random bits.

    Returns ``x`` (B, 2L+1, width+1) and ``y`` (B, L, width), float32 in {0, 1}:

    * steps 0..L-1 of ``x`` hold the bits, with the delimiter channel (the last) at 0;
    * step L is the delimiter: data channels 0, delimiter channel 1;
    * steps L+1..2L are all zero: no input while the network answers.

    ``y`` is the bits again, without the delimiter; it is scored against the outputs at
    steps L+1..2L (``logits[:, L + 1:]``), and the outputs at steps 0..L get no loss.
    """
    check_positive_int(B, "B")
    check_positive_int(width, "width")
    g = _generator(generator)
    if isinstance(L, tuple):
        if len(L) != 2:
            raise ValueError(f"L must be a length or a (low, high) range, got {L!r}")
        low, high = L
        check_positive_int(low, "the lowest length L")
        check_positive_int(high, "the highest length L")
        if low > high:
            raise ValueError(f"the range of L must have low <= high, got {L!r}")
        L = int(torch.randint(low, high + 1, (1,), generator=g))
    else:
        check_positive_int(L, "L")
    bits = torch.randint(0, 2, (B, L, width), generator=g).float()
    x = torch.zeros(B, 2 * L + 1, width + 1)
    x[:, :L, :width] = bits
    x[:, L, width] = 1.0  # the delimiter
    return x, bits


def sum_of_sines(L: int = 256, components=((4, 1.0, 0.0), (12, 0.5, 0.3), (32, 0.25, 1.1))):
    """Chapter 5's generation target: a sum of sines rescaled to [-1, 1], shape (L,) float64.

    Each component ``(cycles, amplitude, phase)`` adds ``amplitude * sin(2π cycles t / L +
    phase)``, t = 0..L-1; the default has periods of 64, 21.3 and 8 steps at L = 256, the
    first one dominant. The sum is then mapped linearly onto [-1, 1] (min to -1, max to 1).
    """
    check_positive_int(L, "L")
    t = torch.arange(L, dtype=torch.float64)
    y = torch.zeros(L, dtype=torch.float64)
    for cycles, amplitude, phase in components:
        y += amplitude * torch.sin(2 * math.pi * cycles * t / L + phase)
    low, high = y.min(), y.max()
    if high == low:
        raise ValueError("the components sum to a constant; nothing to rescale")
    return 2 * (y - low) / (high - low) - 1


COPY_MEMORY_LABELS = ("s003", "zero_blank")


def copy_memory_symbols(N: int = 10, labels: str = "s003") -> dict:
    """The roles of the N categories of the copying-memory task (ltm-copy-memory).

    ``labels="s003"`` (Brantner's thesis and the text of Arjovsky et al. 2016): data
    ``0..N-3``, blank ``N-2``, marker ``N-1``. ``labels="zero_blank"`` (Arjovsky et al.'s
    code): blank ``0``, data ``1..N-2``, marker ``N-1``. Returns
    ``{"data": LongTensor, "blank": int, "marker": int}``.
    """
    if not isinstance(N, int) or isinstance(N, bool) or N < 3:
        raise ValueError(f"the copying-memory task needs N >= 3 categories, got {N!r}")
    if labels not in COPY_MEMORY_LABELS:
        raise ValueError(f"labels must be one of {COPY_MEMORY_LABELS}, got {labels!r}")
    if labels == "s003":
        return {"data": torch.arange(0, N - 2), "blank": N - 2, "marker": N - 1}
    return {"data": torch.arange(1, N - 1), "blank": 0, "marker": N - 1}


def copy_memory(
    B: int, T: int, N: int = 10, K: int = 10, labels: str = "s003", generator=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The copying-memory task (Arjovsky et al. 2016; Brantner's thesis), (ltm-copy-memory).

    ``K`` data symbols, drawn i.i.d. uniformly from the N - 2 data categories, are shown
    first; then ``T - 1`` blanks, one marker, and ``K`` blanks while the network answers.
    The target is blank for the first ``T + K`` steps and then the K data symbols in their
    order. Both are category indices (long), shape ``(B, T + 2K)``:

    * ``x[:, :K]`` the data, ``x[:, T + K - 1]`` the marker, every other input blank;
    * ``y[:, :T + K]`` blank and ``y[:, T + K:] == x[:, :K]``.

    ``labels`` picks the category roles (:func:`copy_memory_symbols`). One-hot or scalar
    encodings of ``x`` are left to the caller.
    """
    check_positive_int(B, "B")
    check_positive_int(T, "T")
    check_positive_int(K, "K")
    roles = copy_memory_symbols(N, labels)
    g = _generator(generator)
    data = roles["data"][torch.randint(0, N - 2, (B, K), generator=g)]
    x = torch.full((B, T + 2 * K), roles["blank"], dtype=torch.long)
    x[:, :K] = data
    x[:, T + K - 1] = roles["marker"]
    y = torch.full((B, T + 2 * K), roles["blank"], dtype=torch.long)
    y[:, T + K :] = data
    return x, y
