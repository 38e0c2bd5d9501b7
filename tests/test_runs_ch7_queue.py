"""rnnbook.runs.ch7_queue: Chapter 7's long runs, one at a time, resumable."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pytest

from rnnbook import longrun
from rnnbook.runs import ch7_queue as queue
from rnnbook.runs import penalty_sweep


def names() -> list[str]:
    return [queue.name_of(task, kwargs) for task, kwargs in queue.jobs()]


def test_the_queue_holds_every_run_once_in_the_briefs_order():
    order = names()
    # three SBA sweeps and the zoneout grid, but Z_c at p = 0.2: Chapter 7's ptb-slice-zc
    # and NS at 100, and R_CB at 0.1 with two more seeds
    # and Chapter 7's thirteen levers on the rate (threshold, tempered surrogate, margins)
    assert len(order) == len(set(order)) == 3 * 18 + 2 + 40 - 1 + 2 + 13 + 6 + 4
    assert "ptb-slice-zc-p0.2" not in order
    assert order[:4] == [f"ptb-slice-sba-ic-cb-lam{lam:g}" for lam in (1e-4, 1e-3, 1e-2, 1e-1)]
    assert order[4:9] == [f"ptb-slice-sba-ic-ns-lam{lam:g}" for lam in (1e-3, 1e-2, 0.1, 1, 10)]
    assert order[9:13] == [f"ptb-slice-sba-ic-msure-ut0.5-lam{lam:g}" for lam in (0.1, 1, 10, 100)]
    assert order[13:26] == [name.replace("sba-ic", "sba-c2") for name in order[:13]]
    assert order[26:30] == [f"ptb-slice-sba-ic-msure-ut0.2-lam{lam:g}" for lam in (0.1, 1, 10, 100)]
    assert order[30:32] == ["ptb-slice-sba-ic-cb-lam0.1-seed1", "ptb-slice-sba-ic-cb-lam0.1-seed2"]
    assert order[32:48] == [f"ptb-slice-z{v}-p{p:g}" for p in (0.1, 0.3, 0.5, 0.7)
                            for v in ("ch", "f", "i", "c")]  # fmt: skip
    assert order[-4:] == [f"ptb-slice-z{v}-p1" for v in ("ch", "f", "i", "c")]  # the LSTM
    levers = [penalty_sweep.run_name(**kw) for kw in penalty_sweep.levers()]
    assert order[56 : 56 + 13] == levers  # after S_c's extra runs, before the grid's second half
    seeded = [penalty_sweep.run_name(**kw) for kw in penalty_sweep.lever_seeds()]
    assert order[69 : 69 + 6] == seeded and all(
        name.endswith(("-seed1", "-seed2")) for name in seeded
    )
    every = {
        penalty_sweep.run_name(**kw) for kw in penalty_sweep.grid(("sba-ic", "sba-c2", "sba-fc"))
    }
    assert every <= set(order)


def test_a_command_names_the_run_that_the_queue_expects(tmp_path):
    for task, kwargs in queue.jobs():
        argv = queue.command(task, kwargs, tmp_path)
        module = {"penalty": "penalty_sweep", "zgrid": "zoneout_grid"}[task]
        args = importlib.import_module(f"rnnbook.runs.{module}").parse_args(argv[4:])
        assert args.resume and args.threads == 1
        if task == "penalty":
            name = penalty_sweep.run_name(
                args.model,
                args.penalty,
                args.lam,
                args.u_target,
                args.seed,
                args.theta,
                args.tau,
                args.theta_from,
            )
        else:
            name = queue.zoneout_grid.run_name(args.variant, args.p)
        assert name == queue.name_of(task, kwargs)


@pytest.fixture
def fake_runs(monkeypatch, tmp_path):
    """Three runs; the child process replaced by a function that writes what a run leaves."""
    jobs = queue.jobs()[:3]
    monkeypatch.setattr(queue, "jobs", lambda: jobs)
    calls = []

    def call(argv, env, cwd):
        folder = argv[argv.index("--out-dir") + 1]
        calls.append(folder)
        name = os.path.basename(folder)
        if name.endswith("lam0.001"):
            return 2  # a NaN
        rows = [{"step": 0, "valid_ppl": 2000.0}, {"step": 90, "valid_ppl": 150.0, "ri": 0.1}]
        longrun.write_curve(tmp_path / "root" / name / "learning_curve.csv", rows)
        staging = tmp_path / "root" / name / "checkpoint"
        staging.mkdir()
        longrun.write_curve(staging / f"{name}.curve.csv", rows)
        (tmp_path / "root" / name / "summary.json").write_text(json.dumps({}))
        return 0

    monkeypatch.setattr(queue.subprocess, "call", call)
    return calls


def test_the_queue_trains_each_run_once_and_skips_a_failed_one(fake_runs, tmp_path):
    root = tmp_path / "root"
    assert queue.run_queue(root) == 3
    first, second, third = names()[:3]
    assert queue.state_of(root / first) == "done" and queue.state_of(root / third) == "done"
    assert queue.state_of(root / second) == "failed"
    book = tmp_path / "checkpoints"  # the tests' RNNBOOK_CHECKPOINTS
    assert not (book / f"{first}.curve.csv").exists()  # the run itself copies it
    assert queue.run_queue(root) == 0  # nothing left: finished and failed runs are skipped
    assert (book / f"{first}.curve.csv").is_file()  # a finished run's missing curve is copied
    assert len(fake_runs) == 3


def test_a_stop_file_ends_the_queue_before_the_next_run(fake_runs, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "STOP").touch()
    assert queue.run_queue(root) == 0 and not fake_runs


def test_a_run_held_by_a_live_queue_is_passed_over(fake_runs, tmp_path):
    """Two queues at once: a run whose running.pid names a live process (here the test's
    parent) is skipped; a pid file left by a dead queue does not hold the run."""
    root = tmp_path / "root"
    first, second, third = names()[:3]
    (root / first).mkdir(parents=True)
    (root / first / "running.pid").write_text(str(os.getppid()))
    assert queue.state_of(root / first) == f"running (queue {os.getppid()})"
    (root / third).mkdir()
    (root / third / "running.pid").write_text("999999999")  # no such process
    assert queue.state_of(root / third) == "pending"
    queue.run_queue(root)
    assert [os.path.basename(f) for f in fake_runs] == [second, third]
    assert not (root / third / "running.pid").exists()  # released when the run ended


def test_a_partial_run_is_reported_at_its_step(tmp_path):
    folder = tmp_path / "run"
    assert queue.state_of(folder) == "pending"
    longrun.write_curve(tmp_path / "learning_curve.csv", [{"step": 0}, {"step": 180}])
    assert queue.state_of(tmp_path) == "at step 180"


# --- the committed learning curves --------------------------------------------------------------

COMMITTED = Path(__file__).resolve().parents[1] / "checkpoints"
QUEUED = dict((queue.name_of(task, kwargs), (task, kwargs)) for task, kwargs in queue.jobs())
FINISHED = sorted(name for name in QUEUED if (COMMITTED / f"{name}.curve.csv").is_file())


@pytest.mark.parametrize("name", FINISHED)
def test_a_committed_curve_is_its_runs_from_the_same_untrained_model(name):
    """Every pass of 25 is there, and the untrained row is that of Chapter 6's (or 7's) run
    of the same cell: the same initial weights, evaluated on the same text."""
    task, kwargs = QUEUED[name]
    rows = longrun.read_curve(COMMITTED / f"{name}.curve.csv")
    assert [row["step"] for row in rows] == [90 * k for k in range(26)]
    first = rows[0]
    if task == "penalty":
        for row in rows[1:]:
            assert 0 <= row["ri"] < 1 and 0 <= row["train_u"] <= 1 and row["train_ce"] > 0
            # a threshold above the untrained surprisals' changes may stop every update
            assert row["train_u"] > 0 or kwargs.get("theta", 0) >= 0.1
        if kwargs["model"] == "sba-fc":
            return  # Chapter 6 has no long run of S_fc to compare with
        seed = f"-seed{kwargs['seed']}" if kwargs.get("seed") else ""  # the same seed's run
        if kwargs.get("theta") is not None:  # another threshold: only the plain LSTM agrees
            chapter = longrun.read_curve(
                COMMITTED / f"ptb-slice-{kwargs['model']}{seed}.curve.csv"
            )[0]
            assert abs(first["valid_ppl_plain"] - chapter["valid_ppl_plain"]) <= 1.1e-5 * abs(
                chapter["valid_ppl_plain"]
            )
            return
        chapter = longrun.read_curve(COMMITTED / f"ptb-slice-{kwargs['model']}{seed}.curve.csv")[0]
        for key in ("valid_ppl", "valid_ppl_plain", "valid_u"):
            # the curves keep six significant digits: one unit of the last may differ
            assert abs(first[key] - chapter[key]) <= 1.1e-5 * abs(chapter[key]), key
    else:
        lstm = longrun.read_curve(COMMITTED / "ptb-slice-lstm.curve.csv")[0]["valid_ppl"]
        assert abs(first["valid_ppl_plain"] - lstm) <= 1e-5 * lstm  # ZO+R: the plain LSTM
        assert all(abs(row["valid_u"] - kwargs["p"]) < 0.01 for row in rows)


def test_a_table_row_reads_the_best_pass_and_the_mean_influence():
    rows = [{"step": 0, "valid_ppl": 2000.0, "valid_ppl_plain": 1990.0, "valid_u": 0.5}]
    rows += [{"step": 90 * k, "valid_ppl": ppl, "valid_ppl_plain": ppl + 1, "valid_u": u,
              "ri": ri, "train_u": u} for k, (ppl, u, ri) in
             enumerate([(150.0, 0.4, 0.1), (120.0, 0.3, 0.2), (130.0, 0.2, 0.6)], start=1)]  # fmt: skip
    line = queue.table_row("run", rows)
    assert "best  120.00 at pass  2" in line and "plain  121.00" in line
    assert "valid_u 0.300" in line and "RI 0.3000" in line  # (0.1 + 0.2 + 0.6) / 3
