"""The arena's results as both pages of Chapter 10 read them: table rows from the committed runs,
and the learning curves of those runs and of the seed study.

The chapter's first page reads the copying-memory task (ltm-copy-memory), scored by the
unweighted cross-entropy per step against the memoryless baseline (ltm-copy-baseline) and by
the symbols recalled; its second page reads the copying rows again beside the adding problem,
delayed recall (ltm-recall) and the pendulum (ltm-pendulum). Both read the same runs the same
way, through these functions:

* :func:`arena_rows`: one :class:`~rnnbook.arena.harness.Row` per model of a book task, from the
  run's checkpoint (:func:`rnnbook.longrun.train_or_load`: loaded in the quick and the full
  profile, trained again in the paper profile), re-measured on sequences no run saw, with the
  run's own record and learning curve attached;
* :func:`curve_at` and :func:`at_step`: a learning curve's value after a number of updates;
* :func:`seed_curves` and :func:`finals`: the seed study's curves (seeds 0, 1 and 2 of
  ``rnnbook.runs.arena.SEED_STUDY``) and their last rows.

Nothing here trains or times a model in the quick or the full profile: the seconds per update
of a row are its long run's record.
"""

from __future__ import annotations

from rnnbook import longrun, plot
from rnnbook.arena import harness, zoo
from rnnbook.paths import checkpoint_dir, project_root
from rnnbook.profiles import Profile
from rnnbook.runs import arena as arena_runs


def arena_runs_of(task_name: str, *, profile: Profile) -> dict:
    """Train or load every book run of a task (``rnnbook.runs.arena.BOOK_TASKS``);
    returns ``{model: (run, trained)}``. A run the paper profile trains goes to
    ``runs/<run name>-<profile>`` and leaves the book's checkpoints alone."""
    out = {}
    for model in arena_runs.BOOK_TASKS[task_name][1]:
        run = arena_runs.book_run(task_name, model)
        folder = project_root() / "runs" / f"{run.name}-{profile.name}"
        out[model] = run, longrun.train_or_load(run, profile=profile, out_dir=folder)
    return out


def arena_rows(task_name: str, n_fresh: int, *, profile: Profile) -> dict:
    """One row per model of a book task: re-measured on ``n_fresh`` fresh sequences (drawn
    from ``rnnbook.arena.harness.FRESH_SEED``), with ``recorded`` (the run's last
    evaluation), ``model`` (the trained module) and ``curve`` (its learning curve, ``[]``
    without one) attached. Returns ``{model: Row}`` in the order of the book's runs."""
    rows = {}
    task_of_runs = arena_runs.BOOK_TASKS[task_name][0]
    for model, (run, trained) in arena_runs_of(task_name, profile=profile).items():
        task_m = zoo.task_for(model, task_of_runs)
        batches = harness.test_set(task_m, n_fresh, seed=harness.FRESH_SEED)
        summary = trained.summary
        r = harness.row(model, task_m, trained.model.eval(), steps=summary["steps"],
                        seconds=summary["seconds"], batches=batches)  # fmt: skip
        r.recorded, r.model = summary["final_eval"], trained.model
        curve = checkpoint_dir() / f"{run.name}.curve.csv"
        r.curve = longrun.read_curve(curve) if curve.is_file() else []
        rows[model] = r
    return rows


def curve_at(curve: list[dict], step: int, metric: str) -> float:
    """A learning curve's ``metric`` after ``step`` updates (nan where it has no such row)."""
    values = [row[metric] for row in curve if row["step"] == step]
    return values[0] if values else float("nan")


def at_step(row: harness.Row, step: int, metric: str) -> float:
    """:func:`curve_at` on the learning curve that :func:`arena_rows` attached to a row."""
    return curve_at(row.curve, step, metric)


def seed_curves(task_name: str) -> dict[str, list[list[dict]]]:
    """``{model: [the learning curves of seeds 0, 1 and 2]}`` for a task's seed study, read
    from ``checkpoints/<run name>.curve.csv``."""

    def curve(model: str, seed: int) -> list[dict]:
        name = arena_runs.curve_name(task_name, model, seed)
        return longrun.read_curve(checkpoint_dir() / f"{name}.curve.csv")

    return {
        model: [curve(model, seed) for seed in arena_runs.SEEDS]
        for model in arena_runs.SEED_STUDY[task_name]
    }


def finals(curves: dict[str, list[list[dict]]], metric: str) -> dict[str, list[float]]:
    """``{model: [metric in the curve's last row, for each seed]}`` of :func:`seed_curves`."""
    return {model: [c[-1][metric] for c in cs] for model, cs in curves.items()}


def arena_style(name: str) -> dict:
    """Matplotlib keywords of arena model ``name`` (a key of ``zoo.MODELS``): the book's style
    of the model its label names (:func:`rnnbook.plot.model_style`), so that the LSTM of
    Chapter 10 looks as it does in Chapter 2, with markers of size 5 for the curves' many
    points. Models that share a colour (the SRN and the two orthogonal RNNs, the two LSTMs,
    the NTM and the DNC, the two Transformers) differ in marker and line style."""
    if name not in zoo.MODELS:
        raise ValueError(f"name must be one of the arena's models {list(zoo.MODELS)}, got {name!r}")
    return dict(plot.model_style(zoo.entry_of(name).label), markersize=5)
