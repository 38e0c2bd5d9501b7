"""Checkers for the exercises of the chapter on surprisal-based activation (SBA).

Each takes the student's answer, tests it on fresh random activations against the
package's own equations (:mod:`rnnbook.models.sba`), prints what passed, and
raises :class:`~rnnbook.checks.grading.CheckFailed` with a hint that names the mistake it
recognised, never the solution.
"""

from __future__ import annotations

import math

import torch

from rnnbook.checks.grading import call, expect_tensor, fail, own_random_state, passed
from rnnbook.models import sba as _sba
from rnnbook.skip import expand_modules

F64 = torch.float64


# --- the references: the package's equations, and S_ic's cell written out ----------------


def _surprisal(v: torch.Tensor, M: int, pooling: str) -> torch.Tensor:
    """(sba-pool), (sba-surprisal): v (B, H) -> s (B, M), modules of neighbouring units."""
    return _sba.module_surprisal(v, M, pooling)


def _select(v_hat, v_prev, s, s_prev, theta):
    """(sba-decision), (sba-select): the new value and the module decisions (B, M)."""
    b = _sba.sba_decision(s, s_prev, theta)
    B_units = expand_modules(b, v_hat.shape[1] // b.shape[1])
    return B_units * v_hat + (1 - B_units) * v_prev, b


def _s_ic(i, f, g, o, c_prev, B_units):
    """S_ic: the input gate forced to 0 in the kept modules; h from the selected cell."""
    c = f * c_prev + (B_units * i) * g
    return c, o * torch.tanh(c)


# --- exercise: the surprisal of a layer's modules -------------------------------------------


@own_random_state
def module_surprisal(fn) -> str:
    """Exercise: ``fn(v (B, H), M, pooling) -> s (B, M)``, (sba-pool) and (sba-surprisal)."""
    g = torch.Generator().manual_seed(61)
    cases = [(3, 12, 4, "max"), (3, 12, 4, "mean"), (2, 10, 5, "max"), (4, 6, 6, "mean"),
             (2, 8, 1, "max"), (5, 12, 3, "mean")]  # fmt: skip
    for B, H, M, pooling in cases:
        v = torch.randn(B, H, generator=g, dtype=F64)
        want = _surprisal(v, M, pooling)
        where = f"module_surprisal(v of shape ({B}, {H}), M={M}, pooling={pooling!r})"
        got = call(fn, v.clone(), M, pooling, name="module_surprisal")
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, H) and M != H:
            fail(
                f"{where} returned one value per unit, shape ({B}, {H}).",
                "pool each module of H/M neighbouring units to one number first (sba-pool).",
            )
        got = expect_tensor(got, (B, M), where)
        if torch.allclose(got.to(F64), want, rtol=1e-6, atol=1e-9):
            continue
        got = got.to(F64)
        if torch.allclose(got, -want, rtol=1e-6, atol=1e-9):
            fail(f"{where}: the values are <= 0.", "surprisal is minus the log of a probability.")
        if torch.allclose(got, want / math.log(2), rtol=1e-6, atol=1e-9):
            fail(f"{where} is in bits.", "the book uses the natural logarithm (torch.log).")
        other = "mean" if pooling == "max" else "max"
        if M != H and torch.allclose(got, _surprisal(v, M, other), rtol=1e-6, atol=1e-9):
            fail(
                f"{where} pooled with the {other}.", f"pooling={pooling!r} asks for the {pooling}."
            )
        interleaved = v.view(B, H // M, M).transpose(1, 2).contiguous().view(B, H)
        if M not in (1, H) and torch.allclose(
            got, _surprisal(interleaved, M, pooling), rtol=1e-6, atol=1e-9
        ):
            fail(
                f"{where}: the modules take every M-th unit.",
                "a module is a block of neighbouring units: 0..K-1, K..2K-1, ... (K = H/M).",
            )
        batch = v.view(B, M, H // M)
        p = batch.amax(-1) if pooling == "max" else batch.mean(-1)
        if B > 1 and torch.allclose(got, -torch.log_softmax(p, dim=0), rtol=1e-6, atol=1e-9):
            fail(f"{where}: the softmax runs over the batch.", "normalise over the M modules.")
        if (
            torch.allclose(got, -torch.log(p.abs() + 1e-300), rtol=1e-6, atol=1e-9)
            or torch.isnan(got).any()
        ):
            fail(
                f"{where} takes the log of the pooled values themselves.",
                "turn the M pooled values into a distribution first (sba-surprisal).",
            )
        fail(f"{where} is not right.", "pool each module, softmax over modules, minus the log.")
    return passed("module_surprisal", [f"{len(cases)} layers, max and mean, M = 1 to H"])


# --- exercise: one SBA selection ------------------------------------------------------------


def _selection_case(g, B, M, K, theta):
    """A candidate, a previous value and surprisals chosen so that every kind of module
    occurs: share clearly down, clearly up, down by less than the threshold, and unchanged."""
    H = M * K
    v_hat = torch.randn(B, H, generator=g, dtype=F64)
    v_prev = torch.randn(B, H, generator=g, dtype=F64)
    s = 2.0 + torch.rand(B, M, generator=g, dtype=F64)
    kinds = torch.arange(B * M).view(B, M) % 4
    s_prev = torch.where(kinds == 0, s - 0.5, s + 0.5)  # 0: up by 0.5 -> update; 1: down
    s_prev = torch.where(kinds == 2, s - theta / 2, s_prev)  # up by less than theta: keep
    s_prev = torch.where(kinds == 3, s.clone(), s_prev)  # unchanged: keep
    return v_hat, v_prev, s, s_prev


@own_random_state
def sba_select(fn) -> str:
    """Exercise: ``fn(v_hat, v_prev, s, s_prev, theta) -> v`` (B, H): (sba-decision) per
    module and (sba-select), without decay."""
    g = torch.Generator().manual_seed(62)
    for B, M, K, theta in ((4, 4, 3, 0.1), (3, 5, 2, 0.1), (8, 2, 4, 0.0)):
        v_hat, v_prev, s, s_prev = _selection_case(g, B, M, K, theta)
        want, b = _select(v_hat, v_prev, s, s_prev, theta)
        given = [t.clone() for t in (v_hat, v_prev, s, s_prev)]
        got = call(fn, *given, theta, name="sba_select")
        where = f"sba_select with {M} modules of {K} units, theta = {theta}"
        got = expect_tensor(got, (B, M * K), where)
        if not all(torch.equal(a, b_) for a, b_ in zip(given, (v_hat, v_prev, s, s_prev))):
            fail(f"{where} changed an argument in place.", "build the new value in a new tensor.")
        if torch.allclose(got, want, rtol=0, atol=1e-12):
            kept = b.repeat_interleave(K, dim=1) == 0
            if not torch.equal(got[kept], v_prev[kept]):
                fail(f"{where}: a kept unit moved.", "a kept module's units are copied exactly.")
            continue
        variants = {
            "updating and keeping are the wrong way round: (sba-decision) updates a module "
            "when its surprisal rises": (s < s_prev + theta),
            "the threshold works against the rule: s > s_prev - theta": s > s_prev - theta,
            "the threshold is left out": s > s_prev,
            "an unchanged surprisal counts as a rise (>= instead of >)": s >= s_prev + theta,
        }
        for mistake, decision in variants.items():
            units = decision.to(F64).repeat_interleave(K, dim=1)
            if torch.allclose(got, units * v_hat + (1 - units) * v_prev, atol=1e-12):
                fail(f"{where}: {mistake}.", "compare each module's s with s_prev + theta.")
        units = b.repeat_interleave(K, dim=1)
        if torch.allclose(got, (1 - units) * v_hat + units * v_prev, atol=1e-12):
            fail(f"{where}: the two branches are swapped.", "b = 1 takes the candidate v_hat.")
        tiled = b.repeat(1, K)
        if torch.allclose(got, tiled * v_hat + (1 - tiled) * v_prev, atol=1e-12):
            fail(
                f"{where}: the decisions were spread over the units in the wrong order.",
                "module m owns units m*K .. (m+1)*K - 1: repeat each decision K times in place.",
            )
        fail(f"{where}: the new value is not right.", "decide per module, then copy or update.")
    return passed(
        "sba_select",
        ["rises above, below and within the threshold, and ties", "module layout, no change "
         "in place"],
    )  # fmt: skip


# --- exercise: the S_ic variant -------------------------------------------------------------


@own_random_state
def s_ic_cell(fn) -> str:
    """Exercise: ``fn(i, f, g, o, c_prev, B) -> (c, h)``: the S_ic LSTM variant's new cell
    and output, given the gates of the plain step and the decisions B spread over the units."""
    gen = torch.Generator().manual_seed(63)
    for batch, H in ((3, 8), (5, 4)):
        i, f, o = (torch.rand(batch, H, generator=gen, dtype=F64) for _ in range(3))
        g = 2 * torch.rand(batch, H, generator=gen, dtype=F64) - 1
        c_prev = torch.randn(batch, H, generator=gen, dtype=F64)
        B_units = (torch.rand(batch, H, generator=gen) < 0.5).to(F64)
        B_units[0] = 1.0  # one row updates everywhere: there S_ic is the plain LSTM
        want_c, want_h = _s_ic(i, f, g, o, c_prev, B_units)
        given = [t.clone() for t in (i, f, g, o, c_prev, B_units)]
        out = call(fn, *given, name="s_ic_cell")
        where = f"s_ic_cell on a batch of {batch}, {H} units"
        if not isinstance(out, tuple) or len(out) != 2:
            fail(f"{where} should return a pair (c, h).", "return the new cell and output.")
        c, h = (expect_tensor(t, (batch, H), f"{where}: {n}") for t, n in zip(out, "ch"))
        if torch.allclose(c, want_c, atol=1e-12) and torch.allclose(h, want_h, atol=1e-12):
            continue
        kept = B_units == 0
        hat_c = f * c_prev + i * g
        if torch.allclose(c, hat_c, atol=1e-12):
            fail(f"{where}: the kept modules changed nothing.", "in S_ic they block the input.")
        if torch.allclose(c, torch.where(kept, c_prev + i * g, hat_c), atol=1e-12):
            fail(
                f"{where}: the kept modules forced the forget gate to 1 (that is S_f*).",
                "S_ic acts on the input gate.",
            )
        if torch.allclose(c, torch.where(kept, c_prev, hat_c), atol=1e-12):
            fail(f"{where}: the kept modules froze the cell (that is S_c).", "S_ic acts on a gate.")
        if torch.allclose(c, torch.where(kept, f * c_prev + g, hat_c), atol=1e-12):
            fail(f"{where}: the input gate was forced to 1.", "a kept module writes nothing.")
        if torch.allclose(c, f * c_prev + ((1 - B_units) * i) * g, atol=1e-12):
            fail(f"{where}: the updating modules are the ones blocked.", "B = 1 means update.")
        if torch.allclose(c, want_c, atol=1e-12):
            if torch.allclose(h, o * torch.tanh(hat_c), atol=1e-12):
                fail(
                    f"{where}: h comes from the plain step's cell.",
                    "compute h from the new cell c_t, after the gate was forced.",
                )
            fail(f"{where}: c is right, h is not.", "h = o * tanh(c), (lstm-L6).")
        fail(f"{where}: c is not right.", "recompute (lstm-L4) with the forced gate.")
    return passed("s_ic_cell", ["mixed decisions per unit and an all-update row (= the LSTM)"])
