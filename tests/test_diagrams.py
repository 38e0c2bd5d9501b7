"""rnnbook.diagrams: the SVG architecture diagrams of Chapters 1-9.

Each diagram must be well-formed SVG with a title and a description, name what the
chapter's equations name, use only the theme's colours (never pure black or white, on a
transparent background), read on the light and the dark page, keep its text at 8 pt or more
at its own size, carry its intrinsic size so the browser suite can measure its ink, and come
out the same every time.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from IPython.core.formatters import DisplayFormatter

from rnnbook import diagrams
from rnnbook.plot import INK, PALETTE

SVG = "{http://www.w3.org/2000/svg}"
BLACK_OR_WHITE = {
    "#000",
    "#000000",
    "black",
    "#fff",
    "#ffffff",
    "white",
    "rgb(0,0,0)",
    "rgb(255,255,255)",
}
COLOUR_ATTRIBUTES = ("fill", "stroke", "color", "stop-color", "flood-color", "lighting-color")

# Default arguments, plus the old read-out letter of Chapter 1.
CASES = {name: (function, {}) for name, function in diagrams.ALL.items()}
CASES["unrolled_rnn(readout='o')"] = (diagrams.unrolled_rnn, {"readout": "o"})
CASES["clockwork_architecture(5 modules, t=0)"] = (
    diagrams.clockwork_architecture,
    {"periods": (1, 2, 3, 6, 12), "t": 0},
)
CASES["clockwork_architecture(2 modules, t=3)"] = (
    diagrams.clockwork_architecture,
    {"periods": [1, 4], "t": 3},
)

KEY_LABELS = {
    "unrolled_rnn": ["xt", "ht−1", "ht", "ht+1", "Wxh", "Whh", "Why", "vt, ŷt", "ℓt", "folded"],
    "unrolled_rnn(readout='o')": ["ot, ŷt", "ot+1, ŷt+1", "Whh"],
    "lstm_cell": [
        "ct−1",
        "ct",
        "ht−1",
        "xt",
        "ht",
        "ft",
        "it",
        "gt",
        "ot",
        "σ",
        "tanh",
        "tanh(ct)",
        "it ⊙ gt",
        "[ht−1; xt]",
        "cell state",
    ],
    "gru_cell": [
        "ht−1",
        "ht",
        "xt",
        "zt",
        "rt",
        "ĥt",
        "1−",
        "(1 − zt) ⊙ ht−1",
        "zt ⊙ ĥt",
        "rt ⊙ ht−1",
        "σ",
        "tanh",
    ],
    "ntm_heads": [
        "controller",
        "read head",
        "write head",
        "memory Mt",
        "N",
        "M",
        "content",
        "key kt, strength βt",
        "interpolation",
        "gate gt, with wt−1",
        "shift",
        "shift weights st",
        "sharpening",
        "exponent γt",
        "wtr",
        "rt = Mt⊤ wtr",
        "wtw, et, at",
        "wtc",
        "wtg",
        "w̃t",
        "wt",
    ],
    "lmu_toeplitz": [
        "B̄",
        "ĀB̄",
        "Ā2B̄",
        "Ā5B̄",
        "H:,1",
        "H:,2",
        "H:,3",
        "0",
        "m1",
        "m6",
        "u1",
        "u6",
        "computed by FFT",
    ],
    "clockwork_architecture": [
        "T1 = 1",
        "T2 = 2",
        "T3 = 4",
        "T4 = 8",
        "h(1)t−1",
        "h(4)t−1",
        "h(1)t",
        "h(4)t",
        "xt",
        "yt",
        "Wx(m)",
        "Wh(m,l), l ≥ m",
        "slower to faster",
        "copy",
        "ticks: 6 mod 1 = 0",
        "ticks: 6 mod 2 = 0",
        "holds: 6 mod 4 = 2",
        "holds: 6 mod 8 = 6",
        "step t − 1",
        "step t = 6",
        "the read-out reads every module",
        "recurrent weights Wh: the uni mask",
        "to m",
        "from l",
        "is 0 for l < m",
        "the clock: module m ticks when t mod Tm = 0",
        "t = 6",
        "step t (t0 = 0)",
        "ticks: a new state",
        "holds its state",
        "not read at this step",
    ],
    "clockwork_architecture(5 modules, t=0)": [
        "T5 = 12",
        "h(5)t",
        "ticks: 0 mod 1 = 0",
        "ticks: 0 mod 12 = 0",
        "step t = 0",
        "t = 0",
    ],
    "clockwork_architecture(2 modules, t=3)": [
        "T2 = 4",
        "ticks: 3 mod 1 = 0",
        "holds: 3 mod 4 = 3",
        "copy",
        "t = 3",
    ],
    "sba_layer": [
        "module 1",
        "module 4",
        "v̂t",
        "p(m)t",
        "qt−1",
        "qt",
        "s(m)t",
        "s(m)t−1",
        "b(m)t",
        "vt",
        "vt−1",
        "0.70",
        "0.90",
        "0.29 → 0.19",
        "1.65",
        "1.22",
        "1 pool",
        "p(m)t = max over module m",
        "2 share and surprisal",
        "qt = softmax(pt), Σm q(m)t = 1",
        "s(m)t = −log q(m)t",
        "θ = 10−4",
        "from t − 1's candidate",
        "3 decide",
        "b(m)t = [s(m)t > s(m)t−1 + θ]",
        "update where the share fell",
        "at most M − 1 modules update",
        "4 keep or take",
        "vt = Bt ⊙ v̂t + (1 − Bt) ⊙ D(vt−1)",
        "Bt = bt ⊗ 1K: one b per unit",
        "v̂(2)t",
        "D(v(1)t−1)",
        "v(1)t−1",
        "What a kept module keeps (b(m)t = 0)",
        "a layer: D(vt−1), vt−1 itself without decay",
        "Sh: ht = ht−1",
        "Sc: ct = ct−1, then ht = ot ⊙ tanh(ct)",
        "Sch: Sc, then a second decision on h",
        "Sff, Sfh, Sfc: ft := 1, forget nothing",
        "Sic: it := 0, write nothing",
        "update, b = 1",
        "keep, b = 0",
    ],
    "zoneout_cell": [
        "ct−1",
        "ct",
        "ht−1",
        "ht",
        "xt",
        "plain LSTM step",
        "ft, it, gt, ot",
        "c̃t = ft ⊙ ct−1",
        "+ it ⊙ gt",
        "c̃t",
        "tanh",
        "ot",
        "ot ⊙ tanh(c̃t)",
        "dct ~ Bernoulli(zc)",
        "dht ~ Bernoulli(zh)",
        "1−",
        "ct = dct ⊙ ct−1 + (1 − dct) ⊙ c̃t",
        "ht = dht ⊙ ht−1 + (1 − dht) ⊙ (ot ⊙ tanh(c̃t))",
        "1 = keep, two independent coins",
        "test time: dct → zc, dht → zh",
        "Gate-level zoneout: one coin bt ~ Bernoulli(p) per unit, 1 = update (bt = 1 − dt)",
        "in the kept units, bt = 0:",
        "Zc",
        "Zf",
        "Zi",
        "Zch",
        "Zh",
        "ct = ct−1, then ht = ot ⊙ tanh(ct)",
        "ft := 1: forget nothing",
        "it := 0: write nothing",
        "ct = ct−1, ht = ht−1: one coin",
        "ht = ht−1 (the source dropped it)",
        "a coin per unit",
        "kept value",
    ],
    "han_reader": [
        "x1,1",
        "x1,W",
        "xS,1",
        "xS,W",
        "biGRUw",
        "biGRUs",
        "biGRUq",
        "Dwordi,j",
        "αwordi,j",
        "Dblend1",
        "DblendS",
        "Dsent1",
        "DsentS",
        "αsenti",
        "q",
        "xxxxx",
        "q⊤Dwordi,j",
        "q⊤Dsenti",
        "αdoci,j = αsenti αwordi,j",
        "P(ck) = Σ αdoci,j",
        "P(ck)",
        "no parameters",
    ],
    "abs_layer": [
        "the",
        "cat",
        "sat",
        "on",
        "mat",
        "biGRU",
        "xt",
        "ĥt",
        "αt",
        "bt",
        "ht",
        "ĥ1",
        "ĥ6",
        "0",
        "0.38",
        "1 encode",
        "2 attend",
        "3 skip",
        "4 blend and point",
        "αt = softmaxt(q⊤ĥt), Σt αt = 1",
        "bt ~ Bernoulli(αt), in hindsight",
        "ht = bt ĥt + (1 − bt) ht−1, h0 = 0",
        "ABS-AS: attend and skip",
        "ABS-ASA: attend, skip, attend",
        "Dblend = Σt αt ht, the original αt",
        "Dblend = Σt α′t ht, α′t = softmaxt(q⊤ht)",
        "the pointer keeps αt: P(the) = α1 + α5 = 0.07",
        "the pointer uses α′t: P(the) = α′1 + α′5 = 0.21",
        "copies of ĥ2: equal α′t",
        "update, bt = 1",
        "skip, bt = 0",
    ],
}


def _texts(root) -> list[str]:
    """The text of every <text> element as a reader would see it (subscripts inline)."""
    return [
        "".join(element.itertext()).replace("\u00a0", " ") for element in root.iter(f"{SVG}text")
    ]


@pytest.fixture(params=sorted(CASES), scope="module")
def case(request):
    function, kwargs = CASES[request.param]
    diagram = function(**kwargs)
    return request.param, diagram, ET.fromstring(diagram.svg)


def test_parses_as_svg_with_title_and_description(case):
    name, diagram, root = case
    assert root.tag == f"{SVG}svg"
    title, desc = list(root)[:2]
    assert title.tag == f"{SVG}title" and title.text == diagram.title and diagram.title.strip()
    assert desc.tag == f"{SVG}desc" and desc.text == diagram.desc
    # The description is the text alternative: it must say what the drawing shows.
    assert len(diagram.desc) > 300, name
    assert root.get("role") == "img"
    labelled_by = root.get("aria-labelledby").split()
    assert labelled_by == [title.get("id"), desc.get("id")]


def test_scales_and_has_its_intrinsic_size(case):
    """A viewBox to scale; width and height so the browser rasterises it at full size.

    With ``width="100%"`` alone, Chromium gives an ``<img>`` of the SVG a natural size of
    300 x 150, and the browser suite's figure check, which draws the image at its natural
    size, measured the thin grey ink at under 3:1 on both themes.
    """
    _, _, root = case
    x, y, width, height = (float(v) for v in root.get("viewBox").split())
    assert (x, y) == (0, 0) and width >= 700 and height >= 300
    assert float(root.get("width")) == width and float(root.get("height")) == height
    assert "max-width: 100%" in root.get("style") and "height: auto" in root.get("style")
    assert root.get("font-family") == "sans-serif"


def test_contains_its_key_labels(case):
    name, _, root = case
    texts = _texts(root)
    missing = [label for label in KEY_LABELS[name] if label not in texts]
    assert not missing, f"{name}: labels not found: {missing}; the labels are {texts}"


def test_readout_letter_is_a_parameter():
    default = _texts(ET.fromstring(diagrams.unrolled_rnn().svg))
    old = _texts(ET.fromstring(diagrams.unrolled_rnn("o").svg))
    assert "vt, ŷt" in default and not any(t.startswith("ot") for t in default)
    assert "ot, ŷt" in old and "vt, ŷt" not in old
    assert "o_t = W_hy h_t + b_y" in diagrams.unrolled_rnn("o").desc


def test_only_theme_colours_and_never_black_or_white(case):
    name, diagram, root = case
    allowed = {c.lower() for c in [INK, *PALETTE]} | {"none"}
    used = set()
    for element in root.iter():
        for attribute in COLOUR_ATTRIBUTES:
            value = element.get(attribute)
            if value is not None:
                used.add(value.strip().lower().replace(" ", ""))
        for declaration in (element.get("style") or "").split(";"):
            if ":" in declaration:
                key, value = declaration.split(":", 1)
                if key.strip() in COLOUR_ATTRIBUTES:
                    used.add(value.strip().lower().replace(" ", ""))
    assert not used & BLACK_OR_WHITE, f"{name} uses {used & BLACK_OR_WHITE}"
    assert used <= allowed, f"{name} uses colours outside the theme: {used - allowed}"
    assert not re.search(r"\b(black|white)\b", diagram.svg.split("</desc>", 1)[1])


def test_nothing_falls_back_to_black(case):
    """SVG fills with black by default: the root says none, and every text names its fill."""
    _, _, root = case
    assert root.get("fill") == "none"
    for text in root.iter(f"{SVG}text"):
        assert text.get("fill") not in (None, "none"), ET.tostring(text, encoding="unicode")


def test_background_is_transparent(case):
    """No filled shape covers most of the drawing (a backdrop would hide the page's theme)."""
    _, _, root = case
    _, _, width, height = (float(v) for v in root.get("viewBox").split())
    for rect in root.iter(f"{SVG}rect"):
        if rect.get("fill", "none") == "none":
            continue
        area = float(rect.get("width")) * float(rect.get("height"))
        assert area < 0.25 * width * height, ET.tostring(rect, encoding="unicode")


def test_text_stays_inside_the_drawing(case):
    """Rough check with estimated text widths: no label is cut off at an edge."""
    name, _, root = case
    _, _, width, height = (float(v) for v in root.get("viewBox").split())
    for element in root.iter(f"{SVG}text"):
        label = "".join(element.itertext())
        size = float(element.get("font-size"))
        extent = diagrams.label_width(label, size)
        x, y = float(element.get("x")), float(element.get("y"))
        anchor = element.get("text-anchor")
        left = {"start": x, "middle": x - extent / 2, "end": x - extent}[anchor]
        assert left >= 0 and left + extent <= width + 2, f"{name}: {label!r} at x={x}"
        assert size <= y <= height, f"{name}: {label!r} at y={y}"


def test_no_file_paths_and_unique_ids(case):
    name, diagram, root = case
    assert not re.search(r"file:|[A-Za-z]:\\|/(home|tmp|work|root|Users|usr)/", diagram.svg)
    ids = [element.get("id") for element in root.iter() if element.get("id")]
    assert len(ids) == len(set(ids))
    # Several diagrams inline in one notebook must not share an id.
    assert all(i.startswith("rnnbook-") for i in ids)


def test_ids_differ_between_diagrams():
    ids = [ET.fromstring(f().svg).find(f"{SVG}title").get("id") for f in diagrams.ALL.values()]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("name", sorted(CASES))
def test_deterministic(name):
    function, kwargs = CASES[name]
    assert function(**kwargs).svg == function(**kwargs).svg


def test_jupyter_displays_it_as_svg(tmp_path):
    diagram = diagrams.lstm_cell()
    data, _ = DisplayFormatter().format(diagram)
    assert data["image/svg+xml"] == diagram.svg
    assert "LSTM" in data["text/plain"]
    path = diagram.save(tmp_path / "lstm.svg")
    assert path.read_text(encoding="utf-8") == diagram.svg


def test_subscripts_return_to_the_baseline():
    root = ET.fromstring(diagrams.gru_cell().svg)
    for text in root.iter(f"{SVG}text"):
        shift = sum(float(t.get("dy", 0)) for t in text.iter(f"{SVG}tspan"))
        assert abs(shift) < 1e-9, "".join(text.itertext())


def test_ntm_example_weightings_are_distributions():
    weightings = diagrams._ntm_weightings()
    assert [label for label, _ in weightings] == ["w_t^c", "w_t^g", "w̃_t", "w_t"]
    for label, w in weightings:
        assert len(w) == 8 and min(w) >= 0 and abs(sum(w) - 1) < 1e-12, label
    # The shift moves the peak by one row; sharpening makes it higher.
    peak = [max(range(8), key=w.__getitem__) for _, w in weightings]
    assert peak == [2, 2, 3, 3]
    assert max(weightings[3][1]) > max(weightings[2][1])


@pytest.mark.parametrize("readout", ["vv", "", "1", "_", 3])
def test_unrolled_rnn_rejects_a_bad_readout(readout):
    with pytest.raises(ValueError, match="readout must be a single letter"):
        diagrams.unrolled_rnn(readout)


@pytest.mark.parametrize("n", [2, 9, 4.0, True, "6"])
def test_lmu_toeplitz_rejects_a_bad_size(n):
    with pytest.raises(ValueError, match="n must be an integer from 3 to 8"):
        diagrams.lmu_toeplitz(n)


@pytest.mark.parametrize("n", [3, 8])
def test_lmu_toeplitz_other_sizes(n):
    root = ET.fromstring(diagrams.lmu_toeplitz(n).svg)
    texts = _texts(root)
    assert f"m{n}" in texts and f"H:,{n}" in texts and f"Ā{n - 1}B̄" in texts


def test_han_reader_draws_the_pointer_path_in_the_accent_colour():
    """The attention and pointer path is the accent colour; the biGRUs are not."""
    root = ET.fromstring(diagrams.han_reader().svg)
    colour = {"".join(t.itertext()): t.get("fill") for t in root.iter(f"{SVG}text")}
    for label in ("pointer", "αsenti", "αwordi,j", "q⊤Dwordi,j", "q⊤Dsenti", "no parameters"):
        assert colour[label] == diagrams.ACCENT, label
    for label in ("biGRUw", "biGRUs", "biGRUq", "Dsenti", "Dwordi,j"):
        assert colour[label] == INK, label
    # One word biGRU box per drawn sentence (sentence 1 and sentence S), one for the query.
    texts = _texts(root)
    assert texts.count("biGRUw") == 2 and texts.count("biGRUq") == 1
    assert texts.count("biGRUs") == 1
    desc = diagrams.han_reader().desc
    for phrase in ("no parameters", "α^doc_(i,j) = α^sent_i α^word_(i,j)", "xxxxx", "biGRU_w"):
        assert phrase in desc, phrase


def test_abs_example_follows_the_model():
    """The drawn fill is the model's forward fill; both attentions are distributions."""
    torch = pytest.importorskip("torch")
    from rnnbook.models.abs import forward_fill

    example = diagrams._abs_example()
    n = len(example["tokens"])
    for key in ("alpha", "alpha_again"):
        assert len(example[key]) == n and abs(sum(example[key]) - 1) < 1e-9, key
    # ĥ_t as the t-th unit vector: each filled row is the one-hot of the output it copies.
    filled = forward_fill(torch.eye(n), torch.tensor(example["b"], dtype=torch.float32))
    expected = [f"ĥ_{int(row.argmax()) + 1}" if row.any() else "0" for row in filled]
    assert example["filled"] == expected == ["0", "ĥ_2", "ĥ_2", "ĥ_2", "ĥ_2", "ĥ_6"]
    # Copies of one state have one score, so one weight in the attention recomputed on them.
    by_state = {}
    for label, weight in zip(example["filled"], example["alpha_again"]):
        by_state.setdefault(label, set()).add(weight)
    assert all(len(weights) == 1 for weights in by_state.values())
    # The pointer sums by token: the two "the" get 0.07 before the skip, 0.21 after.
    positions = [t for t, token in enumerate(example["tokens"]) if token == "the"]
    assert round(sum(example["alpha"][t] for t in positions), 2) == 0.07
    assert round(sum(example["alpha_again"][t] for t in positions), 2) == 0.21


def test_abs_layer_draws_the_fill_and_both_variants():
    """The skipped positions show the copied label, in the step-3 row and in both panels."""
    diagram = diagrams.abs_layer()
    root = ET.fromstring(diagram.svg)
    texts = _texts(root)
    row = ["0", "ĥ2", "ĥ2", "ĥ2", "ĥ2", "ĥ6"]
    starts = [k for k in range(len(texts)) if texts[k : k + len(row)] == row]
    assert len(starts) == 3, texts  # step 3, ABS-AS and ABS-ASA
    # One decision per token: two updates (filled circles), four skips (hollow), in the accent.
    circles = [e for e in root.iter(f"{SVG}circle") if e.get("stroke") == diagrams.ACCENT]
    filled = [e for e in circles if e.get("fill") == diagrams.ACCENT]
    assert len(circles) == 6 + 2 and len(filled) == 2 + 1  # and the legend's two
    # The copies are dashed accent outlines: four skips in each of the three rows, one key.
    dashed = [
        e
        for e in root.iter(f"{SVG}path")
        if e.get("stroke-dasharray") and e.get("stroke") == diagrams.ACCENT
    ]
    assert len(dashed) == 3 * 4 + 1
    colour = {"".join(t.itertext()): t.get("fill") for t in root.iter(f"{SVG}text")}
    for label in ("αt", "α′t", "bt", "forward fill:"):
        assert colour[label] == diagrams.ACCENT, label
    for phrase in (
        "ABS-AS",
        "ABS-ASA",
        "original attention",
        "computed again on the filled outputs",
        "b_t ~ Bernoulli(α_t)",
        "0, ĥ_2, ĥ_2, ĥ_2, ĥ_2, ĥ_6",
        "in hindsight",
    ):
        assert phrase in diagram.desc, phrase


# --- every diagram: legible on both pages, and no text under 8 pt ------------------------

PAGES = {"light": "#ffffff", "dark": "#14181e"}  # pydata-sphinx-theme's page backgrounds
# Drawn before the 8 pt floor: the parameters of the NTM's addressing steps are 13 units,
# so their subscripts are 10.4 units (7.8 pt). Changing them would change the picture.
KNOWN_SMALL_TEXT = {
    "ntm_heads": {"key kt, strength βt", "gate gt, with wt−1", "shift weights st", "exponent γt"},
}


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    dark, light = sorted([_luminance(a), _luminance(b)])
    return (light + 0.05) / (dark + 0.05)


def test_text_is_at_least_8_pt(case):
    """Every text and every sub- or superscript is 8 pt (32/3 units) or more at the
    diagram's own size, where one SVG unit is one CSS pixel."""
    name, _, root = case
    small = set()
    for text in root.iter(f"{SVG}text"):
        sizes = [float(text.get("font-size"))]
        sizes += [float(t.get("font-size")) for t in text.iter(f"{SVG}tspan") if t.get("font-size")]
        if min(sizes) < diagrams.MIN_TEXT:
            small.add("".join(text.itertext()).replace("\u00a0", " "))
    assert diagrams.MIN_TEXT == pytest.approx(8 * 96 / 72)
    assert small == KNOWN_SMALL_TEXT.get(name.split("(")[0], set()), f"{name}: {small}"


def test_texts_read_on_light_and_dark_pages(case):
    """One drawing serves both themes: every text colour keeps 3:1 against both pages."""
    name, _, root = case
    for text in root.iter(f"{SVG}text"):
        for page, background in PAGES.items():
            ratio = _contrast(text.get("fill"), background)
            assert ratio >= 3, f"{name}: {''.join(text.itertext())!r} {ratio:.2f} on {page}"


# --- the three diagrams of Chapters 5-7 ---------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
CITED = {
    "clockwork_architecture": ("05_clockwork", ["cw-rnn", "skip-update"]),
    "sba_layer": (
        "06_sba",
        ["sba-pool", "sba-surprisal", "sba-decision", "sba-ratio", "sba-bound", "sba-select"],
    ),
    "zoneout_cell": ("07_zoneout", ["zo-mask", "zo-lstm-c", "zo-lstm-h", "zo-expect"]),
}


@pytest.mark.parametrize("name", sorted(CITED))
def test_docstring_cites_the_chapters_equations(name):
    """The docstring cites the chapter's equations by their labels, as the chapter defines them."""
    chapter, labels = CITED[name]
    notebook = json.loads((ROOT / "chapters" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    markdown = "".join(
        "".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"
    )
    defined = set(re.findall(r"\$\$\s*\(([\w.-]+)\)", markdown))
    doc = getattr(diagrams, name).__doc__
    for label in labels:
        assert f"({label})" in doc, label
        assert label in defined, f"{label} is not an equation of {chapter}"


@pytest.mark.parametrize(
    "periods, t",
    [((1, 2, 4, 8), 6), ((1, 2, 4, 8), 0), ((1, 2, 3, 6, 12), 9), ((2, 2), 1), ((1, 16), 15)],
)
def test_clockwork_follows_the_models_clock_and_mask(periods, t):
    """The ticks, the filled mask blocks and the schedule are the package's own."""
    pytest.importorskip("torch")
    from rnnbook import skip
    from rnnbook.diagrams import clockwork

    M = len(periods)
    schedule = skip.clock(periods, clockwork.STEPS)  # (16, M), t_0 = 0
    ticks = schedule[t].tolist()
    assert clockwork._ticks(tuple(periods), t) == ticks
    root = ET.fromstring(diagrams.clockwork_architecture(periods, t).svg)
    texts = _texts(root)
    for m, (T, tick) in enumerate(zip(periods, ticks), start=1):
        status = f"ticks: {t} mod {T} = 0" if tick else f"holds: {t} mod {T} = {t % T}"
        assert status in texts and f"T{m} = {T}" in texts
    assert texts.count("copy") == ticks.count(False)
    rects = list(root.iter(f"{SVG}rect"))
    blocks = [r for r in rects if r.get("fill") == diagrams.SKY and r.get("fill-opacity") == "0.45"]
    uni = skip.connectivity_mask(M, M, "uni")  # one unit per module: the block mask itself
    assert len(blocks) == int(uni.sum())
    top = clockwork.Y_PANEL + 40
    for r in blocks:  # block (m, l) is filled only for l ≥ m: on or above the diagonal
        assert float(r.get("x")) - clockwork.MASK_X >= float(r.get("y")) - top - 1e-6
    cells = [r for r in rects if r.get("fill") == diagrams.SKY and r.get("fill-opacity") is None]
    assert len(cells) == int(schedule.sum())
    # Only the ticking modules get arrows from h_{t−1}: one from every module l ≥ m.
    heads = [p for p in root.iter(f"{SVG}path") if p.get("fill") == diagrams.ACCENT]
    assert len(heads) == sum(M - m for m, tick in enumerate(ticks) if tick)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"periods": (1,)},
        {"periods": (1, 2, 4, 8, 16, 16)},
        {"periods": (4, 2)},
        {"periods": (1, 32)},
        {"periods": (1, 2.0)},
        {"periods": "12"},
        {"t": 16},
        {"t": -1},
        {"t": True},
        {"t": 2.0},
    ],
)
def test_clockwork_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError, match="periods must be|t must be"):
        diagrams.clockwork_architecture(**kwargs)


def test_sba_example_follows_the_model():
    """The drawn numbers are the package's surprisals and decisions, and obey the bound."""
    torch = pytest.importorskip("torch")
    from rnnbook.diagrams.sba import THETA, _sba_example
    from rnnbook.models.sba import module_surprisal, sba_decision

    example = _sba_example()
    M, K = len(example["candidate"]), len(example["candidate"][0])
    v_hat = torch.tensor(example["candidate"], dtype=torch.float64).reshape(1, M * K)
    s = module_surprisal(v_hat, M, "max")
    # A previous candidate whose modules pool (max) to p_prev: each unit at that value.
    v_prev = torch.tensor(example["p_prev"], dtype=torch.float64).repeat_interleave(K)[None]
    s_prev = module_surprisal(v_prev, M, "max")
    assert torch.allclose(s[0], torch.tensor(example["s"], dtype=torch.float64))
    assert torch.allclose(s_prev[0], torch.tensor(example["s_prev"], dtype=torch.float64))
    b = sba_decision(s, s_prev, THETA)[0].tolist()
    assert b == example["b"] == [0, 1, 0, 1]
    # (sba-ratio): an update exactly where the share fell; (sba-bound): never all M.
    assert [int(q < p) for p, q in zip(example["q_prev"], example["q"])] == b
    assert 0 < sum(b) <= M - 1
    assert abs(sum(example["q"]) - 1) < 1e-12 and abs(sum(example["q_prev"]) - 1) < 1e-12
    texts = _texts(ET.fromstring(diagrams.sba_layer().svg))
    for key in ("p", "s", "s_prev"):
        for value in example[key]:
            assert f"{value:.2f}" in texts, (key, value)
    for before, now in zip(example["q_prev"], example["q"]):
        assert f"{before:.2f} → {now:.2f}" in texts


def test_sba_layer_draws_the_decisions_and_the_kept_modules():
    diagram = diagrams.sba_layer()
    root = ET.fromstring(diagram.svg)
    circles = [e for e in root.iter(f"{SVG}circle") if e.get("stroke") == diagrams.ACCENT]
    filled = [e for e in circles if e.get("fill") == diagrams.ACCENT]
    assert len(circles) == 4 + 2 and len(filled) == 2 + 1  # and the legend's two
    dashed = [
        e
        for e in root.iter(f"{SVG}path")
        if e.get("stroke-dasharray") and e.get("stroke") == diagrams.ACCENT
    ]
    assert len(dashed) == 2 + 1  # the two kept modules, and the legend's
    texts = _texts(root)
    for m, kept in ((1, True), (2, False), (3, True), (4, False)):
        assert (f"D(v({m})t−1)" in texts) == kept and (f"v̂({m})t" in texts) != kept
    colour = {"".join(t.itertext()): t.get("fill") for t in root.iter(f"{SVG}text")}
    assert colour["b(m)t"] == diagrams.ACCENT
    for phrase in ("modules 2 and 4, whose shares fell, update", "never all M modules", "S_ic"):
        assert phrase in diagram.desc, phrase


def test_zoneout_panel_names_the_models_variants():
    """The gate-level panel has one coin per variant of GateZoneoutLSTMCell, and Krueger's
    cell its two independent coins."""
    pytest.importorskip("torch")
    from rnnbook.models.zoneout import GATE_VARIANTS

    diagram = diagrams.zoneout_cell()
    root = ET.fromstring(diagram.svg)
    colour = {"".join(t.itertext()): t.get("fill") for t in root.iter(f"{SVG}text")}
    names = {text for text, fill in colour.items() if re.fullmatch(r"Z\w+", text)}
    assert names == {f"Z{v}" for v in GATE_VARIANTS}
    assert all(colour[name] == diagrams.ACCENT for name in names)
    # Coins are two accent rings: two in the cell, four badges (Z_ch has none of its own), one
    # in the legend.
    rings = [
        e
        for e in root.iter(f"{SVG}circle")
        if e.get("stroke") == diagrams.ACCENT and e.get("stroke-width") == "2"
    ]
    assert len(rings) == 2 + 4 + 1
    for phrase in ("un-zoned cell", "d^c_t ~ Bernoulli(z_c)", "independently", "expectations"):
        assert phrase in diagram.desc, phrase
