"""The checks catch what they are for: each one, run on a deliberately broken copy of the site.

The site is copied once into a temporary folder. Each case breaks one thing in a copy of a
chapter page, written beside it as ``chapters/broken-<case>.html`` (so its relative links
still work; the missing-image case deletes a figure file instead), opens it, runs one check
of site_checks.py and expects the problem it planted. Together with test_site.py, where the
same functions find nothing on the real site, this shows that a broken page fails the suite.
One test goes the other way: text that only looks unclean (a tqdm progress bar on stderr,
prose about warnings, code that warns) must leave check_clean's report as it was.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from site_checks import (
    VIEWPORT,
    FirstVisits,
    check_claims_page,
    check_clean,
    check_console,
    check_headings,
    check_images,
    check_launch_buttons,
    check_math,
    check_no_link_to,
    check_no_link_to_in_html,
    check_search,
    check_sliders,
    check_theme,
    check_widgets,
    files_not_the_same,
    open_page,
    serve,
    site_pages,
)

BOOK_REPOSITORY = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "_config.yml").read_text(encoding="utf-8")
)["repository"]["url"].rstrip("/")

STATE_RE = re.compile(
    r'(<script type="application/vnd.jupyter.widget-state\+json">)(.*?)(</script>)', re.S
)


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory, site) -> Path:
    copy = tmp_path_factory.mktemp("broken") / "html"
    shutil.copytree(site, copy)
    return copy


@pytest.fixture(scope="module")
def broken_url(broken_site):
    with serve(broken_site) as url:
        yield url


def chapter_with(site: Path, *needles: str) -> Path:
    """The first chapter page whose HTML holds every needle; skip the case if there is none."""
    for path in sorted((site / "chapters").glob("*.html")):
        if not path.name.startswith("broken-"):
            html = path.read_text(encoding="utf-8")
            if all(needle in html for needle in needles):
                return path
    pytest.skip(f"no chapter page has all of {needles}: nothing to break")


def edit_state(html: str, edit: Callable[[dict], None]) -> str:
    """Apply ``edit`` to the page's saved widget state (the ``state`` dict of models)."""
    match = STATE_RE.search(html)
    state = json.loads(match.group(2))
    edit(state["state"])
    return html[: match.start(2)] + json.dumps(state) + html[match.end(2) :]


def after_h1(html: str, snippet: str) -> str:
    """Insert ``snippet`` after the article's h1."""
    article = html.index('<article class="bd-article">')
    end = html.index("</h1>", article) + len("</h1>")
    return html[:end] + snippet + html[end:]


def at_article_end(html: str, snippet: str) -> str:
    """Insert ``snippet`` at the end of the article, after every cell of the page."""
    article = html.index('<article class="bd-article">')
    end = html.index("</article>", article)
    return html[:end] + snippet + html[end:]


# --- the breakages: (site, the HTML of a chapter page) -> the broken HTML -------------------------


def missing_image(site: Path, html: str) -> str:
    image = re.search(r'<figure[^>]*>\s*<img [^>]*src="\.\./(_images/[^"]+)"', html).group(1)
    (site / image).unlink(missing_ok=True)  # two cases share this breakage
    return html


def raw_tex(site: Path, html: str) -> str:
    return after_h1(html, r"<p>An unprocessed formula: $h_t = \tanh(W h_{t-1})$.</p>")


def no_mathjax(site: Path, html: str) -> str:
    return re.sub(r'<script[^>]*src="[^"]*mathjax/tex-mml-chtml\.js[^"]*"[^>]*></script>', "", html)


def js_error(site: Path, html: str) -> str:
    planted = "<script>throw new Error('planted by test_broken_site');</script>"
    return html.replace("</body>", planted + "</body>")


def widget_state_missing(site: Path, html: str) -> str:
    return STATE_RE.sub("", html)


def widget_empty(site: Path, html: str) -> str:
    """Every box widget loses its children: the views render as empty boxes."""

    def empty_boxes(state: dict) -> None:
        for model in state.values():
            if model["model_name"] in ("VBoxModel", "HBoxModel", "BoxModel"):
                model["state"]["children"] = []

    return edit_state(html, empty_boxes)


def slider_unlinked(site: Path, html: str) -> str:
    """The slider's jslink to the image stack is gone: moving it changes nothing."""

    def drop_links(state: dict) -> None:
        for model_id in [k for k, m in state.items() if m["model_name"] == "LinkModel"]:
            del state[model_id]

    return edit_state(html, drop_links)


def slider_alt_removed(site: Path, html: str) -> str:
    """The slider figure's frames (an <img> in an HTML widget each) lose their alt text."""

    def drop_alt(state: dict) -> None:
        frames = [m["state"] for m in state.values() if "<img" in str(m["state"].get("value", ""))]
        assert frames, "no HTML widget with an <img> in the widget state: update this test"
        for frame in frames:
            frame["value"] = re.sub(r'\salt="[^"]*"', "", frame["value"])

    return edit_state(html, drop_alt)


def heading_skipped(site: Path, html: str) -> str:
    article = html.index('<article class="bd-article">')
    start = html.index("<h2", article)
    end = html.index("</h2>", start)
    return html[:start] + "<h4" + html[start + 3 : end] + "</h4>" + html[end + 5 :]


def second_h1(site: Path, html: str) -> str:
    return after_h1(html, "<h1>A second title</h1>")


def caption_removed(site: Path, html: str) -> str:
    return re.sub(r"<figcaption>.*?</figcaption>", "", html, count=1, flags=re.S)


def launch_wrong_notebook(site: Path, html: str) -> str:
    return re.sub(
        r'(href="https://colab\.research\.google\.com/[^"]*/)[^"/]+\.ipynb"',
        r'\1another_chapter.ipynb"',
        html,
    )


def dark_math_unreadable(site: Path, html: str) -> str:
    style = "<style>html[data-theme=dark] mjx-container { color: #333 !important; }</style>"
    return html.replace("</head>", style + "</head>")


def _output(text: str, kind: str = "stream") -> str:
    """A cell output as myst-nb renders one, holding ``text``: ``kind`` is ``stream``
    (stdout), ``stderr`` or ``text_plain`` (an expression's value)."""
    return (
        '<div class="cell docutils container"><div class="cell_output docutils container">'
        f'<div class="output {kind} highlight-myst-ansi notranslate"><div class="highlight">'
        f"<pre><span></span>{text}</pre></div></div></div></div>"
    )


def python_warning(site: Path, html: str) -> str:
    """A warning on stderr, as Python prints it: the category line, then the source line."""
    warning = (
        "../src/rnnbook/checkpoints.py:159: UserWarning: checkpoint 'ntm-copy' was made by "
        "other code; re-run the full profile to refresh it.\n  warnings.warn(\n"
    )
    return after_h1(html, _output(warning, "stderr"))


def python_warning_logged(site: Path, html: str) -> str:
    """A library's logger.warning, in logging's default format."""
    warning = "WARNING:matplotlib.font_manager:findfont: Font family 'Planted' not found.\n"
    return after_h1(html, _output(warning, "stderr"))


def python_warning_hidden(site: Path, html: str) -> str:
    """A warning in an output behind a toggle (a hide-output cell): a reader may open it."""
    warning = "/usr/lib/python3/dist-packages/planted.py:7: DeprecationWarning: planted\n"
    hidden = (
        '<details class="admonition hide below-input"><summary aria-label="Toggle hidden '
        'content"><p class="collapsed admonition-title">Show code cell output</p></summary>'
        f"{_output(warning, 'stderr')}</details>"
    )
    return after_h1(html, hidden)


def machine_path(site: Path, html: str) -> str:
    return after_h1(html, _output("loaded /work/main/checkpoints/ntm-copy.pt\n"))


def machine_path_in_text(site: Path, html: str) -> str:
    path = r"C:\Users\builder\rnn-book\checkpoints"
    return after_h1(html, f'<p>The checkpoints are in <code class="literal">{path}</code>.</p>')


def machine_path_in_tooltip(site: Path, html: str) -> str:
    tooltip = '<abbr title="cached in /home/builder/.cache/rnnbook">cache</abbr>'
    return after_h1(html, f"<p>The data come from the {tooltip}.</p>")


def checkout_path(site: Path, html: str) -> str:
    """A path in the repository's checkout, in a folder no machine root names."""
    return after_h1(html, _output("reading /scratch/rnn-book/data/copy-task.npz\n"))


def internal_hash(site: Path, html: str) -> str:
    sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    return after_h1(html, _output(f"{{'weights_sha256': '{sha256}'}}", "text_plain"))


def internal_hash_cut_short(site: Path, html: str) -> str:
    return after_h1(html, _output("the model's code changed since 2daeda0…\n"))


def git_commit_in_text(site: Path, html: str) -> str:
    commit = "73908f4c1e2b9a0d5f6e7a8b9c0d1e2f3a4b5c6d"
    return after_h1(html, f"<p>This page was built from commit {commit}.</p>")


WIDGET_SCRIPT = r'<script[^>]*src="[^"]*widgets/{name}[^"]*"[^>]*></script>'


def widget_scripts_swapped(site: Path, html: str) -> str:
    """The widget manager loads before RequireJS, as in the student edition whose
    _config.yml was written with sorted keys: "define is not defined", no widget renders."""
    require = re.search(WIDGET_SCRIPT.format(name=r"require\.js"), html)
    embed = re.search(WIDGET_SCRIPT.format(name=r"embed-amd\.js"), html)
    assert require and embed, "no widget scripts to swap"
    if embed.start() < require.start():  # swapped already (two cases share this page)
        return html
    return (
        html[: require.start()]
        + embed[0]
        + html[require.end() : embed.start()]
        + require[0]
        + html[embed.end() :]
    )


def book_repository_linked(site: Path, html: str) -> str:
    """A link to the book's repository, which the student edition must not have."""
    return after_h1(html, f'<p><a href="{BOOK_REPOSITORY}/blob/main/chapters/x.ipynb">x</a></p>')


def book_css_missing(site: Path, html: str) -> str:
    """Without rnnbook.css the theme puts a light card behind the grey figures in dark mode."""
    return re.sub(r'<link[^>]*href="[^"]*rnnbook\.css[^"]*"[^>]*/?>', "", html)


@dataclass(frozen=True)
class Case:
    name: str
    page: str  # the broken page it is planted on, with the other cases of the same page
    needles: tuple[str, ...]  # what the chapter page must contain for the breakage to apply
    breakage: Callable[[Path, str], str]  # (site, html) -> html
    check: Callable  # (visit, chapter, launch_config) -> problems
    expect: str  # a regular expression that one of the problems must match


def _theme(mode: str) -> Callable:
    return lambda visit, chapter, launch: check_theme(visit, mode)


def _launch(visit, chapter: Path, launch) -> list[str]:
    return check_launch_buttons(visit, launch, f"chapters/{chapter.stem}.ipynb")


# Cases on one page must not hide each other: "content" gathers the breakages of the text,
# figures and slider; the widgets' own breakages each need a page of their own.
CASES = [
    Case("missing-image", "content", ("<figure",), missing_image, lambda v, c, l: check_images(v), r"image #\d+ did not load: \.\./_images/"),
    Case("missing-image-request", "content", ("<figure",), missing_image, lambda v, c, l: check_console(v), r"failed request: HTTP 404 .*/_images/"),
    Case("caption-removed", "content", ("<figcaption>",), caption_removed, lambda v, c, l: check_images(v), r"has neither alt text nor a caption: \.\./_images/"),
    Case("raw-tex", "content", ("<h1",), raw_tex, lambda v, c, l: check_math(v), r"raw TeX .*tanh"),
    Case("js-error", "content", ("</body>",), js_error, lambda v, c, l: check_console(v), r"uncaught JavaScript error: .*planted by test_broken_site"),
    Case("heading-skipped", "content", ("<h2",), heading_skipped, lambda v, c, l: check_headings(v), r"heading level skipped, h\d to h4"),
    Case("second-h1", "content", ("<h1",), second_h1, lambda v, c, l: check_headings(v), r"2 h1 headings"),
    Case("launch-wrong-notebook", "content", ("colab.research.google.com",), launch_wrong_notebook, _launch, r"Colab launch button points at .*another_chapter\.ipynb"),
    Case("book-repository-linked", "content", ("<h1",), book_repository_linked, lambda v, c, l: check_no_link_to(v, l.repository_url, "planted"), rf"a link to {re.escape(BOOK_REPOSITORY)} \(planted\): .*/chapters/x\.ipynb"),
    Case("slider-unlinked", "content", ("LinkModel",), slider_unlinked, lambda v, c, l: check_sliders(v), r"did not change the image"),
    Case("slider-alt-removed", "content", ("LinkModel", "HTMLModel"), slider_alt_removed, lambda v, c, l: check_images(v), r"widget image #\d+ has neither alt text nor a caption: data:image/png"),
    Case("dark-math-unreadable", "content", ('class="math',), dark_math_unreadable, _theme("dark"), r"dark: math .* contrast"),
    Case("book-css-missing", "content", ("<figure",), book_css_missing, _theme("dark"), r"dark: figure .* contrast"),
    Case("python-warning", "content", ("<h1",), python_warning, lambda v, c, l: check_clean(v), r"cell output #\d+ shows a Python warning: .*UserWarning: checkpoint 'ntm-copy'"),
    Case("python-warning-hidden", "content", ("<h1",), python_warning_hidden, lambda v, c, l: check_clean(v), r"cell output #\d+ shows a Python warning: .*DeprecationWarning: planted"),
    Case("python-warning-logged", "content", ("<h1",), python_warning_logged, lambda v, c, l: check_clean(v), r"cell output #\d+ shows a Python warning: WARNING:matplotlib"),
    Case("machine-path", "content", ("<h1",), machine_path, lambda v, c, l: check_clean(v), r"cell output #\d+ shows an absolute path: .*/work/main/checkpoints/ntm-copy\.pt"),
    Case("machine-path-in-text", "content", ("<h1",), machine_path_in_text, lambda v, c, l: check_clean(v), r"the page's text shows an absolute path: .*C:\\Users\\builder"),
    Case("machine-path-in-tooltip", "content", ("<h1",), machine_path_in_tooltip, lambda v, c, l: check_clean(v), r"the page's text shows an absolute path: .*/home/builder/\.cache"),
    Case("checkout-path", "content", ("<h1",), checkout_path, lambda v, c, l: check_clean(v, checkouts=["/scratch/rnn-book"]), r"cell output #\d+ shows an absolute path: .*/scratch/rnn-book/data"),
    Case("internal-hash", "content", ("<h1",), internal_hash, lambda v, c, l: check_clean(v), r"cell output #\d+ shows an internal hash: .*e3b0c44298fc1c149afb"),
    Case("internal-hash-cut-short", "content", ("<h1",), internal_hash_cut_short, lambda v, c, l: check_clean(v), r"cell output #\d+ shows an internal hash: .*2daeda0…"),
    Case("git-commit-in-text", "content", ("<h1",), git_commit_in_text, lambda v, c, l: check_clean(v), r"the page's text shows an internal hash: .*73908f4c1e2b"),
    Case("no-mathjax", "no-state", ('class="math',), no_mathjax, lambda v, c, l: check_math(v), r"math elements but no MathJax output"),
    Case("widget-state-missing", "no-state", ("widget-view+json",), widget_state_missing, lambda v, c, l: check_widgets(v), r"has no saved state"),
    Case("widget-not-rendered", "no-state", ("widget-view+json",), widget_state_missing, lambda v, c, l: check_widgets(v), r"did not render"),
    Case("widget-empty", "empty-boxes", ("VBoxModel",), widget_empty, lambda v, c, l: check_widgets(v), r"renders (as an empty box|with no size)"),
    Case("widget-scripts-swapped", "scripts-swapped", ("LinkModel",), widget_scripts_swapped, lambda v, c, l: check_console(v), r"uncaught JavaScript error: .*define is not defined"),
    Case("widget-scripts-swapped-render", "scripts-swapped", ("LinkModel",), widget_scripts_swapped, lambda v, c, l: check_widgets(v), r"did not render"),
]  # fmt: skip

# Waits on a broken page end sooner: what is broken never gets ready.
BROKEN_TIMEOUT = 4_000


@pytest.fixture(scope="module")
def broken_page(broken_site, broken_url, browser, launch_config):
    """``broken_page(name)``: (visit, chapter) of the page with every case of that name planted.

    Each page is built and opened once, on first use, from the first chapter that has what
    all of its cases need.
    """
    context = browser.new_context(viewport=VIEWPORT)
    opened: dict[str, tuple] = {}

    def get(name: str):
        if name not in opened:
            cases = [case for case in CASES if case.page == name]
            chapter = chapter_with(broken_site, *{n for case in cases for n in case.needles})
            html = chapter.read_text(encoding="utf-8")
            for case in cases:
                html = case.breakage(broken_site, html)
            broken = chapter.with_name(f"broken-{name}.html")
            broken.write_text(html, encoding="utf-8")
            path = broken.relative_to(broken_site).as_posix()
            opened[name] = (open_page(context, broken_url, path, timeout=BROKEN_TIMEOUT), chapter)
        return opened[name]

    yield get
    context.close()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_check_reports_the_breakage(case, broken_page, launch_config):
    visit, chapter = broken_page(case.page)
    problems = case.check(visit, chapter, launch_config)
    assert any(re.search(case.expect, p) for p in problems), (
        f"the check did not report the breakage {case.name!r} (expected /{case.expect}/); "
        f"it reported: {problems}"
    )


def test_search_without_its_index(broken_site, broken_url, context):
    html = (broken_site / "search.html").read_text(encoding="utf-8")
    broken = html.replace('src="searchindex.js"', 'src="missing-searchindex.js"')
    assert broken != html, "search.html does not load searchindex.js: update this test"
    (broken_site / "broken-search.html").write_text(broken, encoding="utf-8")
    problems = check_search(
        context, broken_url, "LSTM", path="broken-search.html", timeout=BROKEN_TIMEOUT
    )
    assert any("missing-searchindex.js" in p for p in problems), problems
    assert any(re.search("did not finish|found nothing", p) for p in problems), problems


def test_the_link_check_without_a_browser_finds_the_books_repository_button(site):
    """Every page of the book has a button to the book's repository in its frame: the check
    that the student edition's run makes on the pages it does not open finds it on the
    book's pages (test_site.py, test_the_student_pages_not_opened_have_the_books_article)."""
    pages = [site / "genindex.html", *sorted((site / "book" / "api").rglob("*.html"))[:3]]
    for page in pages:
        html = page.read_text(encoding="utf-8")
        problems = check_no_link_to_in_html(html, BOOK_REPOSITORY, "planted")
        assert any(BOOK_REPOSITORY in p for p in problems), f"{page.name}: {problems}"


def test_a_figure_or_a_theme_file_not_the_books_is_found(site, tmp_path):
    """What lets the student edition's run leave the light and dark test to the book: its
    _static and _images are the book's byte for byte. A changed figure, a missing one and a
    file only the copy has are each reported."""
    copy = tmp_path / "html"
    for folder in ("_static", "_images"):
        shutil.copytree(site / folder, copy / folder)
    assert files_not_the_same(copy, site, "_images") == []
    figure, gone = sorted((copy / "_images").glob("*.png"))[:2]
    figure.write_bytes(figure.read_bytes() + b"\0")
    gone.unlink()
    (copy / "_static" / "extra.css").write_text("body { color: grey }")
    assert files_not_the_same(copy, site, "_images") == [f"_images/{figure.name}"]
    assert files_not_the_same(site, copy, "_images") == sorted(
        [f"_images/{figure.name}", f"_images/{gone.name}"]
    )
    assert files_not_the_same(copy, site, "_static") == ["_static/extra.css"]


def test_claims_check_reports_a_link_to_no_paragraph(broken_site, broken_url, context):
    """A claim whose link names an id its chapter page does not have, and one whose link
    names no page at all: check_claims_page reports both (it reads the ids from the HTML the
    server sends, without rendering the chapter)."""
    html = (broken_site / "book" / "claims.html").read_text(encoding="utf-8")
    links = re.findall(r'href="(\.\./chapters/[^"#]+\.html)#([^"]+)"', html)
    assert len(links) >= 2, "claims.html links to no chapter paragraph: update this test"
    (page, anchor), (other, other_anchor) = links[0], links[-1]
    broken = html.replace(f'href="{page}#{anchor}"', f'href="{page}#no-such-paragraph"', 1)
    broken = broken.replace(
        f'href="{other}#{other_anchor}"', f'href="../chapters/no-such-page.html#{other_anchor}"', 1
    )
    (broken_site / "book" / "broken-claims.html").write_text(broken, encoding="utf-8")
    problems = check_claims_page(
        context, broken_url, path="book/broken-claims.html", timeout=BROKEN_TIMEOUT
    )
    assert any("no-such-paragraph" in p for p in problems), problems
    assert any("no-such-page.html" in p and "404" in p for p in problems), problems


# What check_clean must let pass: a tqdm progress bar on stderr, relative paths, URLs, math,
# numbers in an output; prose about warnings, paths and hashes; a code cell whose source
# warns, names a folder and holds a hash (its output is clean).
LOOKALIKES = (
    _output(
        "training: 100%|██████████| 300/300 [00:02&lt;00:00, 120.51it/s, loss=0.0123]", "stderr"
    )
    + _output(
        "saved checkpoints/ntm-copy.pt and runs/tmp/curve.csv beside ../_images/curve.png\n"
        "softmax: [-1.381551055792975e-28, 1.3815510557929751e+20], 0xff, #1f77b4, 10/s\n"
        "run 2026-11-24 17:19 UTC: done\n"
    )
    + "<p>A stale checkpoint makes Python print a <code>UserWarning: ...</code> on stderr, "
    "from <code>warnings.warn</code>: see "
    '<a href="https://docs.python.org/3/library/warnings.html">'
    "https://docs.python.org/3/library/warnings.html</a>. The ratio "
    '<span class="math notranslate nohighlight">\\(h/\\tau\\)</span> and the folder '
    "<code>book/_assets/</code> are no machine paths; a decade of facades is no hash.</p>"
    + '<div class="cell docutils container"><div class="cell_input docutils container">'
    '<div class="highlight-ipython3 notranslate"><div class="highlight"><pre><span></span>'
    'warnings.warn("checkpoint is stale", UserWarning)\n'
    'scratch = Path("/tmp/rnnbook") / "runs"\n'
    'hashlib.sha256(b"").hexdigest() == '
    '"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"'
    "</pre></div></div></div>"
    '<div class="cell_output docutils container">'
    '<div class="output text_plain highlight-myst-ansi notranslate"><div class="highlight">'
    "<pre><span></span>True</pre></div></div></div></div>"
)


def test_clean_check_passes_what_only_looks_unclean(broken_site, broken_url, context):
    """The lookalikes added to a chapter change nothing in what check_clean reports on it."""
    chapter = chapter_with(broken_site, '<article class="bd-article">')
    html = chapter.read_text(encoding="utf-8")
    copy = chapter.with_name("broken-lookalikes.html")
    copy.write_text(at_article_end(html, LOOKALIKES), encoding="utf-8")
    original = open_page(context, broken_url, f"chapters/{chapter.name}", timeout=BROKEN_TIMEOUT)
    lookalikes = open_page(context, broken_url, f"chapters/{copy.name}", timeout=BROKEN_TIMEOUT)
    assert "120.51it/s" in lookalikes.page.content(), "the lookalikes were not planted"
    assert check_clean(lookalikes) == check_clean(original)


# The files of the site that a page fetched, each with the bytes that came over the network
# for it (0 when the browser took it from its cache).
_FETCHED_JS = """
() => performance.getEntriesByType("resource")
  .filter(entry => entry.name.startsWith(location.origin))
  .map(entry => [entry.name, entry.transferSize])
"""
_STORE_JS = "() => { localStorage.setItem('mode', 'dark'); sessionStorage.setItem('seen', '1'); }"
# What the theme shows (it reads the reader's choice from localStorage, or writes its
# default, "auto", there), and what is stored.
_STORED_JS = """
() => [document.documentElement.dataset.mode, localStorage.getItem("mode"),
       sessionStorage.getItem("seen")]
"""


def test_each_first_visit_starts_with_nothing_stored_and_nothing_cached(browser, site, base_url):
    """The per-page tests open the pages one after another in one browser context
    (site_checks.FirstVisits); each visit must still be a reader's first. A page stores a
    choice, as the theme stores light or dark, and the next page of the site finds nothing
    stored and fetches every file over the network again. The control: the same two pages
    in a plain shared context find the choice, and files in the cache."""
    first, second = [p for p in site_pages(site) if p.startswith("book/")][:2]
    visits = FirstVisits(browser, base_url, VIEWPORT)
    try:
        visits.open(first).page.evaluate(_STORE_JS)
        then = visits.open(second).page
        shown, stored, seen = then.evaluate(_STORED_JS)
        assert "dark" not in (shown, stored) and seen is None, (
            f"a visit found an earlier one's storage: mode shown {shown}, stored {stored}; "
            f"sessionStorage {seen}"
        )
        fetched = then.evaluate(_FETCHED_JS)
        assert fetched, f"{second} fetched no file of the site"
        cached = [name for name, size in fetched if size == 0]
        assert not cached, f"a visit took files from the browser's cache: {cached[:5]}"
    finally:
        visits.close()

    shared = browser.new_context(viewport=VIEWPORT)
    try:
        open_page(shared, base_url, first).page.evaluate(_STORE_JS)
        then = open_page(shared, base_url, second).page
        assert then.evaluate(_STORED_JS)[:2] == ["dark", "dark"]
        assert any(size == 0 for _, size in then.evaluate(_FETCHED_JS)), "nothing was cached"
    finally:
        shared.close()
