#!/usr/bin/env python3
"""Copy the browser assets of the HTML book from node_modules/ into book/_vendor/.

Why: by default the book's pages load MathJax, RequireJS and the Jupyter widget manager
from CDNs, so offline (or behind a firewall) the math stays raw TeX and the widgets
(tqdm bars, sliders) are invisible. We install pinned copies with npm (package.json,
package-lock.json) and copy only the files a browser can request into book/_vendor/,
which _config.yml lists in html_static_path, so Sphinx puts them in _build/html/_static/.
book/_vendor/ is generated and git-ignored. It is deliberately not a root _static/ folder:
Jupyter Book 1 would inject every .js found there as a <script> on every page.

Layout produced (the paths _config.yml refers to):
    mathjax/tex-mml-chtml.js  and what it loads lazily (see MATHJAX_FILES)
    widgets/require.js        RequireJS, plus a few lines that fix the widget font URLs
    widgets/embed-amd.js      @jupyter-widgets/html-manager, with its FontAwesome fonts
    VERSIONS.txt              the package versions copied

Widget fonts: embed-amd.js builds its font URLs from the URL RequireJS gives each AMD
module, which by default is relative to the *page* (chapters/@jupyter-widgets/...), so
the fonts 404ed. The lines appended to require.js map the @jupyter-widgets module ids to
the folder of require.js itself, where the fonts are copied beside embed-amd.js.

Usage (from the repository root):
    npm ci --no-audit --no-fund
    python3 scripts/vendor_assets.py

The script is idempotent: it rebuilds book/_vendor in a temporary folder beside it
and then swaps the two.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODE_MODULES = ROOT / "node_modules"
VENDOR = ROOT / "book" / "_vendor"

MATHJAX = "mathjax"
HTML_MANAGER = "@jupyter-widgets/html-manager"
REQUIREJS = "requirejs"

# Files and folders of node_modules/mathjax/es5 that tex-mml-chtml.js needs or may load.
MATHJAX_FILES = (
    "tex-mml-chtml.js",  # the combined component (TeX + MathML input, CHTML output, menu)
    "output/chtml/fonts/woff-v2",  # CHTML web fonts, always fetched through CSS @font-face
    "input/tex/extensions",  # TeX packages loaded on demand (autoload, \require)
    "input/mml/entities.js",  # MathML named entities that are not built in
    "ui",  # lazy.js and safe.js, if the MathJax config turns them on
    "a11y",  # menu > Accessibility: explorer, semantic enrichment, complexity
    "sre/mathmaps",  # speech and braille rules of the explorer, one file per language
    "output/svg.js",  # menu > Math Settings > Math Renderer > SVG
    "output/svg/fonts/tex.js",  # ... and the font data that output/svg.js loads
)

FONT_SUFFIXES = (".woff2", ".woff", ".ttf", ".eot", ".svg")

# Appended to RequireJS. document.currentScript is this require.js; its folder is
# _static/widgets/ at whatever depth the page is.
REQUIRE_FONT_FIX = """
/* Appended by scripts/vendor_assets.py; not part of RequireJS.
 * embed-amd.js (@jupyter-widgets/html-manager) requests its FontAwesome fonts relative to
 * the URL RequireJS assigns to its AMD modules, by default <page folder>/@jupyter-widgets/...
 * Map those module ids to this file's folder, where the fonts sit beside embed-amd.js. */
(function () {
  var script = document.currentScript;
  if (!script || !script.src) { return; }
  var here = new URL(".", script.src).href.replace(/\\/$/, "");
  requirejs.config({paths: {
    "@jupyter-widgets": here,
    "@jupyter-widgets/html-manager/dist": here
  }});
})();
"""


def fail(message: str) -> None:
    sys.exit(f"vendor_assets: {message}")


def package_dir(name: str) -> Path:
    return NODE_MODULES / name


def installed_versions() -> dict[str, str]:
    """Read the versions from node_modules and check them against the pins in package.json."""
    if not NODE_MODULES.is_dir():
        fail(f"{NODE_MODULES} is missing: run npm ci first (npm ci --no-audit --no-fund)")
    pins = json.loads((ROOT / "package.json").read_text())["dependencies"]
    versions = {}
    for name in (MATHJAX, HTML_MANAGER, REQUIREJS):
        manifest = package_dir(name) / "package.json"
        if not manifest.is_file():
            fail(f"{name} is not in node_modules: run npm ci first")
        version = json.loads(manifest.read_text())["version"]
        if pins.get(name) != version:
            fail(
                f"node_modules has {name} {version}, package.json pins {pins.get(name)}: "
                "run npm ci first"
            )
        versions[name] = version
    return versions


def copy(src: Path, dest: Path) -> None:
    if not src.exists():
        fail(f"{src} not found: is the package version the one package.json pins?")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dest)
    else:
        shutil.copyfile(src, dest)


def vendor_mathjax(out: Path) -> None:
    es5 = package_dir(MATHJAX) / "es5"
    for rel in MATHJAX_FILES:
        copy(es5 / rel, out / "mathjax" / rel)


def vendor_widgets(out: Path) -> None:
    dist = package_dir(HTML_MANAGER) / "dist"
    widgets = out / "widgets"
    embed = dist / "embed-amd.js"
    copy(embed, widgets / "embed-amd.js")
    # The fonts are named by content hash; take the ones embed-amd.js refers to.
    bundle = embed.read_text(encoding="utf-8")
    fonts = [f for f in sorted(dist.iterdir()) if f.suffix in FONT_SUFFIXES and f.name in bundle]
    if not fonts:
        fail(f"no font files referenced by {embed}: has the html-manager layout changed?")
    for font in fonts:
        copy(font, widgets / font.name)
    require = (package_dir(REQUIREJS) / "require.js").read_text(encoding="utf-8")
    (widgets / "require.js").write_text(require + REQUIRE_FONT_FIX, encoding="utf-8")


def write_versions(out: Path, versions: dict[str, str]) -> None:
    lines = ["# Generated by scripts/vendor_assets.py from node_modules; do not edit."]
    lines += [f"{name} {version}" for name, version in versions.items()]
    lines.append("# widgets/require.js = requirejs/require.js + a widget font-path fix (appended)")
    (out / "VERSIONS.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def swap_in(new: Path) -> None:
    """Replace VENDOR by new with two renames, so a half-built folder is never in place."""
    if VENDOR.exists():
        old = Path(tempfile.mkdtemp(prefix="._vendor.old.", dir=VENDOR.parent))
        VENDOR.rename(old / "_vendor")
        new.rename(VENDOR)
        shutil.rmtree(old)
    else:
        new.rename(VENDOR)


def main() -> None:
    versions = installed_versions()
    VENDOR.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="._vendor.new.", dir=VENDOR.parent))
    try:
        out = staging / "_vendor"
        out.mkdir()
        vendor_mathjax(out)
        vendor_widgets(out)
        write_versions(out, versions)
        swap_in(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    files = [p for p in VENDOR.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files) / 1e6
    summary = ", ".join(f"{name} {version}" for name, version in versions.items())
    print(
        f"vendor_assets: {len(files)} files, {size:.1f} MB in {VENDOR.relative_to(ROOT)} "
        f"({summary})"
    )


if __name__ == "__main__":
    main()
