"""``train_or_load``: show converged models in the quick profile, reproducibly.

The full profile trains a model and saves a small checkpoint beside a JSON record of how it
was made: the training config, a SHA-256 of the weights, the code version (rnnbook's
version and a hash of the code of the model's module, docstrings and comments left out),
the torch version and the training time. Frozen parameters, which the model draws again
from its seed, are left out of the file and recorded by their hash.
The quick profile loads that checkpoint instead of training for minutes; it refuses a
checkpoint whose weights or config do not match, and warns when the model's code changed
since. Running the chapter in the full profile writes the checkpoint again, so anybody can
reproduce it.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from rnnbook.paths import checkpoint_dir
from rnnbook.profiles import Profile


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt, or was made with another configuration."""


@dataclass
class Trained:
    """What :func:`train_or_load` returns."""

    model: nn.Module
    source: str  # "trained" or "checkpoint"
    record: dict  # the checkpoint's JSON record (config, hashes, versions, summary)

    @property
    def summary(self) -> dict:
        return self.record.get("summary", {})


def weights_sha256(state_dict: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of the tensors, in sorted order.

    It depends only on the numbers, not on how ``torch.save`` laid out the file.
    """
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())  # any dtype
    return digest.hexdigest()


def _syntax_tree_dump(source: str) -> str:
    """The module's syntax tree without its docstrings, as text."""
    tree = ast.parse(Path(source).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


def model_code_sha256(model: nn.Module) -> str:
    """SHA-256 of the code of the modules that define the model's classes, as Python parses it.

    The files are those of the model's class and of every submodule's class from ``rnnbook``
    (a wrapper and the model it wraps). What a code change should invalidate is the
    arithmetic, not the prose around it: the hash is taken over each file's syntax tree with
    every docstring removed, so comments, docstrings, blank lines and formatting do not change
    it, while any change to a statement, a name or a constant does. A model whose classes all
    live in one file hashes that file's tree alone.
    """
    source = inspect.getsourcefile(type(model))
    if not source:
        return "unknown"
    sources = [source]
    for module in model.modules():
        if type(module).__module__.startswith("rnnbook."):
            path = inspect.getsourcefile(type(module))
            if path and path not in sources:
                sources.append(path)
    dumps = [_syntax_tree_dump(path) for path in [source, *sorted(sources[1:])]]
    return hashlib.sha256("\n".join(dumps).encode()).hexdigest()


def _code_version(model: nn.Module) -> dict:
    from rnnbook import __version__

    return {"rnnbook": __version__, "model_code_sha256": model_code_sha256(model)}


def as_json(config: dict) -> dict:
    """``config`` as JSON reads it back (tuples become lists), or a TypeError naming why not."""
    try:
        return json.loads(json.dumps(config, sort_keys=True))
    except TypeError as error:
        raise TypeError(
            f"config must hold only JSON values (numbers, strings, lists): {error}"
        ) from error


def split_state(model: nn.Module) -> tuple[dict, dict]:
    """``(saved, rebuilt)``: the model's state split into what a checkpoint stores and the
    frozen parameters (``requires_grad=False``) that it leaves out.

    A frozen parameter is not trained: the model's constructor draws it again from the run's
    seed (the random word vectors of Chapter 8's reader, 1.6 MB of its 2.2), so storing it
    would only make the file larger. The record keeps its hash and two sums instead
    (:func:`rebuilt_sums`), and :func:`load_checkpoint` refuses a model that rebuilds it
    differently.
    """
    frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    saved = {k: v for k, v in state.items() if k not in frozen}
    rebuilt = {k: v for k, v in state.items() if k in frozen}
    return saved, rebuilt


def rebuilt_sums(tensors: dict[str, torch.Tensor]) -> list[float]:
    """The sum and the sum of squares of every value, in float64: numbers that another CPU's
    rounding of the same random draws moves by a few ulp, and another seed by far more."""
    values = torch.cat([tensors[k].detach().cpu().double().flatten() for k in sorted(tensors)])
    return [float(values.sum()), float((values * values).sum())]


def save_checkpoint(model: nn.Module, name: str, config: dict, summary: dict, seconds: float):
    """Write ``<name>.pt`` and ``<name>.json`` atomically into the checkpoint folder; frozen
    parameters are left out and recorded by their hash (:func:`split_state`)."""
    folder = checkpoint_dir()
    folder.mkdir(parents=True, exist_ok=True)
    state, rebuilt = split_state(model)
    record = {
        "name": name,
        "config": as_json(config),
        "weights_sha256": weights_sha256(state),
        "code": _code_version(model),
        "torch": torch.__version__.split("+")[0],
        "made_by": "profile full",
        "train_seconds": round(seconds, 1),
        "summary": as_json(summary),
    }
    if rebuilt:
        record["rebuilt"] = {
            "names": sorted(rebuilt),
            "sha256": weights_sha256(rebuilt),
            "sums": rebuilt_sums(rebuilt),
        }
    for suffix, write in (
        (".pt", lambda f: torch.save(state, f)),
        (".json", lambda f: f.write(json.dumps(record, indent=2, sort_keys=True).encode())),
    ):
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}", suffix=suffix)
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
            os.replace(tmp, folder / f"{name}{suffix}")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return record


def load_checkpoint(model: nn.Module, name: str, config: dict) -> dict:
    """Load ``<name>`` into ``model`` after checking its hash and its config."""
    folder = checkpoint_dir()
    weights, meta = folder / f"{name}.pt", folder / f"{name}.json"
    if not weights.is_file() or not meta.is_file():
        raise CheckpointError(
            f"no checkpoint {name!r} in {folder} (expected {weights.name} and {meta.name}); "
            "make it with the run's command line (python -m rnnbook.runs) or run the profile that "
            "trains it"
        )
    record = json.loads(meta.read_text())
    if record.get("config") != as_json(config):
        raise CheckpointError(
            f"checkpoint {name!r} was trained with config {record.get('config')}, but the "
            f"chapter asks for {as_json(config)}; train it again (python -m rnnbook.runs)"
        )
    state = torch.load(weights, map_location="cpu", weights_only=True)
    found = weights_sha256(state)
    if found != record.get("weights_sha256"):
        raise CheckpointError(
            f"checkpoint {weights} is corrupt: its weights hash to {found[:12]}…, "
            f"the record says {str(record.get('weights_sha256'))[:12]}…"
        )
    if "rebuilt" in record:  # frozen parameters, drawn again by the model's constructor
        current, names = model.state_dict(), record["rebuilt"]["names"]
        if any(k not in current for k in names):
            raise CheckpointError(f"checkpoint {name!r} needs the model to have {names}")
        rebuilt = {k: current[k].detach().cpu() for k in names}
        # Bit for bit on the machine that made the checkpoint; elsewhere the vector kernels
        # that draw random numbers round differently, so the two sums must agree closely.
        same = weights_sha256(rebuilt) == record["rebuilt"]["sha256"]
        (total, squares), (total_0, squares_0) = rebuilt_sums(rebuilt), record["rebuilt"]["sums"]
        close = abs(total - total_0) <= 1e-6 * squares_0 and abs(squares - squares_0) <= (
            1e-6 * squares_0
        )
        if not (same or close):
            raise CheckpointError(
                f"checkpoint {name!r} leaves out the frozen parameters "
                f"{record['rebuilt']['names']}, which the model is to draw again from its "
                "seed, but this model's differ from those the checkpoint was trained with"
            )
        state = {**state, **rebuilt}
    model.load_state_dict(state)
    if record.get("code") != _code_version(model):
        warnings.warn(
            f"checkpoint {name!r} was made by code {record.get('code')}; the model's code is now "
            f"{_code_version(model)}. Train it again to refresh it (python -m rnnbook.runs).",
            stacklevel=2,
        )
    return record


def refresh_code(name: str, model: nn.Module, reason: str) -> dict:
    """Record the model's current code in checkpoint ``name``'s record, keeping the old entry.

    Only for a code change that leaves the trained model's arithmetic alone (a renamed
    variable, a moved class): check first that the checkpoint still reproduces its recorded
    results (``python -m rnnbook.runs refresh NAME`` does). ``reason`` says what changed.
    """
    path = checkpoint_dir() / f"{name}.json"
    record = json.loads(path.read_text())
    current = _code_version(model)
    if record.get("code") != current:
        history = record.setdefault("code_history", [])
        history.append({**record.get("code", {}), "replaced_because": reason})
        record["code"] = current
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}", suffix=".json")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(record, indent=2, sort_keys=True))
        os.replace(tmp, path)
    return record


def train_or_load(
    name: str,
    model: nn.Module,
    train: Callable[[nn.Module], dict],
    *,
    profile: Profile,
    config: dict,
    train_in: tuple[str, ...] = ("full", "paper"),
) -> Trained:
    """Train ``model`` (the profiles in ``train_in``) or load its committed checkpoint.

    Args:
        name: the checkpoint's file name stem, unique in the book (``"ntm-copy"``).
        model: a freshly built model; trained or loaded in place.
        train: ``train(model) -> summary`` trains with ``config`` and returns a small dict of
            JSON numbers to keep beside the weights (for example final metrics).
        profile: the session's profile.
        config: everything that determines the trained weights (sizes, steps, seed).
        train_in: the profiles that train; the others load. The default trains in the full
            and paper profiles; :func:`rnnbook.longrun.train_or_load` trains only in the paper
            profile, because a long run takes longer than a chapter may in any other.

    In the full profile the checkpoint is (re)written; in the paper profile the model is
    trained but the committed checkpoint is left alone.
    """
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"name must be a plain file-name stem, got {name!r}")
    if not isinstance(profile, Profile):
        raise TypeError(f"profile must be a rnnbook Profile, got {type(profile).__name__}")
    if not isinstance(train_in, tuple) or not set(train_in) <= {"full", "paper"}:
        raise ValueError(f"train_in must be a tuple of 'full' and/or 'paper', got {train_in!r}")
    if profile.name not in train_in:
        record = load_checkpoint(model, name, config)
        return Trained(model, "checkpoint", record)
    start = time.perf_counter()
    summary = train(model)
    if not isinstance(summary, dict):
        raise TypeError(f"train(model) must return a dict summary, got {type(summary).__name__}")
    seconds = time.perf_counter() - start
    if profile.name == "full":
        record = save_checkpoint(model, name, config, summary, seconds)
    else:
        record = {"name": name, "config": as_json(config), "summary": as_json(summary)}
    return Trained(model, "trained", record)
