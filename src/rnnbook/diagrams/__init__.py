"""The book's architecture diagrams, drawn by code as SVG for its light and dark pages.

Each function returns a :class:`Diagram`, which Jupyter (and the book's HTML, through
myst-nb) shows as an ``image/svg+xml`` output. The drawings follow the figure theme of
:mod:`rnnbook.plot`: a transparent background, text and lines in its mid-grey ``INK``
(legible on white and on the dark theme's near-black) and Okabe-Ito colours for the few
things that stand out, never pure black or white. Labels are plain Unicode text with
subscripts as ``<tspan>`` elements, in the symbols of the chapters' equations.

The SVG carries a ``<title>`` and a ``<desc>`` for readers of the notebook who cannot see
it. In the book the diagram is an ``<img>``, whose text alternative is its figure caption:
the cell that shows a diagram carries ``mystnb: figure: caption:`` metadata like any other
figure cell (``book/_ext/image_alt.py`` fails the build otherwise). A cell that also sets
``mystnb: image: alt:`` must repeat ``classes: dark-light`` there: a cell's ``image``
options replace the book's, and without that class the dark theme dims the drawing.

The SVG has a fixed width and height (its viewBox) and scales down with
``max-width: 100%``. With ``width="100%"`` alone, Chromium would give the ``<img>`` a
natural size of 300 x 150, and the browser suite, which measures a figure's ink at its
natural size, would find the thin grey lines too faint.

The package has one module per diagram (``rnn``, ``lstm``, ``gru``, ``ntm``, ``lmu``,
``clockwork``, ``sba``, ``zoneout``, ``han``, ``abs``, named after the models they draw) and
one shared drawing layer, ``rnnbook.diagrams.canvas``: the theme's colours, labels with
subscripts, and the ``Canvas`` that every diagram draws on.
Every name is importable from the package itself: ``from rnnbook import diagrams;
diagrams.lstm_cell()``.
"""

from __future__ import annotations

# The worked examples behind two drawings stay importable here, as before the split.
from .abs import _abs_example as _abs_example
from .abs import abs_layer
from .canvas import (
    ACCENT,
    BLUE,
    FONT,
    GREEN,
    GREY,
    INK,
    MIN_TEXT,
    ORANGE,
    PALETTE,
    PINK,
    SIGMOID,
    SIZE,
    SKY,
    SMALL,
    TANH,
    VERMILLION,
    Canvas,
    Diagram,
    label_width,
)
from .clockwork import clockwork_architecture
from .gru import gru_cell
from .han import han_reader
from .lmu import lmu_toeplitz
from .lstm import lstm_cell
from .ntm import _ntm_weightings as _ntm_weightings
from .ntm import ntm_heads
from .rnn import unrolled_rnn
from .sba import sba_layer
from .zoneout import zoneout_cell

# Every diagram by name, in the order of the chapters.
ALL = {
    "unrolled_rnn": unrolled_rnn,
    "lstm_cell": lstm_cell,
    "gru_cell": gru_cell,
    "ntm_heads": ntm_heads,
    "lmu_toeplitz": lmu_toeplitz,
    "clockwork_architecture": clockwork_architecture,
    "sba_layer": sba_layer,
    "zoneout_cell": zoneout_cell,
    "han_reader": han_reader,
    "abs_layer": abs_layer,
}

__all__ = [
    "ALL",
    "Diagram",
    "label_width",
    *ALL,
    "Canvas",
    "ACCENT",
    "SIGMOID",
    "TANH",
    "BLUE",
    "VERMILLION",
    "GREEN",
    "PINK",
    "ORANGE",
    "SKY",
    "GREY",
    "INK",
    "PALETTE",
    "FONT",
    "SIZE",
    "SMALL",
    "MIN_TEXT",
]
