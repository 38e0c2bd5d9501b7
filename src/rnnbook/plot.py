"""The book's figure theme and the plotting helpers every chapter shares.

One style for every figure: a transparent background and mid-grey text and axes, so a
figure reads on the book's light and dark pages alike; the Okabe-Ito colours, which stay
distinct under the common colour-vision deficiencies, paired with line styles so no curve
is told apart by colour alone. Each model family keeps its colour across chapters, and
every training figure is stamped with the profile that produced it.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable, Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

INK = "#7f7f7f"  # legible on white and on the dark theme's near-black
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#999999"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3))]
FAMILY_COLORS = {
    "srn": "#D55E00",
    "lstm": "#0072B2",
    "gru": "#009E73",
    "ntm": "#CC79A7",
    "dnc": "#CC79A7",
    "lmu": "#E69F00",
    "clockwork": "#56B4E9",
    "sba": "#999999",
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


def stamp(fig, profile, recorded: str | None = None) -> None:
    """Write ``profile: <name>`` in the figure's lower-right corner, or, for a figure drawn
    from committed runs whatever the profile, ``recorded runs: <recorded>``."""
    text = f"recorded runs: {recorded}" if recorded else f"profile: {profile}"
    fig.text(0.995, 0.005, text, ha="right", va="bottom", fontsize=8, color=INK)


def figure(profile, ncols: int = 1, nrows: int = 1, recorded: str | None = None, **kwargs):
    """``plt.subplots`` with the profile stamp (or the ``recorded`` one, see :func:`stamp`);
    returns ``(fig, ax)`` (``ax`` an array if >1)."""
    fig, ax = plt.subplots(nrows, ncols, **kwargs)
    stamp(fig, profile, recorded)
    return fig, ax


def style(index: int) -> dict:
    """Colour and line style of the ``index``-th curve of a figure."""
    return {
        "color": PALETTE[index % len(PALETTE)],
        "linestyle": LINESTYLES[index % len(LINESTYLES)],
    }


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
