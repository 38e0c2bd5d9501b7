"""Run every benchmark in this folder, one after the other (``make bench``).

The runs go to ``_build/bench/``; ``--record`` (``make bench RECORD=1``) passes ``--record``
to every script, which then writes the book's records in ``benchmarks/results/`` (an idle
machine only: the chapters quote them).
"""

import argparse
import runpy
import sys
from pathlib import Path

from timing import RECORD_HELP

here = Path(__file__).parent
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--record", action="store_true", help=RECORD_HELP)
args = parser.parse_args()
sys.path.insert(0, str(here))
for script in sorted(here.glob("bench_*.py")):
    print(f"== {script.name}")
    sys.argv = [str(script)] + (["--record"] if args.record else [])
    runpy.run_path(str(script), run_name="__main__")
