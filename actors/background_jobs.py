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
and not finished, and opening the session again settles it
(:func:`recover_jobs`): recorded as interrupted, or, for a job declared
idempotent, run again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import pykka

from turnlog.actors.io_loop import IoLoop
from turnlog.actors.session_parts import CanRecordSessions
from turnlog.actors.session_state import SessionState
from turnlog.actors.shared_state_writer import record_for_tool
from turnlog.domain.errors import SessionClosedError, TurnlogError, UsageError
from turnlog.domain.inputs import check_json_data
from turnlog.domain.jobs import (
    INTERRUPTED_JOB_OUTPUT,
    JobRestarted,
    finish_job,
    start_job,
)
from turnlog.domain.session import Session
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
        *,
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

    def decide() -> list[Any]:
        start_job(
            state.session,
            job_id=order.job_id,
            name=order.name,
            turn_id=order.call[0],
            call_id=order.call[1],
            tool=order.tool,
            idempotent=order.idempotent,
            arguments=list(order.arguments) if order.idempotent else [],
        )
        return [state.session]

    if record_for_tool(state, order.waiter, order.call, decide, "job not started"):
        _launch(state, order.job_id, order.work, order.arguments, order.max_output)
        order.waiter.set_result(order.job_id)


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


def recover_jobs(
    store: CanRecordSessions, session: Session, tools: Mapping[str, Any]
) -> None:
    """Settles the jobs a stopped process left running, before the actor starts.

    Runs with crash recovery (``revive.recover_turn``), on the opener's
    thread: a job the log shows running was cut off, since its process
    stopped. One declared idempotent, whose tool still declares it, runs
    again (``JobRestarted``; the actor starts it, see
    :func:`start_restarted_jobs`); every other one is recorded as
    interrupted, its outcome unknown, and never runs again.
    """
    if session.closed:
        return
    for job_id, job in list(session.running_jobs.items()):
        if _rerunnable(tools, job) is None:
            finish_job(
                session, job_id, INTERRUPTED_JOB_OUTPUT, is_error=True, interrupted=True
            )
        else:
            session.trigger_event(JobRestarted, job_id=job_id, reason=RESTART_REASON)
    if session.pending_events:
        store.save(session)


def start_restarted_jobs(state: SessionState) -> None:
    """Runs the jobs the log shows running as a new actor starts.

    A new actor runs no job yet (a session with a running job never
    passivates), so these are the ones :func:`recover_jobs` restarted. One
    that cannot run here (its tool no longer declares it) is recorded as
    interrupted instead.
    """
    session = state.session
    if not session.running_jobs or session.closed:
        return
    agent = state.agent
    for job_id, job in dict(session.running_jobs).items():
        rerun = _rerunnable(agent.tools_by_name, job)
        if rerun is not None:
            work, tool = rerun
            limit = (
                agent.max_tool_output if tool.max_output is None else tool.max_output
            )
            _launch(state, job_id, work, tuple(job["arguments"]), limit)
            continue
        try:
            state.record(functools.partial(_interrupted, session, job_id))
        except TurnlogError as error:  # left running: the next opening settles it
            logger.warning("session %s: job %s: %s", state.session_id, job_id, error)


def _interrupted(session: Session, job_id: str) -> list[Any]:
    finish_job(session, job_id, INTERRUPTED_JOB_OUTPUT, is_error=True, interrupted=True)
    return [session]


def _rerunnable(
    tools: Mapping[str, Any], job: Mapping[str, Any]
) -> tuple[Callable[..., Any], Any] | None:
    """The work of an idempotent job and its tool, if the tool still declares it."""
    if not job["idempotent"]:
        return None
    tool = tools.get(job["tool"])
    work = getattr(tool, "jobs", {}).get(job["name"])
    return None if tool is None or not callable(work) else (work, tool)


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
    its output text and whether it is an error. Never raises: a job that
    cannot even start (bad arguments, the process exiting) reports that
    as its error."""
    try:
        if inspect.iscoroutinefunction(work):
            _await_on(io_loop, work(*arguments), done)
        else:
            _run_on_thread(io_loop, job_id, work, arguments, done)
    except Exception as error:  # noqa: BLE001 - reported as the job's error
        done(_failure(error), True)


def _run_on_thread(
    io_loop: IoLoop,
    job_id: str,
    work: Callable[..., Any],
    arguments: tuple[Any, ...],
    done: Callable[[str, bool], None],
) -> None:
    def body() -> None:
        try:
            value = work(*arguments)
            if inspect.isawaitable(value):  # a plain function gave a coroutine
                _await_on(io_loop, value, done)
                return
        except Exception as error:  # noqa: BLE001 - reported as the job's error
            done(_failure(error), True)
            return
        done(*_outcome(value))

    threading.Thread(target=body, name=f"turnlog-{job_id}", daemon=True).start()


def _await_on(
    io_loop: IoLoop, awaitable: Any, done: Callable[[str, bool], None]
) -> None:
    async def wait() -> Any:
        return await awaitable

    coroutine = wait()
    try:
        future = io_loop.submit(coroutine)
    except BaseException:  # the loop is closed: never awaited, closed here
        coroutine.close()
        close = getattr(awaitable, "close", None)
        if callable(close):
            close()
        raise

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
