"""rnnbook.runs.syncloze_readers: Chapter 8's SynCloze readers at the full profile's size."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from rnnbook import longrun
from rnnbook.data import syncloze
from rnnbook.models.abs import ABSHAN
from rnnbook.models.han import HAN, RAN
from rnnbook.runs import syncloze_readers as readers

COMMITTED = Path(__file__).resolve().parents[1] / "checkpoints"


@pytest.fixture
def small_questions(monkeypatch):
    """128 training and 64 validation questions in place of 10,000 and 1,000."""
    train = syncloze.make_syncloze(128, readers.TRAIN_SEED, S=readers.S)
    valid = syncloze.make_syncloze(64, readers.VALID_SEED, S=readers.S)
    embedding = readers.word_vectors()
    monkeypatch.setattr(readers, "training_questions", lambda: train)
    monkeypatch.setattr(readers, "validation_questions", lambda: valid)
    monkeypatch.setattr(readers, "N_TRAIN", 128)
    return train, valid, embedding


def test_the_word_vectors_are_those_of_the_chapters_vocabulary():
    """One question gives the vocabulary of 10,000: the run's word vectors are the chapter's."""
    many = syncloze.make_syncloze(2000, readers.TRAIN_SEED, S=readers.S)
    one = syncloze.make_syncloze(1, readers.TRAIN_SEED, S=readers.S)
    assert one.vocab == many.vocab
    chapter = syncloze.syncloze_embeddings(len(many.vocab), 64, 0, n_types=4)
    assert torch.equal(readers.word_vectors(), chapter)


def short(run: longrun.LongRun, steps: int = 2, eval_every: int = 1) -> longrun.LongRun:
    return dataclasses.replace(run, steps=steps, eval_every=eval_every)


@pytest.mark.parametrize("model", readers.MODELS)
def test_every_model_is_a_reader_of_the_chapters_full_size(model, small_questions):
    run = readers.reader_run(model=model)
    reader = run.build_model()
    assert isinstance(reader, RAN if model == "ran" else HAN)
    assert reader.H == 64 and reader.E == 64
    if model not in ("ran", "han-doc-vec"):  # every pointer reader: the same number of weights
        assert sum(p.numel() for p in reader.parameters() if p.requires_grad) == 174_336
    if model.startswith(("sgru", "sens")):
        cell, where = model.split("-")
        assert set(reader.where) == set(where)
        assert reader.skip["mode"] == {"sgru": "module", "sens": "ensemble"}[cell]
        assert (reader.skip["M"], reader.skip["theta"]) == (8, 0.01)
    config = json.loads(json.dumps(run.checkpoint_config(run.steps)))
    assert config["model"] == model and config["passes"] == 8
    assert run.steps == 8 * (128 // 64) and run.eval_every == 128 // 64


def test_the_real_sizes_give_156_updates_a_pass():
    run = readers.reader_run(model="han-ptr")
    assert run.eval_every == 156 and run.steps == 1248


def test_names_seeds_and_book_runs():
    assert readers.curve_name("sens-ws", 0) == "syncloze-sens-ws"
    assert readers.curve_name("sens-ws", 2) == "syncloze-sens-ws-seed2"
    assert readers.curve_name("sgru-w", 0, 2, 0.1) == "syncloze-sgru-w-M2-theta0.1"
    assert readers.curve_name("sens-w", 1, 32, 0.01) == "syncloze-sens-w-M32-theta0.01-seed1"
    assert readers.curve_name("sens-w", 0, readers.M, readers.THETA) == "syncloze-sens-w"
    abs_runs = {f"syncloze-{model}" for model in readers.ABS} | {
        f"syncloze-{model}-rank{rate:g}" for model in readers.RANKED for rate in readers.RATES
    }
    assert (
        set(readers.BOOK_RUNS)
        == {
            "syncloze-han-ptr",
            "syncloze-han-doc-vec",
            "syncloze-ran",
            "syncloze-sgru-w-off",
            "syncloze-sens-w-M2-theta0.1",
        }
        | abs_runs
    )
    assert len(abs_runs) == 14
    assert readers.BOOK_COMMANDS["syncloze-sens-w-M2-theta0.1"] == (
        "python -m rnnbook.runs syncloze --model sens-w --modules 2 --theta 0.1 "
        "--out-dir runs/syncloze-sens-w-M2-theta0.1"
    )
    for name, make in readers.BOOK_RUNS.items():
        assert make().name == name and readers.BOOK_COMMANDS[name].endswith(f"runs/{name}")


def test_seeds_change_the_weights_and_the_batches_not_the_questions(small_questions):
    run0, run1 = (readers.reader_run(model="sgru-w", seed=s) for s in (0, 1))
    w0, w1 = (r.build_model().state_dict() for r in (run0, run1))
    frozen = "embedding.weight"
    assert torch.equal(w0[frozen], w1[frozen])  # the word vectors are the data's
    assert any(not torch.equal(w0[k], w1[k]) for k in w0 if k != frozen)
    assert not torch.equal(run0.batch(0)[0], run1.batch(0)[0])  # another order of batches
    assert torch.equal(run0.batch(3)[0], readers.reader_run(model="han-ptr").batch(3)[0])


def test_the_skipping_readers_report_their_update_rates(small_questions):
    _, valid, embedding = small_questions
    torch.manual_seed(0)
    with torch.no_grad():
        plain = readers.evaluate_reader(readers.build_reader("han-ptr", embedding), valid)
        ws = readers.evaluate_reader(readers.build_reader("sens-ws", embedding), valid)
    assert set(plain) == {"valid_acc"}
    assert {"valid_acc", "u_w", "u_s"} <= set(ws) and "u_q" not in ws
    assert 0 <= ws["u_w"] <= 1 and 0 <= ws["u_s"] <= 1 and 0 <= ws["valid_acc"] <= 1


def test_a_short_run_reproduces_its_evaluation(small_questions, tmp_path):
    run = short(readers.reader_run(model="sgru-q"))
    result = longrun.train(run, tmp_path / "run", report=None)
    assert [row["step"] for row in result.rows] == [0, 1, 2]
    longrun.publish(run, result)
    _, _, mismatches = longrun.reproduce(run)
    assert not mismatches


def test_a_grid_run_builds_its_cells_with_its_modules_and_threshold():
    run = readers.reader_run(model="sens-w", modules=32, theta=0.1)
    assert run.config["skip"] == {"M": 32, "theta": 0.1}
    reader = readers.build_reader("sgru-w", readers.word_vectors(), 2, 0.1)
    for cell in (reader.word_encoder.forward_cell, reader.word_encoder.backward_cell):
        assert (cell.mode, cell.M, cell.theta) == ("module", 2, 0.1)
    centre = readers.reader_run(model="sens-w")  # the committed runs' config, unchanged
    assert centre.config["skip"] == {"M": 8, "theta": 0.01} and centre.name == "syncloze-sens-w"


def test_the_control_is_the_sgrus_own_gru_with_skipping_off(small_questions):
    """sgru-w-off: the skipping runs' control; every module updates at every step (u_w = 1)."""
    _, valid, embedding = small_questions
    run = readers.reader_run(model="sgru-w-off")
    assert run.name == "syncloze-sgru-w-off" and run.config["skip"]["theta"] == readers.NO_SKIPPING
    assert "sgru-w-off" not in readers.MODELS  # no seeds 1 and 2, no placement grid
    reader = run.build_model()
    assert sum(p.numel() for p in reader.parameters() if p.requires_grad) == 174_336
    with torch.no_grad():
        row = readers.evaluate_reader(reader, valid)
    assert row["u_w"] == 1.0
    with pytest.raises(ValueError, match="does not skip"):
        readers.reader_run(model="sgru-w-off", theta=0.1)
    assert readers.parse_args(["--out-dir", "x", "--model", "sgru-w-off"]).model == "sgru-w-off"


@pytest.mark.parametrize("rate", [None, 0.3])
@pytest.mark.parametrize("model", sorted(readers.ABS))
def test_the_abs_readers_are_chapter_9s_at_the_full_size(model, rate, small_questions):
    if rate is not None and model not in readers.RANKED:
        with pytest.raises(ValueError, match="keep by rank"):
            readers.reader_run(model=model, rate=rate)
        return
    run = readers.reader_run(model=model, rate=rate)
    reader = run.build_model()
    assert isinstance(reader, ABSHAN) and reader.H == 64 and reader.E == 64
    assert (reader.mode, reader.levels) == readers.ABS[model]
    assert reader.how == ("bernoulli" if rate is None else "rank") and reader.rate == rate
    assert sum(p.numel() for p in reader.parameters() if p.requires_grad) == 174_336
    assert run.name == f"syncloze-{model}" + ("" if rate is None else "-rank0.3")
    assert run.config["skip"] is None and run.config["abs"]["levels"] == readers.ABS[model][1]


def test_an_abs_readers_evaluation_is_its_own_draws(small_questions):
    """Five draws from a generator of their own: the same numbers twice, whatever the global
    generator did in between, and training's tally starts afresh after it."""
    _, valid, embedding = small_questions
    torch.manual_seed(0)
    reader = readers.build_reader("abs-asa-ws", embedding)
    with torch.no_grad():
        first = readers.evaluate_reader(reader, valid, seed=0)
        torch.rand(100)
        again = readers.evaluate_reader(reader, valid, seed=0)
        other = readers.evaluate_reader(reader, valid, seed=1)
    assert first == again and set(first) == {"valid_acc", "u_w", "u_s"}
    assert first != other
    assert 0 < first["u_w"] < 1 and 0 < first["u_s"] < 1
    with pytest.raises(ValueError, match="no step was counted"):
        reader.update_rates()  # reset after the evaluation


def test_a_short_abs_run_reproduces_its_evaluation(small_questions, tmp_path):
    run = short(readers.reader_run(model="abs-asa-w", rate=0.5))
    result = longrun.train(run, tmp_path / "run", report=None)
    longrun.publish(run, result)
    _, _, mismatches = longrun.reproduce(run)
    assert not mismatches


def test_bad_abs_arguments_are_refused():
    for bad in (0, 1.5, float("nan"), True):
        with pytest.raises(ValueError, match="rate must be a number"):
            readers.reader_run(model="abs-as-w", rate=bad)
    with pytest.raises(ValueError, match="does not skip"):
        readers.reader_run(model="abs-as-w", modules=2)
    for bad in (["--model", "abs-asa-s", "--rate", "0.3"], ["--model", "abs-as-w", "--rate", "0"]):
        with pytest.raises(SystemExit):
            readers.parse_args(["--out-dir", "x", *bad])


def test_the_plain_readers_refuse_modules_and_thresholds():
    with pytest.raises(ValueError, match="does not skip"):
        readers.reader_run(model="han-ptr", modules=2)
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match="modules must be a positive int"):
            readers.reader_run(model="sgru-w", modules=bad)
    for bad in (float("nan"), float("inf"), -0.1):
        with pytest.raises(ValueError, match="theta must be a finite number"):
            readers.reader_run(model="sgru-w", theta=bad)
    with pytest.raises(SystemExit):
        readers.parse_args(["--out-dir", "x", "--model", "ran", "--theta", "0.1"])


def test_unknown_models_are_refused():
    with pytest.raises(ValueError, match="model must be one of"):
        readers.reader_run(model="sgru-x")
    with pytest.raises(ValueError, match="model must be one of"):
        readers.build_reader("gru", torch.zeros(3, 4))


@pytest.mark.parametrize(
    "bad",
    [
        ["--passes", "0"],
        ["--seed", "-1"],
        ["--threads", "0"],
        ["--model", "sgru-x"],
        ["--model", "sgru-w", "--modules", "0"],
        ["--model", "sgru-w", "--theta", "nan"],
        ["--model", "sgru-w", "--theta", "-1"],
    ],
)
def test_bad_arguments_are_refused(bad, tmp_path):
    with pytest.raises(SystemExit):
        readers.parse_args(["--out-dir", str(tmp_path), *bad])


# --- the committed learning curves -------------------------------------------------------


def test_every_model_and_seed_has_its_curve():
    for model in readers.MODELS:
        for seed in readers.SEEDS:
            curve = COMMITTED / f"{readers.curve_name(model, seed)}.curve.csv"
            rows = longrun.read_curve(curve)
            assert [row["step"] for row in rows] == [156 * k for k in range(9)], curve.name


def test_every_corner_of_the_grid_has_its_curve():
    for cell in ("sgru", "sens"):
        for modules in readers.GRID["M"]:
            for theta in readers.GRID["theta"]:
                name = readers.curve_name(f"{cell}-{readers.GRID['where']}", 0, modules, theta)
                rows = longrun.read_curve(COMMITTED / f"{name}.curve.csv")
                assert [row["step"] for row in rows] == [156 * k for k in range(9)], name
                assert all(0 < row["u_w"] < 1 for row in rows), name


@pytest.mark.parametrize(
    ("model", "seed", "modules", "theta"),
    [
        ("han-ptr", 1, readers.M, readers.THETA),
        ("sens-ws", 2, readers.M, readers.THETA),
        ("sgru-q", 0, readers.M, readers.THETA),
        ("sgru-w", 0, 2, 0.1),
        ("sens-w", 0, 32, 0.1),
    ],
)
def test_a_curves_untrained_row_is_its_runs_untrained_reader(model, seed, modules, theta):
    """The curve's first row evaluates the untrained reader: the same data, the same initial
    weights, the same model as the run describes (a check of the curve's provenance; the
    untrained update rates differ widely across the grid, so a mislabelled file fails)."""
    curve = COMMITTED / f"{readers.curve_name(model, seed, modules, theta)}.curve.csv"
    first = longrun.read_curve(curve)[0]
    run = readers.reader_run(model=model, seed=seed, modules=modules, theta=theta)
    reader = run.build_model()
    with torch.no_grad():
        now = readers.evaluate_reader(reader, readers.validation_questions())
    for column, value in now.items():
        assert abs(first[column] - value) <= 2e-3, (column, first[column], value)
