"""The machinery of the exercise checkers: a failure type and a way to report success.

Three outcomes, three signals: a right answer returns the checker's pass line (``passed``,
which starts with ✓); a wrong one raises :class:`CheckFailed` with a hint; an untouched stub
(its ``raise NotImplementedError`` still there) returns a :class:`NotAttemptedYet` line and
raises nothing, so that "Run all" in Jupyter or Colab goes past the exercises a reader has
not tried yet, while a wrong answer still stops the notebook loudly.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import operator
import sys
import threading
import types
from pathlib import Path

import torch

NOT_ATTEMPTED = "not attempted yet"

# The comparisons every checker makes, taken from torch when the checkers are imported: an
# answer (or a cell before it) that replaces torch.allclose, torch.equal or torch.isclose
# changes torch's, not these.
allclose = torch.allclose
equal = torch.equal
isclose = torch.isclose


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


class _Run:
    """What the checker that is running knows about the answer's calls: how many have begun,
    and the checker's module (whose ``BOOK_REFERENCES`` the answer may not call)."""

    def __init__(self, module: str):
        self.calls, self.module = 0, module


_RUN: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("rnnbook_check", default=None)

_LATER_NOT_IMPLEMENTED = (
    "the answer handles only some inputs: it answered the checker's earlier calls and raised "
    "NotImplementedError on this one. Make it handle every case the exercise states (every "
    "shape, option and value); only an untouched stub counts as not attempted."
)


def own_random_state(checker):
    """Every public checker's decorator. It runs ``checker`` with torch's global random state
    saved and restored, so that checking an exercise never changes the random numbers of the
    cells that follow it; and it reports an untouched stub (the answer's FIRST call raised
    NotImplementedError) with a printed "not attempted yet" line instead of an exception. A
    NotImplementedError after an earlier call returned is a wrong answer: it handles only some
    inputs. Before the checker starts, torch's and the book's functions must be those the
    checkers were imported with (:func:`remember_torch_and_the_book`)."""

    @functools.wraps(checker)
    def wrapped(*args, **kwargs):
        _refuse_replaced_torch(getattr(checker, "__name__", "the checker"))
        run = _Run(checker.__module__)
        token = _RUN.set(run)
        try:
            with torch.random.fork_rng(devices=[]):
                return checker(*args, **kwargs)
        except _Untouched as untouched:
            return not_attempted(untouched.name)
        except NotImplementedError as error:  # raised by the answer outside `call`
            name = getattr(checker, "__name__", "the answer")
            if run.calls >= 1:
                fail(f"{name}: the answer raised NotImplementedError ({error}) after it had "
                     "answered earlier calls.", _LATER_NOT_IMPLEMENTED)  # fmt: skip
            return not_attempted(name)
        finally:
            _RUN.reset(token)

    return wrapped


def call(fn, *args, name: str, crash_hint: str | None = None):
    """Call the student's function; turn a crash into a readable failure.

    While it runs, the answer may not call the book's reference implementations (the private
    functions of the checkers, and the checker module's ``BOOK_REFERENCES``), may not replace
    torch's or rnnbook's functions, and must return plain tensors (no subclass of
    torch.Tensor). Only its first call may report an untouched stub by raising
    NotImplementedError (see :func:`own_random_state`)."""
    run = _RUN.get()
    first = run is None or run.calls == 0
    if run is not None:
        run.calls += 1
    references = _references(run)
    own = _reference_of(fn, references)
    if own is not None:
        fail(f"{name} is the book's own {own}, the reference implementation the checker "
             "compares answers with.", _WRITE_IT_YOURSELF)  # fmt: skip
    before = _torch_and_book()
    modes = _mode_stacks()
    try:
        with _watching(references) as watch:
            out = fn(*args)
    except CheckFailed:
        _refuse_tampering(name, before, modes)
        raise
    except NotImplementedError as error:
        _refuse_tampering(name, before, modes)
        if first:
            raise _Untouched(name) from None  # reported by the checker's decorator, not raised
        fail(f"{name} raised NotImplementedError ({error}) after it had answered an earlier "
             "call.", _LATER_NOT_IMPLEMENTED)  # fmt: skip
    except Exception as error:  # the student's code crashed
        _refuse_tampering(name, before, modes)
        _refuse_references(name, watch)
        fail(
            f"{name} raised {type(error).__name__}: {error}",
            crash_hint
            or "call it yourself on a small input of the shapes the exercise states (torch.randn) "
            "and read the traceback: it names the line.",
        )
    _refuse_tampering(name, before, modes)
    _refuse_references(name, watch)
    _refuse_subclasses(out, name)
    return out


# --- what an answer may not do while it runs -----------------------------------------------

_WRITE_IT_YOURSELF = (
    "this calls the book's reference implementation; write it yourself (the checker compares "
    "your function with that one)."
)


def _references(run: _Run | None) -> dict:
    """The code objects of the book's reference implementations, with their names: every
    private module-level function of the checker modules (``_s_ic``, ``_msure``, ...) except
    the machinery that runs beside the answer, and the ``BOOK_REFERENCES`` (the package's
    public functions an exercise asks the student to write) of the running checker's module."""
    key = (len(sys.modules), run.module if run is not None else None)
    if key not in _REFERENCES:
        checkers = sorted(n for n in list(sys.modules) if n.startswith("rnnbook.checks."))
        _REFERENCES[key] = _find_references(checkers, key[1])
    return _REFERENCES[key]


_REFERENCES: dict = {}  # found again only when a module was imported since


def _find_references(checkers: list[str], running: str | None) -> dict:
    codes = {}
    for module_name in checkers:
        module = sys.modules[module_name]
        if module_name in _MACHINERY_MODULES:
            continue
        for attr, obj in list(vars(module).items()):
            if (
                attr.startswith("_")
                and not attr.startswith("__")
                and inspect.isfunction(obj)
                and not getattr(obj, "runs_beside_the_answer", False)
            ):
                code = inspect.unwrap(obj).__code__  # a context manager's own generator
                if code.co_filename == getattr(module, "__file__", None):
                    codes[code] = f"{module_name}.{attr}"
    for obj in getattr(sys.modules.get(running), "BOOK_REFERENCES", ()):
        code = getattr(inspect.unwrap(obj), "__code__", None)
        if code is not None:
            codes[code] = f"{obj.__module__}.{obj.__qualname__}"
    return codes


_MACHINERY_MODULES = {"rnnbook.checks.grading", "rnnbook.checks.dtypes"}


def runs_beside_the_answer(fn):
    """Mark a checker's private function that runs while the answer runs (a counter's helper,
    say), so that it is not taken for a reference implementation the answer called."""
    fn.runs_beside_the_answer = True
    return fn


def _reference_of(fn, references: dict) -> str | None:
    """The name of the reference implementation ``fn`` is (through functools.partial, bound
    methods and functools.wraps), or None."""
    for _ in range(10):
        code = getattr(fn, "__code__", None)
        if code in references:
            return references[code]
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif isinstance(fn, types.MethodType):
            fn = fn.__func__
        elif getattr(fn, "__wrapped__", None) is not None:
            fn = fn.__wrapped__
        else:
            return None
    return None


class _watching:
    """A profiler that notes every call of a reference implementation while the answer runs
    (in this thread and in threads it starts), whatever name the answer reached it by. Under
    a profiler written in C (cProfile), which cannot be chained or put back from Python, it
    watches nothing."""

    def __init__(self, references: dict):
        self.references, self.called, self.switched_off = references, [], False

    def __enter__(self):
        references, called = self.references, self.called
        self.previous, self.previous_threads = sys.getprofile(), threading.getprofile()
        previous = self.previous
        self.on = previous is None or callable(previous)
        if not self.on:
            return self

        def profiler(frame, event, arg):
            if event == "call" and frame.f_code in references:
                called.append(references[frame.f_code])
            if previous is not None:
                previous(frame, event, arg)

        self.profiler = profiler
        sys.setprofile(profiler)
        threading.setprofile(profiler)
        return self

    def __exit__(self, *exc):
        if self.on:
            self.switched_off = sys.getprofile() is not self.profiler
            sys.setprofile(self.previous)
            threading.setprofile(self.previous_threads)
        return False


def _refuse_references(name: str, watch: _watching) -> None:
    if watch.called:
        fail(f"{name} calls the book's own {watch.called[0]}, the reference implementation "
             "the checker compares answers with.", _WRITE_IT_YOURSELF)  # fmt: skip
    if watch.switched_off:
        fail(
            f"{name} replaced the profiler (sys.setprofile) through which the checker notes "
            "calls of the book's reference implementations.",
            "an answer computes its result and returns it; leave Python's profiler alone.",
        )


# the namespaces whose functions the checkers compute and compare with (and math's isclose)
_TORCH_MODULES = ("torch", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft",
                  "torch.autograd", "math")  # fmt: skip
_TORCH_CLASSES = (torch.Tensor, torch._C.TensorBase)


_DESCRIPTORS = (property, staticmethod, classmethod, types.GetSetDescriptorType)


def _watched(value) -> bool:
    """A function, a class or a descriptor: what an answer may not replace (a module's other
    globals, such as a cache, may change)."""
    return callable(value) or isinstance(value, _DESCRIPTORS)


def _watched_modules() -> list:
    """torch's modules the checkers compute with and every loaded rnnbook module, as
    ``(name, module)`` pairs (found again only when a module was imported since)."""
    if _MODULES[0] != len(sys.modules):
        _MODULES[:] = [len(sys.modules), [
            (name, module)
            for name, module in list(sys.modules.items())
            if module is not None
            and (name in _TORCH_MODULES or name == "rnnbook" or name.startswith("rnnbook."))
        ]]  # fmt: skip
    return _MODULES[1]


_MODULES: list = [-1, []]


def _torch_and_book() -> tuple[list, list]:
    """What an answer may not replace: the functions of torch's modules and of every loaded
    rnnbook module, and every attribute of torch.Tensor (copies of their namespaces)."""
    modules = [(name, module, dict(vars(module))) for name, module in _watched_modules()]
    classes = [(cls, dict(vars(cls))) for cls in _TORCH_CLASSES]
    return modules, classes


_TORCH_DIR = str(Path(torch.__file__).parent)


def _same(before, now) -> bool:
    """``now`` is ``before``, or torch's own wrapper of it (torch wraps a few of its
    functions lazily, e.g. torch.manual_seed on the first use of a dispatch mode)."""
    if now is before or before is None or now is None:
        return now is before
    code = getattr(now, "__code__", None)
    if code is None or not code.co_filename.startswith(_TORCH_DIR):
        return False
    inner = now
    for _ in range(5):
        inner = getattr(inner, "__wrapped__", None)
        if inner is before:
            return True
        if inner is None:
            return False
    return False


def _mode_stacks() -> tuple[list, list]:
    """The torch function modes and the torch dispatch modes on, innermost last."""
    return (
        torch.overrides._get_current_function_mode_stack(),
        torch.utils._python_dispatch._get_current_dispatch_mode_stack(),
    )


def _put_back(before) -> list[str]:
    """Put back every function of ``before`` (from :func:`_torch_and_book`) that was replaced
    since, and name them."""
    modules, classes = before
    replaced = []
    for module_name, module, saved in modules:
        now = vars(module)
        if len(now) >= len(saved) and all(map(operator.is_, saved.values(), now.values())):
            continue  # nothing replaced (a module may gain names, say by an import)
        for attr, old in saved.items():
            new = now.get(attr)
            if new is not old and _watched(old) and not _same(old, new):
                replaced.append(f"{module_name}.{attr}")
                setattr(module, attr, old)
    for cls, saved in classes:
        now = vars(cls)
        if len(now) == len(saved) and all(map(operator.is_, saved.values(), now.values())):
            continue
        for attr in set(now) | set(saved):
            old, new = saved.get(attr), now.get(attr)
            if (_watched(old) or _watched(new)) and not _same(old, new):  # not a cache
                replaced.append(f"{cls.__module__}.{cls.__name__}.{attr}")
                if attr in saved:
                    setattr(cls, attr, old)
                else:
                    delattr(cls, attr)
    return replaced


def _refuse_tampering(name: str, before, modes) -> None:
    """Put back what the answer replaced while it ran (torch's or rnnbook's functions,
    torch.Tensor's methods, modes it entered and left on) and fail, naming the first."""
    changes = [f"replaced {what}" for what in _put_back(before)]
    function_modes, dispatch_modes = modes
    while torch._C._len_torch_function_stack() > len(function_modes):
        torch._C._pop_torch_function_stack()
        changes.append("left a torch mode on (a TorchFunctionMode)")
    while torch._C._len_torch_dispatch_stack() > len(dispatch_modes):
        torch._C._pop_torch_dispatch_stack(None)
        changes.append("left a torch mode on (a TorchDispatchMode)")
    while torch._C._len_torch_function_stack() < len(function_modes):  # the checker's own
        torch._C._push_on_torch_function_stack(function_modes[torch._C._len_torch_function_stack()])
        changes.append("switched off a torch mode the checker had on")
    while torch._C._len_torch_dispatch_stack() < len(dispatch_modes):
        torch._C._push_on_torch_dispatch_stack(dispatch_modes[torch._C._len_torch_dispatch_stack()])
        changes.append("switched off a torch mode the checker had on")
    if changes:
        more = f" (and made {len(changes) - 1} more changes)" if len(changes) > 1 else ""
        fail(
            f"{name} {changes[0]} while it ran{more}; the checker has put torch and rnnbook back.",
            "an answer computes its result and returns it: it does not change torch's or the "
            "book's functions (the checker compares with its own copies anyway).",
        )


_IMPORTED: list = []  # torch's and the book's functions once the checkers are imported


def remember_torch_and_the_book() -> None:
    """Note torch's and every loaded rnnbook module's functions: ``rnnbook.checks`` calls it
    once all its checkers are imported."""
    _IMPORTED[:] = [_torch_and_book()]


def _refuse_replaced_torch(checker: str) -> None:
    """When a checker starts, torch's and the book's functions must still be those the
    checkers were imported with: a cell that replaced torch.allclose or a reference of the
    book (say) would change what the checker measures. What was replaced is put back."""
    replaced = _put_back(_IMPORTED[0]) if _IMPORTED else []
    if not replaced and (
        torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack()
    ):
        fail(
            f"{checker}: a torch mode (a TorchFunctionMode or TorchDispatchMode) is on when the "
            "checker starts, so the checker cannot trust what torch computes.",
            "leave every torch mode you entered (use it in a `with` block) before you call a "
            "checker; a checker compares your answer with its own reference.",
        )
    if replaced:
        fail(
            f"{checker}: {replaced[0]} is not the one the checkers were imported with (it was "
            "replaced since), so the checker cannot trust what it computes; it has put torch's "
            "and the book's functions back.",
            "a checker compares your answer with its own reference: answer the exercise with "
            "your function alone, without replacing torch's or the book's functions.",
        )


def _plain(value: torch.Tensor) -> bool:
    return type(value) in (torch.Tensor, torch.nn.Parameter)


def _refuse_subclasses(value, name: str, depth: int = 0) -> None:
    """Every tensor an answer returns (in a tuple, list or dict too) must be a plain
    torch.Tensor: a subclass can answer torch's comparisons as it likes."""
    if isinstance(value, torch.Tensor):
        if not _plain(value):
            _subclass_failure(value, name)
    elif depth < 4 and isinstance(value, tuple | list):
        for item in value:
            _refuse_subclasses(item, name, depth + 1)
    elif depth < 4 and isinstance(value, dict):
        for item in value.values():
            _refuse_subclasses(item, name, depth + 1)


def _subclass_failure(value, what: str) -> None:
    fail(
        f"{what} returned a {type(value).__name__}, a subclass of torch.Tensor, not a plain "
        "torch.Tensor.",
        "a subclass can change how torch computes and compares, so the checker takes plain "
        "tensors only: return the tensor your torch operations made, not a subclass of it.",
    )


def expect_tensor(value, shape: tuple, what: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        fail(f"{what} should be a torch.Tensor, got {type(value).__name__}.", "return a tensor.")
    if not _plain(value):
        _subclass_failure(value, what)
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
    return bool(allclose(a.to(b.dtype), b, atol=atol, rtol=rtol))


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
    return all(equal(a, b) for a, b in zip(given, originals))


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
    if isinstance(value, torch.Tensor) and not _plain(value):
        _subclass_failure(value, where)
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
