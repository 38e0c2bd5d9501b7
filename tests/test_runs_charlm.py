"""rnnbook.runs.charlm: Chapter 2's character-level PTB language model as a long run."""

from __future__ import annotations

import json

import pytest
import torch

from rnnbook import longrun
from rnnbook.checkpoints import load_checkpoint
from rnnbook.runs import charlm
from rnnbook.train import token_cross_entropy


@pytest.fixture
def tiny_text(monkeypatch):
    """A periodic text of 50 symbols in place of PTB, so no test needs the dataset."""
    train = torch.arange(4_000) % charlm.V
    valid = torch.arange(1_600) % charlm.V
    monkeypatch.setattr(charlm, "char_data", lambda: (train, valid))
    return train, valid


def tiny_run(**overrides):
    settings = dict(steps=6, batch=4, k=10, hidden=8, embedding=4, eval_every=3)
    return charlm.charlm_run(**{**settings, **overrides})


@pytest.mark.parametrize(("cell", "hidden", "count"), [("lstm", 128, 90_994), ("gru", 128, 70_258)])
def test_the_chapters_models_have_their_parameter_counts(cell, hidden, count):
    model = charlm.build_char_lm(cell, 32, hidden)
    assert sum(p.numel() for p in model.parameters()) == count


def test_the_book_run_has_0_31_million_parameters_and_a_json_config():
    run = charlm.BOOK_RUNS["lstm-ptb-char"]()
    model = run.build_model()
    assert sum(p.numel() for p in model.parameters()) == 311_410  # 1.2 MB in float32
    assert json.loads(json.dumps(run.checkpoint_config(run.steps)))["steps"] == run.steps
    assert run.name == "lstm-ptb-char" and run.config["cell"] == "lstm"


def test_the_lstm_starts_with_forget_bias_1():
    lstm = charlm.build_char_lm("lstm", 4, 6).core
    torch.testing.assert_close(lstm.bias_ih_l0[6:12], torch.ones(6))
    assert lstm.bias_hh_l0.abs().sum() == 0


def test_an_unknown_cell_is_refused():
    with pytest.raises(ValueError, match="cell must be one of"):
        charlm.build_char_lm("srn")


def test_the_batch_of_a_step_is_window_step_mod_w_of_the_streams(tiny_text):
    train, _ = tiny_text
    run = tiny_run()
    streams = train.view(4, 1_000)  # batchify into 4 streams of 1,000
    windows = -(-999 // 10)  # 100 windows of 10 characters cover the 999 predictions
    for step in (0, 1, 57, windows - 1, windows, windows + 3):
        index, x, y = run.batch(step)
        s = index * 10
        assert index == step % windows
        torch.testing.assert_close(x, streams[:, s : s + 10][:, : x.shape[1]])
        torch.testing.assert_close(y, streams[:, s + 1 : s + 11])  # the next characters
    assert run.batch(windows - 1)[1].shape == (4, 9)  # the last window is shorter


def test_the_loss_carries_the_state_from_window_to_window_and_restarts_at_0():
    torch.manual_seed(0)
    model = charlm.build_char_lm("lstm", 4, 6)
    text = torch.randint(charlm.V, (2, 21))
    x, y = text[:, :-1], text[:, 1:]
    loss = tiny_run().loss_fn
    loss(model, (0, x[:, :10], y[:, :10]))
    second = loss(model, (1, x[:, 10:], y[:, 10:]))
    logits, _ = model(x)  # both windows in one pass
    torch.testing.assert_close(second, token_cross_entropy(logits[:, 10:], y[:, 10:]))
    assert all(not s.requires_grad for s in loss.state)  # detached: BPTT stops at the window
    restarted = loss(model, (0, x[:, 10:], y[:, 10:]))  # a new epoch: from the zero state
    fresh, _ = model(x[:, 10:])
    torch.testing.assert_close(restarted, token_cross_entropy(fresh, y[:, 10:]))


def test_a_tiny_run_writes_a_checkpoint_that_reproduces_its_validation_bpc(tiny_text, tmp_path):
    run = tiny_run()
    result = longrun.train(run, tmp_path / "run", report=None)
    assert [row["step"] for row in result.rows] == [0, 3, 6]
    assert result.rows[-1]["valid_bpc"] < result.rows[0]["valid_bpc"]  # it learns
    record = longrun.publish(run, result)
    fresh = run.build_model()
    load_checkpoint(fresh, run.name, run.checkpoint_config(6))
    model, _, mismatches = longrun.reproduce(run)
    assert not mismatches and record["summary"]["final_eval"]["valid_bpc"] > 0


def test_the_gru_run_has_its_own_name(tiny_text):
    assert tiny_run(cell="gru").name == "gru-ptb-char"
    assert tiny_run(cell="gru").config["forget_bias"] is None


@pytest.mark.parametrize(
    "bad",
    [["--steps", "0"], ["--hidden", "0"], ["--seed", "-1"], ["--lr", "0"], ["--clip", "-1"]],
)
def test_bad_arguments_are_refused(bad, tmp_path):
    with pytest.raises(SystemExit):
        charlm.parse_args(["--out-dir", str(tmp_path), *bad])


def test_the_real_text_has_the_50_ptb_characters(mirror, monkeypatch):
    monkeypatch.setenv("RNNBOOK_DATA_MIRROR", str(mirror))
    charlm.char_data.cache_clear()
    try:
        train, valid = charlm.char_data()
    finally:
        charlm.char_data.cache_clear()
    assert train.numel() == 5_017_482 and valid.numel() == 393_042
    assert int(train.max()) == charlm.V - 1 and len(charlm.char_vocab()) == charlm.V
