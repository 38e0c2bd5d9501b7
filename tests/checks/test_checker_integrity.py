"""What every checker refuses, whatever the exercise: the book's own reference implementations
passed or called as answers, torch's comparisons replaced (before the check or by the answer),
tensor subclasses that answer comparisons as they like, and an answer that raises
NotImplementedError for some inputs only (only an untouched stub is "not attempted")."""

import functools
import threading

import pytest
import torch
from torch.overrides import TorchFunctionMode

from rnnbook import checks
from rnnbook.checks import clockwork, grading, sba, zoneout
from rnnbook.checks.grading import CheckFailed, NotAttemptedYet

F64 = torch.float64


# --- right answers, written as a student would -----------------------------------------------


def right_ns(h, h0, lam):
    norms = torch.cat([h0[:, None], h], dim=1).norm(dim=-1)
    return lam * (norms.diff(dim=1) ** 2).mean()


def right_msure(m, u_target, lam):
    b = (m > 0).to(m.dtype) + (m - m.detach())
    return lam * (u_target - b.mean()) ** 2


def right_s_ic(i, f, g, o, c_prev, b_units):
    c = f * c_prev + b_units * i * g
    return o * torch.tanh(c), c


def right_surprisal(v, M, pooling):
    modules = v.view(v.shape[0], M, -1)
    return -torch.log_softmax(modules.amax(-1) if pooling == "max" else modules.mean(-1), -1)


def right_sliced(h, x, W, periods, t):
    k, new = h.shape[1] // len(periods), h.clone()
    for m, T in enumerate(periods):
        if t % T == 0:
            rows = slice(m * k, (m + 1) * k)
            new[:, rows] = torch.tanh(x[:, rows] + h @ W[rows].T)
    return new


def _ticking(h, periods, t):
    k = h.shape[1] // len(periods)
    return torch.tensor([t % T == 0 for T in periods]).repeat_interleave(k)


# --- 1. the book's reference implementations are no answer --------------------------------------


def _ns_in_a_thread(h, h0, lam):
    out = []
    worker = threading.Thread(target=lambda: out.append(zoneout._ns(h, h0, lam)))
    worker.start()
    worker.join()
    return out[0]


def _s_ic_imported_by_name(*args):
    from rnnbook.checks.sba import _s_ic

    return _s_ic(*args)


REFERENCES = {
    "sba._s_ic, wrapped": (sba.s_ic_cell, lambda *a: sba._s_ic(*a), "sba._s_ic"),
    "sba._s_ic, imported by name": (sba.s_ic_cell, _s_ic_imported_by_name, "sba._s_ic"),
    "sba._s_ic in a partial": (sba.s_ic_cell, functools.partial(sba._s_ic), "sba._s_ic"),
    "zoneout._msure, wrapped": (zoneout.msure_ste, lambda *a: zoneout._msure(*a), "_msure"),
    "zoneout._ns, wrapped": (zoneout.norm_stabiliser, lambda *a: zoneout._ns(*a), "_ns"),
    "zoneout._ns, in a thread": (zoneout.norm_stabiliser, _ns_in_a_thread, "_ns"),
    "clockwork._reference, wrapped": (
        clockwork.sliced_step,
        lambda h, x, W, p, t: clockwork._reference(h, x, W, _ticking(h, p, t)),
        "clockwork._reference",
    ),
    "sba._surprisal, wrapped": (
        sba.module_surprisal, lambda v, M, p: sba._surprisal(v, M, p), "sba._surprisal"
    ),
    "the package's module_surprisal, wrapped": (
        sba.module_surprisal,
        lambda v, M, p: checks.sba._sba.module_surprisal(v, M, p),
        "rnnbook.models.sba.module_surprisal",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", REFERENCES)
def test_the_book_s_reference_implementation_is_no_answer(name):
    checker, answer, label = REFERENCES[name]
    with pytest.raises(CheckFailed) as failure:
        checker(answer)
    message = str(failure.value)
    assert label in message and "book's own" in message, message
    assert "this calls the book's reference implementation; write it yourself" in message


def test_an_answer_that_is_a_reference_itself_is_named():
    with pytest.raises(CheckFailed, match="book's own function"):
        zoneout.norm_stabiliser(zoneout._ns)
    with pytest.raises(CheckFailed, match="book's own function"):
        sba.s_ic_cell(sba._s_ic)


# --- 2. torch's comparisons replaced, and tensor subclasses --------------------------------------

WRONG = {  # a wrong answer for three checkers, each rejected on its own
    "norm_stabiliser": (zoneout.norm_stabiliser, lambda h, h0, lam: 2 * right_ns(h, h0, lam)),
    "s_ic_cell": (sba.s_ic_cell, lambda i, f, g, o, c, b: (o * torch.tanh(c), c)),
    "sliced_step": (clockwork.sliced_step, lambda h, x, W, p, t: h.clone()),
}


def _always_true(*args, **kwargs):
    return True


@pytest.fixture
def torch_restored():
    """Whatever a test replaces in torch is torch's own again afterwards."""
    saved = (torch.allclose, torch.equal, torch.isclose)
    yield
    torch.allclose, torch.equal, torch.isclose = saved


@pytest.mark.parametrize("name", WRONG)
@pytest.mark.parametrize("replaced", ["allclose", "equal", "isclose"])
def test_torch_s_comparisons_replaced_before_the_check(name, replaced, torch_restored):
    checker, wrong = WRONG[name]
    setattr(torch, replaced, _always_true)  # a cell that "fixes" torch for the checker
    with pytest.raises(CheckFailed, match=f"torch.{replaced} is not the one the checkers were"):
        checker(wrong)
    assert getattr(torch, replaced) is getattr(grading, replaced)  # put back
    with pytest.raises(CheckFailed):  # and the wrong answer is still wrong
        checker(wrong)


@pytest.mark.parametrize("name", WRONG)
def test_torch_s_comparisons_replaced_by_the_answer(name, torch_restored):
    checker, wrong = WRONG[name]

    def cheat(*args):
        torch.allclose = torch.equal = _always_true
        return wrong(*args)

    with pytest.raises(CheckFailed, match="replaced torch.allclose while it ran"):
        checker(cheat)
    assert torch.allclose is grading.allclose and torch.equal is grading.equal


def test_a_reference_of_the_book_replaced_by_the_answer(torch_restored):
    def cheat(h, h0, lam):
        zoneout._ns = lambda h, h0, lam: 2 * right_ns(h, h0, lam)  # the checker's reference
        return 2 * right_ns(h, h0, lam)

    before = zoneout._ns
    with pytest.raises(CheckFailed, match="replaced rnnbook.checks.zoneout._ns while it ran"):
        zoneout.norm_stabiliser(cheat)
    assert zoneout._ns is before


class _AlwaysEqual(torch.Tensor):
    """A tensor subclass that says it equals whatever it is compared with."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.equal):
            return True
        if func in (torch.isclose, torch.eq, torch.Tensor.__eq__):
            return torch.ones(args[0].shape, dtype=torch.bool)
        return super().__torch_function__(func, types, args, kwargs or {})


SUBCLASSED = {
    "norm_stabiliser": (
        zoneout.norm_stabiliser,
        lambda h, h0, lam: (h.norm(dim=-1) ** 2).mean().as_subclass(_AlwaysEqual),
    ),
    "s_ic_cell": (
        sba.s_ic_cell,
        lambda i, f, g, o, c, b: (c.as_subclass(_AlwaysEqual), c.as_subclass(_AlwaysEqual)),
    ),
    "sliced_step": (clockwork.sliced_step, lambda h, x, W, p, t: h.as_subclass(_AlwaysEqual)),
    "msure_ste": (zoneout.msure_ste, lambda m, u, lam: m.sum().as_subclass(_AlwaysEqual)),
    "module_surprisal": (sba.module_surprisal, lambda v, M, p: v[:, :M].as_subclass(_AlwaysEqual)),
}


@pytest.mark.parametrize("name", SUBCLASSED)
def test_a_tensor_subclass_that_overrides_comparisons_is_refused(name):
    checker, answer = SUBCLASSED[name]
    with pytest.raises(CheckFailed, match="(?s)subclass of torch.Tensor.*plain tensors only"):
        checker(answer)


class _AllEqualMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return func(*args, **(kwargs or {}))


def test_a_torch_mode_left_on_is_refused():
    checker, wrong = WRONG["norm_stabiliser"]
    mode = _AllEqualMode()
    mode.__enter__()  # entered in a cell and never left
    try:
        with pytest.raises(CheckFailed, match="a torch mode .* is on when the checker starts"):
            checker(wrong)
    finally:
        mode.__exit__(None, None, None)

    def enters_a_mode(h, h0, lam):
        _AllEqualMode().__enter__()
        return wrong(h, h0, lam)

    with pytest.raises(CheckFailed, match=r"left a torch mode on \(a TorchFunctionMode\)"):
        checker(enters_a_mode)
    assert torch._C._len_torch_function_stack() == 0  # the checker left it again


def test_right_answers_still_pass(capsys):
    zoneout.norm_stabiliser(right_ns)
    zoneout.msure_ste(right_msure)
    sba.s_ic_cell(right_s_ic)
    sba.module_surprisal(right_surprisal)
    clockwork.sliced_step(right_sliced)
    assert capsys.readouterr().out.count("✓") == 5


# --- 3. NotImplementedError: only an untouched stub is "not attempted" ---------------------------


def _raises_after(right, first_ok):
    """``right`` where ``first_ok(*args)`` holds (the checker's first input does), and
    NotImplementedError elsewhere: an answer that handles only some inputs."""

    def answer(*args):
        if not first_ok(*args):
            raise NotImplementedError("only the first case")
        return right(*args)

    return answer


PARTLY = {
    "norm_stabiliser": (zoneout.norm_stabiliser, _raises_after(right_ns, lambda h, *_: len(h) == 3)),
    "msure_ste": (zoneout.msure_ste, _raises_after(right_msure, lambda m, *_: m.shape[0] == 4)),
    "s_ic_cell": (sba.s_ic_cell, _raises_after(right_s_ic, lambda i, *_: len(i) == 3)),
    "module_surprisal": (
        sba.module_surprisal, _raises_after(right_surprisal, lambda v, M, p: p == "max")
    ),
    "sliced_step": (  # the one-way case first, the dense one raises
        clockwork.sliced_step, _raises_after(right_sliced, lambda h, x, W, p, t: p[2] == 4)
    ),
    "sliced_step, once W requires grad": (  # the values pass, the gradient's call raises
        clockwork.sliced_step,
        _raises_after(right_sliced, lambda h, x, W, p, t: not W.requires_grad or t == 0),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", PARTLY)
def test_not_implemented_for_some_inputs_is_a_wrong_answer(name, capsys):
    checker, answer = PARTLY[name]
    with pytest.raises(CheckFailed, match="(?s)after it had answered.*handles only some inputs"):
        checker(answer)
    assert "not attempted" not in capsys.readouterr().out


@pytest.mark.parametrize("name", PARTLY)
def test_an_untouched_stub_is_still_not_attempted(name, capsys):
    checker, _ = PARTLY[name]

    def stub(*args):
        raise NotImplementedError

    assert isinstance(checker(stub), NotAttemptedYet)
    assert "not attempted yet" in capsys.readouterr().out


def test_torch_s_gradient_replaced_by_the_answer():
    grad = torch.autograd.grad

    def cheat(h, h0, lam):
        torch.autograd.grad = lambda *args, **kwargs: (torch.zeros_like(h),)
        return right_ns(h, h0, lam)

    try:
        with pytest.raises(CheckFailed, match="replaced torch.autograd.grad while it ran"):
            zoneout.norm_stabiliser(cheat)
        assert torch.autograd.grad is grad
    finally:
        torch.autograd.grad = grad


def test_a_cache_on_torch_tensor_is_no_replacement(capsys):
    """Python's copyreg caches ``__slotnames__`` on torch.Tensor the first time a tensor is
    pickled (the gradebook pickles answers): data added to the class is not a replaced
    function."""
    torch.Tensor._a_cache_for_this_test = ["x"]
    try:
        zoneout.norm_stabiliser(right_ns)
    finally:
        del torch.Tensor._a_cache_for_this_test
    assert "✓" in capsys.readouterr().out


def test_switching_the_checker_s_counter_off_is_refused():
    def pops_the_counter(h, x, W, p, t):  # the flop counter of Chapter 5 is a dispatch mode
        if torch._C._len_torch_dispatch_stack():
            torch._C._pop_torch_dispatch_stack(None)
        return right_sliced(h, x, W, p, t)

    with pytest.raises(CheckFailed, match="switched off a torch mode the checker had on"):
        clockwork.sliced_step(pops_the_counter)
    assert torch._C._len_torch_dispatch_stack() == 0
