"""How ``turnlog audit`` shows a stored event: a readable line or a JSON record.

A line holds the log position, the time (UTC, milliseconds), the event name
and a short summary of the payload; the JSON record holds the whole payload
for machines. Text that came from a model, a tool or a user is flattened to
one line and its control characters are escaped, so an audit cannot be
garbled (or a terminal steered) by what a session recorded.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from turnlog.domain.model import final_text, tool_calls_in
from turnlog.domain.session import (
    ModelRouteChanged,
    SessionClosed,
    SessionCreated,
    SharedStateUpdated,
    TurnAborted,
    TurnCompleted,
    TurnStarted,
    UsageRecorded,
)
from turnlog.domain.turn import (
    ApprovalDecided,
    ApprovalRequested,
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
from turnlog.readers import TranscriptItem

SUMMARY_TEXT_LIMIT = 60
"""Characters of free text (prompts, outputs, answers) a summary line shows."""

_ENVELOPE_FIELDS = frozenset(
    {"originator_id", "originator_version", "timestamp", "originator_topic"}
)
"""Fields every stored event has; the JSON record keeps them out of ``data``."""

_USAGE_LABELS = {
    "input_tokens": "in",
    "cached_input_tokens": "cached",
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


def _step_completed(event: ModelStepCompleted) -> str:
    parts = [f"step {event.step}", _usage(event.usage)]
    names = [call["name"] for call in tool_calls_in(event.output)]
    if names:
        parts.append("calls " + ", ".join(one_line(str(name), 30) for name in names))
    text = final_text(event.output)
    if text is not None:
        parts.append("says " + _quoted(text))
    return ", ".join(parts)


def summarize(event: object, tool_names: Mapping[str, str] | None = None) -> str:
    """A short, one-line summary of a domain event's payload.

    Args:
        event: the domain event.
        tool_names: tool name by approval request id, to name the tool an
            ``ApprovalDecided`` event (which records only ids) was about.
    """
    match event:
        case SessionCreated(agent_name=agent, model_route=route):
            return f"agent {one_line(agent)}, route {one_line(route)}"
        case TurnStarted(number=number, submission_id=submission):
            return f"turn {number}, submission {_id(submission)}"
        case TurnOpened(number=number):
            return f"turn {number} record opened"
        case InputAccepted(kind=kind, text=text, attachments=attachments):
            files = f" (+{len(attachments)} attachments)" if attachments else ""
            return f"{_id(kind)} {_quoted(text)}{files}"
        case InputRejected(reason=reason):
            return f"input refused: {one_line(reason)}"
        case ModelStepStarted(step=step, route=route):
            return f"step {step}, route {one_line(route)}"
        case ModelStepCompleted():
            return _step_completed(event)
        case ModelStepFailed(step=step, error_type=error_type, message=message):
            return f"step {step}, {one_line(error_type)}: {one_line(message)}"
        case UsageRecorded(step=step, usage=usage):
            return f"step {step}, {_usage(usage)}"
        case ToolCallStarted(name=name, arguments=arguments, call_id=call_id):
            return f"{_id(name)} {readable_arguments(arguments)} (call {_id(call_id)})"
        case ToolCallFinished(name=name, output=output, is_error=is_error):
            verdict = "error" if is_error else "ok"
            return f"{_id(name)} {verdict}: {_quoted(output)}"
        case ApprovalRequested(name=name, arguments=arguments, request_id=request):
            return (
                f"{_id(name)} {readable_arguments(arguments)} (request {_id(request)})"
            )
        case ApprovalDecided(decision=decision, decided_by=who, request_id=request):
            tool = (tool_names or {}).get(request)
            about = f"{_id(tool)}: " if tool is not None else ""
            return f"{about}{_id(decision)} by {_id(who)} (request {_id(request)})"
        case HookContextAdded(hook=hook, text=text):
            return f"{_id(hook)}: {_quoted(text)}"
        case WarningRaised(message=message):
            return one_line(message)
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
        case SessionClosed():
            return "closed for good"
        case _:
            # An event this CLI does not know yet (added after it was written):
            # its fields still say what happened.
            fields = payload(event)
            fields.pop("session_id", None)
            return one_line(
                ", ".join(f"{key}={value}" for key, value in fields.items())
            )


class Timeline:
    """Formats a session's events in log order, as lines or JSON records.

    It remembers which tool each approval request was for, so the decision
    line can name it; feed it one session's events, oldest first.
    """

    def __init__(self) -> None:
        self._tool_names: dict[str, str] = {}

    def line(self, item: TranscriptItem, name_width: int = 18) -> str:
        """One readable line: sequence, time, event name, summary."""
        event = item.event()
        if isinstance(event, ApprovalRequested):
            self._tool_names[event.request_id] = event.name
        summary = summarize(event, self._tool_names)
        return (
            f"{item.sequence:>6}  {format_time(event.timestamp)}  "
            f"{item.name:<{name_width}}  {summary}"
        ).rstrip()

    @staticmethod
    def record(item: TranscriptItem) -> str:
        """One JSON line: sequence, time (microseconds), event name, payload."""
        event = item.event()
        record = {
            "sequence": item.sequence,
            "time": format_time(event.timestamp, precise=True),
            "event": item.name,
            "data": payload(event),
        }
        return msgspec.json.encode(record).decode()
