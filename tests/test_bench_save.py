"""benchmarks/timing.py save(): a run goes to _build/bench, never into the book's records
(benchmarks/results/, which the chapters quote), unless it asks to with record=True."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import timing as bench_timing  # noqa: E402  (benchmarks/timing.py)

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def folders(monkeypatch, tmp_path):
    results, runs = tmp_path / "results", tmp_path / "_build" / "bench"
    results.mkdir()
    (results / "demo.json").write_text('{"the": "record"}')
    monkeypatch.setattr(bench_timing, "RESULTS", results)
    monkeypatch.setattr(bench_timing, "RUNS", runs)
    return results, runs


def test_a_run_leaves_the_record_alone(monkeypatch, tmp_path, capsys):
    results, runs = folders(monkeypatch, tmp_path)
    path = bench_timing.save("demo", [{"a": 1}])
    assert path == runs / "demo.json"
    assert json.loads(path.read_text())["rows"] == [{"a": 1}]
    assert sorted(p.name for p in results.iterdir()) == ["demo.json"]
    assert json.loads((results / "demo.json").read_text()) == {"the": "record"}
    assert str(path) in capsys.readouterr().out  # it says where the run went
    assert bench_timing.read_record("demo") == {"the": "record"}


def test_record_true_writes_the_record(monkeypatch, tmp_path):
    results, runs = folders(monkeypatch, tmp_path)
    path = bench_timing.save("demo", [{"a": 2}], record=True)
    assert path == results / "demo.json"
    assert json.loads(path.read_text())["rows"] == [{"a": 2}]
    assert not runs.exists()


def test_the_folders():
    assert bench_timing.RESULTS == BENCHMARKS / "results"
    assert bench_timing.RUNS == BENCHMARKS.parent / "_build" / "bench"


def test_every_bench_script_takes_record():
    """Every script passes its --record on to save(), so `make bench RECORD=1` (run.py
    --record) reaches them all and plain `make bench` none."""
    for script in sorted(BENCHMARKS.glob("bench_*.py")):
        text = script.read_text()
        assert '"--record"' in text, script.name
        assert "record=args.record" in text, script.name
