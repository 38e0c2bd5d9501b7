"""Sphinx fixes for the book's HTML; loaded by _config.yml (sphinx.local_extensions).

Duplicate inline scripts. Sphinx 7 writes an inline script that an extension adds after the
builder starts (``app.add_js_file(None, body=...)``) twice into every page: once as it was
added, with the file name None, and once more from the registry with the name '', which
the builder does not recognise as the same script (sphinx-doc/sphinx#13402, fixed only in
Sphinx 8.2; Jupyter Book 1 needs Sphinx 7). sphinx-thebe's ``const THEBE_JS_URL = ...`` is
such a script, and declaring a const twice is a SyntaxError, so every page of the book
logged a JavaScript error. This drops the second copy of any script, just before the
page is written.
"""

from __future__ import annotations


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


def setup(app):
    # After every other handler, which may still add scripts for this page (myst-nb).
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
