"""Every image of the book has a text alternative: a caption or meaningful alt text.

A reader who cannot see a figure gets what it shows from its caption or its alt text. This
extension makes the build enforce that: once a document's doctree is resolved (so
myst-nb has put the notebook outputs in place), it warns about every image node that is
neither inside a figure with a non-empty caption nor has meaningful alt text, naming the
document and the image. The book builds with ``-W``, so such an image fails the build.

Meaningful alt text is not empty and not just the image's file name: Sphinx writes the
file's path as the alt text of an image that has none, and myst-nb's notebook outputs have
none. So a chapter's figure cell needs its ``mystnb: figure: caption:`` metadata (see
chapters/README.md), and a Markdown image its alt text (``![what it shows](file.png)``).

Images drawn by widgets (``rnnbook.plot.slider_figure``) are not image nodes but widget
state; the browser suite (tests/browser, check_images) checks those. The warning's type is
``rnnbook.image_alt``, so ``suppress_warnings`` could silence it; the book does not.

Like every warning of the writing phase (e.g. ``-n``'s broken references), it is emitted
when a document is written: an incremental build that does not rewrite a document does not
repeat it. A fresh build (CI, ``make test`` after ``make clean``) checks every document.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

# A file name or path of an image, as an alt text made of it would be.
IMAGE_FILE = re.compile(r"[\w./\\-]+\.(png|jpe?g|gif|svg|webp|pdf|bmp|tiff?|\*)", re.IGNORECASE)


def meaningless_alt(alt: str | None, uri: str) -> bool:
    """No alt text, an empty one, or just the image's file name (with or without its path)."""
    if alt is None or not alt.strip():
        return True
    alt = alt.strip()
    name = PurePosixPath(uri.replace("\\", "/"))
    return (
        alt == uri
        or alt in (name.name, name.stem)
        or PurePosixPath(alt).name == name.name
        or bool(IMAGE_FILE.fullmatch(alt))
    )


def caption_of(image: nodes.image) -> str:
    """The text of the caption of the figure that holds ``image`` ('' if none)."""
    parent = image.parent
    while parent is not None and not isinstance(parent, nodes.figure):
        parent = parent.parent
    if parent is None:
        return ""
    captions = [child for child in parent.children if isinstance(child, nodes.caption)]
    return " ".join(caption.astext().strip() for caption in captions).strip()


def images_without_text(doctree: nodes.Node) -> list[nodes.image]:
    """The image nodes of ``doctree`` with neither a figure caption nor meaningful alt text."""
    return [
        image
        for image in doctree.findall(nodes.image)
        if not caption_of(image) and meaningless_alt(image.get("alt"), image.get("uri", ""))
    ]


def describe(image: nodes.image) -> str:
    uri = image.get("uri", "")
    alt = image.get("alt")
    where = f"image {uri!r}" if uri else "an image"
    return f"{where} (alt text {alt!r})" if alt else where


def check_doctree(app, doctree: nodes.document, docname: str) -> None:
    """``doctree-resolved``: warn about each image of ``docname`` without a text alternative."""
    for image in images_without_text(doctree):
        line = image.line or (image.parent.line if image.parent is not None else None)
        logger.warning(
            "%s: %s has neither a caption nor alt text; give its figure a caption "
            "(notebook: `mystnb: figure: caption:` metadata) or the image alt text that "
            "says what it shows",
            docname,
            describe(image),
            location=(docname, line),
            type="rnnbook",
            subtype="image_alt",
        )


def setup(app):
    app.connect("doctree-resolved", check_doctree)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
