"""The SynCloze readers of Chapters 8 and 9 at the full profile's size.

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
* ``sgru-w-off``, the control of Chapter 8's skipping runs: HAN-ptr whose word encoder is the
  SGRU's own GRU (reset gate before the product) with skipping switched off (every module
  updates at every step: theta = -1e9), kept apart from ``MODELS`` as ``CONTROLS``;
* ``sgru-<where>``, ``sens-<where>``: HAN-ptr whose encoders named in ``where`` (``q``,
  ``w``, ``s`` or ``ws``) skip with the SGRU (:class:`rnnbook.models.sba.SBAGRUCell`,
  ``mode="module"``) or the SENS-GRU (``mode="ensemble"``), M = 8 modules, theta = 0.01: the
  placement grid of the dissertation's Table 9.1 at the centre of its grid of thresholds and
  module counts. ``--modules`` and ``--theta`` move a skipping reader elsewhere in that grid:
  ``GRID`` holds the word encoder's at M = 2, 8, 32 and theta = 0.01, 0.1 (seed 0), whose runs
  are named ``syncloze-<model>-M<M>-theta<theta>`` off the centre;
* ``abs-as-w``, ``abs-asa-w``, ``abs-asa-s``, ``abs-asa-ws``: Chapter 9's attention-based
  skipping readers (:class:`rnnbook.models.abs.ABSHAN`, kept apart from ``MODELS`` as ``ABS``,
  seed 0): ABS-AS or ABS-ASA at the word level (w), the sentence level (s) or both, each token
  or sentence kept by a Bernoulli draw with its attention as the probability; with ``--rate r``
  the word-level two keep the ``max(1, round(r n))`` tokens of highest attention in each
  sentence of n tokens instead (abs-rank), named ``syncloze-<model>-rank<r>``; ``RATES`` holds
  Chapter 9's full profile's.

The data and the word vectors are those of the chapter with its seed 0
(``make_syncloze(10_000, 1)``, ``make_syncloze(1_000, 2)``, ``syncloze_embeddings(.., 64, 0,
n_types=4)``) whatever the run's ``seed``, which draws the reader's initial weights
(``torch.manual_seed(seed)`` before the model is built) and the order of the batches; so
seeds 0, 1 and 2 measure how much a result depends on the initial weights and the batch
order, on the same questions.

The learning curve's columns: ``valid_acc``, the share of the validation questions answered
right, and for a skipping reader ``u_q``, ``u_w``, ``u_s`` (the update rates of its skipping
encoders over real tokens and non-empty sentences, the mean of the two directions, as
Chapter 8 counts them); an ABS reader's ``valid_acc`` and ``u_w``, ``u_s`` (the share of real
tokens, or non-empty sentences, kept) are the mean over ``EVAL_DRAWS`` = 5 sampling passes whose
draws come from a generator of their own (seed + ``EVAL_SEED``, as in Chapter 9).
``train_loss`` is the mean cloze loss (:func:`rnnbook.models.han.cloze_loss`, renormalised
over the candidates for the pointer) in nats.

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
from rnnbook.models.abs import ABSHAN
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
CONTROLS = ("sgru-w-off",)  # seed 0 only: the skipping runs' control (theta = NO_SKIPPING)
NO_SKIPPING = -1e9  # a threshold every module's surprisal exceeds: each updates at every step
SEEDS = (0, 1, 2)
ABS = {"abs-as-w": ("as", "w"), "abs-asa-w": ("asa", "w"), "abs-asa-s": ("asa", "s"),
       "abs-asa-ws": ("asa", "ws")}  # fmt: skip
RANKED = ("abs-as-w", "abs-asa-w")  # the ABS readers that may keep by rank instead of by a draw
RATES = (0.1, 0.3, 0.5, 0.7, 0.9)  # Chapter 9's full profile's ranked rates
EVAL_DRAWS, EVAL_SEED = 5, 100  # an ABS reader's evaluation: 5 sampling passes, seed + 100
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
    model: str,
    embedding: torch.Tensor,
    modules: int = M,
    theta: float = THETA,
    rate: float | None = None,
) -> HAN | RAN:
    """The untrained reader ``model`` (a name of ``MODELS``, ``CONTROLS`` or ``ABS``) on
    ``embedding``, H = 64; a skipping reader's cells have ``modules`` modules and the threshold
    ``theta``; an ABS reader with a ``rate`` keeps by rank."""
    _check_model(model, modules, theta, rate)
    if model in ABS:
        mode, levels = ABS[model]
        if rate is None:
            return ABSHAN(embedding, H, mode, levels)
        return ABSHAN(embedding, H, mode, levels, how="rank", rate=rate)
    if model == "ran":
        return RAN(embedding, H)
    if model in READERS:
        return HAN(embedding, H, head=head_of(model))
    if model == "sgru-w-off":
        return HAN(
            embedding, H, head="ptr", skip=dict(where="w", mode="module", M=2, theta=NO_SKIPPING)
        )
    cell, where = model.split("-")
    mode = "module" if cell == "sgru" else "ensemble"
    return HAN(embedding, H, head="ptr", skip=dict(where=where, mode=mode, M=modules, theta=theta))


def _check_model(model: str, modules: int, theta: float, rate: float | None = None) -> None:
    known = MODELS + CONTROLS + tuple(ABS)
    if model not in known:
        raise ValueError(f"model must be one of {list(known)}, got {model!r}")
    if rate is not None and model not in RANKED:
        raise ValueError(f"only {list(RANKED)} keep by rank; {model} takes no rate")
    if rate is not None and (
        isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1
    ):
        raise ValueError(f"rate must be a number in (0, 1], got {rate!r}")
    if model in READERS + CONTROLS + tuple(ABS) and (modules, theta) != (M, THETA):
        raise ValueError(f"{model} does not skip: modules and theta are for sgru-/sens- models")
    if type(modules) is not int or modules < 1:
        raise ValueError(f"modules must be a positive int, got {modules!r}")
    if not (isinstance(theta, (int, float)) and math.isfinite(theta) and theta >= 0):
        raise ValueError(f"theta must be a finite number >= 0, got {theta!r}")


def run_name(
    model: str, seed: int = 0, modules: int = M, theta: float = THETA, rate: float | None = None
) -> str:
    """``syncloze-<model>``, then ``-M<modules>-theta<theta>`` off the grid's centre or
    ``-rank<rate>`` for a ranked ABS reader, then ``-seed<k>`` for a seed other than 0."""
    grid = "" if (modules, theta) == (M, THETA) else f"-M{modules}-theta{theta:g}"
    ranked = "" if rate is None else f"-rank{rate:g}"
    return f"syncloze-{model}{grid}{ranked}" + (f"-seed{seed}" if seed else "")


def evaluate_abs(model: ABSHAN, valid: syncloze.SynCloze, seed: int) -> dict[str, float]:
    """An ABS reader's ``valid_acc``, the mean over ``EVAL_DRAWS`` sampling passes with a
    generator of their own (``seed + EVAL_SEED``), and its update rates over those passes."""
    model.generator = torch.Generator().manual_seed(seed + EVAL_SEED)
    model.reset_tally()
    right = []
    for _ in range(EVAL_DRAWS):
        scores = model(valid.doc, valid.query, valid.cands).scores
        right.append(float((scores.argmax(-1) == valid.answer).float().mean()))
    model.generator = None
    row = {"valid_acc": sum(right) / len(right)}
    row.update({f"u_{level}": u for level, u in model.update_rates().items()})
    model.reset_tally()  # training counts afresh
    return row


def evaluate_reader(model: HAN | RAN, valid: syncloze.SynCloze, seed: int = 0) -> dict[str, float]:
    """``valid_acc`` on every validation question, and a skipping reader's update rates (an
    ABS reader: :func:`evaluate_abs` with the run's ``seed``)."""
    if isinstance(model, ABSHAN):
        return evaluate_abs(model, valid, seed)
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
    rate: float | None = None,
) -> longrun.LongRun:
    """The long run of one of the SynCloze readers of Chapters 8 and 9 (see the module's text)."""
    _check_model(model, modules, theta, rate)
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
        return build_reader(model, embedding, modules, theta, rate)

    def loss_fn(reader, batch) -> torch.Tensor:
        doc, query, cands, answer = batch
        return cloze_loss(reader(doc, query, cands).scores, answer, head, renorm=True)

    if model in READERS or model in ABS:
        skip = None
    elif model in CONTROLS:
        skip = {"M": 2, "theta": NO_SKIPPING}
    else:
        skip = {"M": modules, "theta": theta}
    per_pass = N_TRAIN // BATCH
    config = {
        "task": "SynCloze",
        "model": model,
        "head": head,
        "skip": skip,
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
    if model in ABS:  # how the reader keeps and is evaluated (the other runs' configs as before)
        config["abs"] = {
            "mode": ABS[model][0],
            "levels": ABS[model][1],
            "keep": "bernoulli" if rate is None else f"rank, rate {rate:g}",
            "evaluation": f"mean of {EVAL_DRAWS} draws, generator seed {seed + EVAL_SEED}",
        }
    return longrun.LongRun(
        name=name or run_name(model, seed, modules, theta, rate),
        config=config,
        build_model=build_model,
        batch=lambda step: batches()(step),
        loss_fn=loss_fn,
        evaluate=lambda reader: evaluate_reader(reader, validation_questions(), seed),
        optimizer=lambda parameters: torch.optim.Adam(
            [p for p in parameters if p.requires_grad], lr=LR
        ),
        steps=passes * per_pass,
        eval_every=per_pass,
        clip_mode=None,
        train_column="train_loss",
        recent=per_pass,
        rel_tol=0.01 if model in ABS else 1e-4,  # a draw moved by another CPU's rounding
    )


# --- the runs behind the book's checkpoints and curves ---------------------------------------

# Chapter 8 loads the three readers of seed 0 in the quick and the full profile; its second
# page, in the full profile, also the control (sgru-w-off) and the SENS-GRU word encoder at
# M = 2, theta = 0.1 whose decisions it reads: 174,336 trained weights, 0.7 MB each, the word
# vectors drawn again from their seed. Every other model and seed of MODELS x SEEDS, and every
# other corner of GRID, is kept as its learning curve only
# (checkpoints/syncloze-<model>[-M<M>-theta<theta>][-seed<k>].curve.csv).
BOOK_RUNS = {
    f"syncloze-{model}": functools.partial(reader_run, model=model) for model in READERS + CONTROLS
}
BOOK_RUNS["syncloze-sens-w-M2-theta0.1"] = functools.partial(
    reader_run, model="sens-w", modules=2, theta=0.1
)
# Chapter 9's full profile loads its ABS readers, seed 0: the four that draw, and the two
# word-level ones at every rate of RATES
BOOK_RUNS.update({f"syncloze-{model}": functools.partial(reader_run, model=model) for model in ABS})
BOOK_RUNS.update(
    {
        run_name(model, rate=rate): functools.partial(reader_run, model=model, rate=rate)
        for model in RANKED
        for rate in RATES
    }
)


def _command(name: str, keywords: dict) -> str:
    grid = "".join(
        f" --{key} {keywords[key]:g}" for key in ("modules", "theta", "rate") if key in keywords
    )
    return (
        f"python -m rnnbook.runs syncloze --model {keywords['model']}{grid} --out-dir runs/{name}"
    )


BOOK_COMMANDS = {name: _command(name, run.keywords) for name, run in BOOK_RUNS.items()}


def curve_name(
    model: str, seed: int, modules: int = M, theta: float = THETA, rate: float | None = None
) -> str:
    """The file stem of ``model``'s run with ``seed`` (its checkpoint's or curve's name)."""
    return run_name(model, seed, modules, theta, rate)


# --- the command line ------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    parser = longrun.run_parser(
        "syncloze",
        "Train one of Chapter 8's SynCloze readers at the full profile's size",
        "--model sens-q --seed 1 --out-dir runs/syncloze-sens-q-seed1",
    )
    parser.add_argument("--model", choices=MODELS + CONTROLS + tuple(ABS), default="han-ptr")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--passes", type=int, default=PASSES)
    parser.add_argument("--modules", type=int, default=M, help=f"M of a skipping cell ({M})")
    parser.add_argument("--theta", type=float, default=THETA, help=f"its threshold ({THETA})")
    parser.add_argument("--rate", type=float, help="an ABS reader keeps by rank at this rate")
    parser.add_argument(
        "--name", help="checkpoint name (default syncloze-<model>[-M<M>-theta<theta>][-seed<k>])"
    )
    args = parser.parse_args(argv)
    longrun.check_run_arguments(parser, args, ("passes", "threads"), positive=())
    try:  # the model, its modules and its threshold: the checks of reader_run
        _check_model(args.model, args.modules, args.theta, args.rate)
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
        rate=args.rate,
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
