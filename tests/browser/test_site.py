"""Every page of the built book in headless Chromium: the checks of site_checks.py.

Each test is run for every page (the ``page_path`` parameter, see conftest.py); pytest
groups the tests of a page so that the page is loaded once. The order of the tests in this
file matters a little: the slider and theme tests change the page, so they come last.
Problems listed in known_issues.py (in chapters or src/, not fixed here) make a test xfail.
"""

from __future__ import annotations

import pytest
import yaml
from known_issues import judge
from site_checks import (
    THEMES,
    check_clean,
    check_console,
    check_headings,
    check_images,
    check_launch_buttons,
    check_math,
    check_redirect,
    check_search,
    check_sliders,
    check_theme,
    check_widgets,
)


def test_no_javascript_errors_nor_failed_requests(visit):
    judge(check_console(visit), visit.name, "console")


def test_math_is_typeset(visit):
    judge(check_math(visit), visit.name, "math")


def test_images_load_and_have_alt_text_or_caption(visit):
    judge(check_images(visit), visit.name, "images")


def test_widgets_render_from_saved_state(visit):
    judge(check_widgets(visit), visit.name, "widgets")


def test_no_warning_machine_path_or_hash(visit, repo_root):
    judge(check_clean(visit, checkouts=[repo_root]), visit.name, "clean")


def test_headings_in_order(visit):
    judge(check_headings(visit), visit.name, "headings")


def test_launch_buttons(visit, site, launch_config, repo_root):
    if not (site / "_sources" / f"{visit.name}.ipynb").is_file():
        pytest.skip("not a notebook page: no launch buttons")
    problems = check_launch_buttons(visit, launch_config, f"{visit.name}.ipynb", repo_root)
    judge(problems, visit.name, "launch")


def test_slider_figures_work_without_a_kernel(visit):
    judge(check_sliders(visit), visit.name, "sliders")


@pytest.mark.parametrize("mode", THEMES)
def test_light_and_dark_mode_readable(visit, mode, screenshot_path, readability):
    problems = check_theme(visit, mode, screenshot_path(visit.name, mode), readability)
    judge(problems, visit.name, "theme")


# --- once per site ------------------------------------------------------------------------


def test_search_finds_a_chapter(context, base_url):
    judge(check_search(context, base_url, "LSTM", expect="chapters/"), "search", "search")


def test_index_forwards_to_the_book(context, base_url):
    judge(check_redirect(context, base_url, "index.html"), "index", "redirect")


def test_every_page_of_the_toc_was_built(site, repo_root):
    """A page missing from the build would silently drop out of the parametrization."""
    toc = yaml.safe_load((repo_root / "_toc.yml").read_text())
    files = [toc["root"]] + [
        entry["file"] for part in toc.get("parts", []) for entry in part.get("chapters", [])
    ]
    missing = [f for f in files if not (site / f"{f}.html").is_file()]
    assert not missing, f"pages of _toc.yml missing from {site}: {missing}"
