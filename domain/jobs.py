"""Background jobs: work a tool call starts that outlives the call.

A tool starts a job (``ToolContext.start_job``) and returns at once; the
job runs on its own and its result comes back later. What the log holds:

- ``JobStarted`` (Session): the job, and the tool call that started it.
  Durable before the job's work begins, as ``ToolCallStarted`` is before
  a tool runs.
- ``JobFinished`` (Session): its result text (or error), cut to the
  starting tool's output limit; or ``interrupted``: the job's process
  stopped (a crash, a runtime closed) or its session was closed before it
  finished. The result then waits for the model.
- ``JobResultTaken`` (Turn) with ``JobResultsTaken`` (Session): a model
  step took the waiting results into its context, just before it called
  the model, as a steer is taken; the Turn event carries the text, since
  the model's context is folded from Turn events alone.
- ``JobRestarted`` (Session): a reopened session ran a job declared
  idempotent again, after its process stopped.

A job's result never starts a turn: while the session is idle it waits
for the next turn's first model step.
"""

from __future__ import annotations

from typing import Any

from turnlog.domain.errors import SessionClosedError
from turnlog.domain.events import TurnlogEvent

INTERRUPTED_JOB_OUTPUT = "interrupted; outcome unknown"
"""What an unfinished job of a stopped process is recorded as."""
CLOSED_JOB_OUTPUT = "interrupted: the session was closed before the job finished"
"""What a job still running when its session closes is recorded as."""


class JobStarted(TurnlogEvent):
    """A tool call started a background job (before the job's work begins)."""

    job_id: str
    name: str
    """The name the tool gave the job."""
    turn_id: str
    call_id: str
    """The tool call that started it."""
    tool: str
    """The name of that call's tool."""
    idempotent: bool
    """Whether the job may run again after its process stopped."""
    arguments: list[Any]
    """The job's arguments (JSON data), kept for an idempotent job's re-run;
    empty for any other job (its arguments are never recorded)."""

    def apply(self, aggregate: Any) -> None:
        job = {
            "name": self.name,
            "turn_id": self.turn_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "idempotent": self.idempotent,
            "arguments": list(self.arguments),
        }
        aggregate.running_jobs = {**aggregate.running_jobs, self.job_id: job}


class JobRestarted(TurnlogEvent):
    """An idempotent job cut off by a stopped process runs again."""

    job_id: str
    reason: str


class JobFinished(TurnlogEvent):
    """A background job ended: its result waits for the model's next step."""

    job_id: str
    name: str
    output: str
    """The job's result text, or its error (cut to the tool's output limit)."""
    is_error: bool
    interrupted: bool = False
    """True if the job never finished: its process stopped, or its session
    was closed (``output`` says which)."""

    def apply(self, aggregate: Any) -> None:
        running = dict(aggregate.running_jobs)
        running.pop(self.job_id, None)
        aggregate.running_jobs = running
        result = {
            "job_id": self.job_id,
            "name": self.name,
            "output": self.output,
            "is_error": self.is_error,
        }
        aggregate.job_results = [*aggregate.job_results, result]


class JobResultsTaken(TurnlogEvent):
    """The running turn took waiting job results into the model's context."""

    job_ids: list[str]
    turn_id: str

    def apply(self, aggregate: Any) -> None:
        taken = set(self.job_ids)
        aggregate.job_results = [
            r for r in aggregate.job_results if r["job_id"] not in taken
        ] or ()


class JobResultTaken(TurnlogEvent):
    """A job's result entered this turn's model context (a developer note)."""

    job_id: str
    name: str
    output: str
    is_error: bool


def job_note(event: JobResultTaken) -> str:
    """The text the model reads for a job's result."""
    how = "failed" if event.is_error else "finished"
    return f"Background job {event.job_id} ({event.name}) {how}:\n{event.output}"


def start_job(session: Any, **fields: Any) -> None:
    """Records that a job started (``fields`` as :class:`JobStarted`'s)."""
    if session.closed:
        msg = f"session {session.session_id!r} is closed: job not started"
        raise SessionClosedError(msg)
    session.trigger_event(JobStarted, **fields)


def finish_job(
    session: Any,
    job_id: str,
    output: str,
    *,
    is_error: bool,
    interrupted: bool = False,
) -> bool:
    """Records a running job's end; False (nothing recorded) if it is not
    running (the session was closed, or a reopened session settled it)."""
    job = session.running_jobs.get(job_id)
    if job is None:
        return False
    session.trigger_event(
        JobFinished,
        job_id=job_id,
        name=job["name"],
        output=output,
        is_error=is_error,
        interrupted=interrupted,
    )
    return True


def interrupt_jobs(session: Any, output: str) -> None:
    """Records every running job of ``session`` as interrupted."""
    for job_id in list(session.running_jobs):
        finish_job(session, job_id, output, is_error=True, interrupted=True)


def take_job_results(session: Any, turn: Any) -> None:
    """Takes the waiting job results into the running ``turn``'s context."""
    results = list(session.job_results)
    if not results:
        return
    for result in results:
        turn.trigger_event(
            JobResultTaken,
            job_id=result["job_id"],
            name=result["name"],
            output=result["output"],
            is_error=result["is_error"],
        )
    session.trigger_event(
        JobResultsTaken,
        job_ids=[r["job_id"] for r in results],
        turn_id=str(turn.id),
    )
