"""A ``{build-status}`` directive: what the build that rendered the book measured.

For every executed chapter it lists the profile the chapter ran in (read from the chapter's
own set-up output, ``rnnbook ...: profile quick ...``), its execution time and end, whether it
succeeded, and the chapter's last full-profile verification (``rnnbook.verification``: the
commit, the outcome, the time, and whether the code changed since); below the table, the
versions of torch and rnnbook the build used.
The full-profile column comes from the committed records in ``verification/``; everything
else from the build itself: myst-nb's execution records and the executed
notebooks it writes to ``_build/jupyter_execute``. Like myst-nb's ``nb-exec-table``, the
directive leaves a placeholder that is filled once every chapter has executed.
"""

from __future__ import annotations

import json
import platform
import re
from datetime import datetime, timezone
from pathlib import Path

from docutils import nodes
from myst_nb.sphinx_ import NbMetadataCollector
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective

PROFILE_LINE = re.compile(r"rnnbook [\w.+-]+: profile (\w+)")


class BuildStatusNode(nodes.General, nodes.Element):
    """Placeholder, replaced by the status table after all chapters have executed."""


class BuildStatus(SphinxDirective):
    def run(self):
        NbMetadataCollector.set_doc_data(self.env, self.env.docname, "has_build_status", True)
        return [BuildStatusNode()]


def profile_of(executed: Path) -> str:
    """The profile a chapter reported in its set-up cell, or "?" if it printed none."""
    if not executed.exists():
        return "?"
    for cell in json.loads(executed.read_text())["cells"]:
        for output in cell.get("outputs", []):
            text = "".join(output.get("text", ""))
            if match := PROFILE_LINE.search(text):
                return match[1]
    return "?"


def cell(text: str) -> nodes.entry:
    return nodes.entry("", nodes.paragraph(text=text))


def table(rows: list[list[str]], header: list[str]) -> nodes.table:
    result = nodes.table(classes=["colwidths-auto"])
    group = nodes.tgroup(cols=len(header))
    result += group
    group.extend(nodes.colspec(colwidth=1) for _ in header)
    head, body = nodes.thead(), nodes.tbody()
    head += nodes.row("", *(cell(h) for h in header))
    body.extend(nodes.row("", *(cell(c) for c in row)) for row in rows)
    group += head
    group += body
    return result


class FillBuildStatus(SphinxPostTransform):
    default_priority = 8

    def run(self, **kwargs) -> None:
        for placeholder in self.document.findall(BuildStatusNode):
            placeholder.replace_self(self.status())

    def status(self) -> list[nodes.Node]:
        import torch  # the torch this build's kernels imported (same environment)

        import rnnbook
        from rnnbook import verification

        executed_dir = Path(self.app.outdir).parent / "jupyter_execute"
        full = {v.chapter: v.summary() for v in verification.status()}
        rows = []
        metadata = NbMetadataCollector.get_doc_data(self.env)
        for docname in sorted(metadata):
            data = metadata[docname].get("exec_data")
            if not data:
                continue
            ended = (
                datetime.fromtimestamp(data["mtime"], tz=timezone.utc) if data["mtime"] else None
            )
            rows.append(
                [
                    self.env.titles[docname].astext() if docname in self.env.titles else docname,
                    profile_of(executed_dir / f"{docname}.ipynb"),
                    "-" if data["runtime"] is None else f"{data['runtime']:.0f} s",
                    ended.strftime("%Y-%m-%d %H:%M UTC") if ended else "-",
                    "ok" if data["succeeded"] else "FAILED",
                    full.get(Path(docname).name, "-"),
                ]
            )
        header = ["Chapter", "Profile", "Execution time", "Executed", "Status", "Full profile"]
        built = datetime.now(tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        versions = nodes.paragraph(
            text=f"Built {built} with torch {torch.__version__}, rnnbook {rnnbook.__version__}, "
            f"Python {platform.python_version()} on {platform.machine()} "
            f"({'CUDA' if torch.cuda.is_available() else 'CPU only'})."
        )
        return [table(rows, header), versions]


def pages_to_refresh(app, env) -> list[str]:
    """After chapters executed, rewrite the status page even if its source did not change."""
    return [
        docname
        for docname, data in NbMetadataCollector.get_doc_data(env).items()
        if data.get("has_build_status")
    ]


def setup(app):
    app.add_node(BuildStatusNode)
    app.add_directive("build-status", BuildStatus)
    app.add_post_transform(FillBuildStatus)
    app.connect("env-updated", pages_to_refresh)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
