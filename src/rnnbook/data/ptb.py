"""The Penn Treebank (Mikolov's language-modelling version) from the registry."""

from __future__ import annotations

from rnnbook._validate import check_choice
from rnnbook.data.registry import fetch


def load_ptb(split: str = "train") -> str:
    """The text of ``split`` (train, valid or test), a sentence per line, rare words ``<unk>``."""
    check_choice(split, "split", ("train", "valid", "test"))
    return (fetch("ptb") / f"ptb.{split}.txt").read_text(encoding="utf-8")
