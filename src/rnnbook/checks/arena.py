"""Checkers for the exercises of the chapter on long-term memory benchmarks (Chapter 10).

Each takes the student's answer, tests it on prepared inputs against the book's copying-memory
task (:mod:`rnnbook.data.synthetic`: (ltm-copy-memory); :mod:`rnnbook.arena.tasks`:
(ltm-copy-baseline), the weights of (ltm-weighted-loss) and the recalled-symbols metric), prints
what passed, and raises :class:`~rnnbook.checks.grading.CheckFailed` with a hint that names the
mistake it recognised, never the solution. The categories are labelled as in the thesis
(``"s003"``): data ``0..N-3``, blank ``N-2``, marker ``N-1``; ``K = 10`` symbols are recalled.

* :func:`memoryless_ce`: ``fn(T, N) -> float``, the memoryless baseline (ltm-copy-baseline), the
  mean cross-entropy per step in nats. A tensor holding one number is accepted.
* :func:`recall_weights`: ``fn(T) -> (T + 20,)`` tensor, the per-step weights of reading A of
  (ltm-weighted-loss). Float or integer tensors are accepted: only the values are checked.
* :func:`recalled_symbols`: ``fn(logits (B, L, N), y (B, L), K=10) -> float``, how many of the
  last K steps have ``argmax = target``, averaged over the batch. It is called with two
  arguments.
* :func:`copy_memory`: ``fn(B, T, N, generator) -> (x, y)``, one batch of the task drawn with
  ``generator``: inputs and targets as category indices, long tensors (B, T + 20).
* :func:`arena_entry`: ``zoo.Entry(label, mechanism, build)``, a model of the student's own for
  the arena: ``build(task)`` returns an ``nn.Module`` mapping (B, L, task.d_in) float inputs to
  (B, L, task.d_out) outputs, tested on ``MemoryTask(T=5)`` and ``AddingTask(T=8)``: shapes,
  finite outputs, gradients reaching a parameter, causality, ``x`` left unchanged. The model's
  internals are not checked; only the book's own entry objects are refused.
"""

from __future__ import annotations

import inspect
import itertools
import math

import torch

from rnnbook.arena import tasks as _tasks
from rnnbook.checks.grading import (
    allclose,
    as_number,
    call,
    equal,
    fail,
    isclose,
    name_of,
    own_random_state,
    passed,
    reject_own,
)
from rnnbook.data import synthetic as _synthetic

F64 = torch.float64
K = 10  # the symbols to recall, fixed in the exercises


def _own_work(fn, exercise: str) -> None:
    """The package's functions are not answers."""
    own = (_tasks.memoryless_ce, _tasks.recall_weights, _tasks.recalled_symbols,
           _tasks.weighted_cross_entropy, _tasks.step_cross_entropy, _synthetic.copy_memory,
           _synthetic.copy_memory_symbols)  # fmt: skip
    reject_own(fn, own, exercise)


def _compose(parts) -> tuple[str, str]:
    """The (what, hint) of a mistake made of several wrong parts, hints without repeats."""
    whats = [what for what, _ in parts]
    hints = list(dict.fromkeys(hint.rstrip(".") for _, hint in parts))
    return "; ".join(whats), "; ".join(hints) + "."


# --- exercise: the memoryless baseline ------------------------------------------------------

_CE_CASES = ((100, 10), (1, 4), (37, 26), (1000, 10), (5, 3))  # N = 3: one data symbol, 0 nats

_NATS = "F.cross_entropy, which training minimises, measures in nats: use the natural logarithm."
_GUESSES_HINT = (
    "at a recall step the answer is always a data symbol: a memoryless model that knows the "
    "rules never guesses the blank or the marker."
)

# each part: (value as a function of (T, N), None if right or (what went wrong, hint))
_CE_SIGNS = (
    (lambda T, N: 1.0, None),
    (lambda T, N: -1.0, ("the sign is flipped", "a cross-entropy is -log p, never negative.")),
)  # fmt: skip
_CE_LOGS = (
    (math.log, None),
    (math.log2, ("the logarithm is base 2: this is in bits, not nats", _NATS)),
    (math.log10, ("the logarithm is base 10, not natural", _NATS)),
)
_CE_GUESSES = (
    (lambda N: N - 2, None),
    (lambda N: N, ("the blank and the marker were counted among the guesses (the logarithm of "
                   "N)", _GUESSES_HINT)),
    (lambda N: N - 1, ("one of the blank and the marker was counted among the guesses",
                       _GUESSES_HINT)),
)  # fmt: skip
_CE_NUMERATORS = (
    (lambda T: K, None),
    (lambda T: 1, ("only one symbol's loss was counted: the K was dropped", "each of the K recall "
                   "steps is a uniform guess, and each costs the same.")),
)  # fmt: skip
_CE_DENOMINATORS = (
    (lambda T: T + 2 * K, None),
    (lambda T: T, ("the total was divided by T, the memory length", "the mean is per step of the "
                   "whole sequence, which is longer than T: count its data, blank, marker and "
                   "recall steps.")),
    (lambda T: T + K, ("the total was divided by T + K, the steps before the recall only",
                       "the recall steps are steps of the sequence too: the mean is over all of "
                       "them.")),
    (lambda T: 1, ("this is the total over the sequence, not the mean per step", "the baseline "
                   "is a mean per step: divide by the number of steps of the sequence.")),
)  # fmt: skip
_ONE_STEP = (
    "this is the loss of one recall step, not averaged over the sequence",
    "the model pays it at each of the K recall steps and nothing at the blank steps before: "
    "average over every step of the sequence.",
)


def _ce_mistakes():
    """(formula of (T, N), what went wrong, hint): every combination of wrong parts."""
    mistakes = []
    for sign, log, guesses, numerator, denominator in itertools.product(
        _CE_SIGNS, _CE_LOGS, _CE_GUESSES, _CE_NUMERATORS, _CE_DENOMINATORS
    ):
        parts = [p[1] for p in (sign, log, guesses) if p[1] is not None]
        if numerator[1] is not None and denominator[0](7) == 1:
            parts.append(_ONE_STEP)  # one recall step's loss, undivided
        else:
            parts += [p[1] for p in (numerator, denominator) if p[1] is not None]
        if not parts:
            continue  # the right formula

        def formula(T, N, s=sign[0], f=log[0], g=guesses[0], a=numerator[0], b=denominator[0]):
            return s(T, N) * a(T) * f(g(N)) / b(T)

        mistakes.append((formula, *_compose(parts)))
    return mistakes


_CE_MISTAKES = _ce_mistakes()


def _same_number(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


@own_random_state
def memoryless_ce(fn) -> str:
    """Exercise: ``fn(T, N) -> float``: (ltm-copy-baseline), the mean cross-entropy per step,
    in nats, of a model that remembers nothing, with K = 10 symbols to recall."""
    _own_work(fn, "memoryless_ce")
    name = name_of(fn, "memoryless_ce")
    got = []
    for T, N in _CE_CASES:
        where = f"{name}(T={T}, N={N})"
        got.append(as_number(call(fn, T, N, name=name), where))
    want = [_tasks.memoryless_ce(T, N, K) for T, N in _CE_CASES]
    wrong = [i for i, (g, w) in enumerate(zip(got, want)) if not _same_number(g, w)]
    if wrong:
        i = wrong[0]
        T, N = _CE_CASES[i]
        where = f"{name}(T={T}, N={N})"
        if not _same_number(-got[i], want[i]):  # the value, unless it gives away the answer
            where += f" = {got[i]:.6g}"
        if not math.isfinite(got[i]):
            fail(
                f"{name}(T={T}, N={N}) = {got[i]}: not a finite number.",
                "the baseline is a finite loss for every T >= 1 and N >= 3: look for a "
                "division by zero or the logarithm of 0.",
            )
        if all(g == 0 for g in got):
            fail(
                f"{where}, and 0 for every T and N: an integer division (//) rounded it down.",
                "divide with /, which keeps the fraction.",
            )
        for formula, what, hint in _CE_MISTAKES:
            if all(_same_number(g, formula(T, N)) for g, (T, N) in zip(got, _CE_CASES)):
                fail(f"{where}: {what}.", hint)
        if all(
            _same_number(g, _tasks.memoryless_ce(T, 10, K)) for g, (T, _) in zip(got, _CE_CASES)
        ):
            fail(f"{where}: the answer does not change with N: N = 10 was assumed.",
                 "use the N passed in: the checker varies it.")  # fmt: skip
        if any(_same_number(got[i], round(want[i], digits)) for digits in range(1, 6)):
            fail(f"{where}: the loss was rounded.", "return it unrounded; round only to print.")
        fail(
            f"{where} is not right.",
            "a memoryless model predicts the blank with certainty wherever the target is the "
            "blank, and at each recall step guesses uniformly among the symbols that can be "
            "recalled there; average its loss, in nats, over every step of the sequence.",
        )
    return passed(
        name,
        ["T = 100, 1, 37, 1000 and 5 with N = 10, 4, 26, 10 and 3 (one data symbol)"],
    )


# --- exercise: the recall weights of reading A ----------------------------------------------

_W_CASES = (100, 1, 7, 250)

# each part: (value as a function of T, None if right or (what went wrong, hint))
_W_WINDOWS = (
    (lambda T: (T + K, T + 2 * K), None),
    (lambda T: (T + K - 1, T + 2 * K), (
        "the weighted steps start at the marker, one step before the first recall step",
        "the marker's step is an input step whose target is still the blank; the recall "
        "begins after it.")),
    (lambda T: (T + K + 1, T + 2 * K), (
        "the weighted steps start one step late: the first recall step weighs 1",
        "every recall step is weighted, the first one included.")),
    (lambda T: (T + K - 1, T + 2 * K - 1), (
        "the weighted steps are shifted one step early: the marker's step is weighted and the "
        "last recall step is not",
        "the recall steps are those whose target is a data symbol; the marker's target is "
        "still the blank.")),
    (lambda T: (0, K), (
        "the first K steps, where the data are shown, were weighted instead of the recall steps",
        "the weights go where the network must answer (the target is a data symbol), not where "
        "it reads the data.")),
)  # fmt: skip
_W_VALUES = (
    (lambda T: T + K, None),
    (lambda T: T, (
        "each recall step weighs T, the memory length",
        "in reading A each recall step weighs as much as all the steps before the recall "
        "together: count every one of them, the data steps too.")),
    (lambda T: T + 2 * K, (
        "each recall step weighs the length of the whole sequence",
        "count only the steps before the recall, each of which weighs 1; the recall steps "
        "themselves are not among them.")),
    (lambda T: T + K - 1, (
        "each recall step weighs one less than the steps before the recall",
        "count every step before the recall, the marker's too.")),
    (lambda T: (T + K) / K, (
        "this is reading B: the K recall steps together weigh as much as the earlier steps",
        "the exercise asks for reading A, in which each recall step alone weighs as much as "
        "all the earlier steps together.")),
    (lambda T: K, (
        "each recall step weighs K",
        "the weight balances one recall step against all the steps before the recall: it "
        "grows with T.")),
    (lambda T: 1, (
        "the recall steps weigh 1",
        "the recall steps are weighted up, above the weight of an ordinary step.")),
)  # fmt: skip
_W_RESTS = (
    (1, None),
    (0, ("the steps before the recall weigh 0: only the recall steps count",
         "in reading A every step before the recall keeps its weight of 1.")),
)  # fmt: skip


def _weights(T, window, value, rest):
    start, stop = window(T)
    w = torch.full((T + 2 * K,), float(rest), dtype=F64)
    w[start:stop] = float(value(T))
    return w


def _weight_mistakes():
    """(weights as a function of T, what went wrong, hint): the combinations of wrong parts;
    recall steps that weigh 1 among steps that weigh 1 are told apart beforehand."""
    mistakes = []
    for window, value, (rest, rest_wrong) in itertools.product(_W_WINDOWS, _W_VALUES, _W_RESTS):
        if value[0](7) == 1 and rest == 1:
            continue  # all ones, whatever the window
        parts = [p for p in (window[1], value[1], rest_wrong) if p is not None]
        if not parts:
            continue  # the right weights
        mistakes.append(
            (lambda T, w=window[0], v=value[0], r=rest: _weights(T, w, v, r), *_compose(parts))
        )
    return mistakes


_W_MISTAKES = _weight_mistakes()


def _weight_vector(got, T, where) -> torch.Tensor:
    """The student's weights as float64 values, after type and shape checks."""
    L = T + 2 * K
    if not isinstance(got, torch.Tensor):
        hint = "return a torch.Tensor."
        if got is None:
            hint = "the function returned nothing: end it with `return` and the weights."
        elif isinstance(got, list | tuple):
            hint = "return a torch.Tensor (torch.tensor turns a list into one)."
        fail(f"{where} should be a torch.Tensor, got {type(got).__name__}.", hint)
    shape = tuple(got.shape)
    if shape != (L,):
        if got.numel() == L:
            hint = f"one weight per step, as a vector of shape {(L,)}, not a {got.dim()}-d tensor."
        elif shape == (L + 1,):
            hint = "one weight too many: count the steps of the sequence again."
        elif shape == (L - 1,):
            hint = "one weight too few: count the steps of the sequence again, the marker too."
        elif shape == (T + K,):
            hint = "these are the steps before the recall only: the recall steps need weights too."
        elif shape == (T,):
            hint = "T is the memory length; the sequence also holds the data and the recall."
        else:
            hint = "one weight per step of the sequence: the data, blanks, marker and recall."
        fail(f"{where} returned shape {shape}, not {(L,)}.", hint)
    if got.is_complex():
        fail(f"{where} returned complex numbers.", "the weights are real numbers.")
    return got.detach().to(F64)


@own_random_state
def recall_weights(fn) -> str:
    """Exercise: ``fn(T) -> (T + 20,)`` tensor: the per-step weights of reading A of
    (ltm-weighted-loss), with K = 10 recall steps."""
    _own_work(fn, "recall_weights")
    name = name_of(fn, "recall_weights")
    got = [_weight_vector(call(fn, T, name=name), T, f"{name}({T})") for T in _W_CASES]
    want = [_tasks.recall_weights(T, "A", K).to(F64) for T in _W_CASES]

    def same(a, b):
        return bool(allclose(a, b, rtol=1e-6, atol=1e-9))

    wrong = [i for i, (g, w) in enumerate(zip(got, want)) if not same(g, w)]
    if wrong:
        i = wrong[0]
        T = _W_CASES[i]
        where = f"{name}({T})"
        if all(bool((g == 1).all()) for g in got):
            fail(
                f"{where}: all the weights are 1: that is the unweighted loss.",
                "reading A weighs each recall step up, so that remembering counts as much as "
                "predicting the blanks.",
            )
        for weights, what, hint in _W_MISTAKES:
            if all(same(g, weights(T)) for g, T in zip(got, _W_CASES)):
                fail(f"{where}: {what}.", hint)
        if all(
            g.sum() != 0 and same(g / g.sum(), w / w.sum()) for g, w in zip(got, want)
        ):  # fmt: skip
            fail(
                f"{where}: the weights are scaled (they sum to {float(got[i].sum()):.6g}).",
                "(ltm-weighted-loss) divides by the sum of the weights itself: return them "
                "unscaled, 1 on an ordinary step.",
            )
        bad = (got[i] - want[i]).abs() > 1e-6 * want[i].abs().clamp_min(1)
        fail(
            f"{where}: the weights differ from reading A's at {int(bad.sum())} of the "
            f"{T + 2 * K} steps, the first at step {int(bad.nonzero()[0])}.",
            "reading A: every step weighs 1, except that each recall step weighs as much as "
            "all the steps before the recall together.",
        )
    return passed(name, ["T = 100, 1, 7 and 250, every step's weight"])


# --- exercise: the recalled symbols ---------------------------------------------------------


def _recall_logits(gen, y, N, unsure=0.3, sure=0.4, dtype=F64):
    """Logits (B, L, N) for targets ``y``: at each step a sure hit (the target's probability
    above 1/2), an unsure hit (the target the argmax, its probability below 1/2) or a miss
    (another category the argmax), drawn with the given probabilities; no ties."""
    B, L = y.shape
    u = torch.rand(B, L, generator=gen, dtype=F64)
    is_sure, is_unsure = u < sure, (u >= sure) & (u < sure + unsure)
    noise = torch.randn(B, L, N, generator=gen, dtype=F64)
    logits = noise * torch.where(is_unsure, 0.1, 1.0)[..., None]
    top = logits.max(-1).values
    other = (y + 1 + torch.randint(0, N - 1, (B, L), generator=gen)) % N
    value = torch.where(is_sure, 8.0, torch.where(is_unsure, top + 0.2, top + 1.0))
    index = torch.where(is_sure | is_unsure, y, other)
    logits = logits.scatter(-1, index[..., None], value[..., None])
    return logits.to(dtype)


def _recall_cases(gen):
    """(logits, y, what): random batches of sure hits, unsure hits and misses (on the blank
    steps too), a batch of a perfect and a hopeless sequence, a float32 batch."""
    cases = []
    _, y = _synthetic.copy_memory(6, 8, 10, K, "s003", gen)
    cases.append((_recall_logits(gen, y, 10), y, "6 sequences, T = 8, N = 10"))
    _, y = _synthetic.copy_memory(5, 1, 4, K, "s003", gen)
    cases.append((_recall_logits(gen, y, 4, 0.4, 0.2), y, "5 sequences, T = 1, N = 4"))
    _, y = _synthetic.copy_memory(2, 3, 5, K, "s003", gen)
    logits = torch.cat([_recall_logits(gen, y[:1], 5, 0.0, 1.0),
                        _recall_logits(gen, y[1:], 5, 0.0, 0.0)])  # fmt: skip
    cases.append((logits, y, "a perfect and a hopeless sequence, T = 3, N = 5"))
    _, y = _synthetic.copy_memory(32, 50, 10, K, "s003", gen)
    cases.append((_recall_logits(gen, y, 10, dtype=torch.float32), y, "32 sequences in float32"))
    return cases


def _recall_count(logits, y, window="last", decision="argmax", counted="hits", reduce="mean"):
    """The metric, and its classic wrong variants."""
    L = y.shape[1]
    steps = {"last": slice(L - K, L), "all": slice(0, L), "first": slice(0, K),
             "last K+1": slice(L - K - 1, L), "last K-1": slice(L - K + 1, L)}[window]  # fmt: skip
    logits, y = logits[:, steps].to(F64), y[:, steps]
    if decision == "argmax":
        hit = logits.argmax(-1) == y
    else:
        hit = logits.softmax(-1).gather(-1, y[..., None])[..., 0] > 0.5
    if counted == "misses":
        hit = ~hit
    per_row = hit.sum(1).to(F64)
    return {
        "mean": per_row.mean(),
        "sum": per_row.sum(),
        "fraction": (per_row / hit.shape[1]).mean(),
        "floor": per_row.mean().floor(),
        "round": per_row.mean().round(),
    }[reduce].item()


_R_WINDOWS = (
    ("last", None),
    ("all", ("every step was counted, the blank steps too",
             "the metric counts only the recall steps, where a data symbol must be recalled.")),
    ("first", ("the first K steps were compared, where the data are shown and the target is "
               "the blank", "the symbols are recalled at the end of the sequence.")),
    ("last K+1", ("K + 1 steps were counted: the marker's step too",
                  "the marker's step is not a recall step: its target is the blank.")),
    ("last K-1", ("only K - 1 steps were counted", "count every one of the K recall steps.")),
)  # fmt: skip
_R_DECISIONS = (
    ("argmax", None),
    ("p > 1/2", ("a step was counted only where the softmax gave the target a probability above "
                 "1/2", "a symbol is recalled when it is the model's most likely category, even "
                 "with a probability below one half.")),
)  # fmt: skip
_R_COUNTED = (
    ("hits", None),
    ("misses", ("the wrong steps were counted, not the right ones",
                "count the steps whose prediction equals the target.")),
)  # fmt: skip
_R_REDUCTIONS = (
    ("mean", None),
    ("sum", ("the counts were summed over the batch, not averaged",
             "the metric is per sequence: average the B counts.")),
    ("fraction", ("this is a fraction of the steps (0 to 1), not a count (0 to K)",
                  "the metric counts symbols: from 0 to K for each sequence.")),
    ("floor", ("the mean was rounded down to a whole number",
               "the mean over the batch need not be whole: divide with / (or .float().mean()), "
               "not //.")),
    ("round", ("the mean was rounded to a whole number",
               "the mean over the batch need not be whole: return it unrounded; round only to "
               "print.")),
)  # fmt: skip


def _recall_mistakes():
    """(options of :func:`_recall_count`, what went wrong, hint): every wrong combination."""
    mistakes = []
    for parts in itertools.product(_R_WINDOWS, _R_DECISIONS, _R_COUNTED, _R_REDUCTIONS):
        wrong = [p[1] for p in parts if p[1] is not None]
        if wrong:
            mistakes.append((len(wrong), tuple(p[0] for p in parts), *_compose(wrong)))
    # the simplest explanation first: one wrong part before two
    return [m[1:] for m in sorted(mistakes, key=lambda m: m[0])]


_R_MISTAKES = _recall_mistakes()


def _takes_k(fn) -> bool:
    """Whether ``fn`` accepts K as its third argument (the stub's signature); a function of
    (logits, y) alone is accepted and only called with K = 10."""
    try:
        inspect.signature(fn).bind(None, None, 4)
    except (TypeError, ValueError):
        return False
    return True


@own_random_state
def recalled_symbols(fn) -> str:
    """Exercise: ``fn(logits (B, L, N), y (B, L), K=10) -> float``: how many of the last K
    steps have ``argmax = target``, averaged over the batch. Called as ``fn(logits, y)``."""
    _own_work(fn, "recalled_symbols")
    name = name_of(fn, "recalled_symbols")
    cases = _recall_cases(torch.Generator().manual_seed(101))
    got = []
    for logits, y, what in cases:
        where = f"{name} on {what}"
        given = [logits.clone(), y.clone()]
        value = call(fn, *given, name=name)
        if not all(equal(a, b) for a, b in zip(given, (logits, y))):
            fail(f"{where} changed an argument in place.", "count without changing the inputs.")
        B = y.shape[0]
        if isinstance(value, torch.Tensor) and tuple(value.shape) == (B,):
            fail(
                f"{where} returned one count per sequence, shape {(B,)}.",
                "the metric is one number for the batch: the mean of these counts.",
            )
        got.append(as_number(value, where))
    want = [_tasks.recalled_symbols(logits, y, K) for logits, y, _ in cases]
    wrong = [i for i, (g, w) in enumerate(zip(got, want)) if not _same_number(g, w)]
    if wrong:
        i = wrong[0]
        where = f"{name} on {cases[i][2]} = {got[i]:.6g}"
        for options, what, hint in _R_MISTAKES:
            if all(_same_number(g, _recall_count(logits, y, *options))
                   for g, (logits, y, _) in zip(got, cases)):  # fmt: skip
                fail(f"{where}: {what}.", hint)
        fail(
            f"{where} is not right.",
            "compare the most likely category with the target at the recall steps, count the "
            "matches of each sequence, and average over the batch.",
        )
    logits, y, _ = cases[0]
    where = f"{name}(logits, y, K=4) on {cases[0][2]}"
    if _takes_k(fn) and not _same_number(
        as_number(value := call(fn, logits.clone(), y.clone(), 4, name=name), where),
        _tasks.recalled_symbols(logits, y, 4),
    ):
        fail(
            f"{where} = {float(value):.6g}: the answer does not follow K.",
            "count the last K steps for the K passed in, not always the last 10 (nor every step "
            "whose target is a data symbol).",
        )
    return passed(
        name,
        ["hits, unsure hits (argmax right, probability below 1/2) and misses on every step",
         "a perfect and a hopeless sequence", "float32", "no change in place"],
    )  # fmt: skip


# --- exercise: a batch of the copying-memory task --------------------------------------------


def _length_hint(shape, B, T):
    L = T + 2 * K
    if shape == (L, B):
        return "keep the batch first: (B, length)."
    if shape == (B, L + 1):
        return (
            "one step too many: count the blanks between the data and the marker again (the "
            "marker is the last of the T steps that follow the data)."
        )
    if shape == (B, L - 1):
        return "one step too few: count the data, the blanks, the marker and the recall steps."
    return "the sequence holds K data symbols, blanks, one marker and K recall steps."


def _sample(fn, name, B, T, N, seed):
    """Call the student's function with a fresh generator; check the pair, the shapes, the
    dtypes and the range of the categories."""
    where = f"{name}(B={B}, T={T}, N={N}, generator)"
    got = call(fn, B, T, N, torch.Generator().manual_seed(seed), name=name)
    if isinstance(got, list):
        got = tuple(got)
    if isinstance(got, tuple) and len(got) == 2 and any(type(t).__module__ == "numpy" for t in got):
        fail(
            f"{where} returned numpy arrays, not torch tensors.",
            "build x and y with torch (torch.full, torch.randint), or convert them with "
            "torch.from_numpy.",
        )
    if not (isinstance(got, tuple) and len(got) == 2
            and all(isinstance(t, torch.Tensor) for t in got)):  # fmt: skip
        kind = type(got).__name__
        if isinstance(got, torch.Tensor):
            kind = f"one tensor of shape {tuple(got.shape)}"
        fail(
            f"{where} returned {kind}, not a pair of tensors.",
            "return the inputs and the targets as a tuple, in the order (x, y).",
        )
    if got[0].data_ptr() == got[1].data_ptr():
        fail(
            f"{where}: x and y are the same tensor: what was written into one is in the other.",
            "`y = x` does not copy: give y its own tensor (torch.full, or x.clone()).",
        )
    L = T + 2 * K
    for t, letter in zip(got, "xy"):
        shape = tuple(t.shape)
        if shape == (B, L, N):
            fail(
                f"{where}: {letter} is one-hot encoded, shape {shape}.",
                "return category indices, one integer per step: the task encodes them itself.",
            )
        if shape != (B, L):
            fail(
                f"{where}: {letter} has shape {shape}, not {(B, L)}.",
                _length_hint(shape, B, T),
            )
        if t.dtype != torch.long:
            hint = "build it as torch.long (int64), the dtype F.cross_entropy wants for targets."
            if t.is_floating_point():
                hint = "the categories are integer indices: " + hint
            fail(f"{where}: {letter} is a tensor of {t.dtype}.", hint)
        if (t < 0).any() or (t >= N).any():
            value = int(t[(t < 0) | (t >= N)][0])
            fail(
                f"{where}: {letter} holds {value}, which is not one of the N = {N} categories.",
                "every step is a data symbol, the blank or the marker: categories 0 to N - 1.",
            )
    return got


def _check_inputs(where, x, y, T, N):
    """x: the data first, then blanks, one marker at its place, blanks."""
    blank, marker = N - 2, N - 1
    data, rest = x[:, :K], x[:, K:]
    if bool((x[:, : T + K] == blank).all()) and bool((y[:, T + K - 1] == marker).all()):
        fail(f"{where}: x and y are swapped.", "return the inputs first: (x, y).")
    if bool((data == blank).all()):
        fail(
            f"{where}: the first K inputs are all blank: the data are missing there.",
            "the sequence begins with the K data symbols.",
        )
    at_cols = (x == marker).long().argmax(1)
    if (bool(((x == marker).sum(1) == 1).all()) and bool((at_cols == at_cols[0]).all())
            and int(at_cols[0]) < K):  # fmt: skip
        fail(
            f"{where}: the marker is at step {int(at_cols[0])}, among the K data steps.",
            "the data come first, then T - 1 blanks, then the marker: count its place from the "
            "start of the sequence, the K data steps included.",
        )
    found = [f"the {role} ({value})" for role, value in (("blank", blank), ("marker", marker))
             if bool((data == value).any())]  # fmt: skip
    if found:
        verb, source = "appears", "more than the data symbols"
        if len(found) == 2:
            verb, source = "appear", "all the categories"
        fail(
            f"{where}: {' and '.join(found)} {verb} among the data in the first K steps: the "
            f"data were drawn from {source}.",
            "draw the data from the data symbols only: the blank and the marker have their own "
            "roles.",
        )
    markers = (rest == marker).sum(1)
    if bool((markers == 0).any()):
        fail(f"{where}: a sequence has no marker.", "one marker tells the network to recall.")
    if bool((markers > 1).any()):
        fail(
            f"{where}: the marker appears {int(markers.max())} times in a sequence.",
            "the marker is one step: the steps around it are blank.",
        )
    at = K + rest.eq(marker).long().argmax(1)
    if bool((at != T + K - 1).any()):
        p = int(at[at != T + K - 1][0])
        if p == T + K:
            what, hint = (
                "one step late, after T blanks",
                (
                    "the T steps that follow the data are T - 1 blanks and the marker; the recall "
                    "steps come right after it."
                ),
            )
        elif p == T + K - 2:
            what, hint = (
                "one step early",
                ("the marker is the last step before the K recall steps, after T - 1 blanks."),
            )
        else:
            what, hint = f"at step {p}", "the marker comes right before the K recall steps."
        fail(f"{where}: the marker is {what}.", hint)
    others = rest[rest != marker].view(x.shape[0], -1)
    if not bool((others == blank).all()):
        if bool((others == 0).all()):
            fail(
                f"{where}: the steps after the data hold 0, which is a data symbol here.",
                'with the labels "s003" the blank is not 0: it is a category of its own, '
                "after the data symbols.",
            )
        if bool((x[:, T + K :] == data).all()):
            fail(
                f"{where}: the data are shown again in the inputs of the recall steps.",
                "while the network answers it sees only blanks: it must remember the data.",
            )
        fail(
            f"{where}: an input after the data is neither the blank nor the marker.",
            "after the data the inputs are blanks, except the single marker.",
        )


def _check_targets(where, x, y, T, N):
    """y: blank, then the data of x in their order at the K recall steps."""
    blank = N - 2
    B, L = x.shape
    data = x[:, :K]
    want = torch.full_like(y, blank)
    want[:, T + K :] = data
    if equal(y, want):
        return
    if equal(y, x):
        fail(f"{where}: the target is a copy of the input.", "the target is what the network "
             "must answer at each step: the blank until the recall, then the data.")  # fmt: skip
    for shift in range(-(T + K), K):
        if shift == 0:
            continue
        shifted = torch.full_like(y, blank)
        start = T + K + shift
        stop = min(start + K, L)
        shifted[:, start:stop] = data[:, : stop - start]
        if equal(y, shifted):
            if start == 0:
                what = "at the first K steps, where they are shown"
            else:
                what = f"{abs(shift)} step{'s' if abs(shift) > 1 else ''} too "
                what += "early" if shift < 0 else "late"
            fail(
                f"{where}: the data in the target are shifted, {what}.",
                "the target holds the data at the recall steps, the steps after the marker; "
                "the marker's own target is still the blank.",
            )
    head_right = bool((y[:, : T + K] == blank).all())
    tail_right = equal(y[:, T + K :], data)
    if head_right and equal(y[:, T + K :], data.flip(1)):
        fail(f"{where}: the data in the target are in reverse order.",
             "the data are recalled in the order they were shown.")  # fmt: skip
    if head_right and not tail_right and bool((y[:, T + K :] < N - 2).all()):
        fail(
            f"{where}: the data in the target are not the data of the input: they were drawn "
            "separately.",
            "draw the K symbols of a sequence once, and put the same ones into x and y.",
        )
    if tail_right and not head_right:
        if equal(y[:, : T + K], x[:, : T + K]):
            what = "copies the input"
        elif bool((y[:, : T + K] == 0).all()):
            what = "holds 0, which is a data symbol here"
        else:
            what = "is not all blank"
        fail(
            f"{where}: the target before the recall {what}.",
            "until the recall the network has nothing to say: its target there is the blank.",
        )
    fail(
        f"{where}: the target is not right.",
        "the target is the blank until the recall, then the data of the input in their order.",
    )


# (B, T, N, seed); N = 3, one data symbol, comes after the test of the distribution
_COPY_CASES = ((4, 5, 10, 1), (3, 1, 4, 2), (2, 30, 6, 3))
_COPY_EDGE = (5, 2, 3, 4)


def _layout(fn, name, B, T, N, seed):
    """One batch of the student's, its layout checked."""
    where = f"{name}(B={B}, T={T}, N={N}, generator)"
    x, y = _sample(fn, name, B, T, N, seed)
    _check_inputs(where, x, y, T, N)
    _check_targets(where, x, y, T, N)
    return x, y


@own_random_state
def copy_memory(fn) -> str:
    """Exercise: ``fn(B, T, N, generator) -> (x, y)``: a batch of the copying-memory task
    (ltm-copy-memory) with K = 10, the labels ``"s003"`` and the data drawn with
    ``generator``."""
    _own_work(fn, "copy_memory")
    name = name_of(fn, "copy_memory")
    for B, T, N, seed in _COPY_CASES:
        _layout(fn, name, B, T, N, seed)
    B, T, N = 2000, 1, 6
    where = f"{name}(B={B}, T={T}, N={N}, generator)"
    x, _ = _layout(fn, name, B, T, N, 5)
    data = x[:, :K]
    if bool((data == data[:1]).all()):
        fail(
            f"{where}: every sequence has the same data.",
            "draw the data for the whole batch, different symbols for every sequence.",
        )
    if bool((data == data[:, :1]).all()):
        fail(
            f"{where}: each sequence repeats one symbol K times.",
            "draw each of the K symbols of a sequence on its own.",
        )
    counts = torch.bincount(data.flatten(), minlength=N - 2)
    missing = (counts == 0).nonzero().flatten().tolist()
    if missing:
        s = missing[0]
        hint = "every data symbol is drawn with the same probability."
        if s == N - 3:
            hint = "the upper bound of torch.randint is exclusive: " + hint
        elif s == 0:
            hint = 'the data symbols begin at 0 in the labels "s003": ' + hint
        fail(f"{where}: the data symbol {s} never appears in {B * K} draws.", hint)
    expected = B * K / (N - 2)
    if bool(((counts - expected).abs() > 0.1 * expected).any()):
        fail(
            f"{where}: the data are not uniform: the data symbols appear "
            f"{', '.join(str(int(c)) for c in counts)} times in {B * K} draws.",
            "draw every data symbol with the same probability (torch.randint).",
        )
    _layout(fn, name, *_COPY_EDGE)
    B, T, N, seed = _COPY_CASES[0]
    where = f"{name}(B={B}, T={T}, N={N}, generator)"
    with torch.random.fork_rng(devices=[]):  # two global states: a draw from either shows
        torch.manual_seed(1)
        first = _sample(fn, name, B, T, N, seed)[0]
        torch.manual_seed(2)
        again = _sample(fn, name, B, T, N, seed)[0]
    if not equal(first, again):
        fail(
            f"{where}: two generators with the same seed gave different data: they were not "
            "drawn with the generator passed in (the global random state was used?).",
            "pass the generator to the function that draws (generator=generator), so a seed "
            "gives the same batch every time.",
        )
    other = _sample(fn, name, B, T, N, seed + 100)[0]
    if equal(first, other):
        fail(
            f"{where}: two generators with different seeds gave the same data: the data do not "
            "depend on the generator.",
            "draw the data with the generator passed in, not with one seeded inside the function.",
        )
    g = torch.Generator().manual_seed(seed)
    one = call(fn, B, T, N, g, name=name)[0]
    two = call(fn, B, T, N, g, name=name)[0]
    if equal(one, two):
        fail(
            f"{where}: two calls with the same generator gave the same batch: the data were "
            "drawn from the generator's seed, not from the generator itself.",
            "draw with the generator that was passed in, so that each call advances it and the "
            "next batch is new.",
        )
    return passed(
        name,
        ["the layout of x and y for T = 5, 1, 30 and 2 and N = 10, 4, 6 and 3",
         "uniform data over 20000 draws", "the same seed gives the same batch, another seed "
         "another"],
    )  # fmt: skip


# --- exercise: a model of your own in the arena ---------------------------------------------

_ENTRY_B = 3  # sequences per test batch: apart from every length and size used below
_ENTRY_HOW = "(B, L, d_in) float inputs to (B, L, d_out) outputs, one per step"
_FIXED_SIZE = (
    "the model works on the memory task but not on the adding task (d_in = 2, d_out = 1): "
    "the input or output size is fixed (e.g. 10), not taken from the task: size every layer "
    "from the task passed to build."
)


def _entry_tasks(entry) -> list[tuple[str, object]]:
    """The two tasks the entry is built for, the memory task in the entry's encoding."""
    memory = _tasks.MemoryTask(T=5)
    if entry.encoding is not None:
        memory = _tasks.MemoryTask(T=5, encoding=entry.encoding)
    return [("MemoryTask(T=5)", memory), ("AddingTask(T=8)", _tasks.AddingTask(T=8))]


def _entry_itself(entry):
    """``entry`` must be the student's own :class:`zoo.Entry` with a label, a mechanism and a
    build function."""
    from rnnbook.arena import zoo

    if not isinstance(entry, zoo.Entry):
        kind = type(entry).__name__
        if entry is None:
            fail("the entry is None.", "pass the Entry object you made, not the result of a "
                 "function that returns nothing.")  # fmt: skip
        if isinstance(entry, type):
            kind = f"the class {entry.__name__}"
        elif isinstance(entry, torch.nn.Module):
            kind = f"a built model ({kind})"
        elif inspect.isfunction(entry) or inspect.ismethod(entry):
            kind = f"the function {entry.__name__}"
        if type(entry).__name__ == "Entry":
            hint = (
                "use the arena's own class, zoo.Entry (from rnnbook.arena import zoo), not a copy."
            )
        else:
            hint = ("the arena takes a zoo.Entry, which holds the model's label, its mechanism "
                    "and the function that builds it for a task.")  # fmt: skip
        fail(f"the entry should be a zoo.Entry, got {kind}.", hint)
    for key, book in zoo.MODELS.items():
        if entry is book:
            fail(f"this is zoo.MODELS[{key!r}]: that is one of the book's entries.",
                 "make your own entry, with your own model.")  # fmt: skip
    for field in ("label", "mechanism"):
        value = getattr(entry, field)
        if not isinstance(value, str) or not value.strip():
            what = "empty" if isinstance(value, str) else f"a {type(value).__name__}"
            fail(f"the entry's {field} is {what}, not a text.",
                 {"label": "the label names your model in the arena's tables.",
                  "mechanism": "the mechanism says in a few words what your model remembers "
                  "with."}[field])  # fmt: skip
    if not callable(entry.build):
        fail(f"the entry's build is a {type(entry.build).__name__}, not a function.",
             "build is called with a task and returns a model made for it.")  # fmt: skip
    if isinstance(entry.build, torch.nn.Module):
        fail(f"the entry's build is a built model ({type(entry.build).__name__}), not a "
             "function of the task.", "the arena builds the model anew for each task and seed: "
             "pass the function that builds it, not its result.")  # fmt: skip
    clip = entry.clip
    if isinstance(clip, bool) or not isinstance(clip, int | float) or not clip > 0:
        fail(
            f"the entry's clip is {clip!r}.",
            "clip is the gradient-norm limit of the training recipe: a positive number.",
        )
    if entry.encoding is not None and entry.encoding not in _tasks.ENCODINGS:
        fail(
            f"the entry's encoding is {entry.encoding!r}.",
            f"leave it None (the task's inputs) or pick one of {_tasks.ENCODINGS}.",
        )


def _entry_module(entry, task, where: str, first: bool) -> torch.nn.Module:
    """``entry.build(task)``, which must be a model over whole sequences."""
    if first:
        module = call(entry.build, task, name=where)
    else:
        try:
            module = entry.build(task)
        except Exception as error:  # noqa: BLE001 - it worked on the memory task
            fail(f"{where} raised {type(error).__name__}: {error}", _FIXED_SIZE)
    if isinstance(module, torch.nn.Module):
        if isinstance(module, torch.nn.RNNCellBase) or all(
            hasattr(module, a) for a in ("step", "project_inputs", "initial_state")
        ):
            fail(f"{where} returned a cell ({type(module).__name__}), which computes one step "
                 "from one input and a state.", "the arena calls the model once on the whole "
                 f"sequence, {_ENTRY_HOW}: loop the cell over time and read its hidden states "
                 "out, as zoo.CellReadout does.")  # fmt: skip
        return module
    if module is None:
        fail(f"{where} returned nothing.", "end build with `return` and the model.")
    if isinstance(module, type):
        fail(f"{where} returned the class {module.__name__} itself, not a model.",
             "build returns an instance: create the model (call the class with its sizes) and "
             "return that object.")  # fmt: skip
    fail(f"{where} returned a {type(module).__name__}, not a torch.nn.Module.",
         f"build returns a model (an nn.Module) mapping {_ENTRY_HOW}.")  # fmt: skip


def _entry_forward(module, x, where: str, first: bool, seed: int = 0):
    """The model's outputs for ``x``, run from a fixed random state (dropout and other draws
    repeat), with ``x`` left as it was."""
    original = x.clone()
    torch.manual_seed(seed)
    if first:
        out = call(module, x, name=where)
    else:
        try:
            out = module(x)
        except Exception as error:  # noqa: BLE001 - it worked on the memory task
            fail(f"{where} raised {type(error).__name__}: {error}", _FIXED_SIZE)
    if not equal(x, original):
        fail(f"{where} changed its input x in place.", "the arena reuses a batch (for the "
             "metrics and the next model): work on a copy, or with operations that return new "
             "tensors.")  # fmt: skip
    return out


def _entry_outputs(out, task, x, where: str, first: bool) -> torch.Tensor:
    """The outputs must be a float tensor (B, L, d_out)."""
    B, L, _ = x.shape
    want = (B, L, task.d_out)
    on = f"{where} on x of shape {tuple(x.shape)}"
    if isinstance(out, tuple | list):
        fail(f"{on} returned a {type(out).__name__} of {len(out)}, not a tensor.",
             "the arena needs the outputs alone, one tensor; zoo.FirstOutput (for a model that "
             "answers with a tuple) or zoo.CellReadout (for a cell) give them.")  # fmt: skip
    if out is None:
        fail(f"{on} returned nothing.", "end forward with `return` and the outputs.")
    if not isinstance(out, torch.Tensor):
        fail(f"{on} returned a {type(out).__name__}, not a tensor.",
             f"the model maps {_ENTRY_HOW}.")  # fmt: skip
    shape = tuple(out.shape)
    said = f"{on} returned shape {shape}, not {want}"
    if shape == want:
        pass
    elif shape == (B, L) and task.d_out == 1:
        fail(f"{said}: the output axis of size 1 was dropped.",
             "keep the last axis, even when it has size 1.")  # fmt: skip
    elif not first:
        fail(f"{said}.", _FIXED_SIZE)
    elif shape == (B, task.d_out):
        fail(f"{said}: only the last step answers.",
             "the arena scores the output of every step (the memory task's loss reads all of "
             "them): return one output per step.")  # fmt: skip
    elif shape == (L, B, task.d_out):
        fail(f"{said}: the batch and time axes are swapped.",
             "the arena's tensors are batch first, (B, L, d).")  # fmt: skip
    elif len(shape) == 3 and shape[:2] == (B, L):
        fail(f"{said}: there is no read-out to task.d_out.",
             f"the last axis has size {shape[2]} (the hidden size?); the task wants "
             f"{task.d_out} outputs per step.")  # fmt: skip
    else:
        fail(f"{said}.", f"the model maps {_ENTRY_HOW}.")
    if not out.is_floating_point():
        fail(f"{on} returned a {out.dtype} tensor.", "the outputs are scores or values: floats.")
    if not bool(torch.isfinite(out).all()):
        fail(f"{on} returned values that are not finite (inf or nan).",
             "look for a division by zero, a log of 0, or states that blow up over the "
             "steps.")  # fmt: skip
    return out


def _entry_gradient(module, out, y, task, where: str) -> None:
    """The task's loss must reach a parameter, with finite gradients."""
    loss = call(task.loss, out, y, name=f"task.loss on {where}")
    if not bool(torch.isfinite(loss)):
        fail(f"the loss on {where} is {float(loss)}.", "the outputs give a loss that is not "
             "finite: look for outputs the task cannot score.")  # fmt: skip
    params = [p for p in module.parameters() if p.requires_grad]
    nobody = f"no parameter gets a gradient from the loss on {where}"
    if not params:
        fail(f"{nobody}: the model has no trainable parameter.", "every parameter is frozen "
             "(requires_grad=False), or the weights are plain tensors that the module does not "
             "register (nn.Parameter, or a submodule's).")  # fmt: skip
    cut = ("the outputs are cut from the weights: look for .detach(), .data, torch.no_grad(), "
           "or a round trip through numpy or Python numbers.")  # fmt: skip
    if not loss.requires_grad:
        fail(f"{nobody}: the outputs do not depend on the parameters in autograd.", cut)
    try:
        grads = torch.autograd.grad(loss, params, allow_unused=True)
    except RuntimeError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        fail(f"the gradient of the loss on {where} could not be computed ({first}).",
             "an operation in forward breaks backpropagation: look for in-place changes of "
             "tensors that autograd saved.")  # fmt: skip
    grads = [g for g in grads if g is not None]
    if not grads:
        fail(f"{nobody}: the parameters play no part in the outputs.", cut)
    if not all(bool(torch.isfinite(g).all()) for g in grads):
        fail(
            f"the gradients of the loss on {where} are not all finite.",
            "look for an operation with an infinite slope, such as sqrt or log at 0.",
        )


def _entry_causal(module, x, out, gen, where: str, first: bool) -> None:
    """Outputs before step t0 ignore the inputs from t0 on; each sequence ignores the others."""
    B, L, _ = x.shape
    t0 = L // 2
    later = x.clone()
    later[:, t0:] = torch.rand(later[:, t0:].shape, generator=gen, dtype=x.dtype)
    with torch.no_grad():
        again = _entry_forward(module, later, where, first)
    if not isinstance(again, torch.Tensor) or again.shape != out.shape:
        fail(f"{where}: new inputs from step {t0} on changed the outputs' shape.",
             f"the model maps {_ENTRY_HOW}, whatever the inputs' values.")  # fmt: skip
    if not bool((~isclose(again[:, t0:], out.detach()[:, t0:], rtol=1e-5, atol=1e-6)).any()):
        fail(f"{where}: new inputs from step {t0} on left every output from step {t0} on as it "
             "was: the model does not read its inputs.", "the outputs must be computed from "
             "x: look for a tensor of zeros or a constant where the inputs should go.")  # fmt: skip
    before = out.detach()[:, :t0]
    moved = ~isclose(again[:, :t0], before, rtol=1e-5, atol=1e-6)
    if bool(moved.any()):
        step = int(moved.nonzero()[0, 1])
        fail(f"{where}: the output at step {step} changed when only the inputs from step {t0} "
             "on were changed: the output at a step depends on later inputs (a bidirectional "
             "or whole-sequence model).", "the arena's tasks need causal models: the output at "
             "step t may use the inputs up to step t only.")  # fmt: skip
    other = x.clone()
    other[0] = torch.rand(other[0].shape, generator=gen, dtype=x.dtype)
    with torch.no_grad():
        again = _entry_forward(module, other, where, first)
    if not isinstance(again, torch.Tensor) or again.shape != out.shape:
        fail(f"{where}: a new first sequence changed the outputs' shape.",
             f"the model maps {_ENTRY_HOW}, whatever the inputs' values.")  # fmt: skip
    if not allclose(again[1:], out.detach()[1:], rtol=1e-5, atol=1e-6):
        fail(f"{where}: changing the first sequence of the batch changed the outputs of the "
             "others.", "each sequence must be answered on its own: look for mixed-up axes "
             "(torch's nn.RNN, nn.LSTM and nn.GRU take time first unless batch_first=True) or "
             "a statistic taken over the batch.")  # fmt: skip


@own_random_state
def arena_entry(entry) -> str:
    """Exercise: a ``zoo.Entry(label, mechanism, build)`` of the student's own model, where
    ``build(task)`` returns a causal model mapping (B, L, task.d_in) float inputs to
    (B, L, task.d_out) outputs. Only the interface is checked, not the model's internals."""
    _entry_itself(entry)
    name = f"the entry {entry.label!r}"
    gen = torch.Generator().manual_seed(2024)
    for i, (label, task) in enumerate(_entry_tasks(entry)):
        first = i == 0
        torch.manual_seed(i)
        module = _entry_module(entry, task, f"build({label})", first)
        x, y = task.batch(_ENTRY_B, gen)
        where = f"the model for {label}"
        out = _entry_forward(module, x, where, first)
        out = _entry_outputs(out, task, x, where, first)
        _entry_gradient(module, out, y, task, label)
        _entry_causal(module, x, out, gen, where, first)
    return passed(
        name,
        ["an Entry of your own with a label, a mechanism and a build function",
         "models built for MemoryTask(T=5) and AddingTask(T=8)",
         "outputs (B, L, d_out), finite, whose loss reaches the parameters",
         "causal: no output depends on later inputs or other sequences",
         "the outputs read the inputs", "x left unchanged"],
    )  # fmt: skip
