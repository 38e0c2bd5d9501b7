"""Result claims: what a chapter says it measured, checked in the run and recorded for the book.

A chapter states each result through :func:`claim` instead of a bare ``assert``::

    claims.claim(
        "c-beats-lstm",
        "Target c has a lower perplexity than the same-budget LSTM",
        value=ppl["c"], op="<", threshold=ppl["lstm"],
        where="ch5-ptb-results",   # the label of the paragraph that says it
        source=None,               # the source's value, where the claim reproduces one
    )

The claim is checked at once: a failing claim raises :class:`ClaimFailed` (an
``AssertionError``) whose message holds everything below, so the chapter stops where a bare
assert would. A passing claim prints one line under the cell (the sentence, the measured
value against its threshold and the margin) and carries a machine-readable copy of itself
in the output's metadata (``rnnbook/claim``), from which the book's build makes the Claims
page and ``claims.json``, and ``scripts/verify_full.py`` the full profile's record.

Each claim has a **kind**: ``"measured"`` (computed by this run: by a model trained in it, or
by a committed checkpoint that it loads and evaluates on its own data), ``"recorded"`` (a
number that a committed run wrote down: a learning curve, a benchmark's results, a record; it
checks that the text agrees with the record, not that the result reproduces) or ``"source"``
(a transcription of a seed's table checked against the text). Its **margin** says how far it
is from failing, relative to the size of the numbers compared (:func:`margin`); claims of
equality have none.

Implementation checks (shapes, agreement with a reference within a few ulp) stay plain
asserts: they are not results.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field

KINDS = ("measured", "recorded", "source")
OPS = ("<", "<=", ">", ">=", "==", "in")
METADATA_KEY = "rnnbook/claim"

_profile = "?"  # set by rnnbook.setup(): the profile this run states its claims in
_stated: dict[str, Claim] = {}  # this run's claims by id (a re-run cell replaces its own)


class ClaimFailed(AssertionError):
    """A result claim that the run does not support; the message says what and by how much."""


@dataclass(frozen=True)
class Claim:
    """One result claim and what this run measured for it."""

    id: str
    sentence: str
    value: float
    op: str
    threshold: float | tuple[float, float]
    kind: str = "measured"
    where: str = ""
    source: float | None = None
    unit: str = ""
    profile: str = "?"
    margin: float | None = field(default=None)
    holds: bool = True

    def as_dict(self) -> dict:
        record = asdict(self)
        if isinstance(self.threshold, tuple):
            record["threshold"] = list(self.threshold)
        return record

    def condition(self) -> str:
        """The comparison in words, e.g. ``< 0.5`` or ``in [0.2, 0.3]``."""
        if self.op == "in":
            low, high = self.threshold
            return f"in [{_number(low)}, {_number(high)}]"
        return f"{self.op} {_number(self.threshold)}"

    def line(self) -> str:
        """The one line a chapter prints for a claim that holds."""
        unit = f" {self.unit}" if self.unit else ""
        margin = "" if self.margin is None else f", margin {_percent(self.margin)}"
        source = "" if self.source is None else f"; the source: {_number(self.source)}{unit}"
        kind = "" if self.kind == "measured" else f" [{self.kind}]"
        return (
            f"✓ claim {self.id}{kind}: {self.sentence} "
            f"({_number(self.value)}{unit} {self.condition()}{margin}{source})"
        )

    def failure(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        source = "none given" if self.source is None else f"{_number(self.source)}{unit}"
        return (
            f"claim {self.id} does not hold in this run: {self.sentence}\n"
            f"  measured {_number(self.value)}{unit}, claimed {self.condition()}{unit} "
            f"(kind {self.kind}, profile {self.profile}, stated at {self.where or '?'}; "
            f"the source's value: {source})"
        )


def _percent(x: float) -> str:
    """A margin as a percentage: one decimal below 10%, none above."""
    return f"{x:.1%}" if abs(x) < 0.1 else f"{x:.0%}"


def _number(x) -> str:
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_number(v) for v in x) + "]"
    x = float(x)
    if x == int(x) and abs(x) < 1e6:
        return str(int(x))
    return f"{x:.4g}"


def _as_float(x, name: str) -> float:
    """A number from a Python, NumPy or torch scalar; anything else is refused."""
    if hasattr(x, "item") and getattr(x, "ndim", 0) == 0:
        x = x.item()
    if isinstance(x, bool):
        return float(x)
    if not isinstance(x, numbers.Real):
        raise TypeError(f"claim: {name} must be a real number (or a 0-d tensor), got {x!r}")
    x = float(x)
    if math.isnan(x):
        raise ValueError(f"claim: {name} is NaN")
    return x


def margin(value: float, op: str, threshold) -> float | None:
    """How far a claim is from failing, relative to the numbers compared.

    For ``<``/``<=``: ``(threshold - value) / s``; for ``>``/``>=``: ``(value - threshold)
    / s``, with ``s = max(|value|, |threshold|)`` (1 if both are 0); for ``in [low, high]``
    the smaller of the two distances to a bound, relative in the same way. Negative when the
    claim fails; None for ``==``, which holds or does not.
    """
    if op == "==":
        return None
    if op == "in":
        low, high = threshold
        return min(margin(value, ">=", low), margin(value, "<=", high))
    scale = max(abs(value), abs(threshold)) or 1.0
    gap = threshold - value if op in ("<", "<=") else value - threshold
    return gap / scale


def _holds(value: float, op: str, threshold) -> bool:
    if op == "in":
        low, high = threshold
        return low <= value <= high
    return {
        "<": value < threshold,
        "<=": value <= threshold,
        ">": value > threshold,
        ">=": value >= threshold,
        "==": value == threshold,
    }[op]


def claim(
    id: str,
    sentence: str,
    *,
    value,
    op: str,
    threshold,
    kind: str = "measured",
    where: str = "",
    source=None,
    unit: str = "",
) -> None:
    """State a result claim: check it now, print it, and record it for the Claims page.

    Args:
        id: short and unique within the chapter, e.g. ``"c-beats-lstm"``.
        sentence: what the chapter claims, in a short sentence.
        value: the measured number (Python, NumPy or 0-d torch scalar; a bool counts 0/1).
        op: one of ``<``, ``<=``, ``>``, ``>=``, ``==``, ``in``.
        threshold: a number, or ``(low, high)`` for ``in`` (both bounds included).
        kind: ``"measured"``, ``"recorded"`` or ``"source"`` (see the module's docstring).
        where: the label of the paragraph that makes the claim (a MyST target in the chapter).
        source: the source's value where the claim reproduces one, else None.
        unit: printed after the numbers, e.g. ``"ppl"`` or ``"%"``.

    Returns nothing (so that a claim at the end of a cell prints only its line); the
    :class:`Claim` is in :func:`stated`. Raises :class:`ClaimFailed` if it does not hold.
    """
    if not isinstance(id, str) or not id or any(c.isspace() for c in id):
        raise ValueError(f"claim: id must be a non-empty string without spaces, got {id!r}")
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError(f"claim {id}: the sentence must be a non-empty string, got {sentence!r}")
    if op not in OPS:
        raise ValueError(f"claim {id}: op must be one of {', '.join(OPS)}, got {op!r}")
    if kind not in KINDS:
        raise ValueError(f"claim {id}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    value = _as_float(value, "value")
    if op == "in":
        if not isinstance(threshold, (tuple, list)) or len(threshold) != 2:
            raise ValueError(f"claim {id}: op 'in' needs threshold=(low, high), got {threshold!r}")
        threshold = (_as_float(threshold[0], "low"), _as_float(threshold[1], "high"))
        if threshold[0] > threshold[1]:
            raise ValueError(f"claim {id}: the interval {list(threshold)} is empty (low > high)")
    else:
        threshold = _as_float(threshold, "threshold")
    source = None if source is None else _as_float(source, "source")
    stated = Claim(
        id=id,
        sentence=sentence.strip(),
        value=value,
        op=op,
        threshold=threshold,
        kind=kind,
        where=where,
        source=source,
        unit=unit,
        profile=_profile,
        margin=margin(value, op, threshold),
        holds=_holds(value, op, threshold),
    )
    _stated[id] = stated
    if not stated.holds:
        raise ClaimFailed(stated.failure())
    _show(stated)


def _show(stated: Claim) -> None:
    """One line under the cell; in a notebook, the record rides in the output's metadata."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:  # pragma: no cover - IPython comes with Jupyter
        shell = None
    if shell is None or not hasattr(shell, "kernel"):
        print(stated.line())
        return
    from IPython.display import display

    display({"text/plain": stated.line()}, raw=True, metadata={METADATA_KEY: stated.as_dict()})


def set_profile(name: str) -> None:
    """Called by :func:`rnnbook.setup`: the profile the following claims are stated in (and
    a fresh start: the claims stated before are forgotten)."""
    global _profile
    _profile = name
    _stated.clear()


def stated() -> list[Claim]:
    """The claims this process has stated so far (failed ones included), in order."""
    return list(_stated.values())


def from_notebook(notebook: dict) -> list[dict]:
    """The claim records of an executed notebook (nbformat 4 as a dict), in order."""
    found = []
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get(METADATA_KEY)
            if record is not None:
                found.append(record)
    return found
