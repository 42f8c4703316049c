"""The stdio transport of an MCP link: where the server's stderr goes, and
how its stdout is decoded.

- **stderr** never reaches turnlog's terminal (the SDK's default passes
  turnlog's own stderr to the server). With a ``stderr_log`` file the
  server appends to it directly; without one, each line goes to the
  ``turnlog.mcp`` logger at INFO (quiet unless the application shows it).
- **stdout** is decoded as UTF-8 with bad bytes replaced by U+FFFD. The
  SDK's default is strict decoding, and one invalid byte then stops its
  reader for good: every later call of that server waits for an answer
  that never comes. The replacement is counted per link
  (:class:`BadBytes`) so a result can say that it holds replaced bytes.

The SDK types its error handler as one of "strict", "ignore" or
"replace"; a counting handler is registered with :mod:`codecs` under a
name of this link's own and passed through ``model_construct`` (the SDK
hands the name to the decoder, which accepts any registered handler).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import itertools
import logging
import os
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mcp.client.stdio import StdioServerParameters, stdio_client

if TYPE_CHECKING:
    from turnlog.mcp.targets import StdioTarget

logger = logging.getLogger("turnlog.mcp")
"""Where a stdio server's stderr lines go when it has no ``stderr_log``."""

STDERR_DRAIN_TIMEOUT = 2.0
"""Seconds the stderr reader may go on after the server stopped (a child
of the server that kept the pipe open cannot hold the link's close)."""

_handler_numbers = itertools.count(1)
_free_names: list[str] = []
_names_guard = threading.Lock()


class BadBytes:
    """Counts the bytes of a server's stdout that were not valid UTF-8.

    :mod:`codecs` cannot forget a handler, so the names are reused: one
    whose counter was collected goes back to a pool, and the registry
    grows only as far as the most links alive at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        with _names_guard:
            name = (
                _free_names.pop()
                if _free_names
                else f"turnlog-mcp-replace-{next(_handler_numbers)}"
            )
        self.handler_name = name
        # The registry holds the handler, never this object.
        codecs.register_error(name, _handler(weakref.ref(self)))
        weakref.finalize(self, _free_names.append, name)

    @property
    def count(self) -> int:
        """Bytes replaced so far, over every process of the link."""
        with self._lock:
            return self._count

    def _replace(self, error: UnicodeError) -> tuple[str | bytes, int]:
        if isinstance(error, UnicodeDecodeError):
            with self._lock:
                self._count += error.end - error.start
            return "\ufffd", error.end
        # Encoding what turnlog sends: the SDK's JSON is valid UTF-8.
        return codecs.replace_errors(error)


def _handler(
    counter: weakref.ReferenceType[BadBytes],
) -> Callable[[UnicodeError], tuple[str | bytes, int]]:
    def replace(error: UnicodeError) -> tuple[str | bytes, int]:
        alive = counter()
        if alive is not None:
            return alive._replace(error)
        return codecs.replace_errors(error)

    return replace


@contextlib.asynccontextmanager
async def open_stdio(
    target: StdioTarget, label: str, bad: BadBytes
) -> AsyncIterator[Any]:
    """Starts the server and yields the SDK's streams to it.

    Args:
        target: the command and where its stderr goes.
        label: the server's name (for the log lines).
        bad: counts bytes of stdout that were replaced.
    """
    parameters = StdioServerParameters.model_construct(
        command=target.command,
        args=list(target.args),
        env=dict(target.env) if target.env is not None else None,
        cwd=target.cwd,
        encoding="utf-8",
        encoding_error_handler=bad.handler_name,
    )
    reader: _StderrReader | None = None
    async with contextlib.AsyncExitStack() as stack:
        if target.stderr_log is not None:
            errlog = _open_log_file(target.stderr_log, target.command)
        else:
            read_end, write_end = os.pipe()
            errlog = os.fdopen(write_end, "w")
            reader = _StderrReader(read_end, label)
            # Runs after the transport closed (exit callbacks run last first).
            stack.push_async_callback(reader.finish)
        with errlog:  # the server holds its own copy once started
            transport = stdio_client(parameters, errlog=errlog)
            streams = await stack.enter_async_context(transport)
        if reader is not None:
            reader.start()
        yield streams


def _open_log_file(path: Path, command: str) -> TextIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    log = path.open("a", encoding="utf-8", errors="replace")
    started = datetime.now(UTC).isoformat(timespec="seconds")
    log.write(f"--- {started} turnlog started {Path(command).name}\n")
    log.flush()  # before the server's own lines
    return log


class _StderrReader:
    """Reads the server's stderr pipe into the logger while the server runs."""

    def __init__(self, fd: int, label: str) -> None:
        self._fd = fd
        self._label = label
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(_log_lines(self._fd, self._label))

    async def finish(self) -> None:
        """Lets the reader log what is left, briefly; closes the pipe."""
        if self._task is None:  # the server never started
            os.close(self._fd)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._task, STDERR_DRAIN_TIMEOUT)


async def _log_lines(fd: int, label: str) -> None:
    """Logs each line the server writes to stderr, until the pipe closes."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    pipe = os.fdopen(fd, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), pipe
    )
    try:
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # a line longer than the reader's limit
                line = await reader.read(2**16)
            if not line:
                return
            text = line.decode("utf-8", errors="replace").rstrip("\r\n")
            logger.info("MCP server %r: %s", label, text)
    finally:
        transport.close()
