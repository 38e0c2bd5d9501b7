"""The arena of Chapter 10: the book's memories side by side on long-term memory tasks.

Not to be confused with ``benchmarks/``, which measures speed. :mod:`rnnbook.arena.tasks`
holds the tasks, :mod:`rnnbook.arena.zoo` the models by name, :mod:`rnnbook.arena.baselines`
the controls that join them (networks without memory, chrono-initialised LSTMs),
:mod:`rnnbook.arena.harness` the training and the table's rows.
"""

from rnnbook.arena import baselines as _baselines  # noqa: F401  (registers the controls)
