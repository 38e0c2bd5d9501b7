"""Every page of both editions of the built book in headless Chromium: the checks of
site_checks.py.

Each test is run for every page of the book and of the student edition (the ``page_path``
parameter, see conftest.py); pytest groups the tests of a page so that the page is loaded
once. The order of the tests in this file matters a little: the slider and theme tests
change the page, so they come last. Problems listed in known_issues.py (in chapters or src/,
not fixed here) make a test xfail, in either edition.
"""

from __future__ import annotations

import re

import pytest
from known_issues import judge
from site_checks import (
    THEMES,
    LaunchConfig,
    check_claims_page,
    check_clean,
    check_console,
    check_headings,
    check_images,
    check_launch_buttons,
    check_math,
    check_no_link_to,
    check_no_link_to_in_html,
    check_redirect,
    check_search,
    check_sliders,
    check_theme,
    check_widgets,
    files_not_the_same,
    site_pages,
)

# What a page is drawn with, besides its HTML: the theme (CSS, fonts, scripts) and the figures.
DRAWN_WITH = ("_static", "_images")

# The pages only the book has (scripts/student_book.py, INSTRUCTOR_ONLY).
INSTRUCTOR_ONLY = {"book/instructors.html", "book/checkers.html"}


def test_no_javascript_errors_nor_failed_requests(visit):
    judge(check_console(visit), visit.name, "console")


def test_math_is_typeset(visit):
    judge(check_math(visit), visit.name, "math")


def test_images_load_and_have_alt_text_or_caption(visit):
    judge(check_images(visit), visit.name, "images")


def test_widgets_render_from_saved_state(visit):
    judge(check_widgets(visit), visit.name, "widgets")


def test_no_warning_machine_path_or_hash(visit, repo_root, editions):
    checkouts = [repo_root, *(e.sources for e in editions.values())]
    judge(check_clean(visit, checkouts=checkouts), visit.name, "clean")


def test_headings_in_order(visit):
    judge(check_headings(visit), visit.name, "headings")


def test_launch_buttons(visit, editions, launch_config):
    """The launch buttons open the page's notebook in the edition's own repository; no page
    of the student edition links to the book's repository, which holds the solutions."""
    edition = editions[visit.edition]
    problems = []
    if edition.name == "student":  # with or without a repository of its own
        why = "the book's repository holds the solutions"
        problems += check_no_link_to(visit, launch_config.repository_url, why)
    notebook = edition.site / "_sources" / f"{visit.name}.ipynb"
    if notebook.is_file():
        launch = LaunchConfig.from_config(edition.config)
        problems += check_launch_buttons(visit, launch, f"{visit.name}.ipynb", edition.sources)
    elif edition.name == "book":
        pytest.skip("not a notebook page: no launch buttons")
    judge(problems, visit.name, "launch")


def test_slider_figures_work_without_a_kernel(visit):
    judge(check_sliders(visit), visit.name, "sliders")


@pytest.mark.parametrize("mode", THEMES)
def test_light_and_dark_mode_readable(
    visit, mode, screenshot_path, readability, drawn_apart, request
):
    every_page = request.config.open_every_student_page
    if visit.edition == "student" and not drawn_apart and not every_page:
        pytest.skip(
            "the student edition's theme and figures are the book's, byte for byte "
            "(test_the_student_edition_draws_with_the_books_theme_and_figures): their "
            "contrast is measured on the book's pages"
        )
    shot = screenshot_path(visit.name, mode, visit.edition)
    problems = check_theme(visit, mode, shot, readability)
    readability[-1]["edition"] = visit.edition
    judge(problems, visit.name, "theme")


@pytest.fixture(scope="session")
def drawn_apart(editions) -> list[str]:
    """The files of the theme (``_static``) and the figures (``_images``) in which the student
    edition differs from the book; empty when it draws every page with the book's files."""
    if set(editions) != {"book", "student"}:
        return ["no book to compare with"]
    book, student = editions["book"].site, editions["student"].site
    return [f for folder in DRAWN_WITH for f in files_not_the_same(student, book, folder)]


# --- once per edition ---------------------------------------------------------------------


def test_search_finds_a_chapter(context, base_urls, edition):
    problems = check_search(context, base_urls[edition.name], "LSTM", expect="chapters/")
    judge(problems, "search", "search")


def test_the_claims_page_lists_the_claims_linked_to_their_paragraphs(context, base_urls, edition):
    judge(check_claims_page(context, base_urls[edition.name]), "book/claims", "claims")


def test_index_forwards_to_the_book(context, base_urls, edition):
    judge(check_redirect(context, base_urls[edition.name], "index.html"), "index", "redirect")


def test_every_page_of_the_toc_was_built(edition):
    """A page missing from the build would silently drop out of the parametrization."""
    toc = edition.toc
    files = [toc["root"]] + [
        entry["file"] for part in toc.get("parts", []) for entry in part.get("chapters", [])
    ]
    missing = [f for f in files if not (edition.site / f"{f}.html").is_file()]
    assert not missing, f"pages of {edition.name}'s _toc.yml missing from {edition.site}: {missing}"


# --- the two editions side by side ---------------------------------------------------------

WIDGET_VIEW = 'type="application/vnd.jupyter.widget-view+json"'


def test_the_student_edition_has_every_page_and_output_of_the_book(editions, request):
    """The student edition has the book's pages but the instructor-only ones, and each page
    the same cell outputs and widget views: only the solutions differ. Run by the runs that
    test the student edition: `make test` tests the book beside `make student-check`, before
    the student edition is built."""
    if set(editions) != {"book", "student"}:
        pytest.skip("no student edition to compare (RNNBOOK_STUDENT_SITE=none)")
    if "student" not in request.config.editions_tested:
        pytest.skip("compared by the run that tests the student edition (RNNBOOK_EDITIONS)")
    book, student = editions["book"].site, editions["student"].site
    for site in (book, student):
        assert (site / "index.html").is_file(), f"no built site at {site}"
    book_pages, student_pages = set(site_pages(book)), set(site_pages(student))
    assert student_pages == book_pages - INSTRUCTOR_ONLY, (
        f"only in the book: {sorted(book_pages - INSTRUCTOR_ONLY - student_pages)}; "
        f"only in the student edition: {sorted(student_pages - book_pages)}"
    )
    differ = []
    for page in sorted(student_pages):
        counts = []
        for site in (book, student):
            html = (site / page).read_text(encoding="utf-8")
            counts.append((len(re.findall(r'class="cell_output', html)), html.count(WIDGET_VIEW)))
        if counts[0] != counts[1]:
            differ.append(f"{page}: (outputs, widget views) {counts[0]} in the book, {counts[1]}")
    assert not differ, "pages whose outputs differ between the editions:\n" + "\n".join(differ)


def test_the_student_pages_not_opened_have_the_books_article(editions, request, launch_config):
    """The student edition's pages that its run does not open in the browser: by
    site_checks.student_pages_to_open, each one's article is the book's page's, byte for
    byte (checked in the book's run), and a page of its folder was opened (the frame). What
    is left to check without a browser: no link of it, frame or article, opens the book's
    repository."""
    if set(editions) != {"book", "student"} or "student" not in request.config.editions_tested:
        pytest.skip("run by the run that tests the student edition, with the book built")
    student = editions["student"].site
    opened = set(request.config.pages_opened["student"])
    not_opened = [page for page in site_pages(student) if page not in opened]
    why = "the book's repository holds the solutions"
    problems = [
        f"{page}: {problem}"
        for page in not_opened
        for problem in check_no_link_to_in_html(
            (student / page).read_text(encoding="utf-8"), launch_config.repository_url, why
        )
    ]
    assert not problems, "\n".join(problems)


def test_the_student_edition_draws_with_the_books_theme_and_figures(editions, request, drawn_apart):
    """Every file of the student edition's theme and figures is the book's, byte for byte: a
    page's contrast in light and dark mode is a matter of those files, so the student
    edition's run leaves the theme test to the book's pages (RNNBOOK_STUDENT_PAGES=all runs
    it on every page of both)."""
    if set(editions) != {"book", "student"} or "student" not in request.config.editions_tested:
        pytest.skip("run by the run that tests the student edition, with the book built")
    student = editions["student"].site
    for folder in DRAWN_WITH:
        assert any((student / folder).rglob("*.*")), f"no files in the student edition's {folder}"
    assert not drawn_apart, f"files of the student edition not the book's: {drawn_apart[:10]}"
