"""Child sessions: an agent used as a tool runs as a session of its own.

A call of an :class:`~turnlog.AgentTool` runs a child session
on the parent's runtime. The child's id is derived from the parent's
session id, turn number and call id (``domain.ids.child_session_id``), so
running the call again finds the same child. The parent's turn records
``ChildSessionStarted`` with the call's start; the child's
``SessionCreated`` names ``parent_session`` and ``parent_call``.

What one run of a call does, by what the child's log holds:

- nothing, or a session never prompted: the child is created (with the
  link back) and prompted with the call's input;
- a turn that ended: its recorded answer, or its failure, is the output,
  and nothing runs again (a parent revived after a crash lands here);
- a turn still running after the child was revived (waiting for an
  approval, or an idempotent tool): the output is how that run ends.

Opening a child revives it by the usual rules (``actors.revive``): its
tool calls a crash cut off are closed as interrupted, never re-run.

The child takes the parent's approval settings, so an approval provider
decides the child's requests as it does the parent's; without one, the
parent's handle lists the child's pending requests (each names the child
session) and ``approve`` on the parent answers them. Interrupting the
parent's turn cancels its calls, which interrupts the children they run.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec
from eventsourcing.utils import get_topic

from turnlog.domain import session as s
from turnlog.domain import turn_events as t
from turnlog.domain.errors import TurnlogError
from turnlog.domain.ids import child_session_id, session_uuid
from turnlog.domain.run import RunFinished
from turnlog.store.history import SessionHistory, decode_row
from turnlog.tools import ToolResult

if TYPE_CHECKING:
    from turnlog.agent import Agent
    from turnlog.session import AgentSession
    from turnlog.store.log import Store

OpenChild = Callable[["Agent", str, str, str], "AgentSession"]
"""Opens (creating if new) child ``id`` of (agent, id, parent, parent call)."""


CHILD_TOPIC = get_topic(t.ChildSessionStarted)
"""The stored topic of the link a parent's turn records."""


class ChildSession(msgspec.Struct, frozen=True):
    """A child session a tool call of a parent ran.

    Attributes:
        session_id: the child's session id.
        agent: the name of the agent it runs.
        parent_session: the session whose call runs it.
        parent_call: that call's id.
    """

    session_id: str
    agent: str
    parent_session: str
    parent_call: str


class ChildSessions:
    """Runs the child sessions of one runtime's agent tools."""

    def __init__(self, open_child: OpenChild, store: Store) -> None:
        self._open_child = open_child
        self._store = store
        self._lock = threading.Lock()
        self._live: dict[str, dict[str, AgentSession]] = {}

    def run_child(
        self, agent: Agent, context: Mapping[str, Any], text: str
    ) -> ToolResult:
        """Runs (or finds) the child of the call in ``context``; never raises."""
        parent = str(context.get("session_id", ""))
        call_id = str(context.get("call_id", ""))
        child_id = child_session_id(parent, int(context.get("turn", 0)), call_id)
        try:
            child = self._open_child(agent, child_id, parent, call_id)
        except TurnlogError as error:
            return ToolResult(f"child session {child_id} did not start: {error}", True)
        with self._lock:
            self._live.setdefault(parent, {})[child_id] = child
        try:
            return self._outcome(child, text)
        except TurnlogError as error:
            return ToolResult(f"child session {child_id} failed: {error}", True)
        finally:
            with self._lock:
                siblings = self._live.get(parent, {})
                siblings.pop(child_id, None)
                if not siblings:
                    self._live.pop(parent, None)

    def _outcome(self, child: AgentSession, text: str) -> ToolResult:
        child_id = child.session_id
        history = SessionHistory(self._store)
        if not any(
            isinstance(event, t.InputAccepted) for event in history.events(child_id)
        ):  # new, or cut off before its input was recorded: prompt it
            result = child.prompt(text)
            return _tool_result(
                child_id, result.status, result.final_output, result.error
            )
        # Subscribed before asking whether it runs: its end cannot slip by.
        with child.subscribe() as events:
            if child.running():  # revived mid-turn, and the turn resumed
                for item in events:
                    if isinstance(item, RunFinished):
                        result = item.result
                        return _tool_result(
                            child_id, result.status, result.final_output, result.error
                        )
        return _recorded_outcome(child_id, history.events(child_id))

    def cancel_child(self, context: Mapping[str, Any]) -> None:
        """Interrupts the child of the call in ``context``, if it runs here.

        Off the caller's thread: the caller is the tool executor, which
        must not wait on a session.
        """
        parent = str(context.get("session_id", ""))
        child_id = child_session_id(
            parent, int(context.get("turn", 0)), str(context.get("call_id", ""))
        )
        with self._lock:
            child = self._live.get(parent, {}).get(child_id)
        if child is not None:
            threading.Thread(
                target=_interrupt,
                args=(child,),
                name="turnlog-child-interrupt",
                daemon=True,
            ).start()

    def live(self, parent: str) -> list[AgentSession]:
        """The children of ``parent`` running here now."""
        with self._lock:
            return list(self._live.get(parent, {}).values())


def _interrupt(child: AgentSession) -> None:
    with contextlib.suppress(TurnlogError):  # it ended meanwhile
        child.interrupt()


def _recorded_outcome(child_id: str, events: list[Any]) -> ToolResult:
    """How the child's last turn ended, as its log says."""
    for event in reversed(events):
        match event:
            case s.TurnCompleted(final_output=output):
                return _tool_result(child_id, "completed", output, None)
            case s.TurnAborted(reason=reason, failed=failed):
                status = "failed" if failed else "aborted"
                return _tool_result(child_id, status, None, reason)
    return ToolResult(f"child session {child_id} has no outcome", True)


def _tool_result(
    child_id: str, status: str, output: str | None, error: str | None
) -> ToolResult:
    if status == "completed":
        return ToolResult(output or "")
    why = error or "no reason given"
    return ToolResult(f"child session {child_id} {status}: {why}", is_error=True)


def children_of(store: Store, session_id: str) -> list[ChildSession]:
    """The child sessions the tool calls of ``session_id`` started, in order."""
    # Only the links are decoded: a long session's other events are not.
    links = [
        decode_row(row)
        for row in SessionHistory(store).rows(session_id)
        if row[3] == CHILD_TOPIC
    ]
    return [
        ChildSession(link.child_session, link.agent, session_id, link.call_id)
        for link in links
    ]


def descendants(store: Store, session_id: str) -> list[tuple[int, ChildSession]]:
    """Every session under ``session_id`` as (depth, child), depth first."""
    out: list[tuple[int, ChildSession]] = []

    def walk(parent: str, depth: int) -> None:
        for child in children_of(store, parent):
            out.append((depth, child))
            walk(child.session_id, depth + 1)

    walk(session_id, 1)
    return out


def outcome_of(store: Store, session_id: str) -> str:
    """How a child session stands, in a few words (for the audit)."""
    session = store.get_session(session_id)
    if session is None:
        return "not created"
    if session.running:
        return "running"
    result = _recorded_outcome(session_id, store.events(session_uuid(session_id)))
    if result.is_error:
        return result.output.replace(f"child session {session_id} ", "", 1)
    return f"answered {result.output!r}"


def usage_by_agent(store: Store, session_id: str) -> dict[str, dict[str, int]]:
    """Usage totals of a session and all its descendants, summed by agent."""
    totals: dict[str, dict[str, int]] = {}
    pending = [session_id]
    seen: set[str] = set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        session = store.get_session(current)
        if session is None:  # a child whose call never got to create it
            continue
        summed = totals.setdefault(session.agent_name, {})
        for key, value in session.usage_totals.items():
            summed[key] = summed.get(key, 0) + value
        pending.extend(child.session_id for child in children_of(store, current))
    return totals
