"""The ``turnlog`` command line; ``turnlog run`` lives in ``turnlog.cli.run``."""

from turnlog.cli.main import main

__all__ = ["main"]
