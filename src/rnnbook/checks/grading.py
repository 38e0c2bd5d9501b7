"""The machinery of the exercise checkers: a failure type and a way to report success.

Three outcomes, three signals: a right answer returns the checker's pass line (``passed``,
which starts with ✓); a wrong one raises :class:`CheckFailed` with a hint; an untouched stub
(its ``raise NotImplementedError`` still there) returns a :class:`NotAttemptedYet` line and
raises nothing, so that "Run all" in Jupyter or Colab goes past the exercises a reader has
not tried yet, while a wrong answer still stops the notebook loudly.
"""

from __future__ import annotations

import functools

import torch

NOT_ATTEMPTED = "not attempted yet"


class CheckFailed(AssertionError):
    """The answer is not right yet; the message says what was tested and gives a hint."""


class NotAttemptedYet(str):
    """What a checker returns for an untouched stub: the line it printed, marked as such."""


class _Untouched(Exception):
    """Raised by :func:`call` when the answer raises NotImplementedError; the checker's
    decorator (:func:`own_random_state`) turns it into a :class:`NotAttemptedYet` line."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def not_attempted(name: str, why: str = "the stub still raises NotImplementedError") -> str:
    """Print and return the line of an exercise whose stub is untouched (a
    :class:`NotAttemptedYet`); ``why`` says how the checker knows."""
    message = NotAttemptedYet(
        f"· {name}: {NOT_ATTEMPTED} ({why}). Write your answer in place of the stub and run "
        "the cell again."
    )
    print(message)
    return message


def fail(what: str, hint: str) -> None:
    raise CheckFailed(f"{what}\nHint: {hint}")


def passed(name: str, tests: list[str]) -> str:
    what = "the check passed" if len(tests) == 1 else f"all {len(tests)} checks passed"
    message = f"✓ {name}: {what} ({'; '.join(tests)})."
    print(message)
    return message


def own_random_state(checker):
    """Every public checker's decorator. It runs ``checker`` with torch's global random state
    saved and restored, so that checking an exercise never changes the random numbers of the
    cells that follow it; and it reports an untouched stub (the answer raised
    NotImplementedError) with a printed "not attempted yet" line instead of an exception."""

    @functools.wraps(checker)
    def wrapped(*args, **kwargs):
        try:
            with torch.random.fork_rng(devices=[]):
                return checker(*args, **kwargs)
        except _Untouched as untouched:
            return not_attempted(untouched.name)
        except NotImplementedError:  # raised by the answer outside `call`
            return not_attempted(getattr(checker, "__name__", "the answer"))

    return wrapped


def call(fn, *args, name: str):
    """Call the student's function; turn a crash into a readable failure."""
    try:
        return fn(*args)
    except CheckFailed:
        raise
    except NotImplementedError:
        raise _Untouched(name) from None  # reported by the checker's decorator, not raised
    except Exception as error:  # the student's code crashed
        fail(
            f"{name} raised {type(error).__name__}: {error}",
            "call it yourself on a small input of the shapes the exercise states (torch.randn) "
            "and read the traceback: it names the line.",
        )


def expect_tensor(value, shape: tuple, what: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        fail(f"{what} should be a torch.Tensor, got {type(value).__name__}.", "return a tensor.")
    if tuple(value.shape) != tuple(shape):
        fail(
            f"{what} should have shape {tuple(shape)}, got {tuple(value.shape)}.",
            "check which dimension is the batch and which the features (row-major: x @ W.T).",
        )
    return value


def expect_pair(value, names: str, shape: tuple, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A returned pair of tensors of one shape, such as ``(h, c)``: ``names`` is their two
    letters in the order the exercise asks for (``"hc"`` or ``"ch"``)."""
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple) or len(value) != 2:
        first, second = names
        fail(
            f"{where} returned {type(value).__name__}, not a pair of tensors.",
            f"return the two new states as a tuple, in the order ({first}, {second}).",
        )
    return tuple(expect_tensor(t, shape, f"{where}: {n}") for t, n in zip(value, names))


def close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-8, rtol: float = 1e-6) -> bool:
    return bool(torch.allclose(a.to(b.dtype), b, atol=atol, rtol=rtol))


def reject_own(fn, own: tuple, exercise: str) -> None:
    """The package's function (or the checker's reference) is not an answer."""
    if fn in own:
        fail(
            f"{exercise}: you passed the book's own function.",
            "write the exercise's function yourself; the checker compares it with that one.",
        )


def name_of(fn, default: str) -> str:
    """The student's function's name, for messages."""
    return getattr(fn, "__name__", default)


def unchanged(given, originals) -> bool:
    """True if every input still equals its copy taken before the call (nothing in place)."""
    return all(torch.equal(a, b) for a, b in zip(given, originals))


def tolerance(t: torch.Tensor, double: float = 1e-12) -> float:
    """An absolute tolerance for comparing with a reference: ``double`` in float64, 1e-6 else."""
    return double if t.dtype == torch.float64 else 1e-6


def gradient(out, inputs, where: str, hint: str, inplace_hint: str | None = None):
    """``torch.autograd.grad`` of the student's result; an error becomes a failure (with
    ``inplace_hint`` when autograd reports a tensor it saved was modified in place)."""
    try:
        return torch.autograd.grad(out, inputs, allow_unused=True)
    except RuntimeError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        if inplace_hint is not None and "inplace operation" in first:
            first, hint = first.split(": [")[0], inplace_hint
        fail(f"{where}: the gradient could not be computed ({first}).", hint)


def as_number(value, where: str) -> float:
    """Anything float() accepts (a float, an int, a tensor or numpy scalar of one value), but
    no text and no bool."""
    if not isinstance(value, str | bytes | bool):
        try:
            return float(value)
        except Exception:  # noqa: S110 - the failure below says what was returned
            pass
    kind = type(value).__name__
    if isinstance(value, torch.Tensor):
        kind += f" of shape {tuple(value.shape)}"
    hint = "return one number: a float, or a tensor holding a single value."
    if value is None:
        hint = "the function returned nothing: end it with `return` and the value."
    fail(f"{where} should be a number, got {kind}.", hint)
