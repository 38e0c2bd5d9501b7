"""rnnbook.checkpoints: the full profile trains and saves, the quick profile loads and checks.

The conftest sets RNNBOOK_CHECKPOINTS to a folder inside ``tmp_path``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from torch import nn

from rnnbook.checkpoints import (
    CheckpointError,
    Trained,
    model_code_sha256,
    train_or_load,
    weights_sha256,
)
from rnnbook.profiles import Profile

NAME = "unit-linear"
CONFIG = {"steps": 5, "lr": 0.1, "sizes": [3, 2], "seed": 0}
FULL, QUICK, PAPER = (Profile(name, "test") for name in ("full", "quick", "paper"))


@pytest.fixture
def folder() -> Path:
    return Path(os.environ["RNNBOOK_CHECKPOINTS"])


def _fresh(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(3, 2)


def _train(model: nn.Module) -> dict:
    """Five deterministic SGD steps; returns the final loss as the summary."""
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 3, generator=g), torch.randn(16, 2, generator=g)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
    return {"loss": loss.item()}


def _must_not_train(model: nn.Module) -> dict:
    raise AssertionError("the quick profile must load, not train")


def _assert_same_weights(a: nn.Module, b: nn.Module) -> None:
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)


@pytest.fixture
def trained(folder) -> Trained:
    """A checkpoint written by the full profile."""
    return train_or_load(NAME, _fresh(), _train, profile=FULL, config=CONFIG)


# --- full profile ----------------------------------------------------------------------------


def test_full_profile_trains_and_writes_weights_and_record(trained, folder):
    assert trained.source == "trained"
    assert sorted(p.name for p in folder.iterdir()) == [f"{NAME}.json", f"{NAME}.pt"]
    record = json.loads((folder / f"{NAME}.json").read_text())
    assert record == trained.record
    assert record["name"] == NAME
    assert record["config"] == CONFIG
    assert record["weights_sha256"] == weights_sha256(trained.model.state_dict())
    assert record["made_by"] == "profile full"
    assert set(record["code"]) == {"rnnbook", "model_code_sha256"}
    assert trained.summary == record["summary"] and "loss" in trained.summary


def test_full_profile_saves_the_trained_weights(trained, folder):
    state = torch.load(folder / f"{NAME}.pt", weights_only=True)
    assert weights_sha256(state) == weights_sha256(trained.model.state_dict())
    untrained = _fresh().state_dict()
    assert weights_sha256(state) != weights_sha256(untrained)


# --- quick profile ---------------------------------------------------------------------------


def test_quick_profile_loads_equal_weights_without_training(trained):
    model = _fresh(seed=99)  # a different initialisation
    loaded = train_or_load(NAME, model, _must_not_train, profile=QUICK, config=CONFIG)
    assert loaded.source == "checkpoint"
    assert loaded.model is model
    _assert_same_weights(model, trained.model)
    assert loaded.summary == trained.summary


def test_quick_profile_rejects_another_config(trained):
    config = dict(CONFIG, steps=6)
    with pytest.raises(CheckpointError, match="trained with config .* train it again"):
        train_or_load(NAME, _fresh(), _must_not_train, profile=QUICK, config=config)


def test_quick_profile_rejects_corrupt_weights(trained, folder):
    tampered = {k: v + 1 for k, v in trained.model.state_dict().items()}
    torch.save(tampered, folder / f"{NAME}.pt")
    model = _fresh(seed=99)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError, match="is corrupt"):
        train_or_load(NAME, model, _must_not_train, profile=QUICK, config=CONFIG)
    for name, value in model.state_dict().items():  # nothing was loaded
        torch.testing.assert_close(value, before[name], rtol=0, atol=0)


@pytest.mark.parametrize("missing", [".pt", ".json", None])
def test_a_missing_checkpoint_says_how_to_make_it(folder, missing):
    if missing is not None:
        train_or_load(NAME, _fresh(), _train, profile=FULL, config=CONFIG)
        (folder / f"{NAME}{missing}").unlink()
    with pytest.raises(CheckpointError, match=f"no checkpoint '{NAME}'.*python -m rnnbook.runs"):
        train_or_load(NAME, _fresh(), _must_not_train, profile=QUICK, config=CONFIG)


def test_quick_profile_warns_when_the_model_code_changed(trained, folder):
    meta = folder / f"{NAME}.json"
    record = json.loads(meta.read_text())
    record["code"]["model_code_sha256"] = "0" * 64
    meta.write_text(json.dumps(record))
    with pytest.warns(UserWarning, match="Train it again to refresh it"):
        train_or_load(NAME, _fresh(), _must_not_train, profile=QUICK, config=CONFIG)


# --- paper profile and argument checks -------------------------------------------------------


def test_paper_profile_trains_and_writes_nothing(folder):
    model = _fresh()
    result = train_or_load(NAME, model, _train, profile=PAPER, config=CONFIG)
    assert result.source == "trained"
    assert result.record["config"] == CONFIG and "loss" in result.summary
    assert weights_sha256(model.state_dict()) != weights_sha256(_fresh().state_dict())
    assert not folder.exists() or not any(folder.iterdir())


def test_paper_profile_leaves_the_full_checkpoint_alone(trained, folder):
    before = (folder / f"{NAME}.pt").read_bytes(), (folder / f"{NAME}.json").read_text()
    train_or_load(NAME, _fresh(seed=3), _train, profile=PAPER, config=CONFIG)
    assert ((folder / f"{NAME}.pt").read_bytes(), (folder / f"{NAME}.json").read_text()) == before


@pytest.mark.parametrize("name", ["", "a/b", None])
def test_bad_name_is_rejected(name):
    with pytest.raises(ValueError, match="plain file-name stem"):
        train_or_load(name, _fresh(), _train, profile=FULL, config=CONFIG)


def test_profile_must_be_a_profile_object():
    with pytest.raises(TypeError, match="must be a rnnbook Profile, got str"):
        train_or_load(NAME, _fresh(), _train, profile="full", config=CONFIG)


def test_train_must_return_a_dict(folder):
    with pytest.raises(TypeError, match="must return a dict summary, got float"):
        train_or_load(NAME, _fresh(), lambda m: 0.5, profile=FULL, config=CONFIG)
    assert not folder.exists() or not any(folder.iterdir())


def test_config_must_be_json(folder):
    with pytest.raises(TypeError, match="only JSON values"):
        train_or_load(NAME, _fresh(), _train, profile=FULL, config={"device": torch.device("cpu")})
    assert not any(p.suffix == ".pt" for p in folder.iterdir())  # no half-written checkpoint


# --- weights_sha256 --------------------------------------------------------------------------


def _state() -> dict[str, torch.Tensor]:
    return {"b": torch.arange(3.0), "a": torch.ones(2, 2), "empty": torch.zeros(0)}


def test_weights_hash_ignores_dict_order():
    state = _state()
    reordered = dict(reversed(list(state.items())))
    assert list(reordered) != list(state)
    assert weights_sha256(reordered) == weights_sha256(state)


@pytest.mark.parametrize("name, index", [("a", i) for i in range(4)] + [("b", i) for i in range(3)])
def test_weights_hash_changes_with_any_value(name, index):
    state = _state()
    changed = {k: v.clone() for k, v in state.items()}
    changed[name].view(-1)[index] += 1e-3
    assert weights_sha256(changed) != weights_sha256(state)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: {**s, "a": s["a"].double()},
        lambda s: {**s, "a": s["a"].view(4)},
        lambda s: {("A" if k == "a" else k): v for k, v in s.items()},
    ],
    ids=["dtype", "shape", "name"],
)
def test_weights_hash_changes_with_dtype_shape_or_name(change):
    state = _state()
    assert weights_sha256(change(state)) != weights_sha256(state)


def test_weights_hash_ignores_memory_layout():
    a = torch.arange(6.0).view(2, 3)
    assert weights_sha256({"w": a.t()}) == weights_sha256({"w": a.t().contiguous()})


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int64, torch.bool])
def test_weights_hash_works_for_every_dtype(dtype):
    state = {"w": torch.ones(3, 2).to(dtype)}
    assert len(weights_sha256(state)) == 64
    assert weights_sha256(state) != weights_sha256({"w": torch.zeros(3, 2).to(dtype)})


def test_the_code_hash_covers_the_files_of_wrapped_models():
    from rnnbook.arena import zoo
    from rnnbook.arena.tasks import MemoryTask

    task = MemoryTask(T=3)
    lstm, gru, lstm_again = (zoo.build(name, task) for name in ("lstm", "gru", "lstm"))
    # the same wrapper (zoo.py) around models from different files hashes differently
    assert model_code_sha256(lstm) != model_code_sha256(gru)
    assert model_code_sha256(lstm) == model_code_sha256(lstm_again)


class _WithFrozenTable(nn.Module):
    """A trained linear map over a frozen random table drawn from ``table_seed``."""

    def __init__(self, table_seed: int = 0, nudge: bool = False):
        super().__init__()
        table = torch.randn(50, 3, generator=torch.Generator().manual_seed(table_seed))
        if nudge:  # the same draws rounded as another CPU's vector kernels round them
            table = torch.nextafter(table, torch.full_like(table, float("inf")))
        self.table = nn.Embedding.from_pretrained(table, freeze=True)
        self.linear = nn.Linear(3, 2)

    def forward(self, x):
        return self.linear(x)


def test_a_frozen_parameter_is_left_out_and_drawn_again_on_loading(folder):
    torch.manual_seed(0)
    made = train_or_load("frozen", _WithFrozenTable(), _train, profile=FULL, config=CONFIG)
    saved = torch.load(folder / "frozen.pt", weights_only=True)
    record = json.loads((folder / "frozen.json").read_text())
    assert set(saved) == {"linear.weight", "linear.bias"}
    assert record["rebuilt"]["names"] == ["table.weight"]
    torch.manual_seed(1)  # other trained weights to start from: the checkpoint replaces them
    loaded = train_or_load(
        "frozen", _WithFrozenTable(), _must_not_train, profile=QUICK, config=CONFIG
    )
    _assert_same_weights(made.model, loaded.model)


def test_a_model_that_draws_its_frozen_parameter_differently_is_refused(folder):
    train_or_load("frozen", _WithFrozenTable(0), _train, profile=FULL, config=CONFIG)
    with pytest.raises(CheckpointError, match=r"frozen parameters \['table.weight'\]"):
        train_or_load("frozen", _WithFrozenTable(1), _must_not_train, profile=QUICK, config=CONFIG)


def test_a_frozen_parameter_rounded_otherwise_by_another_cpu_still_loads(folder):
    train_or_load("frozen", _WithFrozenTable(0), _train, profile=FULL, config=CONFIG)
    loaded = train_or_load(
        "frozen", _WithFrozenTable(0, nudge=True), _must_not_train, profile=QUICK, config=CONFIG
    )
    assert (
        weights_sha256({"t": loaded.model.table.weight})
        != json.loads((folder / "frozen.json").read_text())["rebuilt"]["sha256"]
    )  # not the same bits, but the same draws


def test_a_record_without_rebuilt_parameters_loads_every_tensor_from_the_file(trained, folder):
    assert "rebuilt" not in json.loads((folder / f"{NAME}.json").read_text())
    assert set(torch.load(folder / f"{NAME}.pt", weights_only=True)) == {"weight", "bias"}
