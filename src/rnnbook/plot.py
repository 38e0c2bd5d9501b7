"""The book's figure theme and the plotting helpers every chapter shares.

One style for every figure: a transparent background and mid-grey text and axes, so a
figure reads on the book's light and dark pages alike; the Okabe-Ito colours, which stay
distinct under the common colour-vision deficiencies, paired with line styles so no curve
is told apart by colour alone. Every training figure is stamped with the profile that
produced it.

Three rules hold for every figure a chapter draws:

* **A model looks the same on every page.** :func:`model_style` gives the colour, marker
  and line style of a model by its name as the book writes it ("LSTM", "S_c, M = 2",
  "ABS-ASA (w)"), from the one table ``MODEL_STYLES``. Curves that are not models
  (seeds, values of a setting, the columns of a table) take :func:`style` by position.
* **No text below 8 pt as the page shows it.** The book's column shows an image at most
  ``PAGE_WIDTH`` (7.0 in) wide at 100 %, which a figure at most ``FIGURE_WIDTH``
  (6.8 in) wide makes with the 0.1-in margins Jupyter saves around it; a wider image is scaled
  down, so a font of ``s`` pt in an image ``w`` in wide shows at ``s * min(1, PAGE_WIDTH / w)``.
  Every figure made by :func:`figure` (or stamped by :func:`stamp`) checks its texts each time
  it is drawn, at the size it is drawn (Jupyter's cropped image), and warns
  (:class:`SmallTextWarning`) about any below ``MIN_TEXT_PT``: the warning shows in the
  chapter's output, where the browser suite refuses it. :func:`small_texts` lists them.
* Figures of committed runs or of the source's tables say so in their stamp (:func:`stamp`).
"""

from __future__ import annotations

import base64
import html
import io
import warnings
from collections.abc import Callable, Sequence
from typing import NamedTuple

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

INK = "#7f7f7f"  # legible on white and on the dark theme's near-black
# Okabe-Ito without its black (invisible on the dark page) and its yellow (invisible on white)
BLUE, VERMILLION, GREEN, PINK, ORANGE, SKY, GREY = PALETTE = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#999999",
]  # fmt: skip
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3))]
FAMILY_COLORS = {  # a family's colour in the diagrams; in figures, its models take MODEL_STYLES
    "srn": VERMILLION,
    "lstm": BLUE,
    "gru": GREEN,
    "ntm": PINK,
    "dnc": PINK,
    "lmu": ORANGE,
    "clockwork": SKY,
    "sba": GREY,
}

# The page. Its column is 768 CSS px wide (the reader review measured it at a 1400-px window):
# 6.98 in of a figure at the theme's 110 dpi. Jupyter saves a figure cropped to what it draws
# plus 0.1 in on each side, so a figure at most FIGURE_WIDTH wide makes an image the page shows
# at 100 %; a wider image is scaled down to the column, and its text with it.
FIGURE_WIDTH = 6.8  # inches: the widest figsize a chapter uses
PAGE_WIDTH = 7.0  # inches: the widest image shown at 100 % (FIGURE_WIDTH and the two margins)
MIN_TEXT_PT = 8.0  # the smallest text a figure may show on the page


class ModelStyle(NamedTuple):
    """How one model is drawn in every figure: a colour, a marker and a line style."""

    color: str
    marker: str
    linestyle: str


# Every model the book draws, by its name as the book writes it. The rules, so a new model
# can join: the models of Part I and of Chapter 10 keep their family's colour (FAMILY_COLORS);
# the variants of one idea that a figure shows side by side (the SBA variants, the readers)
# take different colours; a model that shares a colour with another has its own marker and,
# where it can, its own line style, so no two models are told apart by colour alone. A
# gate-level zoneout Z_x takes the colour of its SBA twin S_x, a plus and a dashed line.
MODEL_STYLES: dict[str, ModelStyle] = {
    # Part I and the arena (Chapters 1-4 and 10)
    "SRN": ModelStyle(VERMILLION, "o", "-"),
    "orthogonal RNN": ModelStyle(VERMILLION, "v", "--"),
    "orthogonal RNN, frozen W": ModelStyle(VERMILLION, "^", ":"),
    "LSTM": ModelStyle(BLUE, "s", "-"),
    "LSTM, scalar input": ModelStyle(BLUE, "X", "--"),
    "GRU": ModelStyle(GREEN, "^", "-"),
    "NTM": ModelStyle(PINK, "D", "-"),
    "DNC": ModelStyle(PINK, "P", "--"),
    "parallel LMU": ModelStyle(ORANGE, "v", "-"),
    "LMU": ModelStyle(ORANGE, "<", "--"),  # the original LMU, stepped in a loop
    "LMU, LTI loop": ModelStyle(ORANGE, ">", "-."),
    "Transformer": ModelStyle(GREY, "p", "-"),
    "recurrent Transformer": ModelStyle(GREY, "8", "--"),
    # Chapter 10's controls (rnnbook.arena.baselines)
    "MLP (no memory)": ModelStyle(GREY, "o", ":"),
    "MLP on x_t, x_t-1": ModelStyle(GREY, "v", ":"),
    "LSTM, chrono init": ModelStyle(BLUE, "D", "-."),
    "LSTM-64, chrono init": ModelStyle(BLUE, "v", "-."),
    "LSTM-128, chrono init": ModelStyle(BLUE, "<", "-."),
    # Chapter 5
    "Clockwork RNN": ModelStyle(SKY, "h", "-"),
    "CWRNN (1, 4, 16, 64)": ModelStyle(SKY, "d", "--"),
    "RPN": ModelStyle(GREY, "d", "-."),
    "SCRN": ModelStyle(VERMILLION, "<", "-."),
    # Chapter 6: the SBA variants (Chapter 7 draws the source's results of all of them)
    "S_c": ModelStyle(VERMILLION, "X", "-"),
    "S_ic": ModelStyle(GREEN, "D", "-"),
    "S_h": ModelStyle(PINK, "v", "-"),
    "S_fc": ModelStyle(ORANGE, "h", "-"),
    "S_ch": ModelStyle(GREY, "s", "-"),
    "S_ff": ModelStyle(SKY, "^", "-"),
    "S_fh": ModelStyle(PINK, "<", "-."),
    # Chapter 7: Krueger's zoneout, and the gate-level zoneout of each SBA variant
    "zoneout": ModelStyle(ORANGE, "o", "--"),
    "Z_c": ModelStyle(VERMILLION, "P", "--"),
    "Z_i": ModelStyle(GREEN, "P", "--"),
    "Z_f": ModelStyle(SKY, "P", "--"),
    "Z_ch": ModelStyle(GREY, "P", "--"),
    # Chapters 8 and 9: the readers
    "HAN-ptr": ModelStyle(GREEN, "*", "-"),
    "HAN-doc-vec": ModelStyle(BLUE, "d", "-."),
    "RAN": ModelStyle(ORANGE, "p", "-."),
    "SGRU": ModelStyle(BLUE, "o", "--"),
    "SENS-GRU": ModelStyle(PINK, "s", "--"),
    "ABS-AS (w)": ModelStyle(BLUE, "^", "--"),
    "ABS-ASA (w)": ModelStyle(VERMILLION, "s", "--"),
    "ABS-ASA (s)": ModelStyle(SKY, "s", "-."),
    "ABS-ASA (ws)": ModelStyle(GREY, "D", "-."),
}

# Other names the chapters give the same models (a setting in the name, a shorter form).
MODEL_ALIASES: dict[str, str] = {
    "LSTM (3 x 128)": "LSTM",
    "CWRNN": "Clockwork RNN",
    "CWRNN (1..128)": "Clockwork RNN",
    "LMU (original)": "LMU",
    "S_c, M = 2": "S_c",
    "S_ic, M = H": "S_ic",
    "S_h, M = H": "S_h",
    "S_fc, M = H": "S_fc",
    "zoneout (0.5, 0.05)": "zoneout",
    "Z_c, p = 0.2": "Z_c",
    "Z_i, p = 0.7": "Z_i",
    "SENS-GRU (w)": "SENS-GRU",
}

THEME = {
    "figure.facecolor": "none",
    "axes.facecolor": "none",
    "savefig.facecolor": "none",
    "savefig.transparent": True,
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "figure.figsize": (6.4, 3.6),
    "figure.constrained_layout.use": True,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "text.color": INK,
    "axes.labelcolor": INK,
    "axes.edgecolor": INK,
    "axes.titlecolor": INK,
    "xtick.color": INK,
    "ytick.color": INK,
    "grid.color": INK,
    "grid.alpha": 0.25,
    "axes.grid": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "legend.labelcolor": INK,
    "lines.linewidth": 1.8,
    "image.cmap": "cividis",
    "axes.prop_cycle": mpl.cycler(color=PALETTE) + mpl.cycler(linestyle=LINESTYLES),
}


def use_theme() -> None:
    """Apply the book's theme to every later figure (the chapter's setup cell does this once)."""
    mpl.rcParams.update(THEME)


class SmallTextWarning(UserWarning):
    """A figure shows a text below ``MIN_TEXT_PT`` at the width the page shows it."""


def shown_size(fig, text) -> float:
    """The size in points at which the page shows ``text`` (a Matplotlib ``Text`` of ``fig``):
    its font size, scaled down as the image is when it is wider than ``PAGE_WIDTH``. The
    image's width is the figure's, or, while Jupyter saves it cropped (``bbox_inches="tight"``),
    the cropped width, which Matplotlib reports as the figure's during that drawing."""
    return text.get_fontsize() * min(1.0, PAGE_WIDTH / fig.get_figwidth())


def small_texts(fig, minimum: float = MIN_TEXT_PT) -> list[tuple[str, float]]:
    """Every visible, non-empty text of ``fig`` that the page shows below ``minimum`` points:
    ``[(text, shown size in pt)]``. Tick labels, legends, titles, annotations and the stamp
    are all ``Text`` artists, so all of them are checked."""
    found = []
    for text in fig.findobj(mpl.text.Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        size = shown_size(fig, text)
        if size < minimum - 1e-9:
            found.append((text.get_text(), round(size, 2)))
    return found


def _check_text_on_draw(event) -> None:
    fig = event.canvas.figure
    if getattr(fig, "_rnnbook_warned", False):
        return  # one warning per figure, however often it is drawn
    found = small_texts(fig)
    if found:
        fig._rnnbook_warned = True
        shown = ", ".join(f"{text!r} at {size:g} pt" for text, size in found[:6])
        more = f" and {len(found) - 6} more" if len(found) > 6 else ""
        warnings.warn(
            f"a figure drawn {fig.get_figwidth():.2f} in wide shows text below {MIN_TEXT_PT:g} pt "
            f"on the page (a column of {PAGE_WIDTH:g} in): {shown}{more}. Make the figure at "
            f"most {FIGURE_WIDTH:g} in wide, keep its texts inside it, or make the font larger.",
            SmallTextWarning,
            stacklevel=1,
        )


def stamp(fig, profile, recorded: str | None = None) -> None:
    """Write ``profile: <name>`` in the figure's lower-right corner, or, for a figure drawn
    from committed runs whatever the profile, ``recorded runs: <recorded>``; and check the
    figure's texts every time it is drawn (:func:`small_texts`, a :class:`SmallTextWarning`)."""
    text = f"recorded runs: {recorded}" if recorded else f"profile: {profile}"
    fig.text(0.995, 0.005, text, ha="right", va="bottom", fontsize=8, color=INK)
    if not getattr(fig, "_rnnbook_checks_text", False):
        fig.canvas.mpl_connect("draw_event", _check_text_on_draw)
        fig._rnnbook_checks_text = True


def figure(profile, ncols: int = 1, nrows: int = 1, recorded: str | None = None, **kwargs):
    """``plt.subplots`` with the profile stamp (or the ``recorded`` one, see :func:`stamp`);
    returns ``(fig, ax)`` (``ax`` an array if >1)."""
    fig, ax = plt.subplots(nrows, ncols, **kwargs)
    stamp(fig, profile, recorded)
    return fig, ax


def style(index: int) -> dict:
    """Colour and line style of the ``index``-th curve of a figure: for curves that are not
    models (seeds, values of a setting); a model takes :func:`model_style`."""
    return {
        "color": PALETTE[index % len(PALETTE)],
        "linestyle": LINESTYLES[index % len(LINESTYLES)],
    }


def model_of(name: str) -> str:
    """The key of ``MODEL_STYLES`` that ``name`` stands for (itself or an alias)."""
    if name in MODEL_STYLES:
        return name
    if name in MODEL_ALIASES:
        return MODEL_ALIASES[name]
    known = sorted([*MODEL_STYLES, *MODEL_ALIASES])
    raise ValueError(
        f"no style for the model {name!r}: add it to rnnbook.plot.MODEL_STYLES (a new model) "
        f"or MODEL_ALIASES (another name of a model there). Known names: {known}"
    )


def model_style(name: str, *, points: bool = False) -> dict:
    """Matplotlib keywords that draw model ``name`` as every figure of the book draws it.

    ``name`` is the model's name as the book writes it, a key of ``MODEL_STYLES`` or
    of ``MODEL_ALIASES``: ``ax.plot(x, y, label=name, **plot.model_style(name))``.
    Returns ``color``, ``marker`` and ``linestyle``; with ``points=True`` only ``color`` and
    ``marker``, for ``scatter``, ``errorbar`` or a line whose style means something else in
    the figure. A long curve can thin its markers with ``markevery``.

    The table of every model (also in the package reference) follows. A test holds it to
    one (colour, marker, line style) per model and to every model name a chapter draws.
    """
    s = MODEL_STYLES[model_of(name)]
    if points:
        return {"color": s.color, "marker": s.marker}
    return {"color": s.color, "marker": s.marker, "linestyle": s.linestyle}


COLOR_NAMES = {BLUE: "blue", VERMILLION: "vermilion", GREEN: "green", PINK: "reddish purple",
               ORANGE: "orange", SKY: "sky blue", GREY: "grey"}  # fmt: skip
_LINE_NAMES = {"-": "solid", "--": "dashed", "-.": "dash-dot", ":": "dotted"}


def style_table() -> str:
    """``MODEL_STYLES`` as a reStructuredText table: model, colour, marker, line style,
    and the other names the chapters give it (``MODEL_ALIASES``)."""
    rows = [("model", "colour", "marker", "line", "also written")]
    for name, s in MODEL_STYLES.items():
        aliases = ", ".join(a for a, m in MODEL_ALIASES.items() if m == name)
        rows.append((name, COLOR_NAMES[s.color], f"``{s.marker}``", _LINE_NAMES[s.linestyle],
                     aliases))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(c.ljust(w) for c, w in zip(rows[0], widths)).rstrip(), rule]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows[1:]]
    return "\n".join([*lines, rule])


model_style.__doc__ += "\n" + "\n".join("    " + line for line in style_table().splitlines()) + "\n"


def smooth(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing moving average over ``window`` values (the first ones average what exists)."""
    values = np.asarray(values, dtype=float)
    if window <= 1 or len(values) == 0:
        return values
    cumsum = np.cumsum(np.insert(values, 0, 0.0))
    counts = np.minimum(np.arange(1, len(values) + 1), window)
    starts = np.arange(1, len(values) + 1) - counts
    return (cumsum[1:] - cumsum[starts]) / counts


def curves(ax, series: dict[str, Sequence[float]], *, window: int = 1, baseline=None, **labels):
    """Plot named series (e.g. losses per model) with the shared styles; optional baseline."""
    for i, (name, values) in enumerate(series.items()):
        ax.plot(smooth(values, window), label=name, **style(i))
    if baseline is not None:
        value, text = baseline
        ax.axhline(value, color=INK, linewidth=1, linestyle=(0, (2, 2)))
        ax.annotate(text, (0, value), xytext=(2, 3), textcoords="offset points", fontsize=8)
    ax.set(**labels)
    ax.legend()
    return ax


def figure_png(fig) -> bytes:
    """The figure as PNG bytes (and the figure closed)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def _slider_label(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _frame_html(png: bytes, alt: str) -> str:
    """An ``<img>`` of ``png`` with its alt text, drawn for both themes (class dark-light)."""
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt, quote=True)}" '
        'class="dark-light" style="display: block; max-width: 100%; height: auto">'
    )


# ipywidgets 7 has no Stack; a Tab with this class stands in for one (see _frame_box).
FRAMES_CLASS = "rnnbook-frames"
_HIDE_TAB_BAR = (
    f"<style>.{FRAMES_CLASS} > .p-TabBar, .{FRAMES_CLASS} > .lm-TabBar "
    f"{{display: none !important}} .{FRAMES_CLASS} > .widget-tab-contents "
    "{border: none !important; padding: 0 !important}</style>"
)


def _frame_box(widgets, frames: list, titles: list[str], index: int):
    """A widget that shows one of ``frames`` at a time (its ``selected_index``), and the
    widgets that must be shown beside it: ``(box, extras)``.

    ipywidgets 8 has ``Stack`` for this. ipywidgets 7 (Colab ships 7.7.1) has none, so the
    frames go into a ``Tab``, which also shows only its selected child, and an ``HTML``
    widget beside it carries the style rule that hides the tab titles (Lumino's tab bar:
    ``p-TabBar`` in ipywidgets 7, ``lm-TabBar`` in later versions), so the slider is the one
    control. The titles are set anyway: without the style (a front end that strips it) the
    tabs are a second, working control with the slider's labels.
    """
    if hasattr(widgets, "Stack"):
        return widgets.Stack(frames, selected_index=index), []
    tabs = widgets.Tab(frames)
    for i, title in enumerate(titles):
        tabs.set_title(i, title)
    tabs.selected_index = index
    tabs.add_class(FRAMES_CLASS)
    # the style applies from a hidden element too: no empty line under the figure
    return tabs, [widgets.HTML(value=_HIDE_TAB_BAR, layout=widgets.Layout(display="none"))]


def slider_figure(
    draw: Callable[[object], object],
    values: Sequence,
    description: str,
    *,
    alt: str | Callable[[object], str] = "{description} = {label}",
    index: int = 0,
):
    """A slider over precomputed figures that works without a kernel.

    ``draw(value)`` returns a Matplotlib figure for each value. All figures are rendered now,
    as images in an ipywidgets ``Stack``, and the slider is linked to the stack in the
    browser (``jslink``), so moving it works in Jupyter and in the static HTML alike.
    ipywidgets 7 (Colab's) has no ``Stack``: there the images go into a ``Tab``, which
    shows one child at a time like a stack, with its row of tab titles hidden by a style
    rule (``_frame_box``); the slider is linked to it the same way.

    ``alt`` is each image's text alternative, for a reader who cannot see it: a function of
    the value, or a format string with the fields ``{value}``, ``{label}`` (the value as the
    slider shows it) and ``{description}``. Say what the frame shows at that value; the
    default only names the value. The texts must not be empty and must tell the frames
    apart. Each frame is an ``HTML`` widget holding an ``<img>`` with that ``alt``: the
    ``Image`` widget has no alt attribute, and the book's static widget manager could not
    render it with a ``tooltip`` either.
    """
    import ipywidgets as widgets

    if len(values) == 0:
        raise ValueError("slider_figure needs at least one value")
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise TypeError(f"index must be an integer, not {type(index).__name__}")
    if not 0 <= index < len(values):
        raise IndexError(f"index {index} is outside the {len(values)} values")
    index = int(index)
    if isinstance(alt, str):
        template = alt

        def alt(value):
            label = _slider_label(value)
            return template.format(value=value, label=label, description=description)

    elif not callable(alt):
        raise TypeError(f"alt must be a format string or a function, not {type(alt).__name__}")
    texts = [alt(v) for v in values]
    for value, text in zip(values, texts):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"the alt text for {value!r} is empty or not a string: {text!r}")
    if len(set(texts)) < len(texts):
        raise ValueError("the alt texts must tell the frames apart (two values share one)")
    frames = []
    for value, text in zip(values, texts):
        frame = widgets.HTML(value=_frame_html(figure_png(draw(value)), text.strip()))
        frame.layout.max_width = "100%"
        frames.append(frame)
    stack, extra = _frame_box(widgets, frames, [_slider_label(v) for v in values], index)
    slider = widgets.SelectionSlider(
        options=[(_slider_label(v), i) for i, v in enumerate(values)],
        index=index,
        description=description,
        continuous_update=True,
        style={"description_width": "initial"},
        layout=widgets.Layout(width="90%"),
    )
    widgets.jslink((slider, "index"), (stack, "selected_index"))
    return widgets.VBox([slider, stack, *extra])
