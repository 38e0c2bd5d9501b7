"""``python -m rnnbook.grade``: see :mod:`rnnbook.grade`."""

from rnnbook.grade import main

main()
