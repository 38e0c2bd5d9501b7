"""Chapter 10's checkers accept right answers and reject the classic wrong ones, each with a
hint that names the mistake and never gives the answer."""

import math
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rnnbook.arena import tasks
from rnnbook.checks import arena as checks
from rnnbook.checks.grading import CheckFailed
from rnnbook.data import synthetic

# --- right answers: the model solutions of the chapter ---------------------------------------


def right_memoryless_ce(T, N):
    K = 10
    return K * math.log(N - 2) / (T + 2 * K)  # a uniform guess at each of the K recall steps


def right_recall_weights(T):
    K = 10
    w = torch.ones(T + 2 * K)
    w[T + K :] = T + K  # each recall step weighs as much as all the T + K steps before it
    return w


def right_recalled_symbols(logits, y, K=10):
    hits = logits[:, -K:].argmax(dim=-1) == y[:, -K:]
    return hits.sum(dim=1).float().mean().item()


def right_copy_memory(B, T, N, generator):
    K, blank, marker = 10, N - 2, N - 1
    data = torch.randint(0, N - 2, (B, K), generator=generator)
    x = torch.full((B, T + 2 * K), blank)
    x[:, :K] = data
    x[:, T + K - 1] = marker
    y = torch.full((B, T + 2 * K), blank)
    y[:, T + K :] = data
    return x, y


def _copy_by_cat(B, T, N, generator):
    K = 10
    data = torch.randint(0, N - 2, (B, K), generator=generator)

    def blanks(n):
        return torch.full((B, n), N - 2)

    x = torch.cat([data, blanks(T - 1), torch.full((B, 1), N - 1), blanks(K)], 1)
    y = torch.cat([blanks(T + K), data], 1)
    return [x, y]  # a list is fine


def _copy_multinomial(B, T, N, generator):
    x, y = right_copy_memory(B, T, N, generator)
    data = torch.multinomial(torch.ones(N - 2), B * 10, True, generator=generator).view(B, 10)
    x[:, :10], y[:, T + 10 :] = data, data
    return x, y


def test_right_answers_pass(capsys):
    checks.memoryless_ce(right_memoryless_ce)
    checks.recall_weights(right_recall_weights)
    checks.recalled_symbols(right_recalled_symbols)
    checks.copy_memory(right_copy_memory)
    assert capsys.readouterr().out.count("✓") == 4


def test_the_books_functions_wrapped_pass(capsys):
    checks.memoryless_ce(lambda T, N: tasks.memoryless_ce(T, N))
    checks.recall_weights(lambda T: tasks.recall_weights(T))
    checks.recalled_symbols(lambda logits, y: tasks.recalled_symbols(logits, y))
    checks.copy_memory(lambda B, T, N, g: synthetic.copy_memory(B, T, N, generator=g))
    assert capsys.readouterr().out.count("✓") == 4


def test_right_answers_in_other_forms_pass(capsys):
    checks.memoryless_ce(lambda T, N: 10 * torch.log(torch.tensor(N - 2.0)) / (T + 20))  # 0-d
    checks.memoryless_ce(lambda T, N: np.float64(10 * np.log(N - 2) / (T + 20)))
    checks.memoryless_ce(lambda T, N, K=10: -K * math.log(1 / (N - 2)) / (T + 2 * K))
    checks.recall_weights(lambda T: right_recall_weights(T).long())
    checks.recall_weights(lambda T: torch.cat([torch.ones(T + 10), torch.full((10,), T + 10.0)]))
    checks.recalled_symbols(lambda lg, y, K=10: (lg.argmax(-1) == y)[:, -K:].sum(1).double().mean())
    checks.recalled_symbols(lambda lg, y: float(np.mean([
        sum(int(lg[b, t].argmax() == y[b, t]) for t in range(-10, 0)) for b in range(len(y))
    ])))  # fmt: skip
    checks.copy_memory(_copy_by_cat)
    checks.copy_memory(_copy_multinomial)
    assert capsys.readouterr().out.count("✓") == 9


def _raise(error):
    raise error


# --- the memoryless baseline ------------------------------------------------------------------


def _ce(log=math.log, guesses=lambda N: N - 2, numerator=10, denominator=lambda T: T + 20):
    return lambda T, N: numerator * log(guesses(N)) / denominator(T)


CE_MISTAKES = {
    "bits": (_ce(log=math.log2), "in bits, not nats"),
    "log10": (_ce(log=math.log10), "base 10"),
    "ln N": (_ce(guesses=lambda N: N), "blank and the marker were counted among the guesses"),
    "ln(N - 1)": (_ce(guesses=lambda N: N - 1), "one of the blank and the marker"),
    "divided by T": (_ce(denominator=lambda T: T), "divided by T, the memory length"),
    "divided by T + 10": (_ce(denominator=lambda T: T + 10), "steps before the recall only"),
    "K dropped": (_ce(numerator=1), "the K was dropped"),
    "per recall step": (lambda T, N: math.log(N - 2), "loss of one recall step"),
    "the total": (lambda T, N: 10 * math.log(N - 2), "total over the sequence"),
    "sign flipped": (lambda T, N: 10 * math.log(1 / (N - 2)) / (T + 20), "sign is flipped"),
    "bits and ln N": (
        _ce(log=math.log2, guesses=lambda N: N),
        r"bits, not nats; the blank and the marker",
    ),
    "K dropped, divided by T": (
        _ce(numerator=1, denominator=lambda T: T),
        r"K was dropped; the total was divided by T",
    ),
    "integer division": (lambda T, N: 10 * math.log(N - 2) // (T + 20), r"integer division \(//\)"),
    "rounded": (lambda T, N: round(right_memoryless_ce(T, N), 3), "rounded"),
    "nan": (lambda T, N: math.nan, "not a finite number"),
    "a tensor of two": (
        lambda T, N: torch.tensor([0.1, 0.2]),
        r"number, got Tensor of shape \(2,\)",
    ),
    "text": (lambda T, N: "0.17", "should be a number, got str"),
    "bool": (lambda T, N: True, "should be a number, got bool"),
    "nothing returned": (lambda T, N: None, "returned nothing"),
    "crash": (lambda T, N: math.log(N - 20), "raised ValueError"),
    "the package's": (tasks.memoryless_ce, "book's own function"),
}


@pytest.mark.parametrize("name", CE_MISTAKES)
def test_memoryless_ce_mistakes_are_named(name):
    fn, hint = CE_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        checks.memoryless_ce(fn)


# --- the recall weights -----------------------------------------------------------------------


def _w(start=lambda T: T + 10, stop=lambda T: T + 20, value=lambda T: T + 10, rest=1.0, L=None):
    def recall_weights(T):
        w = torch.full(((L or (lambda T: T + 20))(T),), rest)
        w[start(T) : stop(T)] = value(T)
        return w

    return recall_weights


W_MISTAKES = {
    "from the marker": (_w(start=lambda T: T + 9), "start at the marker"),
    "one step late": (_w(start=lambda T: T + 11), "start one step late"),
    "shifted early": (_w(start=lambda T: T + 9, stop=lambda T: T + 19), "shifted one step early"),
    "weight T": (_w(value=lambda T: T), "each recall step weighs T, the memory length"),
    "weight T + 2K": (_w(value=lambda T: T + 20), "length of the whole sequence"),
    "weight T + K - 1": (_w(value=lambda T: T + 9), "one less than the steps before"),
    "reading B": (_w(value=lambda T: (T + 10) / 10), "reading B"),
    "weight K": (_w(value=lambda T: 10), "each recall step weighs K"),
    "the data steps": (_w(start=lambda T: 0, stop=lambda T: 10), "where the data are shown"),
    "the data steps, weight T": (
        _w(start=lambda T: 0, stop=lambda T: 10, value=lambda T: T),
        "where the data are shown(.|\n)*weighs T, the memory length",
    ),
    "all ones": (lambda T: torch.ones(T + 20), "all the weights are 1"),
    "a 0/1 mask": (_w(value=lambda T: 1, rest=0.0), "weigh 0: only the recall steps count"),
    "a bool mask": (lambda T: torch.arange(T + 20) >= T + 10, "weigh 0"),
    "recall steps only weighted": (_w(rest=0.0), "weigh 0"),
    "normalised": (lambda T: right_recall_weights(T) / right_recall_weights(T).sum(), "scaled"),
    "T + 2K + 1 long": (
        _w(L=lambda T: T + 21, start=lambda T: T + 11, stop=lambda T: T + 21),
        "one weight too many",
    ),  # fmt: skip
    "T + 2K - 1 long": (
        _w(L=lambda T: T + 19, start=lambda T: T + 9, stop=lambda T: T + 19),
        "one weight too few",
    ),  # fmt: skip
    "T + K long": (lambda T: torch.ones(T + 10), "the recall steps need weights too"),
    "T long": (lambda T: torch.ones(T), "T is the memory length"),
    "a row": (lambda T: right_recall_weights(T)[None], "as a vector of shape"),
    "a list": (lambda T: right_recall_weights(T).tolist(), "got list"),
    "numpy": (lambda T: right_recall_weights(T).numpy(), "got ndarray"),
    "nothing returned": (lambda T: None, "returned nothing"),
    "crash": (lambda T: torch.ones(T)[T + 5], "raised IndexError"),
    "the package's": (tasks.recall_weights, "book's own function"),
}


@pytest.mark.parametrize("name", W_MISTAKES)
def test_recall_weights_mistakes_are_named(name):
    fn, hint = W_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        checks.recall_weights(fn)


# --- the recalled symbols ---------------------------------------------------------------------


def _hits(logits, y, steps):
    return logits[:, steps].argmax(-1) == y[:, steps]


R_MISTAKES = {
    "every step": (lambda lg, y: _hits(lg, y, slice(None)).sum(1).float().mean(), "every step"),
    "a fraction": (lambda lg, y: _hits(lg, y, slice(-10, None)).float().mean(), "a fraction"),
    "summed": (lambda lg, y: _hits(lg, y, slice(-10, None)).sum().item(), "summed over the batch"),
    "first K": (lambda lg, y: _hits(lg, y, slice(0, 10)).sum(1).float().mean(), "first K steps"),
    "probability above 1/2": (
        lambda lg, y: (
            (F.softmax(lg, -1)[:, -10:].gather(-1, y[:, -10:, None]) > 0.5)
            .sum((1, 2))
            .float()
            .mean()
        ),
        "probability above 1/2",
    ),
    "last K + 1": (lambda lg, y: _hits(lg, y, slice(-11, None)).sum(1).float().mean(), "K \\+ 1"),
    "last K - 1": (lambda lg, y: _hits(lg, y, slice(-9, None)).sum(1).float().mean(), "K - 1"),
    "misses": (
        lambda lg, y: (~_hits(lg, y, slice(-10, None))).sum(1).float().mean(),
        "wrong steps",
    ),
    "integer division": (
        lambda lg, y: _hits(lg, y, slice(-10, None)).sum() // len(y),
        "rounded down to a whole number",
    ),
    "accuracy over all steps": (
        lambda lg, y: (lg.argmax(-1) == y).float().mean(),
        "every step was counted(.|\n)*a fraction",
    ),
    "one count per sequence": (
        lambda lg, y: _hits(lg, y, slice(-10, None)).sum(1).float(),
        "one count per sequence",
    ),
    "in place": (
        lambda lg, y: right_recalled_symbols(lg.sub_(lg.max(-1, keepdim=True).values), y),
        "in place",
    ),
    "nothing returned": (lambda lg, y: None, "returned nothing"),
    "crash": (lambda lg, y: lg.argmax(1) == y, "raised"),
    "the package's": (tasks.recalled_symbols, "book's own function"),
}


@pytest.mark.parametrize("name", R_MISTAKES)
def test_recalled_symbols_mistakes_are_named(name):
    fn, hint = R_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        checks.recalled_symbols(fn)


def test_the_recall_cases_tell_argmax_from_probability():
    """Some recall step has the target as its argmax at a probability below 1/2."""
    cases = checks._recall_cases(torch.Generator().manual_seed(101))
    assert all(
        checks._recall_count(lg, y) != checks._recall_count(lg, y, decision="p > 1/2")
        for lg, y, _ in cases[:2]
    )
    assert checks._recall_count(*cases[0][:2]) != round(checks._recall_count(*cases[0][:2]))


# --- the copying-memory batch -----------------------------------------------------------------


def _copy(draw=None, marker_at=lambda T: T + 9, layout=None, target=None, dtype=torch.long):
    """right_copy_memory with one rule changed: ``draw(B, N, g)`` the data, ``marker_at`` the
    marker's steps, ``layout(x, data, T, N)`` and ``target(y, x, data, T, N, g)`` the final
    changes."""

    def copy_memory(B, T, N, generator):
        K, blank, marker = 10, N - 2, N - 1
        data = (draw or (lambda B, N, g: torch.randint(0, N - 2, (B, K), generator=g)))(
            B, N, generator
        )
        x = torch.full((B, T + 2 * K), blank)
        x[:, :K] = data
        if marker_at is not None:
            x[:, marker_at(T)] = marker
        if layout is not None:
            x = layout(x, data, T, N)
        y = torch.full((B, T + 2 * K), blank)
        y[:, T + K :] = data
        if target is not None:
            y = target(y, x, data, T, N, generator)
        return x.to(dtype), y.to(dtype)

    return copy_memory


def _t_blanks(B, T, N, generator):
    data = torch.randint(0, N - 2, (B, 10), generator=generator)
    blank = lambda n: torch.full((B, n), N - 2)  # noqa: E731
    x = torch.cat([data, blank(T), torch.full((B, 1), N - 1), blank(10)], 1)
    return x, torch.cat([blank(T + 11), data], 1)


def _set(y, steps, values):
    y = y.clone()
    y[:, steps] = values
    return y


def _global_rng(B, T, N, generator):
    return _copy(draw=lambda B, N, g: torch.randint(0, N - 2, (B, 10)))(B, T, N, generator)


def _shuffled_globally(B, T, N, generator):
    """Right data, then the batch shuffled with the global random state (a student review:
    with B = 4 two global permutations agreed by chance for one global seed in ten)."""
    x, y = right_copy_memory(B, T, N, generator)
    order = torch.randperm(B)
    return x[order], y[order]


def _fixed_rng(B, T, N, generator):
    g = torch.Generator().manual_seed(0)
    return _copy(draw=lambda B, N, _: torch.randint(0, N - 2, (B, 10), generator=g))(B, T, N, g)


def _skewed(B, N, g):
    return torch.minimum(*torch.randint(0, N - 2, (2, B, 10), generator=g))


COPY_MISTAKES = {
    "marker at T + K": (_copy(marker_at=lambda T: T + 10), "one step late, after T blanks"),
    "marker one step early": (_copy(marker_at=lambda T: T + 8), "one step early"),
    "marker missing": (_copy(marker_at=None), "no marker"),
    "marker repeated": (_copy(marker_at=lambda T: slice(T + 9, None)), "marker appears 11 times"),
    "T blanks": (_t_blanks, "one step too many"),
    "one step short": (
        lambda B, T, N, g: tuple(t[:, :-1] for t in right_copy_memory(B, T, N, g)),
        "one step too few",
    ),  # fmt: skip
    "data from all N": (
        _copy(draw=lambda B, N, g: torch.randint(0, N, (B, 10), generator=g)),
        "drawn from all the categories",
    ),
    "data from N - 1": (
        _copy(draw=lambda B, N, g: torch.randint(0, N - 1, (B, 10), generator=g)),
        r"the blank \(\d\) appears among the data",
    ),
    "randint's high taken as inclusive": (
        _copy(draw=lambda B, N, g: torch.randint(0, N - 3, (B, 10), generator=g)),
        "never appears(.|\n)*upper bound of torch.randint is exclusive",
    ),
    "data from 1": (
        _copy(draw=lambda B, N, g: torch.randint(1, N - 2, (B, 10), generator=g)),
        "symbol 0 never appears",
    ),
    "not uniform": (_copy(draw=_skewed), "not uniform"),
    "the same data in every sequence": (
        _copy(draw=lambda B, N, g: torch.randint(0, N - 2, (1, 10), generator=g).expand(B, 10)),
        "every sequence has the same data",
    ),
    "one symbol per sequence": (
        _copy(draw=lambda B, N, g: torch.randint(0, N - 2, (B, 1), generator=g).expand(B, 10)),
        "repeats one symbol",
    ),
    "target one step early": (
        _copy(target=lambda y, x, d, T, N, g: _set(_set(y, slice(T + 9, T + 19), d), -1, N - 2)),
        "shifted, 1 step too early",
    ),
    "target one step late": (
        _copy(
            target=lambda y, x, d, T, N, g: _set(
                _set(y, T + 10, N - 2), slice(T + 11, None), d[:, :9]
            )
        ),
        "shifted, 1 step too late",
    ),  # fmt: skip
    "target data at the start": (
        _copy(
            target=lambda y, x, d, T, N, g: _set(
                _set(y, slice(0, 10), d), slice(T + 10, None), N - 2
            )
        ),
        "at the first K steps",
    ),  # fmt: skip
    "target reversed": (
        _copy(target=lambda y, x, d, T, N, g: _set(y, slice(T + 10, None), d.flip(1))),
        "reverse order",
    ),
    "target data drawn separately": (
        _copy(
            target=lambda y, x, d, T, N, g: _set(
                y, slice(T + 10, None), torch.randint(0, N - 2, d.shape, generator=g)
            )
        ),
        "not the data of the input: they were drawn separately",
    ),  # fmt: skip
    "target's first part copies x": (
        _copy(target=lambda y, x, d, T, N, g: _set(y, slice(0, T + 10), x[:, : T + 10])),
        "before the recall copies the input",
    ),
    "target's first part zeros": (
        _copy(target=lambda y, x, d, T, N, g: _set(y, slice(0, T + 10), 0)),
        "before the recall holds 0",
    ),
    "target's first part has the marker": (
        _copy(target=lambda y, x, d, T, N, g: _set(y, T + 9, N - 1)),
        "before the recall is not all blank",
    ),
    "target is x": (_copy(target=lambda y, x, d, T, N, g: x.clone()), "copy of the input"),
    "blanks as zeros": (
        _copy(layout=lambda x, d, T, N: torch.where(x == N - 2, 0, x)),
        "hold 0, which is a data symbol",
    ),
    "data shown at the recall": (
        _copy(layout=lambda x, d, T, N: _set(x, slice(T + 10, None), d)),
        "shown again in the inputs of the recall steps",
    ),
    "swapped": (lambda B, T, N, g: right_copy_memory(B, T, N, g)[::-1], "swapped"),
    "one-hot x": (
        lambda B, T, N, g: (
            F.one_hot(right_copy_memory(B, T, N, g)[0], N),
            right_copy_memory(B, T, N, g)[1],
        ),
        "one-hot",
    ),
    "floats": (_copy(dtype=torch.float32), "integer indices(.|\n)*torch.long"),
    "int32": (_copy(dtype=torch.int32), "torch.long"),
    "global random state": (_global_rng, "global random state"),
    "a shuffle with the global random state": (_shuffled_globally, "global random state"),
    "a generator of its own": (_fixed_rng, "do not depend on the generator"),
    "only x": (lambda B, T, N, g: right_copy_memory(B, T, N, g)[0], "not a pair of tensors"),
    "time first": (
        lambda B, T, N, g: tuple(t.T for t in right_copy_memory(B, T, N, g)),
        "batch first",
    ),
    "a category too many": (
        _copy(target=lambda y, x, d, T, N, g: _set(y, 0, N)),
        "not one of the N = 10 categories",
    ),
    "crash": (lambda B, T, N, g: torch.randint(0, N - 2, (B, 10)) + torch.ones(T), "raised"),
    "the package's": (synthetic.copy_memory, "book's own function"),
}


@pytest.mark.parametrize("name", COPY_MISTAKES)
def test_copy_memory_mistakes_are_named(name):
    fn, hint = COPY_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint):
        checks.copy_memory(fn)


# --- all checkers -----------------------------------------------------------------------------

ALL_MISTAKES = [
    (checks.memoryless_ce, CE_MISTAKES),
    (checks.recall_weights, W_MISTAKES),
    (checks.recalled_symbols, R_MISTAKES),
    (checks.copy_memory, COPY_MISTAKES),
]

# what the hints must never say: the formula of the answer, in the usual spellings
ANSWERS = {
    checks.memoryless_ce: ["ln(N - 2)", "ln(N-2)", "log(N - 2)", "T + 2K", "T+2K", "T + 20",
                           "/ (T", "0.173287", "0.17329"],  # 10 ln 8 / 120
    checks.recall_weights: ["T + K,", "T+K", "= T + K", "weigh T + K", "weigh 110", "weighs 110", "= 110"],
    checks.recalled_symbols: ["[:, -K:]", "[-K:]", "argmax(-1)", "7.66667"],
    checks.copy_memory: ["T + K - 1", "T+K-1", "randint(0, N - 2", "N - 3", "[:, T"],
}  # fmt: skip


@pytest.mark.parametrize(
    ("checker", "name"),
    [(checker, name) for checker, mistakes in ALL_MISTAKES for name in mistakes],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_no_hint_gives_the_answer(checker, name):
    fn = dict(ALL_MISTAKES)[checker][name][0]
    with pytest.raises(CheckFailed) as info:
        checker(fn)
    message = str(info.value)
    assert "\nHint: " in message
    for answer in ANSWERS[checker]:
        assert answer not in message, (answer, message)


def test_no_grid_mistake_is_the_right_answer():
    for f, _, _ in checks._CE_MISTAKES:
        assert not all(
            checks._same_number(f(T, N), tasks.memoryless_ce(T, N)) for T, N in checks._CE_CASES
        )
    for f, _, _ in checks._W_MISTAKES:
        assert not all(torch.equal(f(T), tasks.recall_weights(T).double()) for T in checks._W_CASES)
    cases = checks._recall_cases(torch.Generator().manual_seed(101))
    for options, _, _ in checks._R_MISTAKES:
        assert not all(
            checks._same_number(
                checks._recall_count(lg, y, *options), tasks.recalled_symbols(lg, y)
            )
            for lg, y, _ in cases
        )


def test_checkers_leave_the_global_random_state_alone():
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    checks.memoryless_ce(right_memoryless_ce)
    checks.recall_weights(right_recall_weights)
    checks.recalled_symbols(right_recalled_symbols)
    checks.copy_memory(right_copy_memory)
    with pytest.raises(CheckFailed):
        checks.copy_memory(_global_rng)
    assert torch.equal(torch.rand(1), before)


@pytest.mark.parametrize("global_seed", range(12))
def test_a_global_shuffle_is_caught_whatever_the_global_seed(global_seed):
    torch.manual_seed(global_seed)
    with pytest.raises(CheckFailed, match="global random state"):
        checks.copy_memory(_shuffled_globally)


def test_checkers_are_deterministic():
    """The same answer gets the same message, whatever the global random state."""
    messages = set()
    for seed in (0, 1):
        torch.manual_seed(seed)
        with pytest.raises(CheckFailed) as info:
            checks.copy_memory(_global_rng)
        messages.add(str(info.value))
        with pytest.raises(CheckFailed) as info:
            checks.recalled_symbols(R_MISTAKES["first K"][0])
        messages.add(str(info.value))
    assert len(messages) == 2


@pytest.mark.parametrize(
    ("checker", "answer"),
    [
        (checks.memoryless_ce, right_memoryless_ce),
        (checks.recall_weights, right_recall_weights),
        (checks.recalled_symbols, right_recalled_symbols),
        (checks.copy_memory, right_copy_memory),
    ],
)
def test_checkers_are_fast(checker, answer):
    start = time.perf_counter()
    checker(answer)
    assert time.perf_counter() - start < 1.0


# --- mistakes found by a student's review -----------------------------------------------------


def _seed_only_copy(B, T, N, generator):
    """Re-seeds a fresh generator from the given one's seed: the same batch on every call."""
    return right_copy_memory(B, T, N, torch.Generator().manual_seed(generator.initial_seed()))


def _aliased_copy(B, T, N, generator):
    x, _ = right_copy_memory(B, T, N, generator)
    y = x  # no copy: writing the recall into y writes it into x too
    y[:, : T + 10] = N - 2
    y[:, T + 10 :] = x[:, :10]
    return x, y


def _numpy_copy(B, T, N, generator):
    x, y = right_copy_memory(B, T, N, generator)
    return x.numpy(), y.numpy()


def _marker_at_T(B, T, N, generator):
    x, y = right_copy_memory(B, T, N, generator)
    x[:, T + 9] = N - 2
    x[:, T] = N - 1
    return x, y


def _recall_ignores_K(logits, y, K=10):
    return right_recalled_symbols(logits, y, 10)


@pytest.mark.parametrize(
    "checker, fn, hint",
    [
        (checks.copy_memory, _seed_only_copy, "same generator gave the same batch"),
        (checks.copy_memory, _aliased_copy, "does not copy|shares|same storage|same tensor"),
        (checks.copy_memory, _numpy_copy, "numpy arrays"),
        (checks.copy_memory, _marker_at_T, "marker is at step"),
        (checks.memoryless_ce, lambda T, N: right_memoryless_ce(T, 10), "N = 10 was assumed"),
        (checks.recalled_symbols, lambda lg, y: round(right_recalled_symbols(lg, y)), "unrounded"),
        (checks.recalled_symbols, _recall_ignores_K, "K"),
    ],
)
def test_mistakes_from_the_student_review_are_named(checker, fn, hint):
    with pytest.raises(CheckFailed, match=hint):
        checker(fn)


# --- the arena entry: a model of the student's own -------------------------------------------

from torch import nn  # noqa: E402

from rnnbook.arena import zoo  # noqa: E402
from rnnbook.models import SRN, SRNCell  # noqa: E402
from rnnbook.models.srn import initialise_recurrent  # noqa: E402


def build_irnn(task):
    cell = SRNCell(task.d_in, 76, nonlinearity="relu")
    initialise_recurrent(cell, "identity")  # W_hh = I, zero bias: the IRNN
    return zoo.CellReadout(cell, task.d_out)


def _entry(build):
    return zoo.Entry("IRNN", "identity recurrence", build)


class _LastStep(nn.Module):
    def __init__(self, task):
        super().__init__()
        self.model = build_irnn(task)

    def forward(self, x):
        return self.model(x)[:, -1]  # (B, d_out): the last step only


class _Detached(nn.Module):
    def __init__(self, task):
        super().__init__()
        self.model = build_irnn(task)

    def forward(self, x):
        return self.model(x).detach()


def _frozen(task):
    model = build_irnn(task)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


class _BiGRU(nn.Module):
    """A GRU run forwards and, on the flipped sequence, backwards."""

    def __init__(self, task):
        super().__init__()
        self.forwards = nn.GRU(task.d_in, 8, batch_first=True)
        self.backwards = nn.GRU(task.d_in, 8, batch_first=True)
        self.readout = nn.Linear(16, task.d_out)

    def forward(self, x):
        h, _ = self.forwards(x)
        g, _ = self.backwards(x.flip(1))
        return self.readout(torch.cat([h, g.flip(1)], -1))


class _PlusMean(nn.Module):
    def __init__(self, task):
        super().__init__()
        self.model = build_irnn(task)

    def forward(self, x):
        out = self.model(x)
        return out + out.mean(dim=1, keepdim=True)  # every step sees the whole sequence


class _InPlace(nn.Module):
    def __init__(self, task):
        super().__init__()
        self.model = build_irnn(task)

    def forward(self, x):
        x.mul_(0.5)  # scales the caller's batch
        return self.model(x)


class _TimeFirstGRU(nn.Module):
    def __init__(self, task):
        super().__init__()
        self.gru = nn.GRU(task.d_in, 8)  # batch_first=False: reads (L, B, d)
        self.readout = nn.Linear(8, task.d_out)

    def forward(self, x):
        return self.readout(self.gru(x)[0])


ENTRY_MISTAKES = {
    "tuple": (lambda t: SRN(t.d_in, 8, t.d_out), "(?s)tuple of 2.*zoo.FirstOutput"),
    "last step": (_LastStep, "only the last step"),
    "no read-out": (lambda t: zoo.FirstOutput(nn.RNN(t.d_in, 12, batch_first=True)),
                    "no read-out to task.d_out"),
    "cell": (lambda t: SRNCell(t.d_in, 8), "(?s)a cell .SRNCell.*zoo.CellReadout"),
    "10 inputs": (lambda t: zoo.CellReadout(SRNCell(10, 8), t.d_out),
                  "input or output size is fixed"),
    "10 outputs": (lambda t: zoo.CellReadout(SRNCell(t.d_in, 8), 10),
                   "input or output size is fixed"),
    "detached": (_Detached, "(?s)no parameter gets a gradient.*cut from the weights"),
    "frozen": (_frozen, "(?s)no parameter gets a gradient.*frozen"),
    "bidirectional": (_BiGRU, "(?s)depends on later inputs.*causal models"),
    "plus mean": (_PlusMean, "(?s)depends on later inputs.*causal models"),
    "in place": (_InPlace, "changed its input x in place"),
    "class": (lambda t: zoo.CellReadout, "the class CellReadout itself"),
    "nothing": (lambda t: None, "returned nothing"),
    "time first": (_TimeFirstGRU, "other sequences|batch_first"),
}  # fmt: skip


def test_arena_entry_right_answers_pass(capsys):
    checks.arena_entry(_entry(build_irnn))
    checks.arena_entry(zoo.Entry("my LSTM", "gates", zoo.MODELS["lstm"].build))
    checks.arena_entry(zoo.Entry("GRU", "gates", zoo.MODELS["gru"].build, clip=5.0))
    assert capsys.readouterr().out.count("✓") == 3


@pytest.mark.parametrize("name", ENTRY_MISTAKES)
def test_arena_entry_mistakes_are_named(name):
    build, hint = ENTRY_MISTAKES[name]
    with pytest.raises(CheckFailed, match=hint) as info:
        checks.arena_entry(_entry(build))
    assert "\nHint: " in str(info.value)


@pytest.mark.parametrize(
    ("entry", "hint"),
    [
        (build_irnn, "(?s)got the function build_irnn.*zoo.Entry"),
        (zoo.Entry, "got the class Entry"),
        (None, "the entry is None"),
        (zoo.MODELS["lstm"], r"(?s)zoo.MODELS\['lstm'\].*book's entries.*your own"),
        (zoo.Entry("", "identity recurrence", build_irnn), "label is empty"),
        (zoo.Entry("IRNN", None, build_irnn), "mechanism is a NoneType"),
        (zoo.Entry("IRNN", "identity recurrence", "build_irnn"), "build is a str"),
    ],
    ids=["function", "class", "none", "book entry", "label", "mechanism", "build"],
)
def test_arena_entry_wrong_entries_are_named(entry, hint):
    with pytest.raises(CheckFailed, match=hint):
        checks.arena_entry(entry)


def test_arena_entry_leaves_the_global_random_state_alone_and_is_fast():
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    start = time.perf_counter()
    checks.arena_entry(_entry(build_irnn))
    assert time.perf_counter() - start < 1.0
    assert torch.equal(torch.rand(1), before)
