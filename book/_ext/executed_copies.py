"""The executed chapters in ``_build/jupyter_execute``, also when the build renders cached runs.

``make html`` executes the chapters two at a time first (``scripts/execute_chapters.py``),
into the jupyter-cache of ``_build/.jupyter_cache``, and the build (``execute_notebooks:
cache`` in ``_config.yml``) renders those runs instead of executing the chapters again, one
after the other. myst-nb 1.4 then renders the cached outputs, but writes the notebook it read,
without them, to ``_build/jupyter_execute``: it merges the outputs into a copy, and writes the
original. The claims page (``claims_page.py``), the status page (``build_status.py``) and the
student edition (``scripts/student_book.py``) read the executed chapters from there.

So, right after myst-nb has read a notebook (``doctree-read``), this extension writes over
that file the notebook as the page shows it: the source with the cached run's outputs merged
in, as myst-nb merges them. With ``execute_notebooks: force`` (or off) it does nothing.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from jupyter_cache import get_cache
from sphinx.util import logging

logger = logging.getLogger(__name__)


def executed_copy(source: Path, cache_path: str):
    """The notebook at ``source`` with the outputs of its run in the cache, or None if the
    cache holds no run of its present code."""
    notebook = nbformat.read(source, as_version=4)
    try:
        _, merged = get_cache(cache_path).merge_match_into_notebook(notebook)
    except KeyError:
        return None
    return merged


def write_executed_copy(app, doctree) -> None:
    config = getattr(app.env, "mystnb_config", None)
    if config is None or config.execution_mode != "cache" or not config.output_folder:
        return
    docname = app.env.docname
    source = Path(app.env.doc2path(docname))
    if source.suffix != ".ipynb":
        return
    merged = executed_copy(source, config.execution_cache_path)
    if merged is None:  # the run failed (the build fails with it): nothing to write
        logger.warning(f"no cached run of {docname} to write to jupyter_execute", location=docname)
        return
    *folders, name = docname.split("/")
    target = Path(config.output_folder, *folders, f"{name}.ipynb")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(nbformat.writes(merged), encoding="utf-8")


def setup(app):
    app.connect("doctree-read", write_executed_copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
