"""Fixtures of the browser suite: the built sites, a local server for each, headless Chromium.

The suite tests both editions of the book, every page of each, with the same checks: the
book (the instructor edition, ``make html``) and the student edition (``make student-check``
or ``scripts/student_book.py``, which builds it from the book's executed chapters). A page
that works in one edition and not in the other fails like any other page.

Environment (read once, at import, before any fixture changes the environment):
    RNNBOOK_SITE          the book's built site (default: _build/html of this repository)
    RNNBOOK_STUDENT_SITE  the student edition's built site (default:
                          _build/student/_build/html, unless RNNBOOK_SITE names another
                          build); "none" tests the book alone
    RNNBOOK_STUDENT_SOURCES  the student edition's sources, for its _config.yml and _toc.yml
                          (default: _build/student-src)
    RNNBOOK_EDITIONS      the editions to test, of "book,student" (default: both)
    RNNBOOK_STUDENT_PAGES  "all": the student edition's run opens every page of it and tests
                          each in light and dark mode; by default it opens the pages whose
                          article differs from the book's and one of each folder of the
                          others, reads the rest without a browser
                          (site_checks.student_pages_to_open), and leaves the light and
                          dark test to the book's pages while the student edition's theme
                          and figures are the book's files (test_site.py)
    RNNBOOK_SCREENSHOTS   a folder: save there a full-page screenshot of every page in light
                          and dark mode (the student edition's in its student/ folder). Unset,
                          none is saved (a long page's costs seconds of CPU; the contrast
                          of the figures is measured on screenshots of the figures alone),
                          and the measured contrasts (readability.json) go to
                          _build/browser-screenshots of this repository
    RNNBOOK_CHROMIUM      the Chromium binary (default: /usr/bin/chromium, Debian's package;
                          scripts/install_browser.sh installs it)
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from site_checks import (
    CHROMIUM_ARGS,
    VIEWPORT,
    FirstVisits,
    LaunchConfig,
    serve,
    site_pages,
    student_pages_to_open,
)

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("RNNBOOK_SITE") or ROOT / "_build" / "html").resolve()
_student_site = os.environ.get("RNNBOOK_STUDENT_SITE")
if _student_site is None:  # the default student build goes with the default book build only
    _student_site = "none" if os.environ.get("RNNBOOK_SITE") else "_build/student/_build/html"
STUDENT_SITE = None if _student_site == "none" else (ROOT / _student_site).resolve()
STUDENT_SOURCES = (ROOT / os.environ.get("RNNBOOK_STUDENT_SOURCES", "_build/student-src")).resolve()
WANTED = [e.strip() for e in os.environ.get("RNNBOOK_EDITIONS", "book,student").split(",")]
SCREENSHOTS = Path(
    os.environ.get("RNNBOOK_SCREENSHOTS") or ROOT / "_build" / "browser-screenshots"
).resolve()
SAVE_SCREENSHOTS = bool(os.environ.get("RNNBOOK_SCREENSHOTS"))
OPEN_EVERY_STUDENT_PAGE = os.environ.get("RNNBOOK_STUDENT_PAGES") == "all"
CHROMIUM = os.environ.get("RNNBOOK_CHROMIUM") or "/usr/bin/chromium"


@dataclass(frozen=True)
class Edition:
    """One edition of the book: its name, its built site, and the sources it was built from."""

    name: str  # "book" or "student"
    site: Path
    sources: Path  # the folder of its _config.yml and _toc.yml

    @property
    def config(self) -> dict:
        return yaml.safe_load((self.sources / "_config.yml").read_text())

    @property
    def toc(self) -> dict:
        return yaml.safe_load((self.sources / "_toc.yml").read_text())


# Every edition there is (the book, and the student edition unless RNNBOOK_STUDENT_SITE is
# "none"), and the ones this run opens page by page (RNNBOOK_EDITIONS): `make browser` runs
# the two editions in two processes at once, and the side-by-side test needs both sites.
AVAILABLE = {"book": Edition("book", SITE, ROOT)}
if STUDENT_SITE is not None:
    AVAILABLE["student"] = Edition("student", STUDENT_SITE, STUDENT_SOURCES)
EDITIONS = {name: e for name, e in AVAILABLE.items() if name in WANTED}


def pytest_configure(config):
    unknown = [name for name in WANTED if name not in ("book", "student")]
    if unknown:
        raise pytest.UsageError(f"RNNBOOK_EDITIONS names no edition: {unknown}")
    if not EDITIONS:  # RNNBOOK_EDITIONS=student with RNNBOOK_STUDENT_SITE=none (or RNNBOOK_SITE)
        pytest.exit(
            f"no edition to test: RNNBOOK_EDITIONS={','.join(WANTED)}, and no student edition "
            "(RNNBOOK_STUDENT_SITE=none, or RNNBOOK_SITE without RNNBOOK_STUDENT_SITE)",
            returncode=0,
        )
    for edition in EDITIONS.values():
        if not (edition.site / "index.html").is_file():
            how = {
                "book": "run `make html` first, or set RNNBOOK_SITE to the folder of a built site",
                "student": "run `make student-check` (it builds the student edition from the "
                "book's executed chapters) first, or set RNNBOOK_STUDENT_SITE=none to test "
                "the book alone",
            }[edition.name]
            raise pytest.UsageError(
                f"the browser suite needs the {edition.name} edition built, and there is none "
                f"at {edition.site}: {how}"
            )
        if not (edition.sources / "_config.yml").is_file():
            raise pytest.UsageError(
                f"no _config.yml in {edition.sources}, the sources of the {edition.name} "
                "edition (RNNBOOK_STUDENT_SOURCES)"
            )
    if not os.access(CHROMIUM, os.X_OK):
        raise pytest.UsageError(
            f"no Chromium at {CHROMIUM}: run scripts/install_browser.sh, or set RNNBOOK_CHROMIUM"
        )
    config.screenshots_taken = []
    config.readability = []
    config.editions_tested = list(EDITIONS)
    config.pages_opened = {name: pages_to_open(e) for name, e in EDITIONS.items()}
    config.open_every_student_page = OPEN_EVERY_STUDENT_PAGE


def pages_to_open(edition: Edition) -> list[str]:
    """The pages of ``edition`` that this run opens one by one: all of the book's; of the
    student edition's, those of site_checks.student_pages_to_open, or all of them with
    RNNBOOK_STUDENT_PAGES=all or without a built book to compare them with."""
    book = AVAILABLE["book"].site
    if edition.name == "book" or OPEN_EVERY_STUDENT_PAGE or not (book / "index.html").is_file():
        return site_pages(edition.site)
    return student_pages_to_open(book, edition.site)


def pytest_generate_tests(metafunc):
    # One session-scoped parameter per page opened of each edition (pages_to_open): pytest
    # then runs every test of a page in a row against a single load of it (see `visit`).
    if "page_path" in metafunc.fixturenames:
        opened = metafunc.config.pages_opened
        pages = [(name, page) for name in EDITIONS for page in opened[name]]
        ids = [f"{name}:{page}" for name, page in pages]
        metafunc.parametrize("page_path", pages, ids=ids, scope="session")
    if "edition" in metafunc.fixturenames:
        names = list(EDITIONS)
        metafunc.parametrize("edition", [EDITIONS[n] for n in names], ids=names, scope="session")


def pytest_terminal_summary(terminalreporter, config):
    shots = getattr(config, "screenshots_taken", [])
    if shots:
        terminalreporter.section(f"{len(shots)} screenshots in {SCREENSHOTS}")
        for shot in shots:
            terminalreporter.write_line(str(shot.relative_to(SCREENSHOTS)))
    readability = getattr(config, "readability", [])
    if readability:
        name = "readability.json" if list(EDITIONS) != ["student"] else "readability-student.json"
        report = SCREENSHOTS / name
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(readability, indent=1) + "\n")
        terminalreporter.write_line(f"contrast measured on each page and mode: {report}")


@pytest.fixture(scope="session")
def editions() -> dict[str, Edition]:
    """Every edition there is, tested in this run or not: ``{name: Edition}``."""
    return AVAILABLE


@pytest.fixture(scope="session")
def site() -> Path:
    """The book's site (the instructor edition): the one test_broken_site.py breaks."""
    return SITE


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def launch_config() -> LaunchConfig:
    return LaunchConfig.from_config(yaml.safe_load((ROOT / "_config.yml").read_text()))


@pytest.fixture(scope="session")
def base_url(site):
    """The book's site, served over HTTP on a free local port for the whole session."""
    with serve(site) as url:
        yield url


@pytest.fixture(scope="session")
def base_urls():
    """Each edition's site, served on a port of its own for the whole session: ``{name: url}``."""
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(serve(e.site)) for name, e in EDITIONS.items()}


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium from Debian's package, launched once per session by Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield chromium
        chromium.close()


@pytest.fixture
def context(browser):
    """A fresh browser context (no cookies, no localStorage: the theme starts at its default)."""
    ctx = browser.new_context(viewport=VIEWPORT, service_workers="block")
    yield ctx
    ctx.close()


@pytest.fixture(scope="session")
def first_visits(browser, base_urls):
    """``{edition: FirstVisits}``: where the pages of each edition are opened, one after
    another, each as on a reader's first visit (nothing stored, nothing cached)."""
    opened = {name: FirstVisits(browser, url, VIEWPORT) for name, url in base_urls.items()}
    yield opened
    for visits in opened.values():
        visits.close()


@pytest.fixture(scope="session")
def visit(first_visits, page_path):
    """The page ``page_path`` (edition, path) of its edition's site, opened once and shared
    by every test of that page; ``visit.edition`` names the edition. As on a reader's first
    visit: nothing in localStorage (the theme saves the reader's choice there), nothing
    cached (site_checks.FirstVisits)."""
    edition, path = page_path
    loaded = first_visits[edition].open(path)
    loaded.edition = edition
    yield loaded
    loaded.page.close()


@pytest.fixture(scope="session")
def readability(request) -> list:
    """The contrast measurements of the theme tests, written to readability.json at the end."""
    return request.config.readability


@pytest.fixture(scope="session")
def screenshot_path(request):
    """``screenshot_path(page, mode, edition)``: the file for a page's full-page screenshot
    (the student edition's in a folder of its own), recorded for the summary; None, so no
    screenshot, unless RNNBOOK_SCREENSHOTS names a folder."""

    def path(page: str, mode: str, edition: str = "book") -> Path | None:
        if not SAVE_SCREENSHOTS:
            return None
        folder = SCREENSHOTS if edition == "book" else SCREENSHOTS / edition
        shot = folder / f"{page.replace('/', '_')}-{mode}.png"
        request.config.screenshots_taken.append(shot)
        return shot

    return path
