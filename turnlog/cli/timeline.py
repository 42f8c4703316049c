"""How ``turnlog audit`` shows a session: its timeline and its chain verdict.

A timeline line holds the event's position (its place in the whole log),
the time (UTC, milliseconds), the event name and a short summary of the
payload; the JSON record holds the position, the event's sequence (its
place within its session: 1, 2, ...) and the whole payload, for machines. Text that
came from a model, a tool or a user is flattened to one line and its
control characters are escaped, so an audit cannot be garbled (or a
terminal steered) by what a session recorded.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import msgspec

from turnlog.domain.answers import AnswerAccepted, AnswerRejected
from turnlog.domain.chain import SEQ_FIELD
from turnlog.domain.compaction import (
    CompactionCancelled,
    CompactionFailed,
    CompactionStarted,
    ContextCompacted,
)
from turnlog.domain.events import event_name
from turnlog.domain.handoff import AgentHandedOff
from turnlog.domain.instructions import InstructionsEvaluated
from turnlog.domain.jobs import (
    JobFinished,
    JobRestarted,
    JobResultsTaken,
    JobResultTaken,
    JobStarted,
)
from turnlog.domain.lineage import SessionForked, SessionRewound
from turnlog.domain.model import final_text, tool_calls_in
from turnlog.domain.session import (
    ContextRewritten,
    InputQueued,
    ModelRouteChanged,
    QueuedInputDropped,
    QueuedInputTaken,
    SessionClosed,
    SessionCreated,
    SharedStateUpdated,
    ToolAllowedForSession,
    TurnAborted,
    TurnCompleted,
    TurnStarted,
    UsageRecorded,
)
from turnlog.domain.turn_events import (
    ApprovalDecided,
    ApprovalFailed,
    ApprovalRequested,
    ChildSessionStarted,
    HookContextAdded,
    InputAccepted,
    InputRejected,
    ModelStepCompleted,
    ModelStepFailed,
    ModelStepStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnOpened,
    WarningRaised,
)
from turnlog.projections.readers import TranscriptItem
from turnlog.store.verify import VerifyReport

SUMMARY_TEXT_LIMIT = 60
"""Characters of free text (prompts, outputs, answers) a summary line shows."""

_ENVELOPE_FIELDS = frozenset(
    {"originator_id", "originator_version", "timestamp", "originator_topic"}
)
"""Fields every stored event has; the JSON record keeps them out of ``data``."""

_USAGE_LABELS = {
    "input_tokens": "in",
    "cached_input_tokens": "cached",
    "cache_write_input_tokens": "cache write",
    "output_tokens": "out",
    "reasoning_tokens": "reasoning",
    "total_tokens": "total",
}


def format_time(moment: datetime, *, precise: bool = False) -> str:
    """``moment`` in UTC as ISO 8601 with a ``Z``: milliseconds, or microseconds."""
    spec = "microseconds" if precise else "milliseconds"
    return moment.astimezone(UTC).isoformat(timespec=spec).replace("+00:00", "Z")


def one_line(text: str, limit: int = SUMMARY_TEXT_LIMIT) -> str:
    """``text`` on one line, control characters escaped, cut to ``limit``."""
    flat = " ".join(text.split())
    safe = "".join(
        char if char.isprintable() else char.encode("unicode_escape").decode()
        for char in flat
    )
    return safe if len(safe) <= limit else safe[: limit - 3] + "..."


def _id(text: str) -> str:
    # Ids and names come from models and callers too: escaped, kept short.
    return one_line(text, 40)


def _quoted(text: str) -> str:
    return f'"{one_line(text)}"'


def _rewrite_note(event: InputAccepted | InputQueued) -> str:
    """Who rewrote input, and what the user wrote (if it was kept)."""
    if not event.rewritten_by:
        return ""
    hooks = ", ".join(_id(hook) for hook in event.rewritten_by)
    if event.original_text is None:
        return f" (rewritten by {hooks}; the original was not kept)"
    return f" (rewritten by {hooks} from {_quoted(event.original_text)})"


def readable_arguments(arguments: str) -> str:
    """Tool-call arguments (a JSON string from the model) on one short line.

    Valid JSON is re-spaced to read easily; anything else is shown as
    recorded.
    """
    try:
        text = json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        text = arguments
    return one_line(text)


def _usage(usage: dict[str, int] | None) -> str:
    if usage is None:
        return "usage unreported"
    counts = " ".join(
        f"{_USAGE_LABELS.get(key, key)}={value}" for key, value in usage.items()
    )
    return f"usage {counts}" if counts else "usage none"


def payload(event: object) -> dict[str, Any]:
    """The event's own fields, without the envelope every stored event has."""
    if not dataclasses.is_dataclass(event):
        return {}
    return {
        field.name: getattr(event, field.name)
        for field in dataclasses.fields(event)
        if field.name not in _ENVELOPE_FIELDS
    }


def format_duration(seconds: float) -> str:
    """A duration for people: ``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if seconds < 1:
        return f"{max(seconds, 0) * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Seen:
    """What earlier events of a session tell the summary of a later one.

    An ``ApprovalDecided`` records only ids, and a ``ModelStepCompleted``
    not the route its step was sent to: the tool, the time the request was
    made and the route come from the events that went before.
    """

    def __init__(self) -> None:
        self.tool_names: dict[str, str] = {}
        """Tool name by approval request id."""
        self.requested_at: dict[str, datetime] = {}
        """When each approval request was made, by request id."""
        self.routes: dict[tuple[str, int], str] = {}
        """Route of each model step, by (turn aggregate id, step)."""
        self.context_epoch = 0
        """Context rewrites so far."""

    def note(self, event: object) -> None:
        """Remembers what ``event`` tells about the events after it."""
        match event:
            case ApprovalRequested(request_id=request, name=name):
                self.tool_names[request] = name
                self.requested_at[request] = event.timestamp
            case ModelStepStarted(step=step, route=route):
                self.routes[(str(event.originator_id), step)] = route
            case ContextRewritten():
                self.context_epoch += 1

    def route(self, event: ModelStepCompleted | ModelStepFailed) -> str | None:
        """The route the step of ``event`` was sent to, if its start was seen."""
        return self.routes.get((str(event.originator_id), event.step))


def _step(step: int, route: str | None) -> list[str]:
    return [f"step {step}"] + ([f"route {one_line(route)}"] if route else [])


def _step_completed(event: ModelStepCompleted, seen: Seen) -> str:
    parts = [*_step(event.step, seen.route(event)), _usage(event.usage)]
    names = [call["name"] for call in tool_calls_in(event.output)]
    if names:
        parts.append("calls " + ", ".join(one_line(str(name), 30) for name in names))
    text = final_text(event.output)
    if text is not None:
        parts.append("says " + _quoted(text))
    return ", ".join(parts)


def _approval_decided(event: ApprovalDecided, seen: Seen) -> str:
    request = event.request_id
    tool = seen.tool_names.get(request)
    about = f"{_id(tool)}: " if tool is not None else ""
    asked = seen.requested_at.get(request)
    waited = (
        f", waited {format_duration((event.timestamp - asked).total_seconds())}"
        if asked is not None
        else ""
    )
    return (
        f"{about}{_id(event.decision)} by {_id(event.decided_by)}{waited} "
        f"(request {_id(request)})"
    )


def _session_summary(event: object, seen: Seen) -> str | None:
    """Events of the Session aggregate; None for any other event."""
    match event:
        case SessionCreated(agent_name=agent, model_route=route):
            parent = ""
            if event.parent_session:
                parent = (
                    f", child of {one_line(event.parent_session)} "
                    f"(call {_id(event.parent_call)})"
                )
            return f"agent {one_line(agent)}, route {one_line(route)}{parent}"
        case TurnStarted(number=number, submission_id=submission):
            return f"turn {number}, submission {_id(submission)}"
        case InputQueued(kind=kind, text=text, submission_id=submission):
            return (
                f"{_id(kind)} {_quoted(text)}{_rewrite_note(event)} queued to run "
                f"after the current turn (submission {_id(submission)})"
            )
        case QueuedInputTaken(submission_id=submission):
            return f"queued submission {_id(submission)} taken into the running turn"
        case QueuedInputDropped(submission_ids=dropped, reason=reason):
            ids = ", ".join(_id(s) for s in dropped)
            return f"{len(dropped)} queued input(s) dropped: {one_line(reason)} ({ids})"
        case ToolAllowedForSession(tool_name=tool, request_id=request):
            return (
                f"{_id(tool)} needs no approval for the rest of the session "
                f"(request {_id(request)})"
            )
        case UsageRecorded(step=step, route=route, kind=kind, usage=usage):
            return f"{_id(kind)} call, {', '.join(_step(step, route))}, {_usage(usage)}"
        case ContextRewritten(turn_number=turn, reasons=reasons):
            why = one_line(", ".join(reasons)) or "no reason given"
            return f"context epoch {seen.context_epoch} starts in turn {turn} ({why})"
        case TurnCompleted(number=number, final_output=output):
            answer = _quoted(output) if output is not None else "no final answer"
            return f"turn {number}, {answer}"
        case TurnAborted(number=number, reason=reason, failed=failed):
            how = "failed" if failed else "aborted"
            return f"turn {number} {how}: {one_line(reason)}"
        case SharedStateUpdated(changes=changes):
            return "set " + one_line(", ".join(sorted(changes)))
        case ModelRouteChanged(route=route):
            return f"route now {one_line(route)}"
        case AgentHandedOff(from_agent=source, to_agent=target, reason=reason):
            why = f": {_quoted(reason)}" if reason else ""
            return (
                f"{_id(source)} handed off to {_id(target)}{why} "
                f"(call {_id(event.call_id)}, route {one_line(event.model_route)})"
            )
        case JobStarted(job_id=job, name=name, call_id=call):
            again = ", may run again" if event.idempotent else ""
            return (
                f"job {_id(job)} ({one_line(name)}) started by call {_id(call)}{again}"
            )
        case JobFinished(job_id=job, name=name, output=output, is_error=is_error):
            verdict = (
                "interrupted" if event.interrupted else ("error" if is_error else "ok")
            )
            return f"job {_id(job)} ({one_line(name)}) {verdict}: {_quoted(output)}"
        case JobRestarted(job_id=job, reason=reason):
            return f"job {_id(job)} runs again: {one_line(reason)}"
        case JobResultsTaken(job_ids=jobs):
            return f"result of job(s) {', '.join(_id(j) for j in jobs)} taken in"
        case SessionClosed():
            return "closed for good"
        case SessionForked(source_session_id=source, source_position=at):
            return (
                f"forked from {_id(source)} at position {at} (sequence "
                f"{event.source_seq}, after its turn {event.turn_count})"
            )
        case SessionRewound(to_turn=turn, rewound_turns=turns):
            return f"rewound to after turn {turn}: turns {turns} set aside"
    return None


def _turn_summary(event: object, seen: Seen) -> str | None:
    """Events of a Turn aggregate; None for any other event."""
    match event:
        case TurnOpened(number=number):
            return f"turn {number} record opened"
        case InputAccepted(kind=kind, text=text, attachments=attachments):
            files = f" (+{len(attachments)} attachments)" if attachments else ""
            return f"{_id(kind)} {_quoted(text)}{_rewrite_note(event)}{files}"
        case InputRejected(reason=reason):
            return f"input refused: {one_line(reason)}"
        case ModelStepStarted(step=step, route=route):
            return ", ".join(_step(step, route))
        case InstructionsEvaluated(step=step, instructions=instructions):
            return f"step {step} sent with instructions {_quoted(instructions)}"
        case ModelStepCompleted():
            return _step_completed(event, seen)
        case ModelStepFailed(step=step, error_type=error_type, message=message):
            where = ", ".join(_step(step, seen.route(event)))
            return f"{where}, {one_line(error_type)}: {one_line(message)}"
        case ToolCallStarted(name=name, arguments=arguments, call_id=call_id):
            return f"{_id(name)} {readable_arguments(arguments)} (call {_id(call_id)})"
        case ToolCallFinished(name=name, skipped=skipped) if skipped:
            return f"{_id(name)} skipped, not run ({one_line(skipped)})"
        case ToolCallFinished(name=name, output=output, is_error=is_error):
            verdict = "error" if is_error else "ok"
            return f"{_id(name)} {verdict}: {_quoted(output)}"
        case ApprovalRequested(name=name, arguments=arguments, request_id=request):
            return (
                f"{_id(name)} {readable_arguments(arguments)} (request {_id(request)})"
            )
        case ApprovalDecided():
            return _approval_decided(event, seen)
        case ApprovalFailed(request_id=request, error=error):
            return (
                f"request {_id(request)} not decided: the approval provider "
                f"failed: {one_line(error)}"
            )
        case CompactionStarted(compaction_id=compaction, reason=reason):
            return f"compaction {_id(compaction)} started: {one_line(reason)}"
        case ContextCompacted(compaction_id=compaction, items=items, usage=usage):
            return (
                f"compaction {_id(compaction)} done: the context is now "
                f"{len(items)} item(s), {_usage(usage)}"
            )
        case CompactionFailed(compaction_id=compaction, message=message):
            return (
                f"compaction {_id(compaction)} failed, context unchanged: "
                f"{one_line(message)}"
            )
        case CompactionCancelled(compaction_id=compaction):
            return f"compaction {_id(compaction)} cancelled, context unchanged"
        case HookContextAdded(hook=hook, text=text):
            return f"hook {_id(hook)} added context {_quoted(text)}"
        case JobResultTaken(job_id=job, output=output):
            return f"the model is told job {_id(job)}'s result {_quoted(output)}"
        case WarningRaised(message=message):
            return one_line(message)
        case AnswerRejected(attempt=attempt, rejected_by=by, reason=reason):
            ends = ", the turn ends" if event.final else ", sent back"
            return f"answer {attempt} rejected by {_id(by)}{ends}: {one_line(reason)}"
        case AnswerAccepted(output=output):
            return f"answer accepted: {one_line(json.dumps(output))}"
        case ChildSessionStarted(call_id=call_id, child_session=child, agent=agent):
            return (
                f"call {_id(call_id)} runs agent {one_line(agent)} "
                f"as child session {one_line(child)}"
            )
    return None


def summarize(event: object, seen: Seen | None = None) -> str:
    """A short, one-line summary of a domain event's payload.

    Args:
        event: the domain event.
        seen: what the session's earlier events said (tool names, approval
            request times, step routes); without it those are left out.
    """
    memory = Seen() if seen is None else seen
    summary = _session_summary(event, memory)
    if summary is None:
        summary = _turn_summary(event, memory)
    if summary is not None:
        return summary
    # An event this CLI does not know yet (added after it was written):
    # its fields still say what happened.
    fields = payload(event)
    fields.pop("session_id", None)
    return one_line(", ".join(f"{key}={value}" for key, value in fields.items()))


class Timeline:
    """Formats a session's events in log order, as lines or JSON records.

    It remembers what earlier events said (see :class:`Seen`), so feed it
    one session's events, oldest first.
    """

    def __init__(self) -> None:
        self.seen = Seen()

    def line(self, item: TranscriptItem, name_width: int = 18) -> str:
        """One readable line: position in the log, time, event name, summary."""
        event = item.event()
        self.seen.note(event)
        summary = summarize(event, self.seen)
        return (
            f"{item.position:>6}  {format_time(event.timestamp)}  "
            f"{item.name:<{name_width}}  {summary}"
        ).rstrip()

    @staticmethod
    def record(item: TranscriptItem) -> str:
        """One JSON line: position in the log, sequence in the session, time,
        event name, payload."""
        event = item.event()
        seq = getattr(event, SEQ_FIELD, None)  # None in a log older than the chain
        record = {
            "position": item.position,
            "sequence": seq if isinstance(seq, int) else None,
            "time": format_time(event.timestamp, precise=True),
            "event": item.name,
            "data": payload(event),
        }
        return msgspec.json.encode(record).decode()


def verdict(report: VerifyReport) -> str:
    """A session's chain verdict on one line: ok, or its first bad event."""
    name = one_line(report.session_id, 200)
    problem = report.problem
    if problem is None:
        return f"{name}: ok, {report.events} events checked"
    detail = one_line(problem.detail, 200)
    if problem.kind == "truncated" and not problem.position:
        return f"{name}: FAILED, truncated: {detail}"
    sequence = "none" if problem.sequence is None else str(problem.sequence)
    what = "after" if problem.kind == "truncated" else "event at"
    return (
        f"{name}: FAILED, {problem.kind} {what} log position {problem.position} "
        f"(sequence {sequence}, {one_line(event_name(problem.topic), 80)}): {detail}"
    )


def verify_summary(sessions: int, failed: int, events: int, seconds: float) -> str:
    """The last line of ``audit --verify --all``: verdicts and speed."""
    rate = events / seconds if seconds > 0 else 0.0
    return (
        f"{sessions} session{'s' if sessions != 1 else ''}, {failed} failed; "
        f"{events:,} events checked in {seconds:.2f} s ({rate:,.0f} events/s)"
    )


def damage_verdict(location: str, damage: str, *, as_json: bool) -> str:
    """The verdict on a log file SQLite finds damaged, on one line."""
    if as_json:
        record = {"log": location, "ok": False, "damaged": damage}
        return msgspec.json.encode(record).decode()
    return f"the log at {location} is damaged: {one_line(damage, 500)}"


def verdict_record(report: VerifyReport) -> str:
    """A session's chain verdict as one JSON line."""
    problem = report.problem
    record = {
        "session_id": report.session_id,
        "ok": report.ok,
        "events": report.events,
        "problem": None if problem is None else msgspec.to_builtins(problem),
    }
    return msgspec.json.encode(record).decode()
