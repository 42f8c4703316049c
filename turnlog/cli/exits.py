"""Exit codes of the ``turnlog`` command, and its one-line errors."""

from __future__ import annotations

import sys

from turnlog.cli.timeline import one_line

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""128 + SIGINT, as a shell reports a command stopped by Ctrl-C."""

_MESSAGE_LIMIT = 1000
"""Longest error line printed; messages are short, this only bounds garbage."""


def print_error(message: str) -> None:
    """Prints ``turnlog: error: MESSAGE`` on one line of stderr."""
    print(f"turnlog: error: {one_line(message, _MESSAGE_LIMIT)}", file=sys.stderr)


def describe(error: BaseException) -> str:
    """What an error says, or its class name when it says nothing."""
    return str(error) or type(error).__name__
