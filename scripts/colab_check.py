"""Run chapters in an environment with Colab's package versions (``make colab-check``).

Colab keeps its own packages, and some of them lag behind the book's pins: ipywidgets 7.7.1
(its notebook front end cannot show ipywidgets 8), IPython 7 and ipykernel 6. The chapters
run there with Colab's torch and the package on the path (their first cell), not with
``constraints.txt``. This script

1. makes a virtual environment, ``_build/colab-venv``, with the versions in ``COLAB``
   (reused while that list is unchanged), and without the package ``rnnbook``: as on Colab,
   each chapter's first cell finds it (here in the checkout's ``src/``; on Colab in the clone);
2. runs the chosen chapters there, top to bottom, in the quick profile, as the book's build
   does: the cells tagged ``skip-execution`` (the exercise stubs) are left out;
3. fails on an error, and checks that each slider cell (``plot.slider_figure``) showed a
   widget and that the kernel really had ipywidgets 7.7.1;
4. renders each slider the chapters drew, from the widget state they saved, with the
   widget manager of ipywidgets 7 (``@jupyter-widgets/html-manager`` 0.20, fetched with
   ``npm pack`` once) in headless Chromium: one frame shown, no tab titles, and the arrow
   keys on the slider change the frame without a kernel. (Colab's own front end is not to
   be had here; this is the ipywidgets 7 one.)

torch stays the version installed here (Colab's CPU-less image cannot be had offline); the
other versions are Colab's as of this writing, or the nearest that PyPI serves.

    python scripts/colab_check.py                       # Chapters 1, 3, 4 and 5
    python scripts/colab_check.py 01_rnn_bptt           # one chapter
    python scripts/colab_check.py --sources _build/student-src   # the student notebooks
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "_build" / "colab-venv"
PAGES = ROOT / "_build" / "colab-check"  # the slider pages of step 4
# Colab's versions (what matters for the book): the widget stack, IPython and the kernel,
# and the scientific packages; torch is pinned to the tested one (constraints.txt).
COLAB = [
    "ipywidgets==7.7.1",
    "widgetsnbextension==3.6.*",
    "ipython==7.34.0",
    "ipykernel==6.17.1",
    "numpy==2.4.*",
    "scipy==1.17.*",
    "matplotlib==3.11.*",
    "pandas==3.*",
    "scikit-learn",
    "tqdm",
    "pooch",  # the first cell installs it on Colab
    "nbclient",  # runs the notebooks (Colab has it too)
    "nbformat",
]
SLIDER_CHAPTERS = ["01_rnn_bptt", "03_ntm", "04_lmu", "05_clockwork"]
VERSIONS_CELL = """
import json, sys
import ipywidgets, IPython, ipykernel, numpy, scipy, matplotlib, pandas, torch
print("COLAB-CHECK-VERSIONS " + json.dumps({m.__name__: m.__version__ for m in (
    ipywidgets, IPython, ipykernel, numpy, scipy, matplotlib, pandas, torch)}))
"""
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# A Python warning in an output (the browser suite's rule, tests/browser/site_checks.py).
WARNING = re.compile(r"\b[A-Z]\w*Warning\b|\bwarnings\.warn|^WARNING:[\w.]*:", re.M)


def torch_requirement() -> str:
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.startswith("torch=="):
            return line.split("+")[0].strip()  # the local build (+cpu) as pip finds it
    raise SystemExit("no torch pin in constraints.txt")


def make_venv() -> Path:
    """The Colab-like environment, made or reused; returns its Python."""
    python = VENV / "bin" / "python"
    wanted = "\n".join([torch_requirement(), *COLAB]) + "\n"
    stamp = VENV / "colab-requirements.txt"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    print(f"making {VENV.relative_to(ROOT)} with Colab's versions (once)", flush=True)
    start = time.time()
    venv.create(VENV, with_pip=True, clear=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, *wanted.split()], check=True)
    stamp.write_text(wanted)
    print(f"made in {time.time() - start:.0f} s", flush=True)
    return python


def run_chapter(path: Path, timeout: int) -> dict:
    """Run one notebook in this Python's kernel; returns what was seen (raises on an error)."""
    import nbformat
    from nbclient import NotebookClient

    (PAGES / f"{path.stem}.html").unlink(missing_ok=True)  # a page of an earlier run
    notebook = nbformat.read(path, as_version=4)
    notebook.cells = [
        c for c in notebook.cells if "skip-execution" not in c.get("metadata", {}).get("tags", [])
    ]
    notebook.cells.append(nbformat.v4.new_code_cell(VERSIONS_CELL))
    start = time.time()
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    seconds = time.time() - start
    sliders, warnings, versions = [], [], {}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        outputs = cell.get("outputs", [])
        if "slider_figure(" in cell.source:
            views = [o["data"][WIDGET_VIEW] for o in outputs if WIDGET_VIEW in o.get("data", {})]
            if not views:
                raise RuntimeError(f"a slider cell showed no widget:\n{cell.source[:300]}")
            sliders += views
        for output in outputs:
            text = output.get("text", "") or "".join(
                v for k, v in output.get("data", {}).items() if k == "text/plain"
            )
            if "COLAB-CHECK-VERSIONS " in text:
                versions = json.loads(text.split("COLAB-CHECK-VERSIONS ", 1)[1])
            elif WARNING.search(text):
                warnings.append(" ".join(text[WARNING.search(text).start() :].split())[:200])
    state = notebook.metadata.get("widgets", {}).get(
        "application/vnd.jupyter.widget-state+json", {}
    )
    models = sorted({m["model_name"] for m in state.get("state", {}).values()})
    if sliders:
        write_slider_page(PAGES / f"{path.stem}.html", state, sliders)
    return {
        "seconds": round(seconds),
        "sliders": sliders,
        "warnings": warnings,
        "versions": versions,
        "models": models,
    }


def write_slider_page(page: Path, state: dict, views: list[dict]) -> None:
    """A page with the chapter's saved widget state and its slider figures, for step 4."""
    import html

    blocks = [
        f'<div class="slider-figure">\n<script type="{WIDGET_VIEW}">{json.dumps(view)}</script>'
        "\n</div>"
        for view in views
    ]
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(page.stem)}</title></head><body>\n"
        '<script src="html-manager/dist/embed.js"></script>\n'
        f'<script type="application/vnd.jupyter.widget-state+json">{json.dumps(state)}</script>\n'
        + "\n".join(blocks)
        + "\n</body></html>\n",
        encoding="utf-8",
    )


def html_manager(python: Path) -> Path:
    """The widget manager the environment's ipywidgets embeds pages with (``npm pack``, once)."""
    code = "from ipywidgets._version import __html_manager_version__ as v; print(v)"
    version = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    spec = f"@jupyter-widgets/html-manager@{version.stdout.strip()}"
    folder = PAGES / "html-manager"
    if not (folder / "dist" / "embed.js").is_file() or (folder / "SPEC").read_text() != spec:
        PAGES.mkdir(parents=True, exist_ok=True)
        packed = subprocess.run(
            ["npm", "pack", "--silent", spec], cwd=PAGES, capture_output=True, text=True, check=True
        ).stdout.split()[-1]
        subprocess.run(["rm", "-rf", str(folder), str(PAGES / "package")], check=True)
        subprocess.run(["tar", "xzf", packed], cwd=PAGES, check=True)
        (PAGES / "package").rename(folder)
        (PAGES / packed).unlink()
        (folder / "SPEC").write_text(spec)
    return folder


# Step 4, in the page: each slider figure's slider handle (ipywidgets 7: jQuery UI) and the
# frames it shows.
_SHOWN_JS = """
(index) => {
  const box = document.querySelectorAll('.slider-figure')[index];
  const shown = [...box.querySelectorAll('img')].filter(i => i.getBoundingClientRect().height > 0);
  const bars = [...box.querySelectorAll('.p-TabBar, .lm-TabBar')]
    .filter(b => b.getBoundingClientRect().height > 0);
  return {shown: shown.map(i => i.alt), bars: bars.length,
          handle: !!box.querySelector('.ui-slider-handle, .noUi-handle')};
}
"""


def check_slider_pages(python: Path, chapters: list[str]) -> list[str]:
    """Step 4: each slider figure of the pages works in the ipywidgets 7 widget manager."""
    import functools
    import http.server
    import threading

    from playwright.sync_api import sync_playwright

    html_manager(python)
    pages = [PAGES / f"{c}.html" for c in chapters if (PAGES / f"{c}.html").is_file()]

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format, *args):
            pass

    handler = functools.partial(Quiet, directory=str(PAGES))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    chromium = os.environ.get("RNNBOOK_CHROMIUM") or "/usr/bin/chromium"
    problems = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, args=["--no-sandbox", "--disable-gpu"], headless=True
        )
        for page_file in pages:
            page = browser.new_page()
            errors = []
            page.on("pageerror", lambda error, errors=errors: errors.append(str(error)))
            page.goto(f"http://127.0.0.1:{server.server_port}/{page_file.name}")
            count = page.evaluate("document.querySelectorAll('.slider-figure').length")
            for index in range(count):
                name = f"{page_file.stem}, slider figure #{index}"
                try:
                    page.wait_for_function(
                        f"() => ({_SHOWN_JS})({index}).shown.length === 1", timeout=30_000
                    )
                except Exception:
                    problems.append(f"{name}: {page.evaluate(_SHOWN_JS, index)} ({errors})")
                    continue
                before = page.evaluate(_SHOWN_JS, index)
                if before["bars"]:
                    problems.append(f"{name}: the tab titles show")
                handle = page.locator(".slider-figure").nth(index)
                handle = handle.locator(".ui-slider-handle, .noUi-handle").first
                handle.focus()
                for key in ("ArrowRight", "ArrowLeft", "ArrowLeft"):
                    handle.press(key)
                    page.wait_for_timeout(300)
                    after = page.evaluate(_SHOWN_JS, index)
                    if after["shown"] != before["shown"] and len(after["shown"]) == 1:
                        break
                else:
                    problems.append(f"{name}: the arrow keys did not change the frame {before}")
                    continue
                print(f"  {name}: {before['shown'][0][:60]!r} -> {after['shown'][0][:60]!r}")
            problems += [f"{page_file.stem}: JavaScript error: {e}" for e in errors]
            page.close()
        browser.close()
    server.shutdown()
    return problems


def run(chapters: list[str], sources: Path, timeout: int) -> int:
    """The runner, inside the Colab-like environment."""
    os.environ.setdefault("RNNBOOK_PROFILE", "quick")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel 6's debugger note
    # rnnbook takes a relative folder from its checkout's root, which is not this one when
    # the chapters come from other sources (the student edition's): make them absolute
    for name in ("RNNBOOK_DATA_MIRROR", "RNNBOOK_DATA_DIR", "RNNBOOK_CHECKPOINTS"):
        if os.environ.get(name) and not Path(os.environ[name]).is_absolute():
            os.environ[name] = str(ROOT / os.environ[name])
    import importlib.util

    if importlib.util.find_spec("rnnbook") is not None:
        raise SystemExit("rnnbook is installed here: the chapters' first cell would not run")
    failed = []
    for name in chapters:
        path = sources / "chapters" / f"{name}.ipynb"
        print(f"== {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}", flush=True)
        try:
            seen = run_chapter(path, timeout)
        except Exception as error:  # CellExecutionError names the cell and its traceback
            print(f"FAILED: {type(error).__name__}: {str(error)[-3000:]}", flush=True)
            failed.append(name)
            continue
        if seen["versions"].get("ipywidgets") != "7.7.1":
            print(f"FAILED: the kernel did not have ipywidgets 7.7.1: {seen['versions']}")
            failed.append(name)
            continue
        print(
            f"ok in {seen['seconds']} s; {len(seen['sliders'])} slider figure(s); widget models "
            f"{', '.join(seen['models']) or 'none'}",
            flush=True,
        )
        for warning in seen["warnings"]:
            print(f"  a warning in an output: {warning}")
        print(f"  versions: {json.dumps(seen['versions'])}", flush=True)
    if failed:
        print(f"colab-check: {len(failed)} chapter(s) failed: {', '.join(failed)}")
        return 1
    print(f"colab-check: {len(chapters)} chapter(s) ran with Colab's versions")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help=f"default: {' '.join(SLIDER_CHAPTERS)}")
    parser.add_argument("--sources", default=".", help="the folder whose chapters/ to run")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    chapters = args.chapters or SLIDER_CHAPTERS
    sources = (ROOT / args.sources).resolve()
    missing = [c for c in chapters if not (sources / "chapters" / f"{c}.ipynb").is_file()]
    if missing:
        parser.error(f"no notebook in {sources / 'chapters'} for {missing}")
    if args.inside:
        return run(chapters, sources, args.timeout)
    python = make_venv()
    command = [str(python), __file__, "--inside", "--sources", str(sources),
               "--timeout", str(args.timeout), *chapters]  # fmt: skip
    start = time.time()
    code = subprocess.run(command, cwd=ROOT).returncode
    print("== the slider figures in the widget manager of ipywidgets 7 (headless Chromium)")
    problems = check_slider_pages(python, chapters)
    for problem in problems:
        print(f"FAILED: {problem}")
    print(f"colab-check took {time.time() - start:.0f} s (without making the environment)")
    return code or (1 if problems else 0)


if __name__ == "__main__":
    sys.exit(main())
