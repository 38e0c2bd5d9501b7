"""A ``{claims-table}`` directive: every result claim the chapters stated in this build.

The chapters state their results through ``rnnbook.claims.claim``, which puts a record of
each claim in the metadata of the cell's output. After every chapter has executed, this
extension reads those records from the executed notebooks in ``_build/jupyter_execute``
and fills the placeholder with

- a summary: how many claims of each kind, and the weakest margins of the book;
- per chapter, a table of its claims in the order stated: the sentence (linked to the
  paragraph that makes it, the claim's ``where`` label), the measured value, the condition,
  the margin, the source's value, the kind, and the full profile's value where a committed
  verification record (``verification/<chapter>.json``) holds the claim.

It also writes ``claims.json`` beside the HTML: the same records, for tools (a diff of two
builds' files shows which claims moved). A ``where`` label that the chapter does not define
is a build warning (an error under ``-W``).
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from myst_nb.sphinx_ import NbMetadataCollector
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)
WEAKEST = 10  # the summary's list of the weakest margins


class ClaimsNode(nodes.General, nodes.Element):
    """Placeholder, replaced by the claims tables after all chapters have executed."""


class ClaimsTable(SphinxDirective):
    def run(self):
        NbMetadataCollector.set_doc_data(self.env, self.env.docname, "has_claims_table", True)
        return [ClaimsNode()]


def _number(x) -> str:
    if x is None:
        return "–"
    if isinstance(x, list):
        return "[" + ", ".join(_number(v) for v in x) + "]"
    if float(x) == int(x) and abs(x) < 1e6:
        return str(int(x))
    return f"{x:.4g}"


def condition(record: dict) -> str:
    return f"{record['op']} {_number(record['threshold'])}"


def margin_text(record: dict) -> str:
    return "exact" if record.get("margin") is None else f"{record['margin']:.1%}"


def executed_claims(executed_dir: Path, docnames: list[str], env=None) -> dict[str, list[dict]]:
    """docname -> the claim records of its executed notebook, for the chapters: the copy
    this build executed, else the source itself (a build with execution off, like the
    student edition's, whose sources are executed notebooks)."""
    from rnnbook.claims import from_notebook

    found = {}
    for docname in docnames:
        path = executed_dir / f"{docname}.ipynb"
        if not path.is_file() and env is not None:
            path = Path(env.doc2path(docname))
        if path.is_file() and path.suffix == ".ipynb":
            found[docname] = from_notebook(json.loads(path.read_text(encoding="utf-8")))
    return found


def full_profile_claims(chapter: str) -> dict[str, dict]:
    """id -> the claim as the chapter's committed full-profile verification record has it."""
    from rnnbook import verification

    record = verification.load_record(chapter) or {}
    return {c["id"]: c for c in record.get("claims", [])}


class FillClaims(SphinxPostTransform):
    default_priority = 8

    def run(self, **kwargs) -> None:
        for placeholder in self.document.findall(ClaimsNode):
            placeholder.replace_self(self.tables())

    def link(self, docname: str, label: str, text: str) -> nodes.Node:
        """The sentence, linked to the paragraph labelled ``label`` in ``docname``."""
        std = self.env.get_domain("std")
        target = std.labels.get(label) or std.anonlabels.get(label) if label else None
        paragraph = nodes.paragraph()
        if not target or target[0] != docname:
            if label:
                logger.warning(
                    f"claims: {docname} states a claim at {label!r}, which it does not label",
                    location=docname,
                )
            paragraph += nodes.Text(text)
            return paragraph
        uri = self.app.builder.get_relative_uri(self.env.docname, docname) + "#" + target[1]
        paragraph += nodes.reference("", text, internal=True, refuri=uri)
        return paragraph

    def tables(self) -> list[nodes.Node]:
        executed_dir = Path(self.app.outdir).parent / "jupyter_execute"
        chapters = sorted(d for d in self.env.found_docs if d.startswith("chapters/"))
        found = executed_claims(executed_dir, chapters, self.env)
        every = [dict(c, chapter=Path(d).name) for d in chapters for c in found.get(d, [])]
        (Path(self.app.outdir) / "claims.json").write_text(
            json.dumps({"claims": every}, indent=1) + "\n", encoding="utf-8"
        )
        result = [self.summary(every)]
        for docname in chapters:
            records = found.get(docname, [])
            if not records:
                continue
            title = self.env.titles[docname].astext() if docname in self.env.titles else docname
            section = nodes.section(ids=[f"claims-{Path(docname).name}"])
            section += nodes.title(text=title)
            section += self.table(docname, records)
            result.append(section)
        return result

    def summary(self, every: list[dict]) -> nodes.Node:
        kinds = {k: sum(c["kind"] == k for c in every) for k in ("measured", "recorded", "source")}
        text = (
            f"This build stated {len(every)} result claims: {kinds['measured']} measured in the "
            f"run, {kinds['recorded']} read from committed runs, {kinds['source']} checked "
            "against the source's tables. The weakest margins (how far a claim is from failing):"
        )
        weakest = sorted(
            (c for c in every if c.get("margin") is not None), key=lambda c: c["margin"]
        )[:WEAKEST]
        rows = [
            [
                f"{c['chapter']}: {c['id']}",
                c["sentence"],
                _number(c["value"]),
                condition(c),
                margin_text(c),
                c["profile"],
            ]
            for c in weakest
        ]
        container = nodes.container(classes=["claims-summary"])
        container += nodes.paragraph(text=text)
        container += _table(rows, ["Claim", "Sentence", "Measured", "Claimed", "Margin", "Profile"])
        return container

    def table(self, docname: str, records: list[dict]) -> nodes.Node:
        full = full_profile_claims(Path(docname).name)
        header = ["Claim", "Measured", "Claimed", "Margin", "Source", "Kind", "Profile", "Full"]
        rows = []
        for c in records:
            in_full = full.get(c["id"])
            full_text = (
                "–"
                if in_full is None or c["profile"] == "full"
                else f"{_number(in_full['value'])} ({margin_text(in_full)})"
            )
            rows.append(
                [
                    self.link(docname, c.get("where", ""), c["sentence"]),
                    _number(c["value"]) + (f" {c['unit']}" if c.get("unit") else ""),
                    condition(c),
                    margin_text(c),
                    _number(c.get("source")),
                    c["kind"],
                    c["profile"],
                    full_text,
                ]
            )
        return _table(rows, header)


def _cell(content) -> nodes.entry:
    if isinstance(content, nodes.Node):
        return nodes.entry("", content)
    return nodes.entry("", nodes.paragraph(text=content))


def _table(rows: list[list], header: list[str]) -> nodes.table:
    result = nodes.table(classes=["colwidths-auto", "claims-table"])
    group = nodes.tgroup(cols=len(header))
    result += group
    group.extend(nodes.colspec(colwidth=1) for _ in header)
    head, body = nodes.thead(), nodes.tbody()
    head += nodes.row("", *(_cell(h) for h in header))
    body.extend(nodes.row("", *(_cell(c) for c in row)) for row in rows)
    group += head
    group += body
    return result


def pages_to_refresh(app, env) -> list[str]:
    """After chapters executed, rewrite the claims page even if its source did not change."""
    return [
        docname
        for docname, data in NbMetadataCollector.get_doc_data(env).items()
        if data.get("has_claims_table")
    ]


def setup(app):
    app.add_node(ClaimsNode)
    app.add_directive("claims-table", ClaimsTable)
    app.add_post_transform(FillClaims)
    app.connect("env-updated", pages_to_refresh)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
