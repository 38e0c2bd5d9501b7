"""The character-level Penn Treebank language model of Chapter 2, trained for an hour.

The model is :class:`rnnbook.models.language.LanguageModel`: an embedding of the 50 PTB characters,
one ``nn.LSTM`` layer (its forget gate's bias starting at 1, :func:`rnnbook.models.lstm.torch_lstm`)
or one ``nn.GRU`` layer, and a linear read-out over the characters; the quick profile of
Chapter 2 trains the same model on a slice for a few seconds.

Data and recipe (char-rnn's, on one CPU thread): the whole training split (5,017,482
characters) cut into ``batch`` parallel streams (:func:`rnnbook.data.ptb.batchify`); step
``t`` trains on BPTT window ``t mod W`` of them (W windows of ``k`` characters per epoch,
:class:`rnnbook.train.BPTTWindows`), starting from the state the previous window ended in,
detached (truncated BPTT, Chapter 1), and from the zero state at the start of every epoch
(:class:`rnnbook.train.CarriedState`). Adam at ``lr``, gradients clipped to
global norm ``clip``. The batch of a step is a function of the step alone; the carried state
is not in the snapshot, so a *resumed* run starts its first window from the zero state and
matches an uninterrupted one only approximately.

Every ``eval_every`` steps the model reads the whole validation split (393,042 characters in
16 parallel streams, the state carried from window to window) and the learning curve gets
its bits per character, ``valid_bpc``.

``python -m rnnbook.runs charlm --help`` lists the options; Chapter 2 calls :func:`charlm_run`
through :func:`rnnbook.longrun.train_or_load`.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys

import torch
from torch import nn

from rnnbook import longrun
from rnnbook.data.ptb import batchify, ptb_slice
from rnnbook.models import LanguageModel, torch_lstm
from rnnbook.runtime import seed_everything
from rnnbook.train import (
    BPTTWindows,
    CarriedState,
    bits_per_char,
    token_cross_entropy,
)

V = 50  # the PTB characters with <eos>: the closed vocabulary of ptb_slice(level="char")
VALID_STREAMS = 16
EVAL_K = 100
CELLS = ("lstm", "gru")


@functools.cache
def char_data() -> tuple[torch.Tensor, torch.Tensor]:
    """The whole PTB training and validation splits as character ids (N,) each."""
    data = ptb_slice(n_train=None, n_valid=None, vocab_size=None, level="char")
    if len(data.vocab) != V:
        raise ValueError(f"expected the {V} PTB characters, the text has {len(data.vocab)}")
    return data.train, data.valid


def char_vocab() -> list[str]:
    """The 50 characters, id order (most frequent first), to decode what the model writes."""
    return ptb_slice(n_train=1000, n_valid=1000, vocab_size=None, level="char").vocab


def build_char_lm(cell: str = "lstm", embedding: int = 32, hidden: int = 256) -> LanguageModel:
    """Embedding (50 x ``embedding``) -> one ``cell`` layer of ``hidden`` units -> read-out.

    The LSTM's forget-gate bias starts at 1 (lstm-L1); everything else has torch's and
    :class:`~rnnbook.models.language.LanguageModel`'s initialisation.
    """
    if cell not in CELLS:
        raise ValueError(f"cell must be one of {CELLS}, got {cell!r}")
    if cell == "lstm":
        core = torch_lstm(embedding, hidden, forget_bias=1.0)
    else:
        core = nn.GRU(embedding, hidden, batch_first=True)
    return LanguageModel(V, core)


def charlm_run(
    *,
    cell: str = "lstm",
    seed: int = 0,
    steps: int = 30_000,
    batch: int = 32,
    k: int = 100,
    lr: float = 2e-3,
    clip: float = 5.0,
    embedding: int = 32,
    hidden: int = 256,
    eval_every: int = 1000,
    name: str | None = None,
    device="cpu",
) -> longrun.LongRun:
    """The long run of the character-level PTB model (see the module's docstring); the
    model, its batches and the validation text live on ``device``."""

    def build_model() -> LanguageModel:
        seed_everything(seed)
        return build_char_lm(cell, embedding, hidden).to(device)

    @functools.cache
    def windows() -> BPTTWindows:
        streams = batchify(char_data()[0], batch).to(device)  # (batch, N // batch)
        return BPTTWindows(streams[:, :-1], streams[:, 1:], k)

    @functools.cache
    def valid_streams() -> torch.Tensor:
        return batchify(char_data()[1], VALID_STREAMS).to(device)

    def evaluate(model) -> dict[str, float]:
        return {"valid_bpc": bits_per_char(model, valid_streams(), k=EVAL_K)}

    config = {
        "task": "ptb-char",
        "model": f"LanguageModel(embedding {embedding}, one nn.{cell.upper()} layer, read-out)",
        "cell": cell,
        "embedding": embedding,
        "hidden": hidden,
        "forget_bias": 1.0 if cell == "lstm" else None,
        "data": f"PTB train, all characters, batchify into {batch} streams, windows of {k}, "
        "state carried between windows, zero at each epoch's start",
        "eval": f"PTB valid, all characters, {VALID_STREAMS} streams, windows of {EVAL_K}",
        "batch": batch,
        "k": k,
        "optimizer": "adam",
        "lr": lr,
        "grad_clip_norm": clip,
        "seed": seed,
    }
    return longrun.LongRun(
        name=name or f"{cell}-ptb-char",
        config=config,
        build_model=build_model,
        batch=lambda step: windows()(step),
        loss_fn=CarriedState(token_cross_entropy),
        evaluate=evaluate,
        optimizer=lambda parameters: torch.optim.Adam(parameters, lr=lr),
        steps=steps,
        eval_every=eval_every,
        clip_mode="norm",
        clip_at=clip,
        train_column="train_bpc",
        train_unit=lambda loss: loss / math.log(2.0),
        recent=eval_every,
    )


# --- the run behind the book's checkpoint ----------------------------------------------------

# Chapter 2 loads it (quick profile) or retrains it (full); tests/test_book_checkpoints.py
# checks the committed checkpoint against it. 30,000 steps of 32 x 100 characters (96 M, about
# 19 epochs): 55 minutes on one thread of a shared 2-core machine, 1.623 bpc on PTB valid;
# 1 layer of 256 units, 311,410 parameters, 1.2 MB.
# Each takes the keyword ``device`` (default "cpu").
BOOK_RUNS = {"lstm-ptb-char": lambda **device: charlm_run(cell="lstm", **device)}
BOOK_COMMANDS = {"lstm-ptb-char": "python -m rnnbook.runs charlm --out-dir runs/lstm-ptb-char"}


# --- the command line ------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    parser = longrun.run_parser(
        "charlm",
        "Train Chapter 2's character-level PTB language model",
        "--out-dir runs/lstm-ptb-char",
    )
    parser.add_argument("--cell", choices=CELLS, default="lstm")
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=32, help="parallel streams")
    parser.add_argument("--k", type=int, default=100, help="BPTT window, characters")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--clip", type=float, default=5.0, help="global gradient norm")
    parser.add_argument("--embedding", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--name", help="checkpoint name (default <cell>-ptb-char)")
    args = parser.parse_args(argv)
    whole = ("steps", "batch", "k", "embedding", "hidden", "eval_every", "threads")
    longrun.check_run_arguments(parser, args, whole, positive=("lr", "clip"))
    return args


def main(argv=None) -> int:
    """Exit 0 when the checkpoint is written, 1 when the run is refused, 2 on a NaN or inf."""
    args = parse_args(argv)
    run = charlm_run(
        cell=args.cell,
        seed=args.seed,
        steps=args.steps,
        batch=args.batch,
        k=args.k,
        lr=args.lr,
        clip=args.clip,
        embedding=args.embedding,
        hidden=args.hidden,
        eval_every=args.eval_every,
        name=args.name,
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
