"""The embedded Reber grammar (Chapter 5): strings, their legal continuations, and errors.

The inner Reber automaton emits one of two symbols from each state, each with probability
1/2 (state: symbol -> next state):

    0: B -> 1      1: T -> 2, P -> 3      2: S -> 2, X -> 4      3: T -> 3, V -> 5
    4: X -> 3, S -> 6      5: P -> 4, V -> 6      6: E -> end

An embedded string is ``B b <inner string> b E`` with b in {T, P}: the symbol before the
last must repeat the second, across the whole inner string. That is the long-range
dependency; everything else is local. A next-symbol predictor is judged three ways
(:func:`prediction_errors`): wrong symbols (Hamming; the coin flips of the grammar set a
floor), illegal symbols (0 for a model that learnt the grammar), and the critical symbol.
"""

from __future__ import annotations

import random

import torch

from rnnbook._validate import check_positive_int

SYMBOLS = "BTPSXVE"
INDEX = {symbol: i for i, symbol in enumerate(SYMBOLS)}
# state -> ((symbol, next state), (symbol, next state)); state 6 only ends the string
AUTOMATON = {
    0: (("B", 1),),
    1: (("T", 2), ("P", 3)),
    2: (("S", 2), ("X", 4)),
    3: (("T", 3), ("V", 5)),
    4: (("X", 3), ("S", 6)),
    5: (("P", 4), ("V", 6)),
    6: (("E", None),),
}


def reber_string(rng: random.Random) -> str:
    """One string of the inner Reber grammar, from ``B`` to ``E``."""
    state, symbols = 0, []
    while state is not None:
        symbol, state = rng.choice(AUTOMATON[state])
        symbols.append(symbol)
    return "".join(symbols)


def embedded_reber_string(rng: random.Random) -> str:
    """One embedded Reber string: ``B b <inner> b E``, b = T or P."""
    branch = rng.choice("TP")
    return f"B{branch}{reber_string(rng)}{branch}E"


def strings_of_length(n: int, L: int, seed: int = 0) -> list[str]:
    """``n`` embedded Reber strings of exactly ``L`` symbols, by rejection sampling.

    Lengths vary from 9 up: about 1.1% of the strings have 20 symbols, so n = 250 at L = 20
    takes about 22,000 draws.
    """
    check_positive_int(n, "n")
    if isinstance(L, bool) or not isinstance(L, int) or L < 9:
        raise ValueError(f"an embedded Reber string has at least 9 symbols, got L = {L!r}")
    rng, found = random.Random(seed), []
    while len(found) < n:
        s = embedded_reber_string(rng)
        if len(s) == L:
            found.append(s)
    return found


def legal_successors(prefix: str) -> set[str]:
    """The symbols that may follow ``prefix`` in some embedded Reber string (empty after the
    final E). Raises ValueError if the prefix itself is not the start of such a string."""
    if not prefix:
        return {"B"}
    if prefix[0] != "B":
        raise ValueError(f"an embedded Reber string starts with B, got {prefix!r}")
    if len(prefix) == 1:
        return {"T", "P"}
    branch = prefix[1]
    if branch not in "TP":
        raise ValueError(f"an embedded Reber string has T or P second, got {prefix!r}")
    state, rest = 0, prefix[2:]
    for i, symbol in enumerate(rest):
        if state is None:  # the inner string is complete: the branch, then E, then nothing
            tail = rest[i:]
            if tail not in (branch, branch + "E"):
                raise ValueError(f"{prefix!r} is not an embedded Reber prefix")
            return {"E"} if tail == branch else set()
        moves = dict(AUTOMATON[state])
        if symbol not in moves:
            raise ValueError(f"{prefix!r} is not an embedded Reber prefix")
        state = moves[symbol]
    if state is None:
        return {branch}
    return {symbol for symbol, _ in AUTOMATON[state]}


def is_grammatical(s: str) -> bool:
    """Whether ``s`` is a complete embedded Reber string."""
    try:
        return legal_successors(s) == set() and len(s) >= 9
    except ValueError:
        return False


def one_hot(strings: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets for next-symbol prediction, for strings of one length L.

    Returns ``x`` (n, L-1, 7), the one-hot symbols 0..L-2, and ``y`` (n, L-1), the indices of
    symbols 1..L-1.
    """
    lengths = {len(s) for s in strings}
    if len(lengths) != 1:
        raise ValueError(f"the strings must have one length, got lengths {sorted(lengths)}")
    ids = torch.tensor([[INDEX[c] for c in s] for s in strings])
    x = torch.nn.functional.one_hot(ids[:, :-1], len(SYMBOLS)).float()
    return x, ids[:, 1:]


def prediction_errors(predicted: torch.Tensor, strings: list[str]) -> dict[str, float]:
    """Errors per string of the predicted next symbols (n, L-1) (indices, e.g. an arg-max).

    * ``hamming``: predictions that differ from the actual next symbol;
    * ``illegal``: predictions the grammar does not allow after the prefix;
    * ``critical``: the share of strings whose symbol before the last is predicted wrong
      (it must repeat the second symbol; chance is 1/2).
    """
    n, steps = predicted.shape
    hamming = illegal = critical = 0
    for b, s in enumerate(strings):
        for t in range(steps):
            guess = SYMBOLS[int(predicted[b, t])]
            hamming += guess != s[t + 1]
            illegal += guess not in legal_successors(s[: t + 1])
        critical += SYMBOLS[int(predicted[b, len(s) - 3])] != s[1]
    return {"hamming": hamming / n, "illegal": illegal / n, "critical": critical / n}
