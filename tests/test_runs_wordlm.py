"""rnnbook.runs.wordlm: Chapters 6 and 7's word-level PTB-slice language models as long runs."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
import torch

from rnnbook import longrun
from rnnbook.models.zoneout import GateZoneoutLSTMCell, ZoneoutLSTMCell
from rnnbook.runs import wordlm
from rnnbook.train import token_cross_entropy


@pytest.fixture
def tiny_slice(monkeypatch):
    """Random words of the slice's size and vocabulary in place of PTB (no dataset needed)."""
    generator = torch.Generator().manual_seed(0)
    train = torch.randint(wordlm.VOCAB, (wordlm.N_TRAIN,), generator=generator)
    valid = torch.randint(wordlm.VOCAB, (2_000,), generator=generator)
    monkeypatch.setattr(wordlm, "slice_data", lambda: SimpleNamespace(train=train, valid=valid))
    return train, valid


def short(run: longrun.LongRun, steps: int = 4, eval_every: int = 2) -> longrun.LongRun:
    return dataclasses.replace(run, steps=steps, eval_every=eval_every)


@pytest.mark.parametrize("model", sorted(wordlm.MODELS))
def test_every_book_run_has_the_chapters_size_and_a_json_config(model):
    run = wordlm.BOOK_RUNS[f"ptb-slice-{model}"]()
    lm = run.build_model()
    assert sum(p.numel() for p in lm.parameters()) == 390_096  # 1.6 MB in float32
    assert run.steps == 25 * 90 and run.eval_every == 90
    assert json.loads(json.dumps(run.checkpoint_config(run.steps)))["cell"] == model
    assert wordlm.BOOK_COMMANDS[run.name].startswith(
        f"python -m rnnbook.runs wordlm --model {model}"
    )


def test_every_model_starts_from_the_same_weights_as_the_lstm():
    """The chapters seed torch, then build the cell: every model's cell starts as the LSTM's."""
    reference = wordlm.BOOK_RUNS["ptb-slice-lstm"]().build_model().state_dict()
    for model in wordlm.MODELS:
        state = wordlm.BOOK_RUNS[f"ptb-slice-{model}"]().build_model().state_dict()
        assert state.keys() == reference.keys()
        for key, value in state.items():
            assert torch.equal(value, reference[key]), (model, key)  # the same draws repeated


def test_an_unknown_model_is_refused():
    with pytest.raises(ValueError, match="model must be one of"):
        wordlm.build_word_lm("gru")
    with pytest.raises(ValueError, match="model must be one of"):
        wordlm.wordlm_run(model="S_ic")


def test_the_batch_of_a_step_is_window_step_mod_90_of_the_32_streams(tiny_slice):
    train, _ = tiny_slice
    run = wordlm.wordlm_run(model="lstm")
    streams = train.view(32, 3_125)
    for step in (0, 1, 89, 90, 91, 2_249):
        index, x, y = run.batch(step)
        assert index == step % 90
        s = index * 35
        torch.testing.assert_close(x, streams[:, s : s + 35][:, : x.shape[1]])
        torch.testing.assert_close(y, streams[:, s + 1 : s + 36])
    assert run.batch(89)[1].shape == (32, 3_124 - 89 * 35)  # the last window is shorter


def test_the_loss_carries_the_sba_state_and_restarts_each_pass():
    torch.manual_seed(0)
    lm = wordlm.build_word_lm("sba-ic")
    lm.train()
    text = torch.randint(wordlm.VOCAB, (2, 21))
    x, y = text[:, :-1], text[:, 1:]
    run = wordlm.wordlm_run(model="sba-ic")
    run.loss_fn(lm, (0, x[:, :10], y[:, :10]))
    second = run.loss_fn(lm, (1, x[:, 10:], y[:, 10:]))
    logits, _ = lm(x)  # both windows in one pass, references included
    torch.testing.assert_close(second, token_cross_entropy(logits[:, 10:], y[:, 10:]))
    restarted = run.loss_fn(lm, (0, x[:, 10:], y[:, 10:]))  # a new pass: the zero state
    fresh, _ = lm(x[:, 10:])
    torch.testing.assert_close(restarted, token_cross_entropy(fresh, y[:, 10:]))


@pytest.mark.parametrize("model", ["zoneout", "zc"])
def test_evaluation_leaves_the_training_coins_alone(model, tiny_slice):
    """Seeding the global generator before every evaluation would give every pass of
    training the same masks; the evaluation draws its coins in a forked generator."""
    lm = wordlm.build_word_lm(model)
    valid = wordlm.slice_data().valid.view(4, -1)
    torch.manual_seed(123)
    expected = torch.rand(5)
    torch.manual_seed(123)
    with torch.no_grad():
        lm.eval()
        row = wordlm.evaluate_word_lm(lm, valid)
    assert torch.equal(torch.rand(5), expected)
    cell = lm.cell
    used = "expectation" if isinstance(cell, ZoneoutLSTMCell) else "stochastic"
    assert cell.eval_mode == used and row["valid_ppl"] == row[f"valid_ppl_{used}"]
    assert isinstance(cell, (ZoneoutLSTMCell, GateZoneoutLSTMCell))
    p_update = 0.725 if model == "zoneout" else 0.2
    assert abs(row["valid_u"] - p_update) < 0.02  # the stochastic pass's rate


def test_sba_evaluation_reports_both_uses_and_an_update_rate_within_the_bound(tiny_slice):
    lm = wordlm.build_word_lm("sba-c2")
    lm.eval()
    with torch.no_grad():
        row = wordlm.evaluate_word_lm(lm, wordlm.slice_data().valid.view(4, -1))
    assert set(row) == {"valid_ppl", "valid_ppl_plain", "valid_u"}
    assert 0 < row["valid_u"] <= 0.5 and lm.cell.eval_mode == "model"


def test_a_short_run_writes_a_checkpoint_that_reproduces_its_evaluation(tiny_slice, tmp_path):
    run = short(wordlm.wordlm_run(model="zc"))
    result = longrun.train(run, tmp_path / "run", report=None)
    assert [row["step"] for row in result.rows] == [0, 2, 4]
    record = longrun.publish(run, result)
    _, _, mismatches = longrun.reproduce(run)
    assert not mismatches and record["summary"]["final_eval"]["valid_ppl"] > 0


@pytest.mark.parametrize(
    "bad", [["--passes", "0"], ["--seed", "-1"], ["--lr", "0"], ["--model", "gru"]]
)
def test_bad_arguments_are_refused(bad, tmp_path):
    with pytest.raises(SystemExit):
        wordlm.parse_args(["--out-dir", str(tmp_path), *bad])


def test_the_real_slice_has_90_windows_a_pass(mirror, monkeypatch):
    monkeypatch.setenv("RNNBOOK_DATA_MIRROR", str(mirror))
    wordlm.slice_data.cache_clear()
    try:
        run = wordlm.wordlm_run(model="lstm")
        data = wordlm.slice_data()
        assert len(data.train) == wordlm.N_TRAIN and len(data.vocab) == wordlm.VOCAB
        assert run.batch(90)[0] == 0 and run.batch(89)[0] == 89  # 90 windows cover a pass
    finally:
        wordlm.slice_data.cache_clear()
