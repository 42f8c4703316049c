"""Traces as a projection: a session's events folded into OpenTelemetry spans.

A pure fold, like every view: the same events give the same spans, byte
for byte, whether folded live as they are saved or afterwards from the log
(so the trace of a session whose process was killed can still be made).

Spans follow the OpenTelemetry GenAI semantic conventions:

- the session (``turnlog.session``): the root, from ``SessionCreated`` to
  ``SessionClosed``, with ``gen_ai.conversation.id`` = the session id;
- each turn (``invoke_agent AGENT``), a child of the session;
- each model call (``chat MODEL``: ``gen_ai.operation.name`` = ``chat``,
  ``gen_ai.request.model`` the model the provider was asked for,
  ``gen_ai.response.model`` the one that answered, ``gen_ai.provider.name``
  whose it is, and turnlog's route as ``turnlog.model.route``), with its
  token counts. A history recorded before turnlog logged the model names
  none: its calls are named ``chat`` and carry the route alone;
- each tool call (``execute_tool NAME``) with its outcome, typed as what
  runs it (``gen_ai.tool.type``: ``function``, or ``extension`` for an MCP
  server's tool, named in ``turnlog.mcp.server``);
- each approval wait (``turnlog.approval NAME``) with the decision, who
  made it, and (as the span's length) how long it took;
- each compaction (``turnlog.compaction``).

Calls, approvals and compactions are children of their turn. Ids are
derived, never random: the trace id from the session id, a span id from the
event that opens the span (its aggregate id and version), so a rebuild
gives the very trace the live export gave.

Work the log never ends (a turn, model call, tool call, approval or
compaction cut off by a killed process, or still running) is ended at the
time of the session's last event and marked ``turnlog.unfinished = true``,
with an error status ("unfinished"). A turn that ends with a call or
approval still open ends that child with it, the same way. The session's
own span is never so marked: a session stays open after its process exits
cleanly (it can be taken up again), so an open session's span ends at its
last event, with ``turnlog.session.closed = false``. Such spans end again,
later, once the log ends them: that is why live export only ever sends
spans the log has ended. The spans begun and not yet ended are kept,
and ended, by :class:`~turnlog.projections.open_spans.OpenSpans`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from turnlog.domain import answers as a
from turnlog.domain import compaction as c
from turnlog.domain import session as s
from turnlog.domain import turn_events as t
from turnlog.domain.handoff import AgentHandedOff
from turnlog.domain.ids import session_trace_id, trace_id_of
from turnlog.projections.open_spans import SESSION_KEY, UNFINISHED, OpenSpans
from turnlog.projections.span_records import (
    Attribute,
    SpanEvent,
    SpanRecord,
    child_call_span_id,
    span_id_of,
    time_ns,
)


def _usage_attributes(usage: dict[str, int] | None) -> dict[str, Attribute]:
    if not usage:
        return {}
    names = {
        "input_tokens": "gen_ai.usage.input_tokens",
        "output_tokens": "gen_ai.usage.output_tokens",
        "cached_input_tokens": "gen_ai.usage.cache_read.input_tokens",
    }
    return {
        names.get(key, f"turnlog.usage.{key}"): value for key, value in usage.items()
    }


class SpanFold:
    """Folds one session's events, in log order, into spans.

    :meth:`apply` returns the spans an event ends; :meth:`unfinished` the
    ones still open, ended at the last event's time.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.last_ns = 0
        self.agent_name = ""
        self._spans = OpenSpans(session_id, trace_id_of(session_id))
        self._turn_key: str | None = None  # the running turn's key in _spans
        self._turn_usage: dict[str, int] = {}
        self._handlers: dict[type, Callable[[Any, int], list[SpanRecord]]] = {
            s.SessionCreated: self._session_created,
            s.SessionClosed: self._session_closed,
            s.TurnStarted: self._turn_started,
            s.TurnCompleted: self._turn_completed,
            s.TurnAborted: self._turn_aborted,
            s.UsageRecorded: self._usage_recorded,
            t.ModelStepStarted: self._step_started,
            t.ModelStepCompleted: self._step_completed,
            t.ModelStepFailed: self._step_failed,
            a.AnswerRejected: self._answer_rejected,
            t.ToolCallStarted: self._tool_started,
            t.ToolCallFinished: self._tool_finished,
            t.ChildSessionStarted: self._child_started,
            t.ApprovalRequested: self._approval_requested,
            t.ApprovalDecided: self._approval_decided,
            t.ApprovalFailed: self._approval_failed,
            c.CompactionStarted: self._compaction_started,
            c.ContextCompacted: self._compaction_ended,
            c.CompactionFailed: self._compaction_ended,
            c.CompactionCancelled: self._compaction_ended,
            t.WarningRaised: self._warning,
            AgentHandedOff: self._handed_off,
        }

    def apply(self, event: Any) -> list[SpanRecord]:
        """Folds ``event``; returns the spans it ended (children first)."""
        at = time_ns(event.timestamp)
        self.last_ns = max(self.last_ns, at)
        handler = self._handlers.get(type(event))
        return [] if handler is None else handler(event, at)

    def unfinished(self) -> list[SpanRecord]:
        """The spans still open, ended now at the last event's time.

        Work cut off is marked unfinished; the session's own span is not
        (an open session is not cut off work), it says it is still open.
        """
        return self._spans.end_all(self.last_ns)

    @property
    def trace_id(self) -> str:
        """The trace the session's spans belong to."""
        return self._spans.trace_id

    def _under_turn(self) -> str:
        """The parent of a call: the running turn (the session if none runs)."""
        key = self._turn_key
        return key if key is not None and key in self._spans else SESSION_KEY

    # -- the session and its turns ------------------------------------------------

    def _session_created(self, event: s.SessionCreated, at: int) -> list[SpanRecord]:
        self.agent_name = event.agent_name
        if event.parent_session:
            # A child session joins its root's trace, under the call that runs it.
            self._spans.trace_id = session_trace_id(
                self.session_id,
                parent_session=event.parent_session,
                root_session=event.root_session,
            )
        span = self._spans.begin(
            SESSION_KEY,
            event,
            at,
            "turnlog.session",
            {
                "gen_ai.agent.name": event.agent_name,
                "turnlog.agent.digest": event.agent_digest,
                "turnlog.model.route": event.model_route,
            },
        )
        if event.parent_session:
            span.parent_id = child_call_span_id(self.session_id)
            span.attributes["turnlog.parent.session"] = event.parent_session
            span.attributes["turnlog.parent.call"] = event.parent_call
        return []

    def _session_closed(self, _event: s.SessionClosed, at: int) -> list[SpanRecord]:
        closed: dict[str, Attribute] = {"turnlog.session.closed": True}
        return self._spans.end(SESSION_KEY, at, attributes=closed)

    def _turn_started(self, event: s.TurnStarted, at: int) -> list[SpanRecord]:
        self._turn_key = f"turn:{event.turn_id}"
        self._turn_usage = {}
        self._spans.begin(
            self._turn_key,
            event,
            at,
            f"invoke_agent {self.agent_name}".rstrip(),
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self.agent_name,
                "turnlog.turn.id": event.turn_id,
                "turnlog.turn.number": event.number,
                "turnlog.submission.id": event.submission_id,
            },
            parent=SESSION_KEY,
        )
        return []

    def _turn_ended(
        self, turn_id: str, at: int, outcome: str, error: str | None, reason: str = ""
    ) -> list[SpanRecord]:
        attributes: dict[str, Attribute] = {
            "turnlog.turn.outcome": outcome,
            **_usage_attributes(self._turn_usage),
        }
        if reason:
            attributes["turnlog.turn.reason"] = reason
        if error is not None:
            attributes["error.type"] = "turn_failed"
        key = f"turn:{turn_id}"
        return self._spans.end(key, at, error=error, attributes=attributes)

    def _turn_completed(self, event: s.TurnCompleted, at: int) -> list[SpanRecord]:
        return self._turn_ended(event.turn_id, at, "completed", None)

    def _turn_aborted(self, event: s.TurnAborted, at: int) -> list[SpanRecord]:
        if event.failed:
            return self._turn_ended(
                event.turn_id, at, "failed", event.reason, event.reason
            )
        return self._turn_ended(event.turn_id, at, "aborted", None, event.reason)

    def _usage_recorded(self, event: s.UsageRecorded, _at: int) -> list[SpanRecord]:
        if f"turn:{event.turn_id}" == self._turn_key:
            for key, value in (event.usage or {}).items():
                self._turn_usage[key] = self._turn_usage.get(key, 0) + value
        return []

    def _warning(self, event: t.WarningRaised, at: int) -> list[SpanRecord]:
        span = self._spans.get(self._under_turn())
        if span is not None:
            span.events.append(
                SpanEvent("turnlog.warning", at, {"message": event.message})
            )
        return []

    def _handed_off(self, event: AgentHandedOff, at: int) -> list[SpanRecord]:
        # An event on the turn; the turns after it are the new agent's.
        self.agent_name = event.to_agent
        span = self._spans.get(self._under_turn())
        if span is not None:
            attributes: dict[str, Attribute] = {
                "turnlog.handoff.from": event.from_agent,
                "turnlog.handoff.to": event.to_agent,
                "turnlog.handoff.reason": event.reason,
                "gen_ai.tool.call.id": event.call_id,
            }
            span.events.append(SpanEvent("turnlog.handoff", at, attributes))
        return []

    def _answer_rejected(self, event: a.AnswerRejected, at: int) -> list[SpanRecord]:
        span = self._spans.get(self._under_turn())
        if span is not None:
            attributes: dict[str, Attribute] = {
                "turnlog.answer.attempt": event.attempt,
                "turnlog.answer.rejected_by": event.rejected_by,
                "turnlog.answer.reason": event.reason,
                "turnlog.answer.final": event.final,
            }
            span.events.append(SpanEvent("turnlog.answer_rejected", at, attributes))
        return []

    # -- inside a turn ------------------------------------------------------------

    def _step_started(self, event: t.ModelStepStarted, at: int) -> list[SpanRecord]:
        attributes: dict[str, Attribute] = {"gen_ai.operation.name": "chat"}
        if event.provider:
            attributes["gen_ai.provider.name"] = event.provider
        if event.model:
            attributes["gen_ai.request.model"] = event.model
        attributes["turnlog.model.route"] = event.route
        attributes["turnlog.model.step"] = event.step
        self._spans.begin(
            f"step:{event.originator_id}:{event.step}",
            event,
            at,
            f"chat {event.model}" if event.model else "chat",
            attributes,
            kind="client",
            parent=self._under_turn(),
        )
        return []

    def _step_completed(self, event: t.ModelStepCompleted, at: int) -> list[SpanRecord]:
        calls = sum(1 for item in event.output if item.get("type") == "function_call")
        attributes: dict[str, Attribute] = {
            "gen_ai.response.finish_reasons": ["tool_calls" if calls else "stop"],
            **_usage_attributes(event.usage),
        }
        if event.response_model:
            attributes["gen_ai.response.model"] = event.response_model
        route = event.diagnostics.get("route")
        if isinstance(route, str):
            attributes["turnlog.model.route"] = route
        key = f"step:{event.originator_id}:{event.step}"
        return self._spans.end(key, at, attributes=attributes)

    def _step_failed(self, event: t.ModelStepFailed, at: int) -> list[SpanRecord]:
        key = f"step:{event.originator_id}:{event.step}"
        span = self._spans.get(key)
        if span is not None:
            span.events.append(
                SpanEvent(
                    "exception",
                    at,
                    {
                        "exception.type": event.error_type,
                        "exception.message": event.message,
                    },
                )
            )
        attributes: dict[str, Attribute] = {"error.type": event.error_type}
        return self._spans.end(key, at, error=event.message, attributes=attributes)

    def _tool_attributes(self, name: str, call_id: str) -> dict[str, Attribute]:
        return {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
        }

    def _tool_started(self, event: t.ToolCallStarted, at: int) -> list[SpanRecord]:
        attributes = self._tool_attributes(event.name, event.call_id)
        # What runs the tool is logged since turnlog traced MCP tools as
        # extensions; older histories leave the type out rather than guess.
        if event.tool_type:
            attributes["gen_ai.tool.type"] = event.tool_type
        if event.mcp_server:
            attributes["turnlog.mcp.server"] = event.mcp_server
        self._spans.begin(
            f"tool:{event.originator_id}:{event.call_id}",
            event,
            at,
            f"execute_tool {event.name}",
            attributes,
            parent=self._under_turn(),
        )
        return []

    def _tool_finished(self, event: t.ToolCallFinished, at: int) -> list[SpanRecord]:
        key = f"tool:{event.originator_id}:{event.call_id}"
        if key not in self._spans:
            # Answered without running (unknown tool, denied approval): a
            # span of no length, so every call the model made is seen.
            self._spans.begin(
                key,
                event,
                at,
                f"execute_tool {event.name}",
                {
                    **self._tool_attributes(event.name, event.call_id),
                    "turnlog.tool.ran": False,
                },
                parent=self._under_turn(),
            )
        outcome: dict[str, Attribute] = {
            "turnlog.tool.outcome": "error" if event.is_error else "ok"
        }
        if event.is_error:
            outcome["error.type"] = "tool_error"
            # Not the output itself: traces leave the process, tool outputs
            # may hold anything a tool read.
            return self._spans.end(key, at, error="tool error", attributes=outcome)
        return self._spans.end(key, at, attributes=outcome)

    def _child_started(
        self, event: t.ChildSessionStarted, _at: int
    ) -> list[SpanRecord]:
        # The call's span is still open (saved with its start): it takes the
        # id the child's fold gives its parent, so the child nests under it.
        span = self._spans.get(f"tool:{event.originator_id}:{event.call_id}")
        if span is not None:
            span.span_id = child_call_span_id(event.child_session)
            span.attributes["turnlog.child.session"] = event.child_session
            span.attributes["gen_ai.agent.name"] = event.agent
        return []

    def _approval_requested(
        self, event: t.ApprovalRequested, at: int
    ) -> list[SpanRecord]:
        self._spans.begin(
            f"approval:{event.request_id}",
            event,
            at,
            f"turnlog.approval {event.name}",
            {
                "gen_ai.tool.name": event.name,
                "gen_ai.tool.call.id": event.call_id,
                "turnlog.approval.request_id": event.request_id,
            },
            parent=self._under_turn(),
        )
        return []

    def _approval_decided(self, event: t.ApprovalDecided, at: int) -> list[SpanRecord]:
        return self._spans.end(
            f"approval:{event.request_id}",
            at,
            attributes={
                "turnlog.approval.decision": event.decision,
                "turnlog.approval.decided_by": event.decided_by,
            },
        )

    def _approval_failed(self, event: t.ApprovalFailed, at: int) -> list[SpanRecord]:
        return self._spans.end(
            f"approval:{event.request_id}",
            at,
            error=event.error,
            attributes={"error.type": "approval_provider_failed"},
        )

    def _compaction_started(
        self, event: c.CompactionStarted, at: int
    ) -> list[SpanRecord]:
        self._spans.begin(
            f"compaction:{event.compaction_id}",
            event,
            at,
            "turnlog.compaction",
            {
                "turnlog.compaction.id": event.compaction_id,
                "turnlog.compaction.reason": event.reason,
            },
            parent=self._under_turn(),
        )
        return []

    def _compaction_ended(self, event: Any, at: int) -> list[SpanRecord]:
        key = f"compaction:{event.compaction_id}"
        if isinstance(event, c.ContextCompacted):
            attributes = {
                "turnlog.compaction.outcome": "compacted",
                **_usage_attributes(event.usage),
            }
            return self._spans.end(key, at, attributes=attributes)
        if isinstance(event, c.CompactionFailed):
            attributes = {"turnlog.compaction.outcome": "failed"}
            return self._spans.end(key, at, error=event.message, attributes=attributes)
        attributes = {"turnlog.compaction.outcome": "cancelled"}
        return self._spans.end(key, at, attributes=attributes)


def spans_of(session_id: str, events: Iterable[Any]) -> list[SpanRecord]:
    """Every span of a session's events (in log order), ended or not.

    Spans come in the order they end; those the log never ended come last
    (see the module docstring).
    """
    fold = SpanFold(session_id)
    spans: list[SpanRecord] = []
    for event in events:
        spans += fold.apply(event)
    return spans + fold.unfinished()


__all__ = [
    "UNFINISHED",
    "Attribute",
    "SpanEvent",
    "SpanFold",
    "SpanRecord",
    "span_id_of",
    "spans_of",
    "time_ns",
    "trace_id_of",
]
