"""The Clockwork chapter's checkers accept right answers and name each classic mistake."""

import pytest
import torch

from rnnbook import checks
from rnnbook.checks import CheckFailed


def _rate(periods, L, t0):
    return sum((t0 + t) % T == 0 for t in range(L) for T in periods) / (len(periods) * L)


def test_window_rate_accepts_the_right_answer(capsys):
    checks.clockwork.window_rate(_rate)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda p, L, t0: 1 - _rate(p, L, t0), "skip rate"),
        (lambda p, L, t0: sum(1 / T for T in p) / len(p), "endless sequence"),
        (lambda p, L, t0: _rate(p, L, t0 + 1), "one step late"),  # t counted from 1
        (lambda p, L, t0: _rate(p, L, 0), "offset t0 is ignored"),
        (lambda p, L, t0: _rate(p, L, t0) * len(p), "M \\* L"),  # divided by L only
        (lambda p, L, t0: "0.5", "a number"),
    ],
)
def test_window_rate_names_the_mistake(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        checks.clockwork.window_rate(wrong)


def _count(d_x, H, d_y, M, connectivity, recurrent=None, bias=True, readout=True):
    k = H // M
    if recurrent is None:
        recurrent = H * H if connectivity == "bi" else k * k * M * (M + 1) // 2
    return d_x * H + recurrent + (H if bias else 0) + ((H * d_y + d_y) if readout else 0)


def test_cwrnn_parameters_accepts_the_right_answer(capsys):
    checks.clockwork.cwrnn_parameters(_count)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda d_x, H, d_y, M, c: _count(d_x, H, d_y, M, c, recurrent=H * H), "masked weights"),
        (
            lambda d_x, H, d_y, M, c: _count(
                d_x, H, d_y, M, c, recurrent=None if c == "bi" else (H // M) ** 2 * M * (M - 1) // 2
            ),
            "connections to itself",
        ),
        (lambda d_x, H, d_y, M, c: _count(d_x, H, d_y, M, c, bias=False), "bias"),
        (lambda d_x, H, d_y, M, c: _count(d_x, H, d_y, M, c, readout=False), "read-out"),
    ],
)
def test_cwrnn_parameters_names_the_mistake(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        checks.clockwork.cwrnn_parameters(wrong)


def _sliced(h, x_proj, W, periods, t):
    k = h.shape[1] // len(periods)
    new = h.clone()
    for m, T in enumerate(periods):
        if t % T == 0:
            rows = slice(m * k, (m + 1) * k)
            new[:, rows] = torch.tanh(x_proj[:, rows] + h @ W[rows].T)
    return new


def _ticking(h, periods, t):
    k = h.shape[1] // len(periods)
    return torch.tensor([t % T == 0 for T in periods]).repeat_interleave(k)


def test_sliced_step_accepts_the_right_answer(capsys):
    checks.clockwork.sliced_step(_sliced)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda h, x, W, p, t: torch.tanh(x + h @ W.T), "every module was updated"),
        (
            lambda h, x, W, p, t: torch.where(_ticking(h, p, t), torch.tanh(x + h @ W.T), 0.0),
            "set to zero",
        ),
        (lambda h, x, W, p, t: _sliced(h, x, W, p, t + 1), "t \\+ 1"),
        (
            lambda h, x, W, p, t: torch.where(_ticking(h, p, t), torch.tanh(x + h @ W), h),
            "transposed",
        ),
        (  # right numbers on clean weights, but computed whole and then masked
            lambda h, x, W, p, t: (
                (m := _ticking(h, p, t).double()) * torch.tanh(x + h @ W.T) + (1 - m) * h
            ),
            "idle modules were computed",
        ),
        (lambda h, x, W, p, t: h[:, :2], "shape"),
    ],
)
def test_sliced_step_names_the_mistake(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        checks.clockwork.sliced_step(wrong)


def test_the_checker_leaves_the_global_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    checks.clockwork.sliced_step(_sliced)
    assert torch.equal(torch.rand(3), expected)


# --- the holes a student found (each was accepted or misdiagnosed before) ---------------------


def _where_masked(h, x, W, p, t):
    return torch.where(_ticking(h, p, t), torch.tanh(x + h @ W.T), h)


def _index_masked(h, x, W, p, t):
    new = torch.tanh(x + h @ W.T)
    idle = ~_ticking(h, p, t)
    new[:, idle] = h[:, idle]
    return new


def _in_place(h, x, W, p, t):
    k = h.shape[1] // len(p)
    for m, T in enumerate(p):
        if t % T == 0:
            rows = slice(m * k, (m + 1) * k)
            h[:, rows] = torch.tanh(x[:, rows] + h @ W[rows].T)
    return h


def _partly_updated(h, x, W, p, t):
    k, new = h.shape[1] // len(p), h.clone()
    for m, T in enumerate(p):
        if t % T == 0:
            rows = slice(m * k, (m + 1) * k)
            new[:, rows] = torch.tanh(x[:, rows] + new @ W[rows].T)
    return new


def _powers_of_two(h, x, W, p, t):
    k, new = h.shape[1] // len(p), h.clone()
    for m in range(len(p)):
        if t % 2**m == 0:
            rows = slice(m * k, (m + 1) * k)
            new[:, rows] = torch.tanh(x[:, rows] + h @ W[rows].T)
    return new


def _prefix(h, x, W, p, t):
    k, new = h.shape[1] // len(p), h.clone()
    n = sum(t % T == 0 for T in p) * k
    new[:, :n] = torch.tanh(x[:, :n] + h @ W[:n].T)
    return new


def _float32_buffer(h, x, W, p, t):
    return _sliced(h, x, W, p, t).float()


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_where_masked, "idle modules were computed"),
        (_index_masked, "idle modules were computed"),
        (
            lambda h, x, W, p, t: (
                torch.nan_to_num((m := _ticking(h, p, t).double()) * torch.tanh(x + h @ W.T))
                + (1 - m) * h
            ),
            "idle modules were computed",
        ),  # fmt: skip
        (_in_place, "changed in place"),
        (_partly_updated, "partly updated"),
        (_powers_of_two, "not right"),
        (_prefix, "not the ones that tick"),
        (lambda h, x, W, p, t: _sliced(h, x, W, p, t - 1), "step t - 1"),  # "t - 1 or t + 1" at 0
        (_float32_buffer, "keep h's dtype"),
    ],
)
def test_sliced_step_catches_what_a_student_slipped_through(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        checks.clockwork.sliced_step(wrong)


def test_window_rate_catches_what_a_student_slipped_through():
    table = {((1, 2, 4, 8), 5, 0): 0.55}
    with pytest.raises(CheckFailed):  # a table of answers
        checks.clockwork.window_rate(lambda p, L, t0: table.get((p, L, t0), 0.5))
    unique = lambda p, L, t0: _rate(tuple(set(p)), L, t0)  # noqa: E731
    with pytest.raises(CheckFailed, match="counted once"):
        checks.clockwork.window_rate(unique)
    with pytest.raises(CheckFailed, match="one step early"):
        checks.clockwork.window_rate(lambda p, L, t0: _rate(p, L, max(t0 - 1, 0)))


def test_window_rate_accepts_float32_precision():
    import numpy as np

    checks.clockwork.window_rate(lambda p, L, t0: np.float32(_rate(p, L, t0)))


def test_cwrnn_parameters_catches_a_unit_triangle_and_a_table():
    per_unit = lambda d_x, H, d_y, M, c: _count(  # noqa: E731
        d_x, H, d_y, M, c, recurrent=H * H if c == "bi" else H * (H + 1) // 2
    )
    with pytest.raises(CheckFailed, match="unit by unit"):
        checks.clockwork.cwrnn_parameters(per_unit)
    table = {(1, 64, 1, 8, "uni"): 2497}
    with pytest.raises(CheckFailed):
        checks.clockwork.cwrnn_parameters(lambda *args: table.get(args, 0))


# --- the holes of the second review: work the old counter did not see, gradients cut -------


def _broadcast_masked(h, x, W, p, t):  # every module by a broadcast product, then masked
    full = torch.tanh(x + (h[:, None, :] * W[None]).sum(-1))
    return torch.where(_ticking(h, p, t), full, h)


def _addmm_in_place_masked(h, x, W, p, t):  # every module by an in-place product
    full = x.clone().addmm_(h, W.T).tanh()
    return torch.where(_ticking(h, p, t), full, h)


def _einsum_masked(h, x, W, p, t):
    return torch.where(_ticking(h, p, t), torch.tanh(x + torch.einsum("bj,ij->bi", h, W)), h)


def _idle_detached(h, x, W, p, t):  # the idle units copied out of the graph
    k, new = h.shape[1] // len(p), h.detach().clone()
    for m, T in enumerate(p):
        if t % T == 0:
            rows = slice(m * k, (m + 1) * k)
            new[:, rows] = torch.tanh(x[:, rows] + h @ W[rows].T)
    return new


def _result_detached(h, x, W, p, t):
    return _sliced(h, x, W, p, t).detach()


def _one_way_columns(h, x, W, p, t):  # reads only its own and slower modules' columns
    k, new = h.shape[1] // len(p), h.clone()
    for m, T in enumerate(p):
        if t % T == 0:
            rows, sources = slice(m * k, (m + 1) * k), slice(m * k, None)
            new[:, rows] = torch.tanh(x[:, rows] + h[:, sources] @ W[rows, sources].T)
    return new


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_broadcast_masked, "idle modules were computed"),
        (_addmm_in_place_masked, "idle modules were computed"),
        (_einsum_masked, "idle modules were computed"),
        (_idle_detached, "through the idle units"),
        (_result_detached, "cut from the graph"),
        (_one_way_columns, "W is dense"),
    ],
)
def test_sliced_step_catches_hidden_work_and_cut_gradients(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        checks.clockwork.sliced_step(wrong)


def _gathered(h, x, W, p, t):  # all ticking rows at once, by a boolean index
    ticking = _ticking(h, p, t)
    new = h.clone()
    new[:, ticking] = torch.tanh(x[:, ticking] + h @ W[ticking].T)
    return new


def _broadcast_ticking_only(h, x, W, p, t):  # a broadcast product over the ticking rows only
    ticking, new = _ticking(h, p, t), h.clone()
    new[:, ticking] = torch.tanh(x[:, ticking] + (h[:, None, :] * W[ticking][None]).sum(-1))
    return new


def _cat_of_modules(h, x, W, p, t):  # module by module, joined with torch.cat
    k = h.shape[1] // len(p)
    parts = []
    for m, T in enumerate(p):
        rows = slice(m * k, (m + 1) * k)
        if t % T == 0:
            parts.append(torch.tanh(torch.addmm(x[:, rows], h, W[rows].T)))
        else:
            parts.append(h[:, rows])
    return torch.cat(parts, 1)


@pytest.mark.parametrize("right", [_gathered, _broadcast_ticking_only, _cat_of_modules])
def test_sliced_step_accepts_other_right_formulations(right, capsys):
    checks.clockwork.sliced_step(right)
    assert "✓" in capsys.readouterr().out
