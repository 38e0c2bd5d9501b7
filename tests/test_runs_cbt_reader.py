"""rnnbook.runs.cbt_reader: Chapter 8's HAN-ptr on CBT-style questions as a long run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rnnbook import longrun
from rnnbook.checkpoints import load_checkpoint
from rnnbook.data import cbt
from rnnbook.runs import cbt_reader

NAMES = [f"Name{i}" for i in range(12)]


def toy_question(rng: np.random.Generator) -> cbt.ClozeQuestion:
    """Three context sentences in random order with four names, each name once; the answer
    is the name after "saw", and the query asks who was seen. Counting is at chance (1 in 4);
    a pointer reader learns the question in a few dozen steps."""
    a, b, c, d = (str(name) for name in rng.choice(NAMES, size=4, replace=False))
    context = [["we", "saw", a, "."], ["then", b, "ran", "."], [c, "met", d, "."]]
    context = [context[i] for i in rng.permutation(3)]
    return cbt.ClozeQuestion(context, ["we", "saw", cbt.BLANK], a, sorted([a, b, c, d]))


def toy_split(questions, vocab) -> cbt_reader.Split:
    return cbt_reader.Split(questions, torch.arange(len(questions)) % 2, vocab, (3, 5, 4))


@pytest.fixture
def toy_data(monkeypatch):
    """64 training and 32 held-out toy questions in place of the books, so that no test
    needs the dataset."""
    rng = np.random.default_rng(0)
    questions = [toy_question(rng) for _ in range(96)]
    words = [["we", "saw", "then", "ran", "met", "."], NAMES]
    vocab = cbt_reader.book_vocab([("toy", words)])
    data = cbt_reader.CBTData(
        vocab, toy_split(questions[:64], vocab), toy_split(questions[64:], vocab), "toy", 0
    )
    monkeypatch.setattr(cbt_reader, "cbt_data", lambda held_out_book=None: data)
    return data


def tiny_run(**overrides):
    settings = dict(steps=6, batch=8, E=8, H=8, lr=1e-2, eval_every=3)
    return cbt_reader.cbt_reader_run(**{**settings, **overrides})


def test_the_book_run_is_han_ptr_with_0_15_million_trained_parameters():
    run = cbt_reader.BOOK_RUNS["cbt-reader"]()
    model = run.build_model()
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    assert model.head == "ptr" and (model.E, model.H) == (32, 64)
    assert trained == 149_760 and frozen == cbt_reader.V * 32  # 2.2 MB in float32
    assert json.loads(json.dumps(run.checkpoint_config(run.steps)))["steps"] == run.steps
    assert run.name == "cbt-reader" and run.config["held_out_book"] == cbt_reader.HELD_OUT_BOOK


def test_the_word_vectors_are_random_seeded_and_frozen_with_a_zero_pad_row():
    a, b = cbt_reader.random_embedding(0, 8), cbt_reader.random_embedding(0, 8)
    assert torch.equal(a, b)  # a seed replayed
    assert not torch.equal(a, cbt_reader.random_embedding(1, 8))
    assert a.shape == (cbt_reader.V, 8) and bool((a[0] == 0).all())
    assert abs(float(a[1:].mean())) < 0.02 and abs(float(a[1:].std()) - 1) < 0.02  # N(0, 1)
    model = cbt_reader.build_reader(0, E=8, H=4)
    assert torch.equal(model.embedding.weight, a)  # copied
    assert not model.embedding.weight.requires_grad


def test_the_vocabulary_is_lower_cased_with_pad_first_and_the_blank():
    vocab = cbt_reader.book_vocab([("b", [["The", "dog", "."], ["the", "Dog", "ran"]])])
    assert vocab.tokens[0] == cbt.PAD and vocab.tokens[-1] == cbt.UNK
    assert vocab.tokens[1:3] == ["the", "dog"] and cbt_reader.BLANK in vocab.tokens
    assert vocab.id("DOG") == vocab.id("dog") and vocab.id(cbt.BLANK) != vocab.id(cbt.UNK)


def test_a_long_query_is_cropped_around_its_blank():
    context = [["a"]]
    for blank, where in ((0, 0), (3, 3), (10, 3), (19, 5)):  # centred where the query allows
        query = [f"w{i}" for i in range(20)]
        query[blank] = cbt.BLANK
        q = cbt_reader.crop_query(cbt.ClozeQuestion(context, query, "x", ["x", "y"]), 6)
        assert len(q.query) == 6 and cbt.BLANK in q.query
        assert any(q.query == query[s : s + 6] for s in range(15))  # a window of the query
        assert q.query.index(cbt.BLANK) == where
    short = cbt.ClozeQuestion(context, ["a", cbt.BLANK], "x", ["x", "y"])
    assert cbt_reader.crop_query(short, 6) is short


def test_a_question_is_traced_to_its_book():
    books = [("one", [[f"a{i}"] for i in range(25)]), ("two", [[f"b{i}"] for i in range(25)])]
    questions = [
        cbt.ClozeQuestion(s[i : i + 20], ["q"], "x", ["x"]) for _, s in books for i in (0, 3)
    ]
    assert cbt_reader.book_of(books, questions) == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="in 0 books"):
        cbt_reader.book_of(books, [cbt.ClozeQuestion([["c"]] * 3, ["q"], "x", ["x"])])


def test_encoding_some_questions_gives_those_rows_of_the_whole_encoding(toy_data):
    """The evaluation encodes only its sample of the training questions: the same ids, in the
    order asked for, as the rows of the whole side's encoding."""
    train = toy_data.train
    rows = [5, 0, 63, 17, 17]
    part, whole = train.encode(rows), train.data
    for name in ("doc", "query", "cands", "answer"):
        assert torch.equal(getattr(part, name), getattr(whole, name)[rows]), name
    for bad in ([-1], [64], [1.0]):  # 64 training questions (0..63); a float is no index
        with pytest.raises(ValueError, match="question indices"):
            train.encode(bad)


def test_the_batch_of_a_step_is_a_function_of_the_step(toy_data):
    first, second = tiny_run(), tiny_run()
    for step in (5, 0, 13, 5):
        for a, b in zip(first.batch(step), second.batch(step), strict=True):
            assert torch.equal(a, b)  # token ids
    doc, query, cands, answer = first.batch(0)
    assert doc.shape == (8, 3, 5) and query.shape == (8, 4) and answer.shape == (8,)


def test_the_evaluation_reports_accuracy_per_kind_and_on_training_questions(toy_data):
    run = tiny_run()
    row = longrun._evaluate(run, run.build_model())
    kinds = toy_data.held_out.kind
    assert set(row) == {
        "held_out_acc_NE", "held_out_acc_CN", "held_out_acc", "held_out_loss", "train_acc"
    }  # fmt: skip
    weighted = (
        row["held_out_acc_NE"] * (kinds == 0).sum() + row["held_out_acc_CN"] * (kinds == 1).sum()
    )
    assert abs(float(weighted) / len(kinds) - row["held_out_acc"]) < 1e-6
    assert all(0 <= row[k] <= 1 for k in row if "acc" in k) and row["held_out_loss"] > 0


def test_a_tiny_run_learns_and_writes_a_checkpoint_that_reproduces_its_results(toy_data, tmp_path):
    run = tiny_run(steps=30, eval_every=15)
    result = longrun.train(run, tmp_path / "run", report=None)
    assert [row["step"] for row in result.rows] == [0, 15, 30]
    assert result.rows[-1]["held_out_loss"] < result.rows[0]["held_out_loss"]  # it learns
    assert result.rows[-1]["held_out_acc"] > 0.9  # chance and counting: 1 in 4
    record = longrun.publish(run, result)
    fresh = run.build_model()
    load_checkpoint(fresh, run.name, run.checkpoint_config(30))
    _, _, mismatches = longrun.reproduce(run)
    assert not mismatches and record["summary"]["final_eval"]["held_out_acc"] > 0.9


def test_the_command_line_trains_and_writes_the_checkpoint(toy_data, tmp_path):
    out = tmp_path / "cli"
    argv = ["--out-dir", str(out), "--steps", "4", "--eval-every", "2", "--batch", "8"]
    assert cbt_reader.main([*argv, "--E", "8", "--H", "8"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["summary"]["questions"] == {"train": 64, "held_out": 32}
    assert summary["config"]["steps"] == 4 and (out / longrun.CURVE_FILE).is_file()
    assert cbt_reader.main([*argv, "--E", "8", "--H", "8"]) == 1  # the folder holds a run


@pytest.mark.parametrize(
    "bad",
    [["--steps", "0"], ["--H", "0"], ["--seed", "-1"], ["--lr", "0"], ["--clip", "-1"]],
)
def test_bad_arguments_are_refused(bad, tmp_path):
    with pytest.raises(SystemExit):
        cbt_reader.parse_args(["--out-dir", str(tmp_path), *bad])


def test_the_real_questions_split_by_book(mirror, monkeypatch):
    monkeypatch.setenv("RNNBOOK_DATA_MIRROR", str(mirror))
    cbt_reader.cbt_data.cache_clear()
    try:
        data = cbt_reader.cbt_data()
        report = cbt_reader.data_report(data)
        books = cbt.load_books()
        titles = [title for title, _ in books]
        held = cbt_reader.book_of(books, data.held_out.questions)
        train = cbt_reader.book_of(books, data.train.questions)
    finally:
        cbt_reader.cbt_data.cache_clear()
    assert len(data.vocab) == cbt_reader.V
    assert {titles[b] for b in held} == {cbt_reader.HELD_OUT_BOOK}
    assert cbt_reader.HELD_OUT_BOOK not in {titles[b] for b in train} and len(set(train)) == 4
    counts = {
        side: [int((split.kind == k).sum()) for k in range(2)]
        for side, split in (("train", data.train), ("held_out", data.held_out))
    }
    assert counts == {"train": [831, 5346], "held_out": [320, 1291]}  # NE, CN
    # both sides are encoded to one shape (S, W, L_q); the held-out side's tensors show it
    assert data.train.shape == data.held_out.shape == (20, 50, 60)
    assert data.held_out.data.doc.shape[1:] == (20, 50) and data.held_out.data.query.shape[1] == 60
    assert 0.025 < report["share_cut"] < 0.035 and report["queries_cropped"] == 285
    assert report["answer_cut_from_context"] == 114


def test_the_committed_checkpoint_is_the_pointer_reader_after_2000_steps():
    """Its held-out accuracy is re-measured, with the CBT books of the mirror, by
    tests/test_book_checkpoints.py (``cbt-reader``), as every committed checkpoint's is; here
    only what is particular to this run."""
    committed = Path(__file__).resolve().parents[1] / "checkpoints"
    if not (committed / "cbt-reader.pt").is_file():
        pytest.skip("the checkpoint cbt-reader is not in this checkout")
    record = json.loads((committed / "cbt-reader.json").read_text())
    run = cbt_reader.BOOK_RUNS["cbt-reader"]()
    assert record["config"] == run.checkpoint_config(run.steps)
    assert record["config"]["steps"] == 2000 and run.build_model().head == "ptr"
    assert record["summary"]["final_eval"], "the record keeps the accuracy it is checked against"
    size = (committed / "cbt-reader.pt").stat().st_size
    assert size < 700_000, size  # 0.6 MB: the 0.15 M trained weights; the word vectors are
    assert record["rebuilt"]["names"] == ["embedding.weight"]  # drawn again from the seed


def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(toy_data, tmp_path):
    whole = longrun.train(tiny_run(steps=6), tmp_path / "whole", report=None)
    longrun.train(tiny_run(steps=3), tmp_path / "parts", report=None)
    resumed = longrun.train(tiny_run(steps=6), tmp_path / "parts", resume=True, report=None)
    assert resumed.steps == 6 and [r["step"] for r in resumed.rows] == [0, 3, 6]
    for name, tensor in whole.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name  # same steps, bitwise
