"""The book's long runs, one module per task, each a thin command line over :mod:`rnnbook.longrun`.

``python -m rnnbook.runs TASK --help`` lists a task's options. The tasks:

* ``copy``: Chapter 3's NTM and its LSTM baseline on the copy task (:mod:`rnnbook.runs.copy`).
* ``charlm``: Chapter 2's character-level PTB language model (:mod:`rnnbook.runs.charlm`).
* ``cbt``: Chapter 8's pointer reader on CBT-style questions (:mod:`rnnbook.runs.cbt_reader`).
* ``syncloze``: Chapter 8's SynCloze readers at the full profile's size, with three seeds
  (:mod:`rnnbook.runs.syncloze_readers`).
* ``wordlm``: Chapters 6 and 7's word-level PTB-slice language models, SBA and zoneout
  (:mod:`rnnbook.runs.wordlm`).
* ``arena``: Chapter 10's models side by side on long-term memory tasks (:mod:`rnnbook.runs.arena`).
* ``penalty``: Chapter 7's update penalties trained on Chapter 6's SBA language models, over
  their lambda grids (:mod:`rnnbook.runs.penalty_sweep`).
* ``zgrid``: Chapter 7's gate-level zoneout at every update probability of the source's grid
  (:mod:`rnnbook.runs.zoneout_grid`).

``python -m rnnbook.runs.ch7_queue`` trains the last two one at a time
(:mod:`rnnbook.runs.ch7_queue`).
"""

TASKS = {
    "copy": "rnnbook.runs.copy",
    "charlm": "rnnbook.runs.charlm",
    "cbt": "rnnbook.runs.cbt_reader",
    "syncloze": "rnnbook.runs.syncloze_readers",
    "wordlm": "rnnbook.runs.wordlm",
    "arena": "rnnbook.runs.arena",
    "penalty": "rnnbook.runs.penalty_sweep",
    "zgrid": "rnnbook.runs.zoneout_grid",
}


def book_runs() -> dict:
    """``{checkpoint name: () -> LongRun}`` for every committed checkpoint of the book."""
    import importlib

    runs = {}
    for module in TASKS.values():
        runs.update(importlib.import_module(module).BOOK_RUNS)
    return runs
