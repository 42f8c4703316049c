"""The span fold on golden histories: stable ids, parenting, timing."""

from __future__ import annotations

import hashlib

import pytest
from traces_support import NAMES, history_events

from turnlog.domain import session as s
from turnlog.domain import turn_events as t
from turnlog.projections.spans import (
    UNFINISHED,
    SpanRecord,
    span_id_of,
    spans_of,
    time_ns,
    trace_id_of,
)


def by_id(spans: list[SpanRecord]) -> dict[str, SpanRecord]:
    ids = [span.span_id for span in spans]
    assert len(set(ids)) == len(ids), "span ids must be unique in a trace"
    return {span.span_id: span for span in spans}


@pytest.mark.parametrize("name", NAMES)
def test_a_history_folds_to_one_tree_of_spans_with_derived_ids(name: str) -> None:
    events = history_events(name)
    spans = spans_of(name, events)
    assert spans == spans_of(name, history_events(name))  # a rebuild is the same
    spans_by_id = by_id(spans)
    trace = hashlib.sha256(f"turnlog-trace:{name}".encode()).digest()[:16].hex()
    assert {span.trace_id for span in spans} == {trace}
    created = events[0]
    assert isinstance(created, s.SessionCreated)
    root = spans_by_id[span_id_of(created.originator_id, created.originator_version)]
    assert root.name == "turnlog.session"
    assert root.parent_id is None
    assert root.start_ns == time_ns(created.timestamp)
    # Never closed, the session ends at its last event; open is not cut off.
    assert root.end_ns == time_ns(events[-1].timestamp)
    assert "turnlog.unfinished" not in root.attributes
    assert root.attributes["turnlog.session.closed"] is False
    assert root.status == "unset"
    for span in spans:
        assert span.attributes["gen_ai.conversation.id"] == name
        assert span.start_ns <= span.end_ns
        if span is root:
            continue
        parent = spans_by_id[span.parent_id or ""]
        assert parent.start_ns <= span.start_ns <= span.end_ns <= parent.end_ns
    # Every turn, model call and tool call of the log has its span.
    turns = [e for e in events if isinstance(e, s.TurnStarted)]
    steps = [e for e in events if isinstance(e, t.ModelStepStarted)]
    tools = {e.call_id for e in events if isinstance(e, t.ToolCallFinished)}
    operations = [span.attributes.get("gen_ai.operation.name") for span in spans]
    assert operations.count("invoke_agent") == len(turns)
    assert operations.count("chat") == len(steps)
    assert operations.count("execute_tool") == len(tools)
    for turn in turns:
        span = spans_by_id[span_id_of(turn.originator_id, turn.originator_version)]
        assert span.parent_id == root.span_id
        assert span.start_ns == time_ns(turn.timestamp)


def test_the_ids_are_pinned_so_a_trace_never_changes_across_versions() -> None:
    spans = spans_of("basic", history_events("basic"))
    assert trace_id_of("basic") == "8d6ef310376ea161da2788ff88da5605"
    names = [(span.span_id, span.name) for span in spans[:4]]
    # Recorded before turnlog logged model names: the calls are named by
    # their operation alone (the route is not a model name).
    assert names == [
        ("216d85dcbc292c57", "chat"),
        ("38e4b032144aa189", "execute_tool lookup"),
        ("08ea0a8f70b49097", "chat"),
        ("96da89cfcf6b6a5c", "invoke_agent historian"),
    ]


def test_model_calls_carry_route_and_token_counts_and_failures() -> None:
    events = history_events("basic")
    spans = spans_of("basic", events)
    chat = spans[0]
    assert chat.kind == "client"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    # An old history names no model: the route is no stand-in for one.
    assert chat.attributes["turnlog.model.route"] == "main"
    for unknown in ("gen_ai.request.model", "gen_ai.response.model"):
        assert unknown not in chat.attributes
    assert "gen_ai.provider.name" not in chat.attributes
    assert chat.attributes["gen_ai.usage.input_tokens"] == 10
    assert chat.attributes["gen_ai.usage.output_tokens"] == 3
    failed = next(e for e in events if isinstance(e, t.ModelStepFailed))
    span = next(sp for sp in spans if sp.end_ns == time_ns(failed.timestamp))
    assert span.status == "error"
    assert span.status_message == failed.message
    assert span.attributes["error.type"] == failed.error_type
    assert [e.name for e in span.events] == ["exception"]


def test_tool_calls_carry_name_call_id_and_outcome() -> None:
    events = history_events("basic")
    spans = spans_of("basic", events)
    tools = {
        sp.attributes["gen_ai.tool.call.id"]: sp
        for sp in spans
        if sp.attributes.get("gen_ai.operation.name") == "execute_tool"
    }
    finished = {e.call_id: e for e in events if isinstance(e, t.ToolCallFinished)}
    assert set(tools) == set(finished)
    for call_id, span in tools.items():
        assert span.attributes["gen_ai.tool.name"] == finished[call_id].name
        failed = finished[call_id].is_error
        assert span.attributes["turnlog.tool.outcome"] == ("error" if failed else "ok")
        assert span.status == ("error" if failed else "unset")
        assert span.end_ns == time_ns(finished[call_id].timestamp)


def test_an_approval_wait_is_a_span_with_its_decision_who_and_how_long() -> None:
    events = history_events("approvals")
    spans = spans_of("approvals", events)
    requested = {e.request_id: e for e in events if isinstance(e, t.ApprovalRequested)}
    decided = [e for e in events if isinstance(e, t.ApprovalDecided)]
    assert decided
    spans_by_id = by_id(spans)
    for decision in decided:
        request = requested[decision.request_id]
        span = spans_by_id[
            span_id_of(request.originator_id, request.originator_version)
        ]
        assert span.name == f"turnlog.approval {request.name}"
        assert span.attributes["turnlog.approval.decision"] == decision.decision
        assert span.attributes["turnlog.approval.decided_by"] == decision.decided_by
        waited = time_ns(decision.timestamp) - time_ns(request.timestamp)
        assert span.end_ns - span.start_ns == waited
        assert spans_by_id[span.parent_id or ""].name.startswith("invoke_agent")


def test_a_log_cut_off_mid_turn_ends_its_open_spans_as_unfinished() -> None:
    events = history_events("basic")
    cut = next(i for i, e in enumerate(events) if isinstance(e, t.ToolCallStarted))
    spans = spans_of("basic", events[: cut + 1])
    last = time_ns(events[cut].timestamp)
    unfinished = {
        span.name: span for span in spans if span.attributes.get("turnlog.unfinished")
    }
    assert set(unfinished) == {"execute_tool lookup", "invoke_agent historian"}
    for span in unfinished.values():
        assert span.end_ns == last
        assert (span.status, span.status_message) == ("error", UNFINISHED)
    [root] = [span for span in spans if span.name == "turnlog.session"]
    assert (root.end_ns, root.status) == (last, "unset")
    assert root.attributes["turnlog.session.closed"] is False
    # Once the log goes on, the same spans end for real, with the same ids.
    full = by_id(spans_of("basic", events))
    for span in unfinished.values():
        assert full[span.span_id].start_ns == span.start_ns
        assert full[span.span_id].parent_id == span.parent_id
