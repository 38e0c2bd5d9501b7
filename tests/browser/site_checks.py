"""The checks of the browser suite, as plain functions that return a list of problems.

Each ``check_*`` function looks at one page opened in headless Chromium (a :class:`Visit`)
and returns a list of human-readable problems; an empty list means the page passes. The
tests call the same functions on the real site (expecting no problem) and on deliberately
broken copies of it (expecting the problem they planted), so a check that silently stops
seeing anything fails the suite too.

Nothing here knows about pytest: the functions can be reused from a script.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from PIL import Image

# Chromium's flags for this machine kind: the network is closed but for package
# registries, and without the background-networking flags Chromium keeps retrying Google's
# hosts. Playwright adds --headless and a fresh temporary --user-data-dir itself.
CHROMIUM_ARGS = [
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--font-render-hinting=none",  # the same glyphs, so the same screenshots, on every run
]

# Timeouts in milliseconds. A page of the book is ready in well under a second here; the
# margins are for a loaded 2-core machine.
LOAD_TIMEOUT = 30_000
READY_TIMEOUT = 20_000

# WCAG 2.1: 4.5:1 for text (1.4.3), 3:1 for the parts of a graphic needed to understand it
# (1.4.11). The figures' text and axes are one mid-grey for both themes (rnnbook.plot.INK),
# which cannot reach 4.5:1 on a white and a near-black page at once; 3:1 is the bar.
TEXT_CONTRAST = 4.5
GRAPHIC_CONTRAST = 3.0

THEMES = ("light", "dark")

VIEWPORT = {"width": 1280, "height": 900}  # wide enough for both sidebars of the theme


# --- serving a site and opening its pages ------------------------------------------------


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve ``directory`` over HTTP on a free local port; yield the base URL (ending in /).

    A real server rather than file:// URLs: the search page fetches searchindex.js and the
    pages it lists, and Chromium blocks such requests between file:// URLs.
    """
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def site_pages(site: Path) -> list[str]:
    """The site's pages that the per-page checks open, as paths relative to ``site``.

    Left out, each for a reason:
    - ``_static/``: vendored assets; its two .html files are the theme's template macros.
    - ``_sources/``, ``_images/``: copies of the sources and the figures, no pages.
    - ``index.html``: Jupyter Book's one-line redirect to the root page, checked by its own
      test (``check_redirect``).
    - ``search.html``: empty until a query runs; ``check_search`` opens it with one.
    """
    skip_dirs = {"_static", "_sources", "_images"}
    skip_files = {"index.html", "search.html"}
    pages = []
    for path in sorted(site.rglob("*.html")):
        rel = path.relative_to(site)
        if rel.parts[0] in skip_dirs or rel.as_posix() in skip_files:
            continue
        pages.append(rel.as_posix())
    return pages


# A page's article: its own content, without the theme's frame around it (the header, the
# sidebars with the table of contents, the launch and repository buttons).
ARTICLE = re.compile(r'<article class="bd-article".*?</article>', re.S)


def article(html: str) -> str | None:
    """The article of a built page's HTML, or None if it has none."""
    match = ARTICLE.search(html)
    return match.group(0) if match else None


def pages_with_the_same_article(site: Path, other: Path) -> list[str]:
    """The pages of ``site`` (of :func:`site_pages`) whose article is, byte for byte, that of
    the page at the same path of the ``other`` site."""
    same = []
    for page in site_pages(site):
        twin = other / page
        if twin.is_file():
            mine = article((site / page).read_text(encoding="utf-8"))
            if mine is not None and mine == article(twin.read_text(encoding="utf-8")):
                same.append(page)
    return same


def files_not_the_same(site: Path, other: Path, folder: str) -> list[str]:
    """The files under ``site / folder`` that ``other`` does not have, byte for byte, at the
    same path (the theme's CSS, fonts and scripts in ``_static``, the figures in ``_images``)."""
    differ = []
    for path in sorted((site / folder).rglob("*")):
        if path.is_file():
            rel = path.relative_to(site)
            twin = other / rel
            if not twin.is_file() or twin.read_bytes() != path.read_bytes():
                differ.append(rel.as_posix())
    return differ


def student_pages_to_open(book: Path, student: Path) -> list[str]:
    """The pages of the student edition that its browser run opens.

    Every page whose article differs from the book's (the chapters, without their
    solutions; the pages with text of their own), and, of the pages whose article is the
    book's byte for byte (the package reference, ...), the first of each folder: the
    article's checks ran on the book's page, so what the student edition can break on such a
    page is its frame, which is the same template on every page of a folder. The others are
    read without a browser (test_site.py's test of the pages not opened).
    """
    same = set(pages_with_the_same_article(student, book))
    opened, folders = [], set()
    for page in site_pages(student):
        folder = page.rpartition("/")[0]
        if page not in same:
            opened.append(page)
        elif folder not in folders:
            folders.add(folder)
            opened.append(page)
    return opened


@dataclass
class Visit:
    """One page, loaded and settled, with what the browser reported while loading it."""

    page: object  # playwright.sync_api.Page
    url: str
    name: str  # the page's path relative to the site, without .html
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    not_ready: list[str] = field(default_factory=list)
    edition: str = "book"  # which edition of the book the page belongs to
    # The pixel counts of each image file the page shows (check_theme), by its URL: the file
    # is the same in light and dark mode, so it is read back from the page once.
    image_pixels: dict = field(default_factory=dict)


def page_name(url: str, base_url: str) -> str:
    rel = url[len(base_url) :] if url.startswith(base_url) else urlsplit(url).path.lstrip("/")
    return rel.split("?")[0].split("#")[0].removesuffix(".html")


def open_page(
    context,
    base_url: str,
    path: str,
    *,
    wait: bool = True,
    timeout: int = READY_TIMEOUT,
    cache: bool = True,
) -> Visit:
    """Open ``base_url + path`` in a new tab of ``context`` and wait until it has settled.

    Records console errors, uncaught exceptions, failed local requests (network errors and
    HTTP status >= 400) and every request to another host: the book must work offline.
    Settled means: the load event, MathJax's start-up promise (and the typesetting queued
    behind it), every widget view rendered, every image decoded; with ``wait=False``, only
    the load event. ``timeout`` (ms) bounds each wait after loading. ``cache=False`` turns
    the HTTP cache off for the tab, so that it fetches every file as on a first visit.
    """
    page = context.new_page()
    if not cache:
        devtools = context.new_cdp_session(page)
        devtools.send("Network.enable")
        devtools.send("Network.setCacheDisabled", {"cacheDisabled": True})
    url = base_url + path
    visit = Visit(page=page, url=url, name=page_name(url, base_url))

    def on_console(message):
        if message.type == "error":
            where = message.location.get("url", "") if message.location else ""
            visit.console_errors.append(f"{message.text} ({where})" if where else message.text)

    def on_response(response):
        if response.status >= 400 and response.url.startswith(base_url):
            visit.failed_requests.append(f"HTTP {response.status} {response.url}")

    def on_request_failed(request):
        if request.url.startswith(base_url):
            visit.failed_requests.append(f"{request.failure} {request.url}")

    def on_request(request):
        # Recorded, not blocked: blocking (page.route) would also turn off the HTTP cache.
        if not request.url.startswith((base_url, "data:", "blob:")):
            visit.external_requests.append(request.url)

    page.on("console", on_console)
    page.on("pageerror", lambda error: visit.page_errors.append(str(error)))
    page.on("response", on_response)
    page.on("requestfailed", on_request_failed)
    page.on("request", on_request)
    page.goto(url, wait_until="load", timeout=LOAD_TIMEOUT)
    if wait:
        settle(visit, timeout)
    return visit


class FirstVisits:
    """The pages of one site, opened one after another, each as on a reader's first visit.

    A new browser context per page would give each page nothing stored and nothing cached,
    but Chromium starts a new renderer process for every context, about half of the CPU an
    average page of the book costs to open (0.8 of 1.7 CPU-s for a page of the package
    reference on a 2-core Xeon). So the pages share one context, in which a tab of the site
    stays open (Chromium then keeps the site's renderer process), and each visit starts as
    a first one: before it, the site's ``localStorage`` (where the theme keeps the reader's
    light or dark choice) and ``sessionStorage`` are emptied and the cookies cleared, and
    the page's tab runs without the HTTP cache (``open_page(cache=False)``); service
    workers are blocked, as in the suite's other contexts.
    """

    # The tab that stays open: a small file of the site, so that it holds the site's origin.
    KEEPER = "_static/documentation_options.js"

    def __init__(self, browser, base_url: str, viewport: dict):
        self.base_url = base_url
        self.context = browser.new_context(viewport=viewport, service_workers="block")
        self.keeper = self.context.new_page()
        self.keeper.goto(base_url + self.KEEPER, wait_until="load", timeout=LOAD_TIMEOUT)

    def open(self, path: str, **kwargs) -> Visit:
        """``open_page`` of ``path``, after emptying what an earlier page left stored."""
        self.keeper.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
        self.context.clear_cookies()
        return open_page(self.context, self.base_url, path, cache=False, **kwargs)

    def close(self) -> None:
        self.context.close()


_MATHJAX_READY_JS = """
async (timeout) => {
  if (!window.MathJax) return "none";
  if (!MathJax.startup || !MathJax.startup.promise) return "not started";
  const timer = new Promise(resolve => setTimeout(() => resolve("timeout"), timeout));
  return await Promise.race([MathJax.startup.promise.then(() => "ready"), timer]);
}
"""

_WIDGETS_RENDERED_JS = """
() => [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')]
  .every(s => s.previousElementSibling && s.previousElementSibling.matches('.widget-subarea'))
"""

_IMAGES_DONE_JS = "() => [...document.images].every(img => img.complete)"


def settle(visit: Visit, timeout: int = READY_TIMEOUT) -> None:
    """Wait for MathJax, the widgets and the images; note in ``not_ready`` what timed out."""
    page = visit.page
    try:
        state = page.evaluate(_MATHJAX_READY_JS, timeout)
        if state == "not started":
            visit.not_ready.append("MathJax is configured but did not start")
        elif state == "timeout":
            visit.not_ready.append(f"MathJax did not finish in {timeout / 1000:.0f} s")
    except Exception as error:  # a rejected start-up promise
        visit.not_ready.append(f"MathJax failed: {error}")
    for what, script in (("widget views", _WIDGETS_RENDERED_JS), ("images", _IMAGES_DONE_JS)):
        try:
            page.wait_for_function(script, timeout=timeout)
        except Exception:
            visit.not_ready.append(f"{what} not ready after {timeout / 1000:.0f} s")
    # Typesetting queued after start-up (the widget labels) chains onto the same promise.
    if page.evaluate(_MATHJAX_READY_JS, timeout) == "timeout":
        visit.not_ready.append("MathJax did not finish typesetting the widget labels")
    # Web fonts (the theme's, MathJax's): the screenshots should show the real glyphs.
    page.evaluate(
        "(t) => Promise.race([document.fonts.ready, new Promise(r => setTimeout(r, t))])", timeout
    )


# --- the checks ---------------------------------------------------------------------------


def check_console(visit: Visit) -> list[str]:
    """No JavaScript error, no failed request for the site's own files, nothing external."""
    problems = [f"uncaught JavaScript error: {e}" for e in visit.page_errors]
    problems += [f"console error: {e}" for e in visit.console_errors]
    problems += [f"failed request: {r}" for r in visit.failed_requests]
    problems += [
        f"request to another host (the book must work offline): {r}"
        for r in visit.external_requests
    ]
    problems += [f"page did not settle: {r}" for r in visit.not_ready]
    return problems


# Raw TeX that MathJax should have replaced. `$...$` only counts when its content looks
# like TeX (a command, a sub- or superscript, or a single letter), so "$5 and $10" passes.
RAW_TEX = re.compile(
    r"\$\$|\\\(|\\\)|\\\[|\\\]|\\begin\{|\\end\{"
    r"|\$(?:[^$\s]*[\\^_][^$]*|[A-Za-z])\$"
    r"|(?<![\w\\])\\(?:frac|mathbf|mathrm|mathcal|sum|prod|partial|odot|alpha|beta|gamma"
    r"|delta|sigma|tanh|rho|theta|lambda|left|right|Vert|cdot|top|in|le|ge)(?![A-Za-z])"
)

_MATH_JS = """
() => {
  const skip = 'mjx-container, script, style, code, pre, textarea, noscript, kbd, samp, .highlight, template';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skip)) continue;
    const text = node.textContent;
    if (/[$\\\\]/.test(text)) texts.push(text.trim().slice(0, 300));
  }
  const errors = [...document.querySelectorAll('mjx-merror')].map(e => e.textContent.slice(0, 200));
  return {
    texts,
    errors,
    mathNodes: document.querySelectorAll('.math').length,
    containers: document.querySelectorAll('mjx-container').length,
    mathjax: !!(window.MathJax && MathJax.version),
  };
}
"""


def check_math(visit: Visit) -> list[str]:
    """MathJax ran where there is math, no TeX error, and no raw TeX left in the text."""
    info = visit.page.evaluate(_MATH_JS)
    problems = []
    if info["mathNodes"] and not info["containers"]:
        loaded = "loaded" if info["mathjax"] else "not loaded"
        problems.append(
            f"{info['mathNodes']} math elements but no MathJax output (MathJax {loaded})"
        )
    problems += [f"MathJax error: {e}" for e in info["errors"]]
    for text in info["texts"]:
        match = RAW_TEX.search(text)
        if match:
            problems.append(f"raw TeX {match.group(0)!r} in text: {text!r}")
    return problems


_IMAGES_JS = """
() => [...document.images].map((img, index) => {
  const figure = img.closest('figure');
  const caption = figure && figure.querySelector('figcaption');
  return {
    index,
    src: img.getAttribute('src') || '',
    currentSrc: img.currentSrc,
    alt: img.getAttribute('alt'),
    title: img.getAttribute('title') || img.getAttribute('aria-label') || '',
    caption: caption ? caption.textContent.trim() : '',
    complete: img.complete,
    naturalWidth: img.naturalWidth,
    content: !!img.closest('article.bd-article'),
    widget: !!img.closest('.jupyter-widgets'),
  };
})
"""


def _meaningless_alt(alt: str | None, src: str) -> bool:
    """No alt, an empty one, or just the file's name (what Sphinx writes when none is given)."""
    if not alt or not alt.strip():
        return True
    alt = alt.strip()
    return (
        alt == src
        or alt == src.rsplit("/", 1)[-1]
        or bool(re.fullmatch(r"[\w./-]+\.(png|jpe?g|gif|svg|webp)", alt))
    )


def check_images(visit: Visit) -> list[str]:
    """Every image loaded; every figure in the text has alt text or a caption.

    A figure in the text is an image inside the article: a notebook output, a widget's image
    or a Markdown image. The Image widget of ipywidgets 8 has no alt attribute; its title (the
    widget's ``tooltip``) or aria-label names it instead. ``rnnbook.plot.slider_figure`` draws
    each frame as an ``<img>`` with alt text inside an HTML widget, which counts as any image.
    """
    problems = []
    for img in visit.page.evaluate(_IMAGES_JS):
        src = img["src"] if not img["src"].startswith(("data:", "blob:")) else img["src"][:40]
        where = "widget image" if img["widget"] else "image"
        if not img["complete"] or img["naturalWidth"] == 0:
            problems.append(f"{where} #{img['index']} did not load: {src}")
        if img["content"] and _meaningless_alt(img["alt"], img["src"]) and not img["caption"]:
            if not (img["widget"] and img["title"].strip()):
                problems.append(
                    f"{where} #{img['index']} has neither alt text nor a caption: {src}"
                )
    return problems


_WIDGETS_JS = """
() => {
  const stateScript = document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
  let state = {};
  try { state = stateScript ? JSON.parse(stateScript.textContent).state || {} : {}; } catch (e) { state = null; }
  const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
  return views.map((script, index) => {
    let modelId = '';
    try { modelId = JSON.parse(script.textContent).model_id; } catch (e) {}
    const view = script.previousElementSibling;
    const rendered = !!(view && view.matches('.widget-subarea'));
    const result = {index, modelId, hasState: state === null ? false : modelId in state,
                    stateParsed: state !== null, rendered, width: 0, height: 0, content: 0, text: ''};
    if (rendered) {
      const box = view.getBoundingClientRect();
      result.width = box.width; result.height = box.height;
      result.text = view.textContent.trim().slice(0, 120);
      // Visible leaves that draw something: text, an image, a bar, a slider.
      result.content = [...view.querySelectorAll('*')].filter(el => {
        const r = el.getBoundingClientRect();
        if (r.width < 1 || r.height < 1) return false;
        if (el.matches('img')) return el.naturalWidth > 0;
        if (el.matches('.progress-bar, .noUi-handle, input, select, button, canvas, svg')) return true;
        return [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
      }).length;
    }
    return result;
  });
}
"""


def check_widgets(visit: Visit) -> list[str]:
    """Every widget view has its saved state, rendered, has a size and draws something."""
    problems = []
    for view in visit.page.evaluate(_WIDGETS_JS):
        label = f"widget view #{view['index']} (model {view['modelId'][:8]})"
        if not view["stateParsed"]:
            problems.append("the page's widget state is not valid JSON")
        elif not view["hasState"]:
            problems.append(f"{label} has no saved state in the page (precomputed state missing)")
        if not view["rendered"]:
            problems.append(f"{label} did not render")
            continue
        if "Error displaying widget" in view["text"]:
            problems.append(f"{label} shows 'Error displaying widget'")
        elif view["width"] < 1 or view["height"] < 1:
            problems.append(f"{label} renders with no size ({view['width']}x{view['height']})")
        elif not view["content"]:
            problems.append(f"{label} renders as an empty box")
    return problems


# The images of a slider figure: Image widgets, or (rnnbook.plot.slider_figure, which needs
# their alt text) an <img> in an HTML widget.
_FRAME_IMAGES = ".widget-image, .widget-html-content img"

_SLIDERS_JS = """
() => [...document.querySelectorAll('.widget-subarea .widget-vbox')].flatMap((box, index) => {
  const handle = box.querySelector('.widget-slider .noUi-handle');
  const stackImage = box.querySelector('FRAME_IMAGES');
  if (!handle || !stackImage) return [];
  return [{index, max: +handle.getAttribute('aria-valuemax'), now: +handle.getAttribute('aria-valuenow')}];
})
""".replace("FRAME_IMAGES", _FRAME_IMAGES)

# "ok <src>" when the slider's box shows exactly one loaded image, else what it shows.
_SLIDER_IMAGE_JS = """
(index) => {
  const box = [...document.querySelectorAll('.widget-subarea .widget-vbox')][index];
  const shown = [...box.querySelectorAll('FRAME_IMAGES')].filter(i => i.getBoundingClientRect().height > 0);
  if (shown.length !== 1) return `${shown.length} images shown`;
  return shown[0].complete && shown[0].naturalWidth > 0 ? `ok ${shown[0].src}` : 'an image that did not load';
}
""".replace("FRAME_IMAGES", _FRAME_IMAGES)

_SLIDER_MOVED_JS = (
    "([index, before]) => { const now = (" + _SLIDER_IMAGE_JS + ")(index);"
    " return now.startsWith('ok ') && now !== before; }"
)


def check_sliders(visit: Visit) -> list[str]:
    """Each slider linked to a stack of precomputed images switches the image without a kernel.

    ``rnnbook.plot.slider_figure`` draws one image per slider value into an ipywidgets Stack
    (each an ``<img>`` in an HTML widget; an Image widget counts too) and links the slider to
    it with ``jslink``, which the embedded widget manager runs in the browser. The check
    presses an arrow key on the slider's handle, expects exactly one shown, loaded image
    that differs from the one before, then moves the slider back.
    """
    page = visit.page
    problems = []
    for slider in page.evaluate(_SLIDERS_JS):
        index = slider["index"]
        handle = page.locator(".widget-subarea .widget-vbox").nth(index).locator(".noUi-handle")
        before = page.evaluate(_SLIDER_IMAGE_JS, index)
        if not before.startswith("ok "):
            problems.append(f"slider figure #{index} shows {before} before moving")
            continue
        at_end = slider["now"] >= slider["max"]
        key, back = ("ArrowLeft", "ArrowRight") if at_end else ("ArrowRight", "ArrowLeft")
        handle.focus()
        handle.press(key)
        try:
            page.wait_for_function(_SLIDER_MOVED_JS, arg=[index, before], timeout=5_000)
        except Exception:
            after = page.evaluate(_SLIDER_IMAGE_JS, index)
            shows = "the same image" if after == before else after
            problems.append(f"slider figure #{index}: {key} did not change the image ({shows})")
        handle.press(back)
    return problems


_HEADINGS_JS = """
() => [...document.querySelectorAll('article.bd-article :is(h1, h2, h3, h4, h5, h6)')]
  .map(h => [+h.tagName[1], h.textContent.replace('#', '').trim().slice(0, 80)])
"""


# What a reader must never see on a page: the traces of the machine that built it.
# - a Python warning in a cell's output: a chapter must not run into one. Only outputs are
#   read for it (stdout, stderr, text/plain, tracebacks, widgets), so prose that explains a
#   warning and code that calls warnings.warn pass; tqdm's progress bars, on stderr too, pass;
# - an absolute path of the build machine, in an output or anywhere in the page's text;
# - an internal hash: a SHA-256 or a git commit, whole or cut short ("e433f285928b…").
# The source of the code cells is left out of all three: code may name a warning class, a
# hash function or a folder, and none of it is output.

# A warning category as Python names it (UserWarning, DeprecationWarning, FutureWarning,
# RuntimeWarning, a library's TqdmWarning, ...), wherever an output shows one: in the
# "file.py:12: UserWarning: ..." line Python prints to stderr, a repr, a traceback. Also
# the base category in that line, the "warnings.warn(" source line Python prints under the
# warning, and a library's logger.warning in logging's default format ("WARNING:name:...").
# A plain "Warning:" printed by a chapter itself is the chapter's choice and passes.
PYTHON_WARNING = re.compile(
    r"\b[A-Z]\w*Warning\b"
    r"|:\d+: Warning:"
    r"|\bwarnings\.warn"
    r"|^WARNING:[\w.]*:",
    re.MULTILINE,
)

# The folders a machine keeps its files in (Linux, macOS, CI runners). The repository's
# own checkout is added by absolute_path_pattern, wherever it lies.
MACHINE_ROOTS = (
    "work", "root", "home", "tmp", "usr", "opt", "var", "srv", "mnt", "etc", "builds",
    "Users", "Volumes", "private",
)  # fmt: skip


def absolute_path_pattern(checkouts: Iterable[str | Path] = ()) -> re.Pattern:
    """An absolute path of a machine: under one of MACHINE_ROOTS, on a Windows drive, or in
    one of ``checkouts`` (the repository's absolute path, say).

    The path must start a word: ``checkpoints/ntm-copy.pt`` and ``runs/tmp/x`` are relative,
    ``~/work`` is the reader's, a URL's path follows its host (``https://host/home/...``),
    ``a/b`` in a formula is no root. A ``file://`` URL's path counts.
    """
    starts = [f"/{root}" for root in MACHINE_ROOTS]
    starts += [str(path).rstrip("/\\") for path in checkouts if str(path).strip("/\\")]
    roots = "|".join(re.escape(start) for start in sorted(starts, key=len, reverse=True))
    return re.compile(
        rf"(?:(?<![\w.:/~-])|(?<=file://))(?:{roots})(?![\w-])[^\s'\"<>`),;]*"
        r"|(?<![\w/\\])[A-Z]:[\\/]\w[^\s'\"<>`),;]*"
    )


ABSOLUTE_PATH = absolute_path_pattern()

# A run of hexadecimal digits with letters and digits both, alone (not part of a word, of
# an identifier with dashes such as a UUID, nor the digits of a number such as
# 1.3815510557929751e+20): 12 or more lower-case digits (a SHA-256, a git commit, or either
# cut to 12), 40 or 64 upper-case ones, or 6 or more cut short with an ellipsis ("2daeda0…").
HEX_HASH = re.compile(
    r"(?<![\w.+-])(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*[0-9])"
    r"(?:[0-9a-f]{12,}(?![\w+-])"  # a hash, whole or cut to 12 digits or more
    r"|[0-9A-F]{40}(?:[0-9A-F]{24})?(?![\w+-])"  # a git commit or a SHA-256 in capitals
    r"|[0-9a-f]{6,}(?:…|\.\.\.))"  # cut shorter, with an ellipsis
)

# The text of the cell outputs, and the rest of the page's text, as it stands in the page:
# hidden parts too (a closed <details>, an output behind a toggle, which a reader may
# open). A text node joins the one before it within the same block, else starts a new line,
# so "UserWarning" and its coloured ": ..." stay together and two table cells do not. Left
# out: the source of the code cells, scripts and styles (a widget's model id is a hex
# string), and MathJax's output (the math check's business).
_CLEAN_JS = """
() => {
  const skip = 'script, style, template, noscript, mjx-container, .copybtn';
  const blocks = 'p, li, dt, dd, td, th, pre, div, h1, h2, h3, h4, h5, h6, summary, figcaption, '
    + 'caption, blockquote, section, header, footer, nav, aside, table, tr, form, button, label, '
    + 'details, dialog, article, main, body';
  const textOf = (root, leaveOut) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let text = '', block = null;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const parent = node.parentElement;
      if (!parent || parent.closest(skip) || (leaveOut && parent.closest(leaveOut))) continue;
      const here = parent.closest(blocks);
      text += (here === block ? '' : '\\n') + node.textContent;
      block = here;
    }
    return text;
  };
  const outputs = [...document.querySelectorAll('.cell_output')].map(output => textOf(output, null));
  // Text a reader meets outside the flow (outputs' figures included): the title, alt
  // texts, tooltips, labels. An alt text that is the image's own src is the site's link
  // to its file (Sphinx's default for a figure with a caption), as a URL is.
  const attributes = [...document.querySelectorAll('[alt], [title], [aria-label]')]
    .filter(element => !element.closest('.cell_input, ' + skip))
    .flatMap(element => ['alt', 'title', 'aria-label'].map(name => element.getAttribute(name))
      .filter(value => value && value !== element.getAttribute('src')));
  const text = [document.title, textOf(document.body, '.cell_input, .cell_output'), ...attributes];
  return {outputs, text: text.join('\\n')};
}
"""


def _excerpt(text: str, match: re.Match) -> str:
    start, end = max(0, match.start() - 40), min(len(text), match.end() + 40)
    return " ".join(text[start:end].split())


def check_clean(visit: Visit, checkouts: Iterable[str | Path] = ()) -> list[str]:
    """No Python warning in a cell's output; no absolute path of the build machine and no
    internal hash in an output or in the rest of the page's text.

    ``checkouts``: absolute paths that count as the machine's wherever they lie, such as
    the repository's root (see absolute_path_pattern). The patterns: PYTHON_WARNING,
    ABSOLUTE_PATH, HEX_HASH.
    """
    found = visit.page.evaluate(_CLEAN_JS)
    absolute_path = absolute_path_pattern(checkouts)
    problems = []
    for index, output in enumerate(found["outputs"], start=1):
        for pattern, what in (
            (PYTHON_WARNING, "a Python warning"),
            (absolute_path, "an absolute path"),
            (HEX_HASH, "an internal hash"),
        ):
            for match in pattern.finditer(output):
                problems.append(f"cell output #{index} shows {what}: {_excerpt(output, match)}")
    for pattern, what in ((absolute_path, "an absolute path"), (HEX_HASH, "an internal hash")):
        for match in pattern.finditer(found["text"]):
            problems.append(f"the page's text shows {what}: {_excerpt(found['text'], match)}")
    return problems


def check_headings(visit: Visit) -> list[str]:
    """In the article: exactly one h1, first; no level skipped on the way down."""
    headings = visit.page.evaluate(_HEADINGS_JS)
    if not headings:
        return ["the article has no heading"]
    problems = []
    h1 = [text for level, text in headings if level == 1]
    if len(h1) != 1:
        problems.append(f"{len(h1)} h1 headings in the article (expected 1): {h1}")
    if headings[0][0] != 1:
        problems.append(f"the first heading is h{headings[0][0]}, not h1: {headings[0][1]!r}")
    for (previous, _), (level, text) in zip(headings, headings[1:]):
        if level > previous + 1:
            problems.append(f"heading level skipped, h{previous} to h{level}: {text!r}")
    return problems


@dataclass(frozen=True)
class LaunchConfig:
    """What the launch buttons must point at, from _config.yml."""

    repository_url: str  # https://github.com/ORG/REPO
    branch: str
    path_to_book: str
    colab_url: str
    binderhub_url: str
    notebook_interface: str

    @classmethod
    def from_config(cls, config: dict) -> LaunchConfig:
        repository = config.get("repository", {})
        launch = config.get("launch_buttons", {})
        return cls(
            repository_url=repository["url"].rstrip("/"),
            branch=repository.get("branch", "main"),
            path_to_book=(repository.get("path_to_book") or "").strip("/"),
            colab_url=launch.get("colab_url", "").rstrip("/"),
            binderhub_url=launch.get("binderhub_url", "").rstrip("/"),
            notebook_interface=launch.get("notebook_interface", "classic"),
        )

    @property
    def org_repo(self) -> str:
        return self.repository_url.removeprefix("https://github.com/")


def check_launch_buttons(
    visit: Visit, launch: LaunchConfig, notebook: str, repo_root: Path | None = None
) -> list[str]:
    """The page's Colab and Binder buttons open ``notebook`` (a repository path) in the book's repo.

    ``notebook`` is the page's source notebook, e.g. ``chapters/01_rnn_bptt.ipynb``; with
    ``repo_root`` the check also wants that file to exist in the checkout.
    """
    links = visit.page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
    path = f"{launch.path_to_book}/{notebook}" if launch.path_to_book else notebook
    problems = []
    expected = {
        "Colab": (
            launch.colab_url,
            f"{launch.colab_url}/github/{launch.org_repo}/blob/{launch.branch}/{path}",
        ),
        "Binder": (
            launch.binderhub_url,
            f"{launch.binderhub_url}/v2/gh/{launch.org_repo}/{launch.branch}?urlpath="
            f"{'lab/tree' if launch.notebook_interface == 'jupyterlab' else 'tree'}/{path}",
        ),
    }
    for name, (host, url) in expected.items():
        if not host:
            continue
        found = [link for link in links if link.startswith(host)]
        if not found:
            problems.append(f"no {name} launch button (no link to {host})")
        elif url not in found:
            problems.append(f"{name} launch button points at {found[0]}, expected {url}")
    if repo_root is not None and not (repo_root / path).is_file():
        problems.append(f"the launch buttons open {path}, which is not in the repository")
    return problems


def check_no_link_to(visit: Visit, repository_url: str, why: str) -> list[str]:
    """No link of the page opens ``repository_url`` (a launch button, the repository button,
    a link in the text), nor a Colab or Binder launch of it."""
    links = visit.page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
    return links_to(links, repository_url, why)


_HREF = re.compile(r"""<a\s[^>]*?href=["']([^"']+)["']""", re.S)


def check_no_link_to_in_html(html: str, repository_url: str, why: str) -> list[str]:
    """check_no_link_to on a page's HTML as built, without a browser (the repository's links
    are absolute URLs, the same in the HTML as in the DOM)."""
    return links_to(_HREF.findall(html), repository_url, why)


def links_to(links: Iterable[str], repository_url: str, why: str) -> list[str]:
    """The problems of check_no_link_to: each of ``links`` that opens ``repository_url``."""
    repository = repository_url.rstrip("/")
    org_repo = repository.removeprefix("https://github.com/")
    found = [
        link
        for link in links
        if link.rstrip("/") == repository
        or link.startswith(repository + "/")
        or f"/gh/{org_repo}/" in link
        or f"/github/{org_repo}/" in link
    ]
    return [f"a link to {repository_url} ({why}): {link}" for link in found]


def check_search(
    context,
    base_url: str,
    query: str,
    expect: str = "chapters/",
    path: str = "search.html",
    timeout: int = READY_TIMEOUT,
) -> list[str]:
    """``path?q=<query>`` finishes with at least one result linking to a page under ``expect``."""
    visit = open_page(context, base_url, f"{path}?q={query}", timeout=timeout)
    page = visit.page
    problems = check_console(visit)
    try:
        page.wait_for_function(
            "() => { const s = document.querySelector('#search-results .search-summary');"
            " return s && /finished|did not match/.test(s.textContent); }",
            timeout=timeout,
        )
    except Exception:
        problems.append(f"the search for {query!r} did not finish")
        page.close()
        return problems
    results = page.evaluate(
        "() => [...document.querySelectorAll('#search-results ul.search li a')].map(a => a.getAttribute('href'))"
    )
    if not results:
        problems.append(f"the search for {query!r} found nothing")
    elif not any(href.startswith(expect) for href in results):
        problems.append(f"no result of the search for {query!r} is under {expect}: {results}")
    page.close()
    return problems


def check_redirect(context, base_url: str, path: str = "index.html") -> list[str]:
    """``path`` forwards the reader to a page of the site that loads."""
    visit = open_page(context, base_url, path, wait=False)
    visit.page.wait_for_url(lambda url: not url.endswith(path), timeout=READY_TIMEOUT)
    visit.page.wait_for_load_state("load")
    settle(visit)
    problems = check_console(visit)
    if not visit.page.url.startswith(base_url) or visit.page.url == base_url + path:
        problems.append(f"{path} does not forward to a page of the site ({visit.page.url})")
    elif visit.page.title() == "":
        problems.append(f"{path} forwards to a page with no title ({visit.page.url})")
    visit.page.close()
    return problems


# --- light and dark: screenshots and contrast ---------------------------------------------


def relative_luminance(rgb: tuple[float, float, float]) -> float:
    """WCAG 2.1 relative luminance of an sRGB colour with 0-255 channels."""

    def linear(channel: float) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a, b) -> float:
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


_SET_THEME_JS = """
async (mode) => {
  document.documentElement.dataset.mode = mode;
  document.documentElement.dataset.theme = mode;
  await new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  return getComputedStyle(document.body).backgroundColor;
}
"""

# Colours as the reader sees them: an element's colour, and the background it sits on (the
# first opaque background among its ancestors, blending translucent ones on the way).
# The figures' own pixels are counted once per image file (``known``: the URLs counted
# already, whose ``histogram`` is left empty): they do not change with the mode.
_COLOURS_JS = """
(known) => {
  const parse = (c) => { const m = c.match(/[\\d.]+/g) || [0, 0, 0, 0]; return [+m[0], +m[1], +m[2], m.length > 3 ? +m[3] : 1]; };
  const backdrop = (el) => {
    let layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    let out = [255, 255, 255];
    for (const c of layers.reverse()) out = out.map((v, i) => c[i] * c[3] + v * (1 - c[3]));
    return out;
  };
  const visible = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const sample = (selector, limit) => [...document.querySelectorAll(selector)].filter(visible).slice(0, limit)
    .map(el => ({text: el.textContent.trim().slice(0, 40), color: parse(getComputedStyle(el).color), background: backdrop(el)}));
  return {
    math: sample('article.bd-article mjx-container', 400),
    widgetText: sample('article.bd-article .widget-label, article.bd-article .widget-readout, article.bd-article .widget-html-content', 200),
    bodyText: sample('article.bd-article p', 3),
    // Images that did not load are the images check's to report. ``index`` is the image's
    // place among the page's _FIGURES (the same selector), by which check_theme screenshots it.
    figures: [...document.querySelectorAll('article.bd-article img')].map((img, index) => [img, index])
      .filter(([img]) => visible(img) && img.naturalWidth > 0).map(([img, index]) => {
      const figure = {src: (img.getAttribute('src') || '').slice(0, 60), filter: getComputedStyle(img).filter, index,
                      url: img.currentSrc || img.src, histogram: [], total: 0};
      if (known.includes(figure.url)) return figure;
      try {
        const canvas = document.createElement('canvas');
        canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
        const context = canvas.getContext('2d');
        context.drawImage(img, 0, 0);
        const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
        const counts = new Map();
        for (let i = 0; i < data.length; i += 4) {
          const key = data[i] + ',' + data[i + 1] + ',' + data[i + 2] + ',' + data[i + 3];
          counts.set(key, (counts.get(key) || 0) + 1);
        }
        figure.total = data.length / 4;
        figure.histogram = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 2000)
          .map(([key, n]) => key.split(',').map(Number).concat([n]));
      } catch (error) { figure.error = String(error); }
      return figure;
    }),
  };
}
"""
_FIGURES = "article.bd-article img"  # the figures of _COLOURS_JS


def _figure_contrast(histogram, total: int, backdrop) -> tuple[float, tuple, tuple] | None:
    """Contrast of a figure's ink against its background, as the reader sees it.

    ``histogram`` holds the image's own pixels at its natural size, ``[r, g, b, a, count]``
    (the most frequent colours), and ``backdrop`` is what the page shows behind it (taken
    from the screenshot, so a theme's card behind a transparent figure counts). Every colour
    is first composited over the backdrop. The background is then the most frequent colour;
    the ink is the grey of the text, ticks and axes (the book's theme draws them in one
    grey): the grey that contrasts most with the background among those covering at least
    0.1% of the image, so neither stray pixels nor the faint grid decide. A figure without
    such a grey (a heat map, a photo) is judged by its most contrasting colour instead.
    """
    colours: Counter = Counter()
    for r, g, b, a, count in histogram:
        alpha = a / 255
        colours[tuple(round(c * alpha + k * (1 - alpha)) for c, k in zip((r, g, b), backdrop))] += (
            count
        )
    if not colours or not total:
        return None
    background = colours.most_common(1)[0][0]
    floor = max(20, total // 1000)
    candidates = [
        (contrast_ratio(c, background), c)
        for c, n in colours.items()
        if n >= floor and c != background
    ]
    greys = [(ratio, c) for ratio, c in candidates if max(c) - min(c) <= 12]
    pool = greys or candidates
    if not pool:
        return None
    ratio, ink = max(pool)
    return ratio, ink, background


def _open_screenshot(png: bytes) -> Image.Image:
    """Our own screenshot as an RGB image. Pillow takes an image of over 89 million pixels for
    a decompression bomb (a warning, and an error above twice that); the full-page screenshot
    of a long page (the package's reference, about 130 million) is no such thing."""
    limit = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None
    try:
        return Image.open(io.BytesIO(png)).convert("RGB")
    finally:
        Image.MAX_IMAGE_PIXELS = limit


def _backdrop(page, index: int, timeout: int = READY_TIMEOUT) -> tuple:
    """The colour the reader sees most within the box of figure ``index`` (of _FIGURES): the
    page behind a transparent figure, or the figure's own background. From a screenshot of
    the figure's box alone (Playwright scrolls it into view), which gives the pixels of the
    same box of a full-page screenshot at a small part of its cost."""
    png = (
        page.locator(_FIGURES)
        .nth(index)
        .screenshot(animations="disabled", caret="hide", timeout=timeout)
    )
    image = _open_screenshot(png)
    count, colour = max(image.getcolors(image.width * image.height))
    return colour


def check_theme(
    visit: Visit, mode: str, screenshot: Path | None = None, measurements: list | None = None
) -> list[str]:
    """Switch the page to ``mode`` (light or dark) and measure its readability.

    - math (every MathJax container) and widget text: colour against its backdrop >= 4.5:1;
    - figures: not dimmed by a CSS filter, and their grey ink against the background they
      are drawn on (the pixels behind them, from a screenshot of each figure) >= 3:1.
    The page's own text is sampled too (three paragraphs), as a control. With
    ``measurements``, a record of every measured contrast is appended to it. With
    ``screenshot`` (a path), a full-page screenshot is saved there: it costs seconds of CPU
    on a long page, so the suite takes it only when asked (RNNBOOK_SCREENSHOTS).
    """
    page = visit.page
    page.evaluate(_SET_THEME_JS, mode)
    colours = page.evaluate(_COLOURS_JS, list(visit.image_pixels))
    for figure in colours["figures"]:  # an image counted in the other mode: its counts then
        counted = {k: figure[k] for k in ("histogram", "total", "error") if k in figure}
        figure.update(visit.image_pixels.setdefault(figure["url"], counted))
    if screenshot is not None:
        # a full-page shot of the tallest pages (the claims page) takes long on a busy machine
        shot = page.screenshot(full_page=True, animations="disabled", caret="hide", timeout=120_000)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(shot)
    problems = []
    record = {"page": visit.name, "mode": mode, "lowest text contrast": {}, "figures": []}
    for kind in ("math", "widgetText", "bodyText"):
        worst = None
        for item in colours[kind]:
            ratio = contrast_ratio(item["color"], item["background"])
            if worst is None or ratio < worst[0]:
                worst = (ratio, item)
        if worst is None:
            continue
        ratio, item = worst
        record["lowest text contrast"][kind] = round(ratio, 2)
        if ratio < TEXT_CONTRAST:
            problems.append(
                f"{mode}: {kind} {item['text']!r} has contrast {ratio:.2f}:1 < {TEXT_CONTRAST}:1 "
                f"(colour {item['color'][:3]} on {[round(c) for c in item['background']]})"
            )
    for figure in colours["figures"]:
        name = figure["src"]
        if figure["filter"] not in ("none", ""):
            problems.append(f"{mode}: figure {name} is drawn with the filter {figure['filter']}")
        if "error" in figure:
            problems.append(f"{mode}: figure {name} could not be read back: {figure['error']}")
            continue
        backdrop = _backdrop(page, figure["index"])
        measured = _figure_contrast(figure["histogram"], figure["total"], backdrop)
        if measured is None:
            problems.append(f"{mode}: figure {name} shows a single colour")
            continue
        ratio, ink, background = measured
        record["figures"].append(
            {"src": name, "contrast": round(ratio, 2), "ink": ink, "background": background}
        )
        if ratio < GRAPHIC_CONTRAST:
            problems.append(
                f"{mode}: figure {name}: its ink {ink} on {background} has contrast "
                f"{ratio:.2f}:1 < {GRAPHIC_CONTRAST}:1"
            )
    if measurements is not None:
        measurements.append(record)
    return problems


_ID = re.compile(r"""\sid=["']([^"']+)["']""")  # an element's id in a page's HTML


def check_claims_page(
    context,
    base_url: str,
    path: str = "book/claims.html",
    least: int = 200,
    timeout: int = READY_TIMEOUT,
) -> list[str]:
    """The Claims page lists at least ``least`` claims in its chapter tables, and every
    claim's link lands on an element of its chapter page with that id."""
    visit = open_page(context, base_url, path, timeout=timeout)
    page = visit.page
    problems = check_console(visit)
    links = page.evaluate(
        "() => [...document.querySelectorAll('section[id^=\"claims-\"] table tbody tr')]"
        ".map(row => { const a = row.querySelector('a'); return a ? a.href : null; })"
    )
    page.close()
    if len(links) < least:
        problems.append(f"{path} lists {len(links)} claims, expected at least {least}")
    targets: dict[str, set[str]] = {}
    for href in filter(None, links):
        url, _, anchor = href.partition("#")
        targets.setdefault(url, set()).add(anchor)
    for url, anchors in targets.items():
        # The ids are in the page's HTML as the server sends it: no need to render the page
        # (its own visit does, and a chapter takes seconds of CPU to lay out and typeset).
        response = context.request.get(url, timeout=timeout)
        if not response.ok:
            problems.append(f"{path}: links to {url}, which answers HTTP {response.status}")
            continue
        ids = set(_ID.findall(response.text()))
        missing = [a for a in sorted(anchors) if a not in ids]
        if missing:
            problems.append(f"{path}: links to {url} with no such id: {missing}")
    unlinked = sum(1 for link in links if link is None)
    if unlinked:
        problems.append(f"{path}: {unlinked} claims without a link to their paragraph")
    return problems
