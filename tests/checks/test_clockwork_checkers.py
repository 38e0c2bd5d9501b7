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
        (_float32_buffer, "(?s)float32, but the inputs are float64.*dtype=x.dtype"),  # the rule
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


# --- the holes of the third review: work the counter could not see, found by the rows of W
# that were read (a tensor that notes which rows of W enter arithmetic, in any thread) ------


def _masked_by(whole):
    """Every module computed by ``whole(h, W)`` (= h @ W.T), then the idle units kept."""

    def step(h, x, W, p, t):
        return torch.where(_ticking(h, p, t), torch.tanh(x + whole(h, W)), h)

    return step


def _outer_columns(h, W):  # a column loop of rank-1 updates with torch.outer, batch by batch
    rows = []
    for b in range(h.shape[0]):
        acc = torch.zeros(W.shape[0], dtype=h.dtype)
        for j in range(W.shape[1]):
            acc = acc + torch.outer(W[:, j], h[b, j : j + 1])[:, 0]
        rows.append(acc)
    return torch.stack(rows)


def _addr_columns(h, W):  # the same with torch.addr, the batch as a rank-1 update too
    acc = torch.zeros_like(h)
    for j in range(W.shape[1]):
        acc = torch.addr(acc, h[:, j], W[:, j])
    return acc


def _python_outer_products(h, W):  # outer products by broadcasting, summed in a Python loop
    acc = torch.zeros_like(h)
    for j in range(W.shape[1]):
        acc = acc + h[:, j, None] * W[None, :, j]
    return acc


def _cumsum(h, W):
    return torch.cumsum(h[:, None, :] * W[None], dim=-1)[..., -1]


def _conv1d(h, W):
    return torch.nn.functional.conv1d(h[:, :, None], W[:, :, None])[:, :, 0]


def _sparse_mm(h, W):
    return torch.sparse.mm(W.to_sparse(), h.T).T


def _bilinear(h, W):
    one = torch.ones(h.shape[0], 1, dtype=h.dtype)
    return torch.nn.functional.bilinear(h, one, W[:, :, None])


def _embedding_bag(h, W):
    B, H = h.shape
    columns = torch.arange(H).repeat(B)
    return torch.nn.functional.embedding_bag(
        columns, W.T, torch.arange(B) * H, mode="sum", per_sample_weights=h.reshape(-1)
    )


def _in_a_thread(h, W):
    import threading

    out = []
    worker = threading.Thread(target=lambda: out.append(h @ W.T))
    worker.start()
    worker.join()
    return out[0]


def _modes_disabled(h, W):  # torch's switch that turns every dispatch mode off
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        return h @ W.T


def _idle_rows_zeroed_in_a_thread(h, x, W, p, t):  # W's idle rows cleaned first, unseen
    import threading

    ticking, out = _ticking(h, p, t), []

    def work():
        kept = torch.where(ticking[:, None], W, torch.zeros_like(W))
        out.append(torch.where(ticking, torch.tanh(x + h @ kept.T), h))

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    return out[0]


ROUTES = {
    "torch.outer column loop": _outer_columns,
    "torch.addr column loop": _addr_columns,
    "Python loop of outer products": _python_outer_products,
    "torch.cumsum": _cumsum,
    "conv1d": _conv1d,
    "torch.sparse.mm": _sparse_mm,
    "F.bilinear": _bilinear,
    "F.embedding_bag": _embedding_bag,
    "another thread": _in_a_thread,
    "_disable_current_modes": _modes_disabled,
}


@pytest.mark.parametrize("route", ROUTES)
def test_sliced_step_refuses_every_route_to_the_idle_modules(route):
    whole = ROUTES[route]
    h, W = torch.randn(3, 12, dtype=torch.float64), torch.randn(12, 12, dtype=torch.float64)
    assert torch.allclose(whole(h, W), h @ W.T)  # the route computes every module
    with pytest.raises(CheckFailed, match="(?s)idle modules were computed.*masking, not skip"):
        checks.clockwork.sliced_step(_masked_by(whole))


def test_sliced_step_refuses_idle_rows_cleaned_in_another_thread():
    with pytest.raises(CheckFailed, match="read the rows of W that belong to idle modules"):
        checks.clockwork.sliced_step(_idle_rows_zeroed_in_a_thread)


def _rows_by_index_select(h, x, W, p, t):
    rows = _ticking(h, p, t).nonzero().flatten()
    new = h.clone()
    new[:, rows] = torch.tanh(x[:, rows] + torch.nn.functional.linear(h, W.index_select(0, rows)))
    return new


def _module_blocks(h, x, W, p, t):  # W viewed as (M, k, H): one block of rows per module
    M, H = len(p), h.shape[1]
    blocks, new = W.view(M, H // M, H), h.clone()
    for m, T in enumerate(p):
        if t % T == 0:
            rows = slice(m * (H // M), (m + 1) * (H // M))
            new[:, rows] = torch.tanh(x[:, rows] + torch.einsum("bj,ij->bi", h, blocks[m]))
    return new


def _split_rows(h, x, W, p, t):
    k, parts = h.shape[1] // len(p), []
    for m, (T, W_m) in enumerate(zip(p, W.split(h.shape[1] // len(p)))):
        rows = slice(m * k, (m + 1) * k)
        parts.append(torch.tanh(x[:, rows] + (W_m @ h.T).T) if t % T == 0 else h[:, rows])
    return torch.cat(parts, dim=1)


@pytest.mark.parametrize("right", [_rows_by_index_select, _module_blocks, _split_rows])
def test_sliced_step_accepts_rows_taken_in_other_ways(right, capsys):
    checks.clockwork.sliced_step(right)
    assert "✓" in capsys.readouterr().out


def test_sliced_step_names_float32_on_the_way():
    def float32_product(h, x, W, p, t):
        k, new = h.shape[1] // len(p), h.clone()
        for m, T in enumerate(p):
            if t % T == 0:
                rows = slice(m * k, (m + 1) * k)
                new[:, rows] = torch.tanh(x[:, rows] + h.float() @ W[rows].T.float())
        return new

    # at t = 0 every module ticks: a float32 product was once told "every module was updated"
    with pytest.raises(CheckFailed, match="(?s)only to float32 precision.*dtype=x.dtype"):
        checks.clockwork.sliced_step(float32_product)


def test_the_book_s_references_are_no_answer():
    with pytest.raises(CheckFailed, match="(?s)clockwork._reference.*book's reference implem"):
        checks.clockwork.sliced_step(
            lambda h, x, W, p, t: checks.clockwork._reference(h, x, W, _ticking(h, p, t))
        )
    from rnnbook.skip import window_update_rate

    with pytest.raises(CheckFailed, match="(?s)window_update_rate.*book's reference implem"):
        checks.clockwork.window_rate(lambda p, L, t0: window_update_rate(p, L, t0))
