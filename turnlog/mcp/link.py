"""One live link to an MCP server, held on a loop thread of its own.

The MCP SDK is async and its sessions are bound to the event loop (and to
the task) that opened them: the transport's task groups must be left by
the task that entered them. So each link has one owner task that opens
the connection, holds it, and closes it when told to; calls are made from
other tasks on the same loop, which the SDK allows.

The loop is the link's own, not the runtime's: an ``McpServer`` belongs to
an ``Agent``, which several runtimes may share, and its tool list is read
from a caller's thread when a session starts. Calls cross from the
runtime's I/O loop with ``asyncio.wrap_future``, so cancelling the call
there (a timeout, an interrupt) cancels the request here.

A link that broke (the process exited, the HTTP server went away) is
dropped: the call that saw it becomes an error output, and the next call
or tool listing opens a new link (for stdio, a new process). A call that
was cancelled (it timed out, or its turn was interrupted) may have left
the server stuck: the link is then checked with a request, which the next
call waits for, and dropped if the server does not answer in time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar

import httpx2
import msgspec
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CONNECTION_CLOSED, Tool

from turnlog.actors.io_loop import IoLoop
from turnlog.domain.errors import McpServerError
from turnlog.mcp.results import tool_result
from turnlog.mcp.stdio import BadBytes, open_stdio
from turnlog.tools import ToolResult

if TYPE_CHECKING:
    from turnlog.mcp.targets import Target

T = TypeVar("T")

CLOSE_TIMEOUT = 10.0
"""Seconds ``close`` waits for a server to shut down (the SDK bounds its
own process shutdown well within this)."""

MAX_LIST_PAGES = 100
"""A server whose tools/list pages never end cannot hang a session start."""

CHECK_TIMEOUT = 5.0
"""Seconds a server may take to answer the check after a cancelled call."""


def check_timeout_for(call_timeout: float | None) -> float:
    """The check's timeout for a server whose calls may take ``call_timeout``.

    A quarter of it, between 1 and :data:`CHECK_TIMEOUT` seconds: the next
    call waits for the check, and a dead server must leave it time enough
    to start again and answer.
    """
    if call_timeout is None:
        return CHECK_TIMEOUT
    return max(1.0, min(CHECK_TIMEOUT, call_timeout / 4))


BAD_BYTES_NOTE = (
    "[turnlog: the server sent bytes that are not valid UTF-8; "
    "each is shown as U+FFFD (\ufffd)]"
)
"""Added to a result that holds replaced bytes, so the model knows."""


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    # The SDK's own defaults: a response stream may stay open a long time.
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


class _Open:
    """One open connection: its client and how to close it."""

    def __init__(self, client: Client, stop: asyncio.Event, owner: Any) -> None:
        self.client = client
        self.stop = stop
        self.owner = owner
        self.check: asyncio.Task[None] | None = None
        """The check after a cancelled call; the next call waits for it."""


class McpLink:
    """The connection to one MCP server, opened on first use."""

    def __init__(
        self, label: str, target: Target, check_timeout: float = CHECK_TIMEOUT
    ) -> None:
        self._label = label
        self._target = target
        self._check_timeout = check_timeout
        self._bad_bytes = BadBytes()
        self._guard = threading.Lock()
        self._loop: IoLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._open: _Open | None = None
        self._closing: set[asyncio.Task[None]] = set()
        """Owners still closing a link that was dropped."""

    def list_tools(self) -> concurrent.futures.Future[list[Tool]]:
        """Every tool the server offers (connecting first if need be)."""
        return self._run(_list_all_tools)

    def call_tool(
        self, name: str, arguments: dict[str, Any]
    ) -> concurrent.futures.Future[ToolResult]:
        """Calls a tool; the future holds its output (text, media, is_error).

        Cancelling the future cancels the request. A failure of the server
        or of the connection is an McpServerError naming it.
        """

        async def call(client: Client) -> ToolResult:
            replaced_before = self._bad_bytes.count
            result = tool_result(await client.call_tool(name, arguments))
            if self._bad_bytes.count > replaced_before and "\ufffd" in result.output:
                output = f"{result.output}\n{BAD_BYTES_NOTE}"
                result = msgspec.structs.replace(result, output=output)
            return result

        return self._run(call)

    def _run(
        self, work: Callable[[Client], Awaitable[T]]
    ) -> concurrent.futures.Future[T]:
        """Schedules ``work`` with a connected client on the link's loop."""
        with self._guard:
            if self._loop is None:
                self._loop = IoLoop(name=f"turnlog-mcp-{self._label}")
            loop = self._loop
        future = loop.submit(self._with_client(work))

        def after(done: concurrent.futures.Future[T]) -> None:
            # Runs in the cancelling thread, at once: the check is scheduled
            # before any call made after the cancel, so that call waits for
            # it (the cancelled request may take a while to unwind).
            if done.cancelled():
                with contextlib.suppress(RuntimeError):  # the loop is closed
                    loop.call_soon_threadsafe(self._suspect)

        future.add_done_callback(after)
        return future

    async def _with_client(self, work: Callable[[Client], Awaitable[T]]) -> T:
        opened = await self._connected()
        try:
            return await work(opened.client)
        except McpServerError:
            raise
        except Exception as error:
            if _broken(error):
                self._drop(opened)
            msg = f"MCP server {self._label!r} failed: {_describe(error)}"
            raise McpServerError(msg) from error

    async def _connected(self) -> _Open:
        if self._lock is None:  # made on the loop it will be used on
            self._lock = asyncio.Lock()
        async with self._lock:
            current = self._open
            if current is not None and current.check is not None:
                await asyncio.shield(current.check)  # drops a dead link
            if self._open is not None and not self._open.owner.done():
                return self._open
            self._open = None
            ready: asyncio.Future[_Open] = asyncio.get_running_loop().create_future()
            owner = asyncio.create_task(self._hold(ready))
            try:
                self._open = await ready
            except BaseException:
                owner.cancel()
                raise
            return self._open

    async def _hold(self, ready: asyncio.Future[_Open]) -> None:
        """Opens the connection, holds it until told to stop, then closes it."""
        stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                transport = self._open_transport()
                # The link keeps its own tool list; the SDK's response cache
                # would serve a stale one after a refresh.
                client = Client(transport, cache=None)
                await stack.enter_async_context(client)
                ready.set_result(_Open(client, stop, asyncio.current_task()))
                await stop.wait()
        except Exception as error:  # noqa: BLE001 - any failure to start is reported
            if not ready.done():
                failure = McpServerError(
                    f"MCP server {self._label!r} did not start: {_describe(error)}"
                )
                ready.set_exception(failure)

    def _suspect(self) -> None:
        """After a cancelled call: checks the link before it is used again."""
        opened = self._open
        if opened is not None and opened.check is None and not opened.owner.done():
            opened.check = asyncio.create_task(self._check(opened))

    async def _check(self, opened: _Open) -> None:
        """Drops the link unless the server answers a request in time.

        The request is tools/list, which every server with tools answers:
        ping is gone from the protocol as of 2026-07-28.
        """
        try:
            await asyncio.wait_for(opened.client.list_tools(), self._check_timeout)
        except Exception:  # noqa: BLE001 - no answer, whatever the reason
            self._drop(opened)
        else:
            opened.check = None

    def _open_transport(self) -> AbstractAsyncContextManager[Any]:
        target = self._target
        if target.kind == "stdio":
            return open_stdio(target, self._label, self._bad_bytes)
        return _http_transport(target.url, dict(target.headers))

    def _drop(self, opened: _Open) -> None:
        # The owner closes the broken link (and reaps its process); the
        # next call opens a new one.
        if self._open is opened:
            self._open = None
        opened.stop.set()
        self._closing.add(opened.owner)
        opened.owner.add_done_callback(self._closing.discard)

    def restart(self) -> None:
        """Closes the current connection; the next use opens a new one."""
        future = self._submit_if_running(self._close_open())
        if future is not None:
            with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
                future.result(timeout=CLOSE_TIMEOUT)

    async def _close_open(self) -> None:
        opened, self._open = self._open, None
        if opened is not None:
            opened.stop.set()
            self._closing.add(opened.owner)
        # Dropped links too: their processes are stopped before the loop is.
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=CLOSE_TIMEOUT)

    def close(self) -> None:
        """Closes the connection and stops the loop thread; reusable after."""
        self.restart()
        with self._guard:
            loop, self._loop = self._loop, None
            self._lock = None
        if loop is not None:
            loop.close()

    def _submit_if_running(
        self, coroutine: Awaitable[None]
    ) -> concurrent.futures.Future[None] | None:
        with self._guard:
            loop = self._loop
        if loop is None:
            coroutine.close()  # type: ignore[attr-defined]
            return None
        return loop.submit(coroutine)  # type: ignore[arg-type]


async def _list_all_tools(client: Client) -> list[Tool]:
    """Every tool the server offers, across pages."""
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    msg = f"the server's tool list has more than {MAX_LIST_PAGES} pages"
    raise McpServerError(msg)


def _broken(error: BaseException) -> bool:
    """Whether an error means the connection itself is gone."""
    if isinstance(error, MCPError):
        return error.code == CONNECTION_CLOSED
    return True  # a transport or OS error: do not trust the connection again


def _describe(error: BaseException) -> str:
    """One line naming what went wrong."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in error.exceptions)
    return f"{type(error).__name__}: {error}"
