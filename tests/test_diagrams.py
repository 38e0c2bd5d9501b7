"""rnnbook.diagrams: the SVG architecture diagrams of Chapters 1-4, 8 and 9.

Each diagram must be well-formed SVG with a title and a description, name what the
chapter's equations name, use only the theme's colours (never pure black or white, on a
transparent background), carry its intrinsic size so the browser suite can measure its ink,
and come out the same every time.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

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
