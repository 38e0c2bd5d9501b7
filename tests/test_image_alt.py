"""book/_ext/image_alt.py: the build warns about every image without a caption or alt text.

First the check function on a hand-made docutils doctree, then the extension in a tiny
Sphinx project built in ``tmp_path`` with ``-W`` semantics, where exactly the bare image
must be reported and must fail the build.
"""

from __future__ import annotations

import importlib.util
import io
import re
import sys
from pathlib import Path

import pytest
from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

ROOT = Path(__file__).resolve().parents[1]
EXT_DIR = ROOT / "book" / "_ext"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _load_extension():
    spec = importlib.util.spec_from_file_location("image_alt", EXT_DIR / "image_alt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


image_alt = _load_extension()


def _document() -> nodes.document:
    return new_document("<test>", get_default_settings(Parser))


def _figure(image: nodes.image, caption: str | None) -> nodes.figure:
    figure = nodes.figure("", image)
    if caption is not None:
        figure += nodes.caption("", caption)
    return figure


def _reported(doctree) -> list[str]:
    return [image["uri"] for image in image_alt.images_without_text(doctree)]


def test_only_the_bare_image_is_reported():
    doc = _document()
    doc += _figure(nodes.image(uri="captioned.png"), "Loss against step, for each model.")
    doc += nodes.image(uri="with-alt.png", alt="Loss against step: the LSTM ends lowest.")
    doc += nodes.image(uri="bare.png")
    assert _reported(doc) == ["bare.png"]


def test_a_notebook_output_figure_is_found_through_its_containers():
    """myst-nb puts a figure cell's output image inside containers inside the figure."""
    doc = _document()
    output = nodes.container("", nodes.container("", nodes.image(uri="_build/out.png")))
    doc += _figure(output, "The training loss.")
    doc += nodes.container("", nodes.container("", nodes.image(uri="_build/bare.png")))
    assert _reported(doc) == ["_build/bare.png"]


@pytest.mark.parametrize(
    "alt",
    [None, "", "   ", "plot.png", "plot", "figures/plot.png", "../_images/abc.png", "other.svg"],
)
def test_meaningless_alt_text_is_reported(alt):
    doc = _document()
    doc += nodes.image(uri="figures/plot.png", **({} if alt is None else {"alt": alt}))
    assert _reported(doc) == ["figures/plot.png"]


@pytest.mark.parametrize("caption", [None, "", "  "])
def test_a_figure_without_a_caption_needs_alt_text(caption):
    doc = _document()
    doc += _figure(nodes.image(uri="a.png"), caption)
    doc += _figure(nodes.image(uri="b.png", alt="Accuracy against sequence length."), caption)
    assert _reported(doc) == ["a.png"]


def test_a_caption_of_another_figure_does_not_count():
    doc = _document()
    doc += _figure(nodes.image(uri="a.png"), "A caption.")
    doc += nodes.paragraph("", "", nodes.image(uri="inline.png"))
    assert _reported(doc) == ["inline.png"]


# --- the extension in a Sphinx build ---------------------------------------------------------

INDEX_RST = """\
A page
======

.. figure:: captioned.png

   The loss of each model against the training step.

.. image:: with-alt.png
   :alt: Accuracy against sequence length; it falls to chance at 50.

.. image:: bare.png
"""


def _build(tmp_path: Path, index: str, *, warningiserror: bool):
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    src = tmp_path / "src"
    src.mkdir()
    png = (
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00"
        b"\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18"
        b"\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"
    )
    for name in ("captioned.png", "with-alt.png", "bare.png"):
        (src / name).write_bytes(png)
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXT_DIR)!r})\nextensions = ['image_alt']\n"
    )
    (src / "index.rst").write_text(index)
    warnings = io.StringIO()
    # As sphinx-build does: docutils' registries (nodes, directives, roles) restored after.
    with patch_docutils(src), docutils_namespace():
        app = Sphinx(
            srcdir=src,
            confdir=src,
            outdir=tmp_path / "html",
            doctreedir=tmp_path / "doctrees",
            buildername="html",
            status=None,
            warning=warnings,
            freshenv=True,
            warningiserror=warningiserror,
            keep_going=True,
        )
        app.build()
    return app, ANSI.sub("", warnings.getvalue())


@pytest.fixture
def no_extension_leak():
    """The build imports image_alt from book/_ext as a top-level module: drop it afterwards."""
    yield
    sys.modules.pop("image_alt", None)


def test_the_build_reports_exactly_the_bare_image(tmp_path, no_extension_leak):
    app, warnings = _build(tmp_path, INDEX_RST, warningiserror=False)
    reported = [line for line in warnings.splitlines() if "neither a caption nor alt text" in line]
    assert len(reported) == 1, warnings
    assert "index: image 'bare.png'" in reported[0]  # names the document and the image
    assert "index.rst" in reported[0]  # and points at the source
    assert "captioned.png" not in warnings and "with-alt.png" not in warnings
    assert warnings.count("WARNING") == 1, warnings  # nothing else went wrong
    assert app.statuscode == 0


def test_with_W_the_bare_image_fails_the_build(tmp_path, no_extension_leak):
    app, warnings = _build(tmp_path, INDEX_RST, warningiserror=True)
    assert "bare.png" in warnings
    assert app.statuscode != 0


def test_with_W_a_book_whose_images_all_have_text_builds(tmp_path, no_extension_leak):
    index = INDEX_RST.replace(".. image:: bare.png\n", ".. image:: bare.png\n   :alt: A dot.\n")
    app, warnings = _build(tmp_path, index, warningiserror=True)
    assert "WARNING" not in warnings, warnings
    assert app.statuscode == 0
