"""Fixtures of the browser suite: the built site, a local server for it, headless Chromium.

Environment (read once, at import, before any fixture changes the environment):
    RNNBOOK_SITE         the built site (default: _build/html of this repository)
    RNNBOOK_SCREENSHOTS  where the light and dark screenshots go (default:
                         _build/browser-screenshots of this repository)
    RNNBOOK_CHROMIUM     the Chromium binary (default: /usr/bin/chromium, Debian's package;
                         scripts/install_browser.sh installs it)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from site_checks import CHROMIUM_ARGS, LaunchConfig, open_page, serve, site_pages

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("RNNBOOK_SITE") or ROOT / "_build" / "html").resolve()
SCREENSHOTS = Path(
    os.environ.get("RNNBOOK_SCREENSHOTS") or ROOT / "_build" / "browser-screenshots"
).resolve()
CHROMIUM = os.environ.get("RNNBOOK_CHROMIUM") or "/usr/bin/chromium"

VIEWPORT = {"width": 1280, "height": 900}  # wide enough for both sidebars of the theme


def pytest_configure(config):
    if not (SITE / "index.html").is_file():
        raise pytest.UsageError(
            f"the browser suite needs a built site, and there is none at {SITE}: run "
            "`make html` first, or set RNNBOOK_SITE to the folder of a built site"
        )
    if not os.access(CHROMIUM, os.X_OK):
        raise pytest.UsageError(
            f"no Chromium at {CHROMIUM}: run scripts/install_browser.sh, or set RNNBOOK_CHROMIUM"
        )
    config.screenshots_taken = []
    config.readability = []


def pytest_generate_tests(metafunc):
    # One session-scoped parameter per page: pytest then runs every test of a page in a row
    # against a single load of it (see the `visit` fixture).
    if "page_path" in metafunc.fixturenames:
        pages = site_pages(SITE)
        metafunc.parametrize("page_path", pages, ids=pages, scope="session")


def pytest_terminal_summary(terminalreporter, config):
    shots = getattr(config, "screenshots_taken", [])
    if shots:
        terminalreporter.section(f"{len(shots)} screenshots in {SCREENSHOTS}")
        for shot in shots:
            terminalreporter.write_line(str(shot.relative_to(SCREENSHOTS)))
    readability = getattr(config, "readability", [])
    if readability:
        report = SCREENSHOTS / "readability.json"
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(readability, indent=1) + "\n")
        terminalreporter.write_line(f"contrast measured on each page and mode: {report}")


@pytest.fixture(scope="session")
def site() -> Path:
    return SITE


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def launch_config() -> LaunchConfig:
    return LaunchConfig.from_config(yaml.safe_load((ROOT / "_config.yml").read_text()))


@pytest.fixture(scope="session")
def base_url(site):
    """The site, served over HTTP on a free local port for the whole session."""
    with serve(site) as url:
        yield url


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
def visit(browser, base_url, page_path):
    """The page ``page_path`` of the site, opened once and shared by every test of that page.

    In a context of its own, as on a reader's first visit: nothing in localStorage (the
    theme saves the reader's choice there) and nothing cached.
    """
    ctx = browser.new_context(viewport=VIEWPORT, service_workers="block")
    loaded = open_page(ctx, base_url, page_path)
    yield loaded
    ctx.close()


@pytest.fixture(scope="session")
def readability(request) -> list:
    """The contrast measurements of the theme tests, written to readability.json at the end."""
    return request.config.readability


@pytest.fixture(scope="session")
def screenshot_path(request):
    """``screenshot_path(page, mode)``: the file for a page's screenshot, recorded for the summary."""

    def path(page: str, mode: str) -> Path:
        shot = SCREENSHOTS / f"{page.replace('/', '_')}-{mode}.png"
        request.config.screenshots_taken.append(shot)
        return shot

    return path
