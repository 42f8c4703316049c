"""Background jobs: started by a tool call, run on their own, reported later.

A tool calls ``ToolContext.start_job``: its :class:`JobStarter` tells the
session actor (the single writer) to record ``JobStarted``, and only once
that is durable does the job's work begin (:func:`run_job`): a plain
function on a daemon thread of its own, a coroutine function on the I/O
loop, so a job never holds a tool slot nor the session's thread. The tool
gets the job's id and returns. When the work ends, :class:`JobDone` goes to
the session actor, which records ``JobFinished`` (the output cut to the
starting tool's limit); the next model step takes the result in
(turnlog.domain.jobs). A session with a job running does not passivate,
so the result always finds the actor that started the job.

A job's work cannot be stopped once it runs. If its session is closed
first, the close records it as interrupted and its result is dropped; if
the runtime closes (or the process dies) first, the log shows it started
and not finished, and the session's next actor settles it
(:func:`settle_leftover_jobs`): recorded as interrupted, or, for a job
declared idempotent, run again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import pykka

from turnlog.actors.io_loop import IoLoop
from turnlog.actors.session_state import SessionState
from turnlog.domain.errors import SessionClosedError, TurnlogError, UsageError
from turnlog.domain.inputs import check_json_data
from turnlog.domain.jobs import (
    INTERRUPTED_JOB_OUTPUT,
    JobRestarted,
    finish_job,
    start_job,
)
from turnlog.domain.tool_output import limit_output

logger = logging.getLogger(__name__)

RESTART_REASON = "the process stopped while the job ran; it is idempotent"


class StartJob(msgspec.Struct, frozen=True):
    """A tool call's job to record as started, then run (told; ``waiter``
    gets the job id once ``JobStarted`` is durable, or the refusal)."""

    job_id: str
    name: str
    work: Callable[..., Any]
    arguments: tuple[Any, ...]
    idempotent: bool
    call: tuple[str, str]
    """(turn id, call id) of the call that starts it."""
    tool: str
    max_output: int
    waiter: concurrent.futures.Future[str]


class JobDone(msgspec.Struct, frozen=True):
    """A job's work ended with ``output`` (an error if ``is_error``)."""

    job_id: str
    output: str
    is_error: bool


class JobStarter:
    """A tool call's way to start background jobs (see ToolContext.start_job)."""

    def __init__(
        self,
        session: pykka.ActorRef[Any],
        session_id: str,
        call: tuple[str, str],
        tool: str,
        declared: Mapping[str, Callable[..., Any]],
        max_output: int,
    ) -> None:
        self._session = session
        self._session_id = session_id
        self._call = call
        self._tool = tool
        self._declared = declared
        self._max_output = max_output

    def start(
        self,
        name: str,
        work: Callable[..., Any],
        arguments: tuple[Any, ...],
        idempotent: bool,
    ) -> str:
        """Records the job as started and starts it; returns its id."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._send(name, work, arguments, idempotent).result()
        msg = (
            "start_job() would block the event loop: in an async tool, use "
            "'await context.start_job_async(...)'"
        )
        raise UsageError(msg)

    async def start_async(
        self,
        name: str,
        work: Callable[..., Any],
        arguments: tuple[Any, ...],
        idempotent: bool,
    ) -> str:
        """``start`` for async tools: waits without blocking the loop."""
        future = self._send(name, work, arguments, idempotent)
        return await asyncio.wrap_future(future)

    def _send(
        self,
        name: str,
        work: Callable[..., Any],
        arguments: tuple[Any, ...],
        idempotent: bool,
    ) -> concurrent.futures.Future[str]:
        if not isinstance(name, str) or not name.strip():
            msg = f"a job's name must be a non-empty str, not {name!r}"
            raise UsageError(msg)
        if not callable(work):
            msg = f"a job's work must be callable, not {type(work).__name__}"
            raise UsageError(msg)
        if idempotent:
            if self._declared.get(name) is not work:
                msg = (
                    f"an idempotent job must be declared on its tool, as "
                    f"function_tool(jobs={{{name!r}: work}}), so that a session "
                    "reopened after a crash can run it again"
                )
                raise UsageError(msg)
            check_json_data(list(arguments), "an idempotent job's arguments")
        waiter: concurrent.futures.Future[str] = concurrent.futures.Future()
        job_id = f"job_{uuid.uuid4().hex[:12]}"
        order = StartJob(
            job_id,
            name,
            work,
            tuple(arguments),
            idempotent,
            self._call,
            self._tool,
            self._max_output,
            waiter,
        )
        try:
            self._session.tell(order)
        except pykka.ActorDeadError:
            msg = f"session {self._session_id!r} is closed: job not started"
            raise SessionClosedError(msg) from None
        return waiter


def record_job_start(state: SessionState, order: StartJob) -> None:
    """Records ``JobStarted`` on the session's thread, then starts the work."""
    waiter = order.waiter
    try:
        state.check_open()
        _check_call_open(state, *order.call)
        session = state.session

        def decide() -> list[Any]:
            start_job(
                session,
                job_id=order.job_id,
                name=order.name,
                turn_id=order.call[0],
                call_id=order.call[1],
                tool=order.tool,
                idempotent=order.idempotent,
                arguments=list(order.arguments) if order.idempotent else [],
            )
            return [session]

        state.record(decide)
    except TurnlogError as refused:
        waiter.set_exception(refused)
        return
    except BaseException as error:  # the actor fails; the tool must not wait
        waiter.set_exception(error)
        raise
    _launch(state, order.job_id, order.work, order.arguments, order.max_output)
    waiter.set_result(order.job_id)


def record_job_done(state: SessionState, done: JobDone) -> None:
    """Records a job's end (told by its worker, so it never raises)."""
    session = state.session
    if done.job_id not in session.running_jobs:
        # Its session was closed (which recorded it as interrupted), or a
        # reopened session settled it: the result has nowhere to go.
        logger.info("session %s: dropped job %s", state.session_id, done.job_id)
        return

    def decide() -> list[Any]:
        finish_job(session, done.job_id, done.output, is_error=done.is_error)
        return [session]

    try:
        state.record(decide)
    except TurnlogError as error:  # the log shows it running: settled on reopen
        logger.warning(
            "session %s: job %s not recorded: %s", state.session_id, done.job_id, error
        )


def settle_leftover_jobs(state: SessionState) -> None:
    """Settles the jobs the log shows running when an actor starts.

    A new actor runs no job yet (a session with a running job never
    passivates), so each one was cut off: its process stopped. A job
    declared idempotent whose tool still declares it runs again; every
    other one is recorded as interrupted, its outcome unknown.
    """
    session = state.session
    leftovers = dict(session.running_jobs)
    if not leftovers or session.closed:
        return
    reruns: list[tuple[str, Callable[..., Any], tuple[Any, ...], int]] = []

    def decide() -> list[Any]:
        for job_id, job in leftovers.items():
            rerun = _rerunnable(state, job)
            if rerun is None:
                finish_job(
                    session,
                    job_id,
                    INTERRUPTED_JOB_OUTPUT,
                    is_error=True,
                    interrupted=True,
                )
            else:
                session.trigger_event(
                    JobRestarted, job_id=job_id, reason=RESTART_REASON
                )
                reruns.append((job_id, rerun[0], tuple(job["arguments"]), rerun[1]))
        return [session]

    try:
        state.record(decide)
    except TurnlogError as error:  # left as it is: the next actor tries again
        logger.warning("session %s: leftover jobs: %s", state.session_id, error)
        return
    for job_id, work, arguments, limit in reruns:
        _launch(state, job_id, work, arguments, limit)


def _rerunnable(
    state: SessionState, job: Mapping[str, Any]
) -> tuple[Callable[..., Any], int] | None:
    """The work and output limit of an idempotent job, if still declared."""
    if not job["idempotent"]:
        return None
    tool = state.agent.tools_by_name.get(job["tool"])
    work = getattr(tool, "jobs", {}).get(job["name"])
    if tool is None or not callable(work):
        return None
    limit = tool.max_output
    return work, state.agent.max_tool_output if limit is None else limit


def _launch(
    state: SessionState,
    job_id: str,
    work: Callable[..., Any],
    arguments: tuple[Any, ...],
    max_output: int,
) -> None:
    session = state.actor_ref

    def done(output: str, is_error: bool) -> None:
        try:
            session.tell(JobDone(job_id, limit_output(output, max_output), is_error))
        except pykka.ActorDeadError:  # runtime closed: settled on reopen
            logger.info("job %s ended after its session stopped", job_id)

    run_job(state.services.io_loop, job_id, work, arguments, done)


def run_job(
    io_loop: IoLoop,
    job_id: str,
    work: Callable[..., Any],
    arguments: tuple[Any, ...],
    done: Callable[[str, bool], None],
) -> None:
    """Runs ``work(*arguments)`` off every actor's thread; ``done`` gets
    its output text and whether it is an error."""
    if inspect.iscoroutinefunction(work):
        _await_on(io_loop, work(*arguments), done)
        return

    def body() -> None:
        try:
            value = work(*arguments)
        except Exception as error:  # noqa: BLE001 - reported as the job's error
            done(_failure(error), True)
            return
        if inspect.isawaitable(value):
            _await_on(io_loop, value, done)
            return
        done(*_outcome(value))

    threading.Thread(target=body, name=f"turnlog-{job_id}", daemon=True).start()


def _await_on(
    io_loop: IoLoop, awaitable: Any, done: Callable[[str, bool], None]
) -> None:
    async def wait() -> Any:
        return await awaitable

    future = io_loop.submit(wait())

    def finished(future: concurrent.futures.Future[Any]) -> None:
        if future.cancelled():  # the loop stopped: the runtime closed
            return
        error = future.exception()
        if error is not None:
            done(_failure(error), True)
        else:
            done(*_outcome(future.result()))

    future.add_done_callback(finished)


def _failure(error: BaseException) -> str:
    return f"job failed: {type(error).__name__}: {error}"


def _outcome(value: Any) -> tuple[str, bool]:
    """A job's return value as text: a str as is, a ToolResult's output,
    anything else as JSON (or its ``str`` if it is not JSON data)."""
    if isinstance(value, str):
        return value, False
    output = getattr(value, "output", None)
    if isinstance(output, str):
        return output, bool(getattr(value, "is_error", False))
    try:
        return msgspec.json.encode(value).decode(), False
    except (TypeError, msgspec.EncodeError):
        return str(value), False


def _check_call_open(state: SessionState, turn_id: str, call_id: str) -> None:
    turn = state.turn
    if turn is None or str(turn.id) != turn_id or call_id not in turn.open_calls:
        msg = (
            f"tool call {call_id!r} is no longer running (it timed out, or its "
            "turn ended): job not started"
        )
        raise UsageError(msg)
