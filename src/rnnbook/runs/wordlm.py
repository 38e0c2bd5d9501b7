"""The word-level language models of Chapters 6 and 7, trained until they stop improving.

Chapters 6 (SBA) and 7 (zoneout) train their models live for two or three passes over the
PTB slice, which leaves them far from converged: the LSTM's validation perplexity still falls by
more than ten points per pass. This run trains the same models, from the same initial
weights, on the same slice with the same recipe, for ``passes`` passes, so that the quick
profile can load them (:func:`rnnbook.longrun.train_or_load`) and show what each model
becomes once training has nothing left to give.

Models (``--model``), each a :class:`rnnbook.models.language.LanguageModel` of H = 128 units
with tied embeddings around one cell:

* ``lstm``: the plain LSTM (:class:`rnnbook.models.lstm.LSTMCell`);
* ``sba-c2``: S_c with M = 2 modules and max pooling; ``sba-ic``, ``sba-h``: S_ic and S_h with
  one module per unit (:class:`rnnbook.models.sba.SBALSTMCell`, theta = 1e-4, no decay);
* ``zoneout``: Krueger's zoneout with z_c = 0.5, z_h = 0.05
  (:class:`rnnbook.models.zoneout.ZoneoutLSTMCell`);
* ``zc``: the gate-level Z_c with p = 0.2 (:class:`rnnbook.models.zoneout.GateZoneoutLSTMCell`).

Data and recipe (the chapters' quick profile): the first 100,000 training and 20,000
validation words of PTB under its 2,000 most frequent words
(:func:`rnnbook.data.ptb.ptb_slice`), 32 parallel streams, windows of 35 words with the state
(and SBA's surprisal references) carried from window to window and detached, the zero state
at the start of every pass (:class:`rnnbook.train.BPTTWindows`,
:class:`rnnbook.train.CarriedState`); Adam at ``lr``, gradients clipped to global norm 10.
Zoneout's training masks come from torch's global generator, which the evaluations leave
alone (they draw their own coins inside ``torch.random.fork_rng``), so the masks of one
pass are not those of the next.

After every pass the learning curve gets the validation perplexity, ``valid_ppl``, as the
model is used: SBA skipping (SBA+M), zoneout in its expectation (Krueger's) or with coins
(Z_c, ZO+M). SBA models add ``valid_u`` (their update rate) and ``valid_ppl_plain`` (the
same weights as a plain LSTM, SBA+R); zoneout models add ``valid_ppl_plain``,
``valid_ppl_expectation`` and ``valid_ppl_stochastic`` (coins seeded with 10,000) and the
stochastic pass's ``valid_u``, the share of units whose coin said "update": with the same
coins at every evaluation it is the same at every pass (0.725 for Krueger's zoneout, 0.200
for Z_c), a check on the masks rather than a result.

``python -m rnnbook.runs wordlm --help`` lists the options; Chapters 6 and 7 call
:func:`wordlm_run` through :func:`rnnbook.longrun.train_or_load`.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys

import torch

from rnnbook import longrun
from rnnbook.data.ptb import batchify, ptb_slice
from rnnbook.models import LanguageModel, LSTMCell
from rnnbook.models.sba import SBALSTMCell
from rnnbook.models.zoneout import GateZoneoutLSTMCell, ZoneoutLSTMCell
from rnnbook.runtime import seed_everything
from rnnbook.train import BPTTWindows, CarriedState, perplexity, token_cross_entropy

N_TRAIN, N_VALID, VOCAB = 100_000, 20_000, 2_000  # the slice of Chapters 5-7
HIDDEN, STREAMS, K, CLIP = 128, 32, 35, 10.0
THETA = 1e-4  # SBA's threshold, Chapter 6
EVAL_SEED = 10_000  # the coins of a stochastic evaluation
MODELS = {
    "lstm": lambda: LSTMCell(HIDDEN, HIDDEN),
    "sba-c2": lambda: SBALSTMCell(HIDDEN, HIDDEN, theta=THETA, variant="c", M=2, pooling="max"),
    "sba-ic": lambda: SBALSTMCell(HIDDEN, HIDDEN, theta=THETA, variant="ic", M=HIDDEN),
    "sba-h": lambda: SBALSTMCell(HIDDEN, HIDDEN, theta=THETA, variant="h", M=HIDDEN),
    "zoneout": lambda: ZoneoutLSTMCell(HIDDEN, HIDDEN, z_c=0.5, z_h=0.05, forget_bias=0.0),
    "zc": lambda: GateZoneoutLSTMCell(HIDDEN, HIDDEN, variant="c", p=0.2),
}
DESCRIPTIONS = {
    "lstm": "LSTM",
    "sba-c2": "S_c, M = 2, max pooling, theta 1e-4",
    "sba-ic": "S_ic, M = H, theta 1e-4",
    "sba-h": "S_h, M = H, theta 1e-4",
    "zoneout": "zoneout z_c = 0.5, z_h = 0.05, evaluated in expectation",
    "zc": "Z_c, p = 0.2, evaluated with coins (ZO+M)",
}


@functools.cache
def slice_data():
    """The PTB slice: training and validation ids and the vocabulary (2,000 words)."""
    return ptb_slice(N_TRAIN, N_VALID, VOCAB)


def build_word_lm(model: str) -> LanguageModel:
    """The language model around the cell ``model`` (a key of ``MODELS``), tied embeddings."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {model!r}")
    return LanguageModel(VOCAB, MODELS[model](), tie_weights=True)


def _seeded_perplexity(model: LanguageModel, stream: torch.Tensor) -> float:
    """One validation pass with its coins (if any) seeded with EVAL_SEED, leaving torch's
    global generator as it was, so the training masks that follow do not repeat."""
    with torch.random.fork_rng(devices=[]):  # the CPU generator: these runs are CPU-only
        torch.manual_seed(EVAL_SEED)
        return perplexity(model, stream)


def evaluate_word_lm(model: LanguageModel, stream: torch.Tensor) -> dict[str, float]:
    """The curve's columns for ``model`` on the validation streams (see the module's text)."""
    cell = model.cell
    if isinstance(cell, SBALSTMCell):
        used, row = cell.eval_mode, {}
        for mode, column in (("plain", "valid_ppl_plain"), ("model", "valid_ppl")):
            cell.eval_mode = mode
            cell.reset_tally()
            row[column] = _seeded_perplexity(model, stream)  # coins only with decay="prob"
        row["valid_u"] = cell.update_rate()  # of the SBA+M pass, the last one
        cell.eval_mode = used
        return row
    if isinstance(cell, (ZoneoutLSTMCell, GateZoneoutLSTMCell)):
        used = cell.eval_mode
        row = {}
        for mode in ("plain", "expectation", "stochastic"):
            cell.eval_mode = mode
            cell.reset_tally()
            row[f"valid_ppl_{mode}"] = _seeded_perplexity(model, stream)
        row["valid_u"] = cell.update_rate()  # of the stochastic pass, the last one
        cell.eval_mode = used
        row["valid_ppl"] = row[f"valid_ppl_{used}"]
        return row
    return {"valid_ppl": perplexity(model, stream)}


def wordlm_run(
    *,
    model: str = "lstm",
    seed: int = 0,
    passes: int = 25,
    lr: float = 3e-3,
    eval_every: int | None = None,
    name: str | None = None,
) -> longrun.LongRun:
    """The long run of one of Chapters 6 and 7's models (see the module's text); one
    evaluation per pass unless ``eval_every`` says otherwise."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {model!r}")

    @functools.cache
    def windows() -> BPTTWindows:
        streams = batchify(slice_data().train, STREAMS)
        return BPTTWindows(streams[:, :-1], streams[:, 1:], K)

    @functools.cache
    def valid_streams() -> torch.Tensor:
        return batchify(slice_data().valid, STREAMS)

    per_pass = -(-(N_TRAIN // STREAMS - 1) // K)  # windows per pass, the last one shorter

    def build_model() -> LanguageModel:
        seed_everything(seed)  # the chapters' initial weights: torch.manual_seed(seed) first
        return build_word_lm(model)

    config = {
        "task": "ptb-slice-words",
        "model": f"LanguageModel(tied embeddings, H = {HIDDEN}, {DESCRIPTIONS[model]})",
        "cell": model,
        "hidden": HIDDEN,
        "data": f"PTB slice: first {N_TRAIN:,} training and {N_VALID:,} validation words, "
        f"vocabulary {VOCAB:,}; {STREAMS} streams, windows of {K}, state carried between "
        "windows, zero at each pass's start",
        "eval": "PTB slice validation, 32 streams, windows of 35; stochastic passes seeded "
        f"with {EVAL_SEED}",
        "passes": passes,
        "optimizer": "adam",
        "lr": lr,
        "grad_clip_norm": CLIP,
        "seed": seed,
    }
    return longrun.LongRun(
        name=name or f"ptb-slice-{model}",
        config=config,
        build_model=build_model,
        batch=lambda step: windows()(step),
        loss_fn=CarriedState(token_cross_entropy),
        evaluate=lambda m: evaluate_word_lm(m, valid_streams()),
        optimizer=lambda parameters: torch.optim.Adam(parameters, lr=lr),
        steps=passes * per_pass,
        eval_every=eval_every or per_pass,
        clip_mode="norm",
        clip_at=CLIP,
        train_column="train_ppl",
        train_unit=math.exp,
        recent=per_pass,
        rel_tol=1e-3 if model.startswith("sba") else 1e-4,  # SBA: a flipped decision elsewhere
    )


# --- the runs behind the book's checkpoints --------------------------------------------------

# Chapters 6 and 7 load them (quick profile) or retrain them (full). 25 passes of 90 windows
# (2,250 steps) each, seed 0; 390,096 parameters, 1.6 MB, per model.
BOOK_RUNS = {f"ptb-slice-{model}": functools.partial(wordlm_run, model=model) for model in MODELS}
BOOK_COMMANDS = {
    name: f"python -m rnnbook.runs wordlm --model {run.keywords['model']} --out-dir runs/{name}"
    for name, run in BOOK_RUNS.items()
}


# --- the command line ------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    parser = longrun.run_parser(
        "wordlm",
        "Train one of Chapters 6 and 7's word-level PTB-slice language models",
        "--model sba-ic --out-dir runs/ptb-slice-sba-ic",
    )
    parser.add_argument("--model", choices=sorted(MODELS), default="lstm")
    parser.add_argument("--passes", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--name", help="checkpoint name (default ptb-slice-<model>)")
    args = parser.parse_args(argv)
    longrun.check_run_arguments(parser, args, ("passes", "threads"), positive=("lr",))
    return args


def main(argv=None) -> int:
    """Exit 0 when the checkpoint is written, 1 when the run is refused, 2 on a NaN or inf."""
    args = parse_args(argv)
    run = wordlm_run(
        model=args.model, seed=args.seed, passes=args.passes, lr=args.lr, name=args.name
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
