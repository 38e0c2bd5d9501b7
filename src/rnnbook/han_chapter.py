"""What the two pages of Chapter 8 share: the chapter's sizes, the loop that trains a cloze
reader on SynCloze, and the committed learning curves of its long runs.

The readers are the chapter's hierarchical attention networks: word attention
(han-word-attention) and the blend (han-blend), sentence attention (han-sentence), and a
read-out, the document vector (han-docvec) or the pointer sum (han-pointer), trained on the
cross-entropy of the right candidate (han-loss). The first page (``chapters/08_han.ipynb``)
trains the three readers and reads their attention; the second
(``chapters/08_han_skipping.ipynb``) puts skipping encoders into the pointer reader, the SGRU
and the SENS-GRU (sens-vote)-(sens-select), and measures their update rates against the bounds
(han-u-min). Each page runs on its own (Colab opens one notebook), so each makes the SynCloze
questions of its ``sizes`` and trains with :func:`train_reader`; the second page trains again
the plain pointer reader of the first, with the same seed, questions and recipe, as the
reference of its skipping readers. Both read the committed runs of
:mod:`rnnbook.runs.syncloze_readers` through :func:`reader_curve`, and the full profile, whose
sizes are those runs', loads the readers it would otherwise train again through
:func:`committed_reader` (a chapter in the full profile is to take minutes, not hours), as
does Chapter 9's full profile for its ABS readers.
"""

from __future__ import annotations

import torch

from rnnbook import longrun
from rnnbook.data.syncloze import SynCloze
from rnnbook.models.han import HAN, RAN, cloze_loss
from rnnbook.paths import checkpoint_dir
from rnnbook.profiles import Profile
from rnnbook.runs import syncloze_readers
from rnnbook.train import EpochBatches, History, fit

# The chapter's sizes, profile by profile (``P.sizes(**SIZES)``): the SynCloze questions
# (n_train, n_valid, S sentences), the word vectors (E) and units per direction (H), the
# readers' passes (epochs) and the skipping readers' (skip_epochs), the skipping grid of the
# word encoder that trains live (skip_grid), and Adam's learning rate and batch size.
SIZES = dict(
    quick=dict(n_train=2000, n_valid=500, S=10, E=32, H=32, epochs=4, skip_epochs=2,
               skip_grid=dict(theta=(0.1,), M=(2, 32)), lr=5e-3, batch=64),
    full=dict(n_train=10_000, n_valid=1000, S=10, E=64, H=64, epochs=8, skip_epochs=8,
              skip_grid=dict(theta=(0.01, 0.1), M=(2, 8, 32)), lr=3e-3, batch=64),
    paper=dict(n_train=10_000, n_valid=1000, S=20, E=100, H=256, epochs=7, skip_epochs=7,
               skip_grid=dict(theta=(1e-7, 0.01, 0.1), M=(2, 8, 32)), lr=1e-3, batch=64),
)  # fmt: skip


def accuracy(predicted: torch.Tensor, data: SynCloze) -> float:
    """The share of the questions of ``data`` whose answer is the ``predicted`` candidate
    (indices into each question's candidates)."""
    return float((predicted == data.answer).float().mean())


def train_reader(
    model: HAN | RAN,
    head: str,
    epochs: int,
    *,
    train: SynCloze,
    valid: SynCloze,
    sizes,
    seed: int,
    renorm: bool = True,
    every_pass: bool = True,
) -> History:
    """Train a cloze reader on ``train`` with the book's loop (:func:`rnnbook.train.fit`): Adam
    at ``sizes.lr``, batches of ``sizes.batch`` in an order drawn from ``seed``, the loss
    (han-loss) of the ``head`` (``"ptr"`` or ``"docvec"``; ``renorm=False`` drops the pointer's
    denominator). Returns the :class:`~rnnbook.train.History`, with the validation accuracy on
    ``valid`` after every pass (or, with ``every_pass=False``, after the last) and, for a HAN
    whose encoders skip, their update rates ``u_q``, ``u_w``, ``u_s``, counted afresh at each
    evaluation."""
    batches = EpochBatches(train.doc, train.query, train.cands, train.answer,
                           batch_size=sizes.batch, seed=seed)  # fmt: skip

    def loss(model, batch):
        doc, query, cands, answer = batch
        return cloze_loss(model(doc, query, cands).scores, answer, head, renorm)

    def validate(model):
        model.reset_tally()  # count the update rates of skipping encoders afresh
        out = model(valid.doc, valid.query, valid.cands)
        rates = model.update_rates() if isinstance(model, HAN) else {}
        return {"accuracy": accuracy(out.scores.argmax(-1), valid),
                **{f"u_{place}": u for place, u in rates.items() if len(place) == 1}}  # fmt: skip

    return fit(model, batches, loss, steps=batches.steps(epochs), lr=sizes.lr,
               evaluate=validate, eval_every=batches.per_epoch if every_pass else None,
               desc=type(model).__name__)  # fmt: skip


def reader_curve(
    model: str,
    seed: int,
    modules: int = syncloze_readers.M,
    theta: float = syncloze_readers.THETA,
    rate: float | None = None,
) -> list[dict[str, float | None]]:
    """The committed learning curve of a SynCloze long run of
    :mod:`rnnbook.runs.syncloze_readers` (its model, seed, modules and threshold): one row per
    evaluation, the first before training, with ``step``, ``train_loss``, ``valid_acc`` and a
    skipping reader's update rates (``rate``: a ranked ABS reader's)."""
    name = syncloze_readers.curve_name(model, seed, modules, theta, rate)
    return longrun.read_curve(checkpoint_dir() / f"{name}.curve.csv")


def committed_history(
    model: str,
    modules: int = syncloze_readers.M,
    theta: float = syncloze_readers.THETA,
    rate: float | None = None,
) -> History:
    """The committed learning curve of a SynCloze long run of seed 0 (:func:`reader_curve`) as
    the :class:`~rnnbook.train.History` that :func:`train_reader` would have recorded: the
    validation ``accuracy`` and the update rates ``u_*`` after every pass, at the steps as
    :func:`rnnbook.train.fit` counts them (0-based, the update just done: the curve's step
    minus one), and the run's training time in ``seconds`` (the losses of single steps are not
    kept)."""
    rows = reader_curve(model, 0, modules, theta, rate)
    history = History(seconds=float(rows[-1]["seconds"]))
    history.evals["accuracy"] = [(int(row["step"]) - 1, row["valid_acc"]) for row in rows[1:]]
    for column in (c for c in rows[-1] if c.startswith("u_") and c.count("_") == 1):
        history.evals[column] = [(int(row["step"]) - 1, row[column]) for row in rows[1:]]
    return history


def check_committed_sizes(sizes) -> None:
    """Refuse a page's ``sizes`` unless they are those of the committed runs of
    :mod:`rnnbook.runs.syncloze_readers` (questions, S, E, H, passes, learning rate, batch):
    a page that loads those runs must not print one set of sizes and show runs of another."""
    names = ("n_train", "n_valid", "S", "E", "H", "epochs", "lr", "batch")
    runs = syncloze_readers
    theirs = (runs.N_TRAIN, runs.N_VALID, runs.S, runs.E, runs.H, runs.PASSES, runs.LR, runs.BATCH)
    ours = tuple(getattr(sizes, name, None) for name in names)
    if ours != theirs:
        differ = {n: (o, t) for n, o, t in zip(names, ours, theirs, strict=True) if o != t}
        raise ValueError(
            f"these sizes are not the committed runs' (page, runs): {differ}; the full profile "
            "can load those runs only at their own sizes"
        )


def committed_reader(
    model: str,
    *,
    profile: Profile,
    sizes,
    modules: int = syncloze_readers.M,
    theta: float = syncloze_readers.THETA,
    rate: float | None = None,
) -> tuple[HAN | RAN, History]:
    """A reader of the full profile's size and seed 0, loaded from its committed checkpoint
    (:mod:`rnnbook.runs.syncloze_readers`: ``model``, ``modules``, ``theta``, ``rate``) through
    :func:`rnnbook.longrun.train_or_load`, in evaluation mode, with its
    :func:`committed_history`. Refuses the page's ``sizes`` unless they are the runs'
    (:func:`check_committed_sizes`), and a checkpoint whose recorded accuracy is not its curve's
    last."""
    check_committed_sizes(sizes)
    run = syncloze_readers.reader_run(model=model, modules=modules, theta=theta, rate=rate)
    trained = longrun.train_or_load(run, profile=profile)
    history = committed_history(model, modules, theta, rate)
    recorded = trained.summary["final_eval"]["valid_acc"]
    if abs(recorded - history.last("accuracy")) > 1e-6:
        raise ValueError(
            f"{run.name}: the checkpoint's recorded accuracy {recorded:.4f} is not its curve's "
            f"last, {history.last('accuracy'):.4f}: they are not of the same run"
        )
    return trained.model.eval(), history
