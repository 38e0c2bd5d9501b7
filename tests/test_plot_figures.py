"""rnnbook.plot's rules for every chapter figure: one style per model across the book, and no
text below 8 pt at the width the page shows a figure.

Two halves. The model scheme: every model name a chapter draws has a style, and no two models
share one. The text size: the check that every figure made through ``plot.figure`` runs when it
is drawn (so the chapters' own execution runs it: a small text is a warning in the page's
output, which the browser suite refuses), and a reading of the chapters' code for the sizes
they set by hand.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import nbformat
import pytest

from rnnbook import plot
from rnnbook.arena import baselines, zoo
from rnnbook.arena.results import arena_style

CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"

# The models each chapter draws, by the names it gives them (its labels and dictionary keys).
# A chapter asks plot.model_style for each, which fails on a name the scheme lacks; this list
# keeps the scheme complete without executing the chapters, and each name here must still be
# in its chapter's code (below), so the list follows the chapters.
CHAPTER_MODELS = {
    "01_rnn_bptt": ["SRN"],
    "02_lstm_gru": ["SRN", "LSTM", "GRU"],
    "03_ntm": ["NTM", "LSTM (3 x 128)"],
    "03_ntm_at_work": ["NTM", "LSTM (3 x 128)"],
    "04_lmu": ["parallel LMU", "LSTM", "LMU (original)", "LMU, LTI loop"],
    "05_clockwork": ["SRN", "CWRNN (1..128)", "CWRNN (1, 4, 16, 64)", "LSTM", "RPN", "SCRN",
                     "CWRNN"],
    "06_sba": ["LSTM", "S_c, M = 2", "S_ic, M = H", "S_h, M = H", "S_ic"],
    "07_update_penalties": [],  # the penalised runs of S_ic and S_c: curves by penalty, plot.style
    "07_zoneout": ["LSTM", "zoneout (0.5, 0.05)", "Z_c, p = 0.2", "Z_i, p = 0.7", "S_ch", "S_ff",
                   "S_fh", "S_fc", "S_ic", "S_c", "Z_ch", "Z_f", "Z_i", "Z_c"],
    "08_han": ["HAN-ptr", "HAN-doc-vec", "RAN"],
    "08_han_skipping": ["SGRU", "SENS-GRU", "HAN-ptr"],
    "09_abs": ["HAN-ptr", "ABS-AS (w)", "ABS-ASA (w)", "ABS-ASA (s)", "ABS-ASA (ws)",
               "SENS-GRU (w)"],
}  # fmt: skip
ARENA_PAGES = ("10_benchmarks", "10_benchmarks_beyond_copying")  # their models: zoo.MODELS

# Pages whose figures another change is to fix (widths and font sizes the lead applies by hand):
# their checks below are expected to fail until then, and fail loudly once they pass.
PENDING: set[str] = set()


def _code(chapter: str) -> str:
    notebook = nbformat.read(CHAPTERS / f"{chapter}.ipynb", as_version=4)
    return "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")


# --- the model scheme ----------------------------------------------------------------------


def test_every_chapter_is_listed():
    listed = {*CHAPTER_MODELS, *ARENA_PAGES}
    assert listed == {path.stem for path in CHAPTERS.glob("*.ipynb")}


@pytest.mark.parametrize("chapter", sorted(CHAPTER_MODELS))
def test_every_model_a_chapter_draws_has_a_style_and_is_in_its_code(chapter):
    code = _code(chapter)
    for name in CHAPTER_MODELS[chapter]:
        assert plot.model_of(name) in plot.MODEL_STYLES
        assert f'"{name}"' in code, f"{name!r} no longer appears in {chapter}'s code"


def test_every_arena_model_has_the_style_of_its_name():
    assert set(baselines.CONTROLS) <= set(zoo.MODELS)  # the controls too
    for key, entry in zoo.MODELS.items():
        assert arena_style(key) == {**plot.model_style(entry.label), "markersize": 5}
    looks = {tuple(sorted(arena_style(key).items())) for key in zoo.MODELS}
    assert len(looks) == len(zoo.MODELS)  # twelve models, twelve looks
    with pytest.raises(ValueError, match="arena's models"):
        arena_style("LSTM")  # a label, not a key of zoo.MODELS


@pytest.mark.parametrize("chapter", sorted([*CHAPTER_MODELS, *ARENA_PAGES]))
def test_every_name_a_chapter_passes_to_model_style_has_a_style(chapter):
    for name in re.findall(r"model_style\(\s*\"([^\"]+)\"", _code(chapter)):
        assert plot.model_of(name) in plot.MODEL_STYLES, name


def test_no_two_models_look_the_same():
    looks = [(s.color, s.marker, s.linestyle) for s in plot.MODEL_STYLES.values()]
    assert len(set(looks)) == len(looks)
    # stronger: two models that share a colour never share a marker either
    assert len({(s.color, s.marker) for s in plot.MODEL_STYLES.values()}) == len(looks)


def test_the_scheme_uses_the_palette_markers_and_line_styles_matplotlib_knows():
    markers = set(mpl.markers.MarkerStyle.filled_markers)
    for name, s in plot.MODEL_STYLES.items():
        assert s.color in plot.PALETTE, name
        assert s.marker in markers, name  # filled: they can also be drawn open
        assert s.linestyle in ("-", "--", "-.", ":"), name


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


@pytest.mark.parametrize("page", ["#ffffff", "#14181e"])  # the light and the dark theme's page
def test_every_model_colour_stands_out_on_both_themes(page):
    for name, s in plot.MODEL_STYLES.items():
        light, dark = sorted([_luminance(s.color), _luminance(page)], reverse=True)
        assert (light + 0.05) / (dark + 0.05) >= 2.2, name  # orange and sky blue: 2.25 on white


def test_aliases_name_models_of_the_table():
    assert set(plot.MODEL_ALIASES.values()) <= set(plot.MODEL_STYLES)
    assert not set(plot.MODEL_ALIASES) & set(plot.MODEL_STYLES)
    assert plot.model_style("S_c, M = 2") == plot.model_style("S_c")


def test_model_style_keywords_draw_a_line_or_points():
    fig, ax = plot.figure("quick")
    (line,) = ax.plot([0, 1], [0, 1], **plot.model_style("LSTM"))
    assert (line.get_color(), line.get_marker(), line.get_linestyle()) == (plot.BLUE, "s", "-")
    points = ax.scatter([0], [1], **plot.model_style("GRU", points=True))
    assert set(plot.model_style("GRU", points=True)) == {"color", "marker"}
    assert points.get_facecolor()[0][:3] == pytest.approx(mpl.colors.to_rgb(plot.GREEN))
    plt.close(fig)


def test_an_unknown_model_is_an_error_that_says_where_to_add_it():
    with pytest.raises(ValueError, match="MODEL_STYLES"):
        plot.model_style("LSTM-with-a-typo")


def test_the_style_table_lists_every_model_in_the_reference():
    table, doc = plot.style_table(), plot.model_style.__doc__
    for name, s in plot.MODEL_STYLES.items():
        row = rf"^{re.escape(name)} +{plot.COLOR_NAMES[s.color]} +``{re.escape(s.marker)}``"
        assert re.search(row, table, re.M), name
        assert name in doc


# --- no text below 8 pt on the page --------------------------------------------------------


def test_a_text_shows_scaled_down_with_a_figure_wider_than_the_page():
    fig = plt.figure(figsize=(2 * plot.PAGE_WIDTH, 3))
    text = fig.text(0.5, 0.5, "label", fontsize=10)
    assert plot.shown_size(fig, text) == pytest.approx(5.0)
    fig.set_figwidth(plot.PAGE_WIDTH / 2)
    assert plot.shown_size(fig, text) == pytest.approx(10.0)  # never scaled up
    plt.close(fig)


def test_small_texts_lists_what_the_page_shows_below_8_pt():
    fig, ax = plot.figure("quick", figsize=(6.4, 3))
    ax.set_title("a title")
    ax.text(0.5, 0.5, "tiny", fontsize=7)
    ax.text(0.5, 0.5, "", fontsize=2)  # empty: nothing to read
    ax.text(0.5, 0.5, "hidden", fontsize=2, visible=False)
    assert plot.small_texts(fig) == [("tiny", 7.0)]
    fig.set_figwidth(9.6)  # everything shrinks by 7.0 / 9.6: the stamp's 8 pt too
    found = dict(plot.small_texts(fig))
    assert found["profile: quick"] == pytest.approx(8 * plot.PAGE_WIDTH / 9.6, abs=0.01)
    assert "a title" not in found  # 11 pt shows at 8.0
    plt.close(fig)


def _draw(fig) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig("/dev/null", format="png")
    return [str(w.message) for w in caught if issubclass(w.category, plot.SmallTextWarning)]


def test_drawing_a_figure_of_the_book_warns_once_about_small_text():
    plot.use_theme()
    fig, ax = plot.figure("quick", figsize=(9.6, 3))
    ax.plot([0, 1], [0, 1], label="a")
    ax.legend(fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
    messages = _draw(fig)
    assert len(messages) == 1  # Matplotlib draws twice to save a figure; one warning
    assert "'a' at 5.83 pt, 'profile: quick' at 5.83 pt." in messages[0]
    assert _draw(fig) == []  # and only once for the figure
    plt.close(fig)


def test_a_figure_as_the_theme_draws_it_at_the_page_width_passes():
    plot.use_theme()
    fig, (left, right) = plot.figure("quick", ncols=2, figsize=(plot.FIGURE_WIDTH, 3.4))
    for ax in (left, right):
        ax.plot([0, 1], [1, 0], label="SRN", **plot.model_style("SRN"))
        ax.set(title="a title", xlabel="step", ylabel="loss")
        ax.legend(fontsize="small")  # 8.3 pt with the theme's 10
    image = right.imshow([[0, 1], [1, 0]])
    fig.colorbar(image, ax=right, label="value")
    assert _draw(fig) == []
    plt.close(fig)


def test_the_stamp_checks_a_figure_made_without_plot_figure_too():
    fig = plt.figure(figsize=(8.0, 3))
    plot.stamp(fig, "quick")
    plot.stamp(fig, "quick", recorded="runs")  # one check, however often it is stamped
    assert len(_draw(fig)) == 1
    plt.close(fig)


def test_a_figure_cropped_wider_than_the_page_warns():
    """Jupyter saves a figure cropped to what it draws, plus 0.1 in: a text past the figure's
    edge widens the image beyond the figure, and the page scales all of it down."""
    plot.use_theme()
    fig, ax = plot.figure("quick", figsize=(plot.FIGURE_WIDTH, 3))
    fig.text(0.9, 0.5, "a note that runs past the figure's right edge")
    assert plot.small_texts(fig) == []  # the figure itself is narrow enough
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig("/dev/null", format="png", bbox_inches="tight")
    assert any(issubclass(w.category, plot.SmallTextWarning) for w in caught)
    plt.close(fig)


# The chapters' code: every figure at most FIGURE_WIDTH wide where it gives a width, and no font
# size below 8 pt where it sets one (the theme's own sizes are 8.3 pt and more).
FIGSIZE = re.compile(r"figsize\s*=\s*\(\s*([0-9.]+)\s*,")
FONTSIZE = re.compile(r"\b\w*(?:fontsize|labelsize)\s*=\s*([0-9.]+|\"[a-z-]+\"|'[a-z-]+')")
NAMED_SIZES = {"xx-small": 5.79, "x-small": 6.94, "small": 8.33, "medium": 10}


def _chapter_sizes(chapter):
    code = _code(chapter)
    widths = [float(w) for w in FIGSIZE.findall(code)]
    fonts = []
    for size in FONTSIZE.findall(code):
        size = size.strip("\"'")
        fonts.append(NAMED_SIZES.get(size, None) if not size[0].isdigit() else float(size))
    return widths, [f for f in fonts if f is not None]


@pytest.mark.parametrize(
    "chapter",
    [
        pytest.param(c, marks=pytest.mark.xfail(c in PENDING, reason="figures to fix", strict=True))
        for c in sorted([*CHAPTER_MODELS, *ARENA_PAGES])
    ],
)
def test_a_chapter_sets_no_figure_wider_than_the_page_and_no_font_below_8_pt(chapter):
    widths, fonts = _chapter_sizes(chapter)
    assert widths, f"{chapter} sets no figure width"
    assert max(widths) <= plot.FIGURE_WIDTH, widths
    assert not fonts or min(fonts) >= plot.MIN_TEXT_PT, fonts
