"""Where the ``turnlog`` command's log records go: nowhere, or one line each.

turnlog's background threads (the view runner, lease renewals, the model
retry loop) report through :mod:`logging`. A process that sets up no
handler leaves those records to Python's last-resort handler, which
prints every warning, traceback included, on stderr: a CLI user asked for
one line and got a page. So the command sets up logging itself:

- by default, records go nowhere (the command says what matters in its
  own words, once); ``turnlog serve``, which runs for others, shows its
  warnings and errors, one line each;
- with ``--verbose``, turnlog's records from INFO up and every other
  library's warnings go to stderr, one line each: an exception is shown
  as its type and message, never as a traceback.

An exception no thread caught is logged the same way instead of printed.
"""

from __future__ import annotations

import logging
import sys
import threading
from types import TracebackType
from typing import TextIO

_OWN_LOGGER = "turnlog"
"""turnlog's loggers share this prefix (``logging.getLogger(__name__)``)."""

_FORMAT = "turnlog: %(levelname)s: %(message)s"

_thread_logger = logging.getLogger("turnlog.threads")

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class OneLineFormatter(logging.Formatter):
    """Formats a record on one line: an exception as ``Type: message``."""

    def formatException(self, ei: ExcInfo | tuple[None, None, None]) -> str:  # noqa: N802 - logging's name
        """The exception's type and message, without its traceback."""
        kind, error, _ = ei
        if kind is None:
            return ""
        detail = " ".join(str(error).split())
        return f"{kind.__name__}: {detail}" if detail else kind.__name__

    def format(self, record: logging.LogRecord) -> str:
        """The record on one line, its exception (if any) after a dash.

        Formatted from a copy without the exception: another handler may
        have cached the whole traceback on the record (``exc_text``).
        """
        bare = logging.makeLogRecord(record.__dict__)
        bare.exc_info, bare.exc_text, bare.stack_info = None, None, None
        text = " ".join(super().format(bare).split())
        if record.exc_info is not None and record.exc_info[0] is not None:
            text += " - " + self.formatException(record.exc_info)
        return text


class CommandLogging:
    """The handler the ``turnlog`` command installs on the root logger.

    Args:
        verbose: show records from INFO up on ``stream``.
        warnings: show warnings and errors on ``stream`` even when not
            verbose (``turnlog serve``: an operator must see a request that
            failed); else, not verbose, records go nowhere.
        stream: where shown records go (default: stderr at install time).
    """

    def __init__(
        self, *, verbose: bool, warnings: bool = False, stream: TextIO | None = None
    ) -> None:
        self.verbose = verbose
        if verbose or warnings:
            handler: logging.Handler = logging.StreamHandler(stream or sys.stderr)
            handler.setFormatter(OneLineFormatter(_FORMAT))
        else:
            # A handler that drops everything: with one installed, Python's
            # last-resort handler (which prints tracebacks) is never used.
            handler = logging.NullHandler()
        self.handler = handler
        self._own_level = logging.NOTSET
        self._thread_hook = threading.excepthook

    def install(self) -> None:
        """Routes log records, and uncaught thread exceptions, to the handler."""
        root = logging.getLogger()
        root.addHandler(self.handler)
        own = logging.getLogger(_OWN_LOGGER)
        self._own_level = own.level
        if self.verbose:
            own.setLevel(logging.INFO)
        self._thread_hook = threading.excepthook
        threading.excepthook = _log_thread_exception

    def uninstall(self) -> None:
        """Undoes :meth:`install` (for callers that run ``main`` in-process)."""
        logging.getLogger().removeHandler(self.handler)
        logging.getLogger(_OWN_LOGGER).setLevel(self._own_level)
        threading.excepthook = self._thread_hook


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    """Logs an exception a thread did not catch, instead of printing it."""
    if args.exc_type is SystemExit:
        return  # as threading's own hook: a thread's quiet way out
    name = args.thread.name if args.thread is not None else "a thread"
    error = args.exc_value if args.exc_value is not None else args.exc_type()
    _thread_logger.error(
        "%s stopped on an error",
        name,
        exc_info=(args.exc_type, error, args.exc_traceback),
    )
