"""rnnbook.plot: the theme, the profile stamp, smoothing and the kernel-free slider.

The conftest selects the Agg backend before matplotlib is imported.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import ipywidgets as widgets
import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest

from rnnbook import plot
from rnnbook.profiles import Profile

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _restore_matplotlib():
    with mpl.rc_context():
        yield
    plt.close("all")


def test_backend_is_agg():
    assert mpl.get_backend().lower() == "agg"


def test_use_theme_makes_figures_transparent():
    mpl.rcdefaults()
    assert mpl.rcParams["figure.facecolor"] != "none"
    plot.use_theme()
    for key in ("figure.facecolor", "axes.facecolor", "savefig.facecolor"):
        assert mpl.rcParams[key] == "none"
    assert mpl.rcParams["savefig.transparent"] is True


def test_use_theme_pairs_colours_with_line_styles():
    plot.use_theme()
    cycle = list(mpl.rcParams["axes.prop_cycle"])
    assert [c["color"] for c in cycle] == plot.PALETTE
    assert len({str(c["linestyle"]) for c in cycle}) == len(cycle)


@pytest.mark.parametrize("profile", ["quick", Profile("quick", "test")])
def test_figure_stamps_the_profile(profile):
    fig, ax = plot.figure(profile)
    assert [t.get_text() for t in fig.texts] == ["profile: quick"]
    assert ax in fig.axes


def test_a_figure_of_recorded_runs_says_so_instead_of_the_profile():
    fig, _ = plot.figure("quick", recorded="committed learning curves")
    assert [t.get_text() for t in fig.texts] == ["recorded runs: committed learning curves"]


def test_figure_with_several_axes_returns_an_array():
    fig, axes = plot.figure("full", ncols=2, nrows=2)
    assert axes.shape == (2, 2)
    assert "profile: full" in [t.get_text() for t in fig.texts]


def _moving_average(values, window):
    return np.array([np.mean(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))])


@pytest.mark.parametrize("window", [2, 3, 10, 50])
def test_smooth_is_a_trailing_moving_average(window):
    values = np.random.default_rng(0).normal(size=40)
    np.testing.assert_allclose(
        plot.smooth(values, window), _moving_average(values, window), rtol=1e-12
    )


@pytest.mark.parametrize("window", [0, 1])
def test_smooth_with_window_one_returns_the_values(window):
    np.testing.assert_array_equal(plot.smooth([1, 2, 4], window), [1.0, 2.0, 4.0])


def test_smooth_of_nothing_is_empty():
    assert plot.smooth([], 5).shape == (0,)


def test_style_cycles_through_palette_and_line_styles():
    n = len(plot.PALETTE)
    assert plot.style(0) == {"color": plot.PALETTE[0], "linestyle": plot.LINESTYLES[0]}
    assert plot.style(n) == plot.style(0)


def test_curves_plots_each_series_smoothed_with_a_baseline():
    fig, ax = plot.figure("quick")
    plot.curves(
        ax, {"a": [1, 2, 3], "b": [3, 2, 1]}, window=2, baseline=(1 / 6, "constant"), xlabel="step"
    )
    lines = ax.get_lines()
    assert [line.get_label() for line in lines[:2]] == ["a", "b"]
    np.testing.assert_allclose(lines[0].get_ydata(), [1.0, 1.5, 2.5])
    assert ax.get_xlabel() == "step"
    assert ax.get_legend() is not None


def test_figure_png_returns_png_bytes_and_closes_the_figure():
    fig, _ = plot.figure("quick")
    data = plot.figure_png(fig)
    assert data.startswith(PNG_MAGIC)
    assert not plt.fignum_exists(fig.number)


def _draw(value):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, value])
    return fig


IMG_RE = re.compile(r'^<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)" ([^>]*)>$')


def _frames(box):
    """(png bytes, alt text, the img tag's other attributes) of each frame of a slider figure."""
    frames = []
    for frame in box.children[1].children:
        assert isinstance(frame, widgets.HTML)
        match = IMG_RE.match(frame.value)
        assert match, frame.value[:200]
        png, alt, rest = match.groups()
        frames.append((base64.b64decode(png), html.unescape(alt), rest))
    return frames


def test_slider_figure_has_one_image_per_value():
    values = [0.5, 1.0, 2.0]
    box = plot.slider_figure(_draw, values, "rho", index=1)
    assert isinstance(box, widgets.VBox)
    slider, stack = box.children
    assert isinstance(stack, widgets.Stack)
    assert len(stack.children) == len(values)
    frames = _frames(box)
    assert all(png.startswith(PNG_MAGIC) for png, _, _ in frames)
    assert len({png for png, _, _ in frames}) == len(values)  # one drawing per value
    assert stack.selected_index == 1 and slider.index == 1
    assert [label for label, _ in slider.options] == ["0.5", "1", "2"]
    assert plt.get_fignums() == []  # every drawn figure was closed


def test_slider_figure_images_keep_the_theme_class_and_fit_the_page():
    for _, _, rest in _frames(plot.slider_figure(_draw, [1, 2], "rho")):
        assert 'class="dark-light"' in rest
        assert "max-width: 100%" in rest


def test_slider_figure_default_alt_names_the_value():
    box = plot.slider_figure(_draw, [0.5, 1.0, 2.0], "spectral norm ρ")
    assert [alt for _, alt, _ in _frames(box)] == [
        "spectral norm ρ = 0.5",
        "spectral norm ρ = 1",
        "spectral norm ρ = 2",
    ]


def test_slider_figure_alt_from_a_function_is_escaped():
    box = plot.slider_figure(_draw, [1, 2], "n", alt=lambda v: f'"{v}" steps < {v + 1} & more')
    frames = _frames(box)
    assert [alt for _, alt, _ in frames] == ['"1" steps < 2 & more', '"2" steps < 3 & more']
    values = [widget.value for widget in box.children[1].children]
    assert all("<" not in v[4:-1] and '"1" steps' not in v for v in values)  # escaped in HTML


def test_slider_figure_alt_from_a_format_string():
    box = plot.slider_figure(
        _draw, [0.25, 3], "ρ", alt="Line of slope {value} ({description} {label})"
    )
    assert [alt for _, alt, _ in _frames(box)] == [
        "Line of slope 0.25 (ρ 0.25)",
        "Line of slope 3 (ρ 3)",
    ]


@pytest.mark.parametrize("alt", ["", "   ", lambda v: "", lambda v: None, lambda v: 3])
def test_slider_figure_rejects_an_empty_alt(alt):
    with pytest.raises(ValueError, match="alt text"):
        plot.slider_figure(_draw, [1, 2], "rho", alt=alt)
    assert plt.get_fignums() == []  # checked before anything is drawn


@pytest.mark.parametrize("alt", ["a figure", lambda v: "the same text"])
def test_slider_figure_alt_must_tell_the_frames_apart(alt):
    with pytest.raises(ValueError, match="tell the frames apart"):
        plot.slider_figure(_draw, [1, 2], "rho", alt=alt)


def test_slider_figure_alt_of_the_wrong_type():
    with pytest.raises(TypeError, match="alt must be"):
        plot.slider_figure(_draw, [1, 2], "rho", alt=42)


@pytest.mark.parametrize(("index", "error"), [(2, IndexError), (-1, IndexError), (0.5, TypeError)])
def test_slider_figure_index_checks(index, error):
    with pytest.raises(error):
        plot.slider_figure(_draw, [1, 2], "rho", index=index)


def test_slider_figure_accepts_a_numpy_index():
    box = plot.slider_figure(_draw, [1, 2], "rho", index=np.int64(1))
    assert box.children[0].index == 1 and box.children[1].selected_index == 1


def test_slider_figure_without_values_is_an_error():
    with pytest.raises(ValueError, match="at least one value"):
        plot.slider_figure(_draw, [], "rho")


def test_slider_figure_accepts_a_numpy_array():
    box = plot.slider_figure(_draw, np.linspace(0.5, 1.5, 3), "rho")
    assert len(box.children[1].children) == 3
    assert [alt for _, alt, _ in _frames(box)] == ["rho = 0.5", "rho = 1", "rho = 1.5"]


def test_slider_figure_embeds_its_alt_text_in_the_widget_state():
    """The static HTML is made from the embedded widget state: the alt text must be in it."""
    from ipywidgets.embed import dependency_state, embed_data

    box = plot.slider_figure(_draw, [1, 2], "rho", alt="frame {label}")
    state = embed_data(views=[box], state=dependency_state(box))["manager_state"]["state"]
    html_models = [m for m in state.values() if m["model_name"] == "HTMLModel"]
    assert sorted(m["state"]["value"].split('alt="')[1].split('"')[0] for m in html_models) == [
        "frame 1",
        "frame 2",
    ]


# --- ipywidgets 7 (Colab) -------------------------------------------------------------------

# Colab ships ipywidgets 7.7.1, which has no Stack. These packages are installed beside the
# tested pins into a folder of their own (once; later runs reuse it) and put first on the
# path of a subprocess, which then draws a slider figure with ipywidgets 7.
IPYWIDGETS_7 = ["ipywidgets==7.7.1", "widgetsnbextension==3.6.*", "jupyterlab_widgets==1.*",
                "ipython_genutils==0.2.*"]  # fmt: skip
IPYWIDGETS_7_DIR = Path(__file__).resolve().parents[1] / "_build" / "test-envs" / "ipywidgets-7.7.1"
# What pip prints when it cannot reach the registry (the only reason to skip).
UNREACHABLE = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|"
    r"Network is unreachable|ConnectTimeout|ReadTimeout|No matching distribution found"
)


@pytest.fixture(scope="module")
def ipywidgets_7() -> Path:
    """A folder holding ipywidgets 7.7.1 and the packages it needs that the pins lack."""
    done = IPYWIDGETS_7_DIR / "INSTALLED"
    if not done.exists():
        # Two test runs at once (make unit) each install into a folder of their own and
        # move it into place; the second move finds the first and is dropped.
        partial = IPYWIDGETS_7_DIR.with_name(f"{IPYWIDGETS_7_DIR.name}.{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                   "--disable-pip-version-check", "--target", str(partial), *IPYWIDGETS_7]  # fmt: skip
        out = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            if UNREACHABLE.search(out.stdout + out.stderr):
                pytest.skip(f"the package registry is unreachable: cannot install {IPYWIDGETS_7}")
            pytest.fail(f"pip could not install {IPYWIDGETS_7}:\n{out.stderr[-2000:]}")
        (partial / "INSTALLED").write_text("\n".join(IPYWIDGETS_7) + "\n")
        try:
            partial.rename(IPYWIDGETS_7_DIR)
        except OSError:  # installed meanwhile by the other run
            shutil.rmtree(partial, ignore_errors=True)
    assert done.exists()
    return IPYWIDGETS_7_DIR


SLIDER_UNDER_7 = """
import json
import ipywidgets as widgets
import matplotlib.pyplot as plt
import importlib.util
import sys
from ipywidgets.embed import dependency_state, embed_data

# rnnbook.plot alone: the package's __init__ would import torch (seconds) for nothing here
spec = importlib.util.spec_from_file_location("rnnbook_plot", sys.argv[1])
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)

def draw(value):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, value])
    return fig

box = plot.slider_figure(draw, [0.5, 1.0, 2.0], "rho", index=1)
slider, frames, *extra = box.children
state = embed_data(views=[box], state=dependency_state(box))["manager_state"]
links = [m["state"] for m in state["state"].values() if m["model_name"] == "LinkModel"]
print(json.dumps({
    "version": widgets.__version__,
    "children": [type(c).__name__ for c in box.children],
    "slider": [slider.index, [label for label, _ in slider.options]],
    "frames": [frames.selected_index, list(frames._dom_classes),
               [frames.get_title(i) for i in range(3)],
               [type(f).__name__ for f in frames.children],
               [f.value.split('alt="')[1].split('"')[0] for f in frames.children]],
    "extra": [[e.value, e.layout.display] for e in extra],
    "links": [[link["source"], link["target"]] for link in links],
    "ids": {"slider": "IPY_MODEL_" + slider.model_id, "frames": "IPY_MODEL_" + frames.model_id},
    "state_major": state["version_major"],
    "figures_left": len(plt.get_fignums()),
}))
"""


def test_slider_figure_under_ipywidgets_7(ipywidgets_7):
    """Under Colab's ipywidgets 7.7.1 (no Stack) the frames go into a Tab whose titles a
    style rule hides, linked to the slider in the browser, and the state embeds for the HTML."""
    env = {**os.environ, "PYTHONPATH": str(ipywidgets_7), "MPLBACKEND": "Agg"}
    out = subprocess.run(
        [sys.executable, "-c", SLIDER_UNDER_7, plot.__file__], env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["version"] == "7.7.1"
    assert facts["children"] == ["SelectionSlider", "Tab", "HTML"]
    assert facts["slider"] == [1, ["0.5", "1", "2"]]
    index, classes, titles, kinds, alts = facts["frames"]
    assert index == 1 and plot.FRAMES_CLASS in classes and titles == ["0.5", "1", "2"]
    assert kinds == ["HTML"] * 3 and alts == ["rho = 0.5", "rho = 1", "rho = 2"]
    [(style, display)] = facts["extra"]
    assert display == "none"
    assert f".{plot.FRAMES_CLASS} > .p-TabBar" in style and "display: none" in style
    ids = facts["ids"]
    assert facts["links"] == [[[ids["slider"], "index"], [ids["frames"], "selected_index"]]]
    assert facts["state_major"] == 2 and facts["figures_left"] == 0
