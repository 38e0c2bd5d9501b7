"""Problems the browser suite finds in the book that this suite does not fix, and the verdict.

The suite fixes what lies in the build's configuration, CSS and assets. A problem in a
chapter notebook or in src/ is fixed there, by its authors; until then it is listed here,
for one check on one page, as a regular expression that must match the problem's text, and
the test is marked xfail with the reason. Listed narrowly on purpose:

- any other problem on that page still fails the test;
- a listed problem that no longer occurs fails the test too ("stale"), so the entry is
  removed as soon as the fix lands and the check guards the fix from then on.
"""

from __future__ import annotations

import re

import pytest

# (check, page) -> [(pattern, reason)]. check is the test's short name (see test_site.py),
# page the page's path in the site without .html.
KNOWN_ISSUES: dict[tuple[str, str], list[tuple[str, str]]] = {}


def judge(problems: list[str], page: str, check: str) -> None:
    """Pass, fail or xfail a test of ``check`` on ``page`` from the problems it found."""
    known = KNOWN_ISSUES.get((check, page), [])

    def reason_for(problem: str) -> str | None:
        return next((reason for pattern, reason in known if re.search(pattern, problem)), None)

    unexplained = [p for p in problems if reason_for(p) is None]
    stale = [
        reason for pattern, reason in known if not any(re.search(pattern, p) for p in problems)
    ]
    if unexplained:
        listed = [p if reason_for(p) is None else f"(known) {p}" for p in problems]
        pytest.fail(
            f"{page}: {len(unexplained)} problem(s):\n  " + "\n  ".join(listed), pytrace=False
        )
    if stale:
        pytest.fail(
            f"{page}: a known issue of check {check!r} no longer occurs; remove it from "
            "tests/browser/known_issues.py:\n  " + "\n  ".join(stale),
            pytrace=False,
        )
    if problems:
        reasons = sorted({reason_for(p) for p in problems})
        pytest.xfail(f"{page}: known issue, not fixed here: " + " | ".join(reasons))
