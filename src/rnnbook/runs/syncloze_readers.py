"""Chapter 8's readers on SynCloze at the full profile's size, with three seeds.

Chapter 8 trains its readers live on 2,000 SynCloze questions at E = H = 32 (the quick
profile). This run trains them as the chapter's ``full`` profile does: 10,000 training and
1,000 validation questions of S = 10 sentences, frozen word vectors of E = 64 entries,
H = 64 units per direction, Adam at 3e-3, batches of 64, 8 passes (1,248 updates), no gradient
clipping, validation accuracy after every pass. The quick profile loads the result
(:func:`rnnbook.longrun.train_or_load`).

Models (``--model``), every one a :class:`rnnbook.models.han.HAN` or the flat
:class:`rnnbook.models.han.RAN` on the same word vectors:

* ``han-ptr``, ``han-doc-vec``: HAN with the pointer head or the document-vector head;
* ``ran``: the flat recurrent attention reader;
* ``sgru-<where>``, ``sens-<where>``: HAN-ptr whose encoders named in ``where`` (``q``,
  ``w``, ``s`` or ``ws``) skip with the SGRU (:class:`rnnbook.models.sba.SBAGRUCell`,
  ``mode="module"``) or the SENS-GRU (``mode="ensemble"``), M = 8 modules, theta = 0.01: the
  placement grid of the dissertation's Table 9.1 at the centre of its grid of thresholds and
  module counts. ``--modules`` and ``--theta`` move a skipping reader elsewhere in that grid:
  ``GRID`` holds the word encoder's at M = 2, 8, 32 and theta = 0.01, 0.1 (seed 0), whose runs
  are named ``syncloze-<model>-M<M>-theta<theta>`` off the centre.

The data and the word vectors are those of the chapter with its seed 0
(``make_syncloze(10_000, 1)``, ``make_syncloze(1_000, 2)``, ``syncloze_embeddings(.., 64, 0,
n_types=4)``) whatever the run's ``seed``, which draws the reader's initial weights
(``torch.manual_seed(seed)`` before the model is built) and the order of the batches; so
seeds 0, 1 and 2 measure how much a result depends on the initial weights and the batch
order, on the same questions.

The learning curve's columns: ``valid_acc``, the share of the validation questions answered
right, and for a skipping reader ``u_q``, ``u_w``, ``u_s`` (the update rates of its skipping
encoders over real tokens and non-empty sentences, the mean of the two directions, as
Chapter 8 counts them). ``train_loss`` is the mean cloze loss
(:func:`rnnbook.models.han.cloze_loss`, renormalised over the candidates for the pointer) in nats.

``python -m rnnbook.runs syncloze --help`` lists the options.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys

import torch

from rnnbook import longrun
from rnnbook.data import syncloze
from rnnbook.models.han import HAN, RAN, cloze_loss
from rnnbook.runtime import seed_everything
from rnnbook.train import EpochBatches

N_TRAIN, N_VALID, S = 10_000, 1_000, 10
TRAIN_SEED, VALID_SEED, EMBEDDING_SEED = 1, 2, 0  # the chapter's with its seed 0
E = H = 64
BATCH, LR, PASSES = 64, 3e-3, 8
M, THETA = 8, 0.01  # the centre of the source's grid of module counts and thresholds
PLACES = ("q", "w", "s", "ws")
READERS = ("han-ptr", "han-doc-vec", "ran")
MODELS = READERS + tuple(f"{cell}-{where}" for cell in ("sgru", "sens") for where in PLACES)
SEEDS = (0, 1, 2)
# Thresholds and module counts at the word encoder (the source's Experiment B), seed 0: the
# full profile's grid, whose centre (M = 8, theta = 0.01) is the placement grid's w.
GRID = {"where": "w", "M": (2, 8, 32), "theta": (0.01, 0.1)}


@functools.cache
def training_questions() -> syncloze.SynCloze:
    """The training questions, the same for every model and seed."""
    return syncloze.make_syncloze(N_TRAIN, TRAIN_SEED, S=S)


@functools.cache
def validation_questions() -> syncloze.SynCloze:
    """The validation questions of the learning curves, the same for every model and seed."""
    return syncloze.make_syncloze(N_VALID, VALID_SEED, S=S)


@functools.cache
def word_vectors() -> torch.Tensor:
    """The frozen word vectors of every model and seed. SynCloze's vocabulary does not depend
    on the number of questions, so one question gives its size without building 10,000."""
    V = len(syncloze.make_syncloze(1, TRAIN_SEED, S=S).vocab)
    return syncloze.syncloze_embeddings(V, E, EMBEDDING_SEED, n_types=4)


def head_of(model: str) -> str:
    """The loss's head: ``"docvec"`` for the two document-vector readers, else ``"ptr"``."""
    return "docvec" if model in ("han-doc-vec", "ran") else "ptr"


def build_reader(
    model: str, embedding: torch.Tensor, modules: int = M, theta: float = THETA
) -> HAN | RAN:
    """The untrained reader ``model`` (a name of ``MODELS``) on ``embedding``, H = 64; a
    skipping reader's cells have ``modules`` modules and the threshold ``theta``."""
    _check_model(model, modules, theta)
    if model == "ran":
        return RAN(embedding, H)
    if model in READERS:
        return HAN(embedding, H, head=head_of(model))
    cell, where = model.split("-")
    mode = "module" if cell == "sgru" else "ensemble"
    return HAN(embedding, H, head="ptr", skip=dict(where=where, mode=mode, M=modules, theta=theta))


def _check_model(model: str, modules: int, theta: float) -> None:
    if model not in MODELS:
        raise ValueError(f"model must be one of {list(MODELS)}, got {model!r}")
    if model in READERS and (modules, theta) != (M, THETA):
        raise ValueError(f"{model} does not skip: modules and theta are for sgru-/sens- models")
    if type(modules) is not int or modules < 1:
        raise ValueError(f"modules must be a positive int, got {modules!r}")
    if not (isinstance(theta, (int, float)) and math.isfinite(theta) and theta >= 0):
        raise ValueError(f"theta must be a finite number >= 0, got {theta!r}")


def run_name(model: str, seed: int = 0, modules: int = M, theta: float = THETA) -> str:
    """``syncloze-<model>``, then ``-M<modules>-theta<theta>`` off the grid's centre, then
    ``-seed<k>`` for a seed other than 0."""
    grid = "" if (modules, theta) == (M, THETA) else f"-M{modules}-theta{theta:g}"
    return f"syncloze-{model}{grid}" + (f"-seed{seed}" if seed else "")


def evaluate_reader(model: HAN | RAN, valid: syncloze.SynCloze) -> dict[str, float]:
    """``valid_acc`` on every validation question, and a skipping reader's update rates."""
    if isinstance(model, HAN):
        model.reset_tally()
    scores = model(valid.doc, valid.query, valid.cands).scores
    row = {"valid_acc": float((scores.argmax(-1) == valid.answer).float().mean())}
    if isinstance(model, HAN):
        row.update({f"u_{place}": u for place, u in model.update_rates().items()})
    return row


def reader_run(
    *,
    model: str = "han-ptr",
    seed: int = 0,
    passes: int = PASSES,
    name: str | None = None,
    modules: int = M,
    theta: float = THETA,
) -> longrun.LongRun:
    """The long run of one of Chapter 8's SynCloze readers (see the module's text)."""
    _check_model(model, modules, theta)
    head = head_of(model)

    @functools.cache
    def batches() -> EpochBatches:
        train = training_questions()
        return EpochBatches(
            train.doc, train.query, train.cands, train.answer, batch_size=BATCH, seed=seed
        )

    def build_model() -> HAN | RAN:
        embedding = word_vectors()
        seed_everything(seed)  # as the chapter: torch.manual_seed(seed), then the model
        return build_reader(model, embedding, modules, theta)

    def loss_fn(reader, batch) -> torch.Tensor:
        doc, query, cands, answer = batch
        return cloze_loss(reader(doc, query, cands).scores, answer, head, renorm=True)

    per_pass = N_TRAIN // BATCH
    config = {
        "task": "SynCloze",
        "model": model,
        "head": head,
        "skip": None if model in READERS else {"M": modules, "theta": theta},
        "loss": "cloze_loss, renormalised over the candidates",
        "data": f"make_syncloze({N_TRAIN}, {TRAIN_SEED}, S={S}) for training, "
        f"make_syncloze({N_VALID}, {VALID_SEED}, S={S}) for validation",
        "word_vectors": f"syncloze_embeddings(V, {E}, {EMBEDDING_SEED}, n_types=4), frozen",
        "embedding": E,
        "hidden": H,
        "batches": f"EpochBatches(batch_size={BATCH}, seed={seed})",
        "passes": passes,
        "optimizer": "adam",
        "lr": LR,
        "seed": seed,
    }
    return longrun.LongRun(
        name=name or run_name(model, seed, modules, theta),
        config=config,
        build_model=build_model,
        batch=lambda step: batches()(step),
        loss_fn=loss_fn,
        evaluate=lambda reader: evaluate_reader(reader, validation_questions()),
        optimizer=lambda parameters: torch.optim.Adam(
            [p for p in parameters if p.requires_grad], lr=LR
        ),
        steps=passes * per_pass,
        eval_every=per_pass,
        clip_mode=None,
        train_column="train_loss",
        recent=per_pass,
    )


# --- the runs behind the book's checkpoints and curves ---------------------------------------

# Chapter 8 loads the three readers of seed 0 (quick profile) or retrains them (full): 174,336
# trained weights, 0.7 MB each, the word vectors drawn again from their seed. Every other
# model and seed of MODELS x SEEDS is kept as its learning curve only
# (checkpoints/syncloze-<model>[-seed<k>].curve.csv).
BOOK_RUNS = {f"syncloze-{model}": functools.partial(reader_run, model=model) for model in READERS}
BOOK_COMMANDS = {
    name: f"python -m rnnbook.runs syncloze --model {run.keywords['model']} --out-dir runs/{name}"
    for name, run in BOOK_RUNS.items()
}


def curve_name(model: str, seed: int, modules: int = M, theta: float = THETA) -> str:
    """The file stem of ``model``'s run with ``seed`` (its checkpoint's or curve's name)."""
    return reader_run(model=model, seed=seed, modules=modules, theta=theta).name


# --- the command line ------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    parser = longrun.run_parser(
        "syncloze",
        "Train one of Chapter 8's SynCloze readers at the full profile's size",
        "--model sens-q --seed 1 --out-dir runs/syncloze-sens-q-seed1",
    )
    parser.add_argument("--model", choices=MODELS, default="han-ptr")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--passes", type=int, default=PASSES)
    parser.add_argument("--modules", type=int, default=M, help=f"M of a skipping cell ({M})")
    parser.add_argument("--theta", type=float, default=THETA, help=f"its threshold ({THETA})")
    parser.add_argument(
        "--name", help="checkpoint name (default syncloze-<model>[-M<M>-theta<theta>][-seed<k>])"
    )
    args = parser.parse_args(argv)
    longrun.check_run_arguments(parser, args, ("passes", "threads"), positive=())
    try:  # the model, its modules and its threshold: the checks of reader_run
        _check_model(args.model, args.modules, args.theta)
    except ValueError as error:
        parser.error(str(error))
    return args


def main(argv=None) -> int:
    """Exit 0 when the checkpoint is written, 1 when the run is refused, 2 on a NaN or inf."""
    args = parse_args(argv)
    run = reader_run(
        model=args.model,
        seed=args.seed,
        passes=args.passes,
        name=args.name,
        modules=args.modules,
        theta=args.theta,
    )
    return longrun.run_and_publish(
        run,
        args.out_dir,
        resume=args.resume,
        threads=args.threads,
        extra=lambda result: {"seed": args.seed},
    )


if __name__ == "__main__":
    sys.exit(main())
