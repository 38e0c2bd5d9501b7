"""rnnbook.han_chapter: what both pages of Chapter 8 share.

The sizes name the same settings in every profile; the training loop trains a small reader on
a few SynCloze questions and reports what the pages read from it; the curves are the committed
ones of rnnbook.runs.syncloze_readers. Nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rnnbook.data import syncloze
from rnnbook.han_chapter import (
    SIZES,
    accuracy,
    check_committed_sizes,
    committed_history,
    committed_reader,
    reader_curve,
    train_reader,
)
from rnnbook.models.han import HAN
from rnnbook.profiles import resolve_profile
from rnnbook.runs import syncloze_readers

COMMITTED = Path(__file__).resolve().parents[1] / "checkpoints"


def test_every_profile_sets_the_same_sizes_and_the_full_one_is_the_long_runs():
    sizes = resolve_profile("quick").sizes(**SIZES)
    assert sizes.skip_epochs <= sizes.epochs and sizes.batch == 64
    full = SIZES["full"]  # the committed readers are trained at the full profile's size
    assert (full["n_train"], full["n_valid"], full["S"]) == (
        syncloze_readers.N_TRAIN,
        syncloze_readers.N_VALID,
        syncloze_readers.S,
    )
    assert (full["E"], full["H"], full["lr"], full["batch"], full["epochs"]) == (
        syncloze_readers.E,
        syncloze_readers.H,
        syncloze_readers.LR,
        syncloze_readers.BATCH,
        syncloze_readers.PASSES,
    )


def test_accuracy_is_the_share_of_answers_picked():
    data = SimpleNamespace(answer=torch.tensor([0, 3, 3, 1]))
    assert accuracy(torch.tensor([0, 3, 2, 2]), data) == 0.5


@pytest.mark.parametrize("every_pass", [True, False])
def test_train_reader_evaluates_after_every_pass_or_the_last(every_pass):
    train = syncloze.make_syncloze(64, 1, S=5)
    valid = syncloze.make_syncloze(32, 2, S=5)
    embedding = syncloze.syncloze_embeddings(len(train.vocab), 8, 0, n_types=4)
    sizes = SimpleNamespace(batch=32, lr=5e-3)
    torch.manual_seed(0)
    model = HAN(embedding, 4, skip=dict(where="w", mode="ensemble", M=2, theta=0.1))
    history = train_reader(model, "ptr", 2, train=train, valid=valid, sizes=sizes, seed=0,
                           every_pass=every_pass)  # fmt: skip
    steps = [step for step, _ in history.evals["accuracy"]]
    assert steps == ([1, 3] if every_pass else [3])  # 0-based: the update just done
    assert 0.0 <= history.last("accuracy") <= 1.0
    assert 0.0 < history.last("u_w") <= 1.0  # a skipping word encoder reports its rate
    torch.manual_seed(0)
    again = HAN(embedding, 4, skip=dict(where="w", mode="ensemble", M=2, theta=0.1))
    repeated = train_reader(again, "ptr", 2, train=train, valid=valid, sizes=sizes, seed=0,
                            every_pass=every_pass)  # fmt: skip
    assert repeated.evals["accuracy"] == history.evals["accuracy"]  # the seed decides the run


def test_reader_curve_reads_the_committed_curves(monkeypatch):
    monkeypatch.setenv("RNNBOOK_CHECKPOINTS", str(COMMITTED))
    plain = reader_curve("han-ptr", 0)
    assert len(plain) == syncloze_readers.PASSES + 1 and plain[0]["step"] == 0
    assert all(0.0 <= row["valid_acc"] <= 1.0 for row in plain)
    off_centre = reader_curve("sgru-w", 0, modules=2, theta=0.1)
    assert "u_w" in off_centre[-1] and off_centre != reader_curve("sgru-w", 0)


def test_a_committed_history_is_what_train_reader_records(monkeypatch):
    """The steps as fit counts them (the update just done), one evaluation per pass, the rates."""
    monkeypatch.setenv("RNNBOOK_CHECKPOINTS", str(COMMITTED))
    history = committed_history("sens-w", modules=2, theta=0.1)
    rows = reader_curve("sens-w", 0, modules=2, theta=0.1)
    per_pass = syncloze_readers.N_TRAIN // syncloze_readers.BATCH
    assert [step for step, _ in history.evals["accuracy"]] == [
        per_pass * k - 1 for k in range(1, syncloze_readers.PASSES + 1)
    ]
    assert history.last("accuracy") == rows[-1]["valid_acc"]
    assert history.last("u_w") == rows[-1]["u_w"] and "u_w_fwd" not in history.evals
    assert history.seconds == rows[-1]["seconds"]


def test_the_full_sizes_are_the_committed_runs_and_others_are_refused():
    full = resolve_profile("full").sizes(**SIZES)
    check_committed_sizes(full)
    with pytest.raises(ValueError, match="not the committed runs'.*'H': \\(32, 64\\)"):
        check_committed_sizes(resolve_profile("quick").sizes(**SIZES))
    with pytest.raises(ValueError, match="'lr'"):
        check_committed_sizes(SimpleNamespace(**{**SIZES["full"], "lr": 1e-3}))


def test_a_committed_reader_loads_its_run_and_answers_as_recorded(monkeypatch):
    monkeypatch.setenv("RNNBOOK_CHECKPOINTS", str(COMMITTED))
    full = resolve_profile("full")
    sizes = full.sizes(**SIZES)
    model, history = committed_reader("sgru-w-off", profile=full, sizes=sizes)
    assert not model.training
    valid = syncloze_readers.validation_questions()
    with torch.no_grad():
        scores = model(valid.doc, valid.query, valid.cands).scores
    assert abs(accuracy(scores.argmax(-1), valid) - history.last("accuracy")) <= 2 / len(valid)
    with pytest.raises(ValueError, match="not the committed runs'"):
        committed_reader("sgru-w-off", profile=full, sizes=resolve_profile("quick").sizes(**SIZES))
