"""The ToolExecutor: runs tool calls off every actor's thread.

Sync handlers run on a bounded thread pool, async handlers on the I/O
loop; at most ``max_concurrency`` calls run at once and the rest wait in
FIFO order. Each call has an optional timeout. A handler that raises, a
timeout or a cancelled call becomes an error output: a tool never crashes
the turn. The actor's own handlers only schedule work, so it never blocks.
Every output is cut to the call's limit (``RunTool.max_output``, see
``turnlog.domain.tool_output``) before the session hears of it.

A sync handler cannot be stopped once it runs; after a timeout, or after
the runtime closed, its thread finishes in the background and its result
is dropped without a word: the session it was for is gone or has moved on.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import logging
from collections import deque
from typing import Any

import pykka

from turnlog.actors.io_loop import IoLoop
from turnlog.actors.messages import CancelTools, RunTool, ToolDone, ToolTimedOut
from turnlog.domain.tool_output import DEFAULT_MAX_TOOL_OUTPUT, limit_output
from turnlog.domain.turn_facts import ToolFinished

DEFAULT_MAX_CONCURRENCY = 16

logger = logging.getLogger(__name__)


class _Call:
    __slots__ = ("future", "request", "timer", "token")

    def __init__(self, token: int, request: RunTool) -> None:
        self.token = token
        self.request = request
        self.future: concurrent.futures.Future[Any] | None = None
        self.timer: Any = None


class ToolExecutorActor(pykka.ThreadingActor):
    """Runs tool calls concurrently, up to a limit, with timeouts."""

    # A runtime left open must not hold its process at exit (see Runtime).
    use_daemon_thread = True

    def __init__(
        self, io_loop: IoLoop, max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    ) -> None:
        super().__init__()
        self._io_loop = io_loop
        self._max = max_concurrency
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_concurrency, thread_name_prefix="turnlog-tool"
        )
        self._tokens = itertools.count(1)
        self._waiting: deque[_Call] = deque()
        self._running: dict[int, _Call] = {}

    def on_receive(self, message: Any) -> Any:
        match message:
            case RunTool():
                self._waiting.append(_Call(next(self._tokens), message))
                self._pump()
            case ToolDone(token=token):
                call = self._running.pop(token, None)
                if call is not None and call.timer is not None:
                    call.timer.cancel()
                self._pump()
            case ToolTimedOut(token=token):
                call = self._running.pop(token, None)
                if call is not None:
                    timeout = call.request.tool.timeout
                    self._finish(call, f"tool timed out after {timeout:g} s", True)
                    if call.future is not None:
                        call.future.cancel()
                self._pump()
            case CancelTools(key=key):
                self._waiting = deque(c for c in self._waiting if c.request.key != key)
                for token, call in list(self._running.items()):
                    if call.request.key == key:
                        del self._running[token]
                        _cancel_running(call.request)
                        if call.future is not None:
                            call.future.cancel()
                        if call.timer is not None:
                            call.timer.cancel()
                self._pump()
            case _:
                msg = f"ToolExecutor got an unknown message: {message!r}"
                raise TypeError(msg)

    def _pump(self) -> None:
        while self._waiting and len(self._running) < self._max:
            call = self._waiting.popleft()
            self._start(call)

    def _start(self, call: _Call) -> None:
        request = call.request
        tool = request.tool
        me = self.actor_ref
        if tool.is_async:
            call.future = self._io_loop.submit(
                tool.run_async(request.arguments, request.context)
            )
        else:
            try:
                call.future = self._pool.submit(
                    tool.run_sync, request.arguments, request.context
                )
            except RuntimeError:  # the interpreter is exiting: no new threads
                _reply(request, "tool not run: the process is exiting", True)
                return
        self._running[call.token] = call
        token = call.token

        def done(future: concurrent.futures.Future[Any]) -> None:
            # The result goes straight to the session (one hop, not two via
            # this actor); this actor only frees the slot. If a timeout was
            # reported first, the session keeps that and drops this.
            if not future.cancelled():
                output, is_error, media = _outcome(future)
                _reply(request, output, is_error, media)
            with contextlib.suppress(pykka.ActorDeadError):  # closed meanwhile
                me.tell(ToolDone(token, future))

        call.future.add_done_callback(done)
        if tool.timeout is not None:
            call.timer = self._io_loop.call_later(
                tool.timeout, lambda: me.tell(ToolTimedOut(token))
            )

    def _finish(self, call: _Call, output: str, is_error: bool) -> None:
        if call.timer is not None:
            call.timer.cancel()
        _reply(call.request, output, is_error)

    def on_stop(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        _traceback: object,
    ) -> None:
        # Every call that will not report by itself is answered here, or its
        # turn would wait for it forever. A running call still reports from
        # its done callback.
        name = getattr(exception_type, "__name__", "error")
        reason = f"not run: the tool executor failed: {name}: {exception_value}"
        waiting, self._waiting = self._waiting, deque()
        for call in waiting:
            self._finish(call, reason, True)
        self.on_stop()


def _cancel_running(request: RunTool) -> None:
    # A running sync call cannot be stopped, but a tool that runs work of
    # its own (an agent tool's child session) can be told to stop it.
    cancel = getattr(request.tool, "cancel", None)
    if callable(cancel):
        try:
            cancel(request.context)
        except Exception:  # a tool's cancel must not stop the executor
            logger.warning("could not cancel %r", request.tool, exc_info=True)


def _reply(
    request: RunTool,
    output: str,
    is_error: bool,
    media: tuple[dict[str, str], ...] = (),
) -> None:
    # The model sees (and the log keeps) no more than the call's limit.
    limit = request.max_output or DEFAULT_MAX_TOOL_OUTPUT
    output = limit_output(output, limit)
    # A turn stopped (its session closed, or the runtime) wants no result.
    with contextlib.suppress(pykka.ActorDeadError):
        request.reply_to.tell(
            ToolFinished(request.turn, request.call_id, output, is_error, media=media)
        )


def _outcome(
    future: concurrent.futures.Future[Any],
) -> tuple[str, bool, tuple[dict[str, str], ...]]:
    if future.cancelled():
        return "tool call was cancelled", True, ()
    error = future.exception()
    if error is not None:
        return f"tool failed: {type(error).__name__}: {error}", True, ()
    result = future.result()
    # Media is optional: a tool's own outcome type may not carry any.
    media = tuple(dict(part) for part in getattr(result, "media", ()))
    return str(result.output), bool(result.is_error), media
