"""Exercise checkers: call them on your answer; they test it and give hints, not solutions.

One module per chapter (``rnnbook.checks.rnn_bptt``); :mod:`grading` holds what they share.
"""

from rnnbook.checks import abs, arena, clockwork, han, lmu, lstm_gru, ntm, rnn_bptt, sba, zoneout
from rnnbook.checks.grading import CheckFailed, remember_torch_and_the_book

remember_torch_and_the_book()  # what a checker finds replaced when it starts is refused

__all__ = [
    "CheckFailed",
    "abs",
    "arena",
    "clockwork",
    "han",
    "lmu",
    "lstm_gru",
    "ntm",
    "rnn_bptt",
    "sba",
    "zoneout",
]
