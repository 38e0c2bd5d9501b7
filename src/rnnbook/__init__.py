"""rnnbook: the shared code of the executable textbook on recurrent neural networks.

Chapters start with ``session = rnnbook.setup(profile, seed)`` and then import what they
need: ``rnnbook.models`` (one module per family), ``rnnbook.data`` (``fetch`` and
``synthetic``), ``rnnbook.train`` (the one training loop), ``rnnbook.plot`` (the theme),
``rnnbook.checks`` (exercise checkers) and, from Part II on, ``rnnbook.skip`` (the skip
update, the update decisions and the one update rate).
"""

__version__ = "0.1.0"

from rnnbook.profiles import Profile, resolve_profile  # noqa: E402
from rnnbook.runtime import Session, seed_everything, setup  # noqa: E402

__all__ = ["Profile", "Session", "__version__", "resolve_profile", "seed_everything", "setup"]
