"""``python -m rnnbook.runs TASK [options]``: train one of the book's long runs.

``python -m rnnbook.runs refresh NAME "why"`` records the current model code in checkpoint
NAME's record after checking that the checkpoint still reproduces its recorded results: for
a code change that leaves the arithmetic alone. Any other change needs a retrained checkpoint.
"""

import importlib
import sys

from rnnbook.runs import TASKS


def refresh(argv: list[str]) -> int:
    from rnnbook import longrun
    from rnnbook.checkpoints import refresh_code
    from rnnbook.runs import book_runs

    runs = book_runs()
    if len(argv) != 2 or argv[0] not in runs:
        usage = f"usage: python -m rnnbook.runs refresh NAME WHY; NAME in {sorted(runs)}"
        print(usage, file=sys.stderr)
        return 1
    name, why = argv
    model, _, mismatches = longrun.reproduce(runs[name]())
    if mismatches:
        print(f"{name} does not reproduce its record, so it is not refreshed: {mismatches}")
        return 1
    record = refresh_code(name, model, why)
    print(f"{name}: results reproduced; code recorded as {record['code']}")
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "refresh":
        return refresh(argv[1:])
    if not argv or argv[0] not in TASKS:
        given = f"got {argv[0]!r}" if argv else "got none"
        print(
            f"usage: python -m rnnbook.runs TASK [options]; TASK is one of {sorted(TASKS)} "
            f"({given}). `python -m rnnbook.runs TASK --help` lists a task's options.",
            file=sys.stderr,
        )
        return 1
    return importlib.import_module(TASKS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
