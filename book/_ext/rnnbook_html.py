"""Sphinx fixes for the book's HTML; loaded by _config.yml (sphinx.local_extensions).

Duplicate inline scripts. Sphinx 7 writes an inline script that an extension adds after the
builder starts (``app.add_js_file(None, body=...)``) twice into every page: once as it was
added, with the file name None, and once more from the registry with the name '', which
the builder does not recognise as the same script (sphinx-doc/sphinx#13402, fixed only in
Sphinx 8.2; Jupyter Book 1 needs Sphinx 7). sphinx-thebe's ``const THEBE_JS_URL = ...`` is
such a script, and declaring a const twice is a SyntaxError, so every page of the book
logged a JavaScript error. This drops the second copy of any script, just before the
page is written.

The root redirect. The book's first page is ``book/intro``, so ``index.html`` at the root of
the site only forwards the reader there. sphinx-external-toc writes it as a bare
``<meta http-equiv="Refresh">``, with no icon, so a browser may ask for ``/favicon.ico``
before it follows the redirect (a 404 in the console). A real icon is no better: the browser
starts to fetch it and then abandons the request when the page forwards (``ERR_ABORTED``,
which the browser suite counts as a failed request on a fast machine). We write the page
first, with a title and an empty inline icon (``data:,``), which asks the network for nothing;
sphinx-external-toc leaves an existing ``index.html`` alone.
"""

from __future__ import annotations

import html
from pathlib import Path


def _script_key(script) -> tuple:
    filename = getattr(script, "filename", script) or ""
    attributes = getattr(script, "attributes", {})
    return (str(filename), getattr(script, "priority", 500), tuple(sorted(attributes.items())))


def drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple] = set()
    unique = []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    # In place: the list is the builder's own, which Sphinx restores before the next page.
    scripts[:] = unique


def write_root_redirect(app, exception) -> None:
    if exception is not None or "html" not in app.builder.format or app.config.root_doc == "index":
        return
    page = Path(app.outdir) / "index.html"
    first = f"{app.config.root_doc}.html"
    page.write_text(
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">\n'
        f"<title>{html.escape(app.config.html_title or app.config.project)}</title>\n"
        + '<link rel="icon" href="data:,">\n'
        + f'<meta http-equiv="Refresh" content="0; url={first}">\n'
        f'</head><body><a href="{first}">{first}</a></body></html>\n',
        encoding="utf8",
    )


def setup(app):
    # After every other handler, which may still add scripts for this page (myst-nb).
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    # Before sphinx-external-toc's handler (priority 500), which then finds the page written.
    app.connect("build-finished", write_root_redirect, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
