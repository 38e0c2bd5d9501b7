"""rnnbook.runs.zoneout_grid: Chapter 7's gate-level zoneout over the source's grid of p."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
import torch

from rnnbook import longrun
from rnnbook.models.zoneout import GateZoneoutLSTMCell
from rnnbook.runs import penalty_sweep, wordlm
from rnnbook.runs import zoneout_grid as zg


@pytest.fixture
def tiny_slice(monkeypatch):
    """Random words of the slice's size and vocabulary in place of PTB (no dataset needed)."""
    generator = torch.Generator().manual_seed(0)
    train = torch.randint(wordlm.VOCAB, (wordlm.N_TRAIN,), generator=generator)
    valid = torch.randint(wordlm.VOCAB, (1_120,), generator=generator)  # 32 streams of 35
    monkeypatch.setattr(wordlm, "slice_data", lambda: SimpleNamespace(train=train, valid=valid))
    penalty_sweep.slice_windows.cache_clear()
    penalty_sweep.valid_streams.cache_clear()
    yield train, valid
    penalty_sweep.slice_windows.cache_clear()
    penalty_sweep.valid_streams.cache_clear()


def short(run: longrun.LongRun, steps: int = 4, eval_every: int = 2) -> longrun.LongRun:
    return dataclasses.replace(run, steps=steps, eval_every=eval_every)


def test_the_grid_is_four_variants_at_ten_update_probabilities():
    assert zg.P_GRID == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    names = [zg.run_name(**kw) for kw in zg.grid()]
    assert len(names) == len(set(names)) == 40
    assert zg.run_name("ch", 0.3) == "ptb-slice-zch-p0.3"
    assert zg.run_name("c", 1.0) == "ptb-slice-zc-p1"
    assert zg.run_name("i", 0.7, seed=1) == "ptb-slice-zi-p0.7-seed1"


@pytest.mark.parametrize("kwargs", zg.grid())
def test_every_run_has_chapter_7s_recipe_and_its_cell(kwargs):
    run = zg.zgrid_run(**kwargs)
    lm = run.build_model()
    cell = lm.cell
    assert isinstance(cell, GateZoneoutLSTMCell)
    assert (cell.variant, cell.p, cell.decay, cell.eval_mode) == (
        kwargs["variant"], kwargs["p"], "none", "stochastic")  # fmt: skip
    assert sum(p.numel() for p in lm.parameters()) == 390_096
    assert run.steps == 25 * 90 and run.eval_every == 90
    config = json.loads(json.dumps(run.checkpoint_config(run.steps)))
    assert config["p"] == kwargs["p"] and config["cell"] == f"z{kwargs['variant']}"


def test_z_c_at_p_02_is_chapter_7s_run_under_another_name():
    ours = zg.zgrid_run(variant="c", p=0.2)
    theirs = wordlm.BOOK_RUNS["ptb-slice-zc"]()
    assert {k: v for k, v in ours.config.items() if k != "p"} == theirs.config
    assert ours.steps == theirs.steps and ours.rel_tol == theirs.rel_tol
    a, b = ours.build_model().state_dict(), theirs.build_model().state_dict()
    assert all(torch.equal(a[k], b[k]) for k in b)


@pytest.mark.parametrize(
    "variant, p, match",
    [("h", 0.5, "variant must be one of"), ("c", 0.0, "p must be"), ("c", 1.5, "p must be"),
     ("c", True, "p must be")],
)  # fmt: skip
def test_bad_settings_are_refused(variant, p, match):
    with pytest.raises(ValueError, match=match):
        zg.zgrid_run(variant=variant, p=p)


@pytest.mark.parametrize("bad", [["--p", "0"], ["--p", "0.5", "--variant", "h"], []])
def test_bad_arguments_are_refused(bad, tmp_path):
    with pytest.raises(SystemExit):
        zg.parse_args(["--out-dir", str(tmp_path), *bad])


@pytest.mark.parametrize("variant", zg.VARIANTS)
def test_at_p_1_every_variant_trains_the_lstm_exactly(variant, tiny_slice, tmp_path):
    """Every coin says "update": a product by 1 and a sum with 0 at every gate, so the weights
    after three updates are those of the LSTM's run, bit for bit, and so is every evaluation."""
    run = short(zg.zgrid_run(variant=variant, p=1.0), steps=3)
    ours = longrun.train(run, tmp_path / "z", report=None)
    lstm = dataclasses.replace(wordlm.wordlm_run(model="lstm"), steps=3, eval_every=2)
    theirs = longrun.train(lstm, tmp_path / "lstm", report=None)
    for key, value in theirs.model.state_dict().items():
        assert torch.equal(ours.model.state_dict()[key], value), key
    for a, b in zip(ours.rows, theirs.rows):
        for mode in ("plain", "expectation", "stochastic"):
            assert a[f"valid_ppl_{mode}"] == b["valid_ppl"]
        assert a["valid_u"] == 1.0


@pytest.mark.parametrize("variant", zg.VARIANTS)
def test_a_tiny_run_logs_zo_m_zo_r_and_the_rate(variant, tiny_slice, tmp_path):
    result = longrun.train(short(zg.zgrid_run(variant=variant, p=0.3)), tmp_path, report=None)
    assert [row["step"] for row in result.rows] == [0, 2, 4]
    for row in result.rows:
        assert row["valid_ppl"] == row["valid_ppl_stochastic"]  # ZO+M
        assert row["valid_ppl_plain"] > 0 and row["valid_ppl_expectation"] > 0  # ZO+R, Krueger
        assert abs(row["valid_u"] - 0.3) < 0.01  # 1,120 x 128 coins: sd 0.0013
    assert result.rows[1]["valid_ppl_plain"] != result.rows[1]["valid_ppl_stochastic"]


def test_best_pass_is_the_first_lowest_trained_row():
    rows = [{"valid_ppl": 1.0}, {"valid_ppl": 9.0}, {"valid_ppl": 7.0}, {"valid_ppl": 7.0},
            {"valid_ppl": 8.0}]  # fmt: skip
    assert zg.best_pass(rows) == (7.0, 2)  # row 0 (untrained) left out, first of the tie
    with pytest.raises(ValueError, match="no trained row"):
        zg.best_pass(rows[:1])
