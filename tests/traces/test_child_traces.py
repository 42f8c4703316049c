"""A child session's spans (an agent used as a tool) join its root's trace,
nested under the tool call that ran it, live and rebuilt from the log."""

from __future__ import annotations

from turnlog import Agent, Runtime, ScriptedModel, calls, tool_call
from turnlog.projections.spans import SpanRecord, trace_id_of
from turnlog.traces import session_spans


def _ask(tool: str, call_id: str) -> object:
    return calls(tool_call(tool, {"input": "look it up"}, call_id=call_id))


def test_a_childs_spans_nest_under_the_call_that_ran_it(store_url: str) -> None:
    checker = Agent("checker", model=ScriptedModel(["checked"]))
    researcher = Agent(
        "researcher",
        model=ScriptedModel([_ask("check", "k1"), "Paris"]),
        tools=[checker.as_tool(name="check")],
    )
    lead = Agent(
        "lead",
        model=ScriptedModel([_ask("research", "a"), "Paris it is"]),
        tools=[researcher.as_tool(name="research")],
    )
    with Runtime.open(store_url) as rt:
        rt.create_session(lead, session_id="lead").prompt("go", timeout=30)
        spans = session_spans(rt, "lead")
        assert spans == session_spans(rt, "lead")  # derived, never random
        child_only = session_spans(rt, "lead:1:a")
    by_id: dict[str, SpanRecord] = {span.span_id: span for span in spans}
    assert len(by_id) == len(spans)
    assert {span.trace_id for span in spans} == {trace_id_of("lead")}

    def parent_of(span: SpanRecord) -> SpanRecord:
        return by_id[span.parent_id or ""]

    def only(name: str, conversation: str) -> SpanRecord:
        (found,) = [
            span
            for span in spans
            if span.name == name
            and span.attributes["gen_ai.conversation.id"] == conversation
        ]
        return found

    research = only("execute_tool research", "lead")
    assert research.attributes["turnlog.child.session"] == "lead:1:a"
    researcher_turn = only("invoke_agent researcher", "lead:1:a")
    assert parent_of(parent_of(researcher_turn)) == research
    assert parent_of(researcher_turn).attributes["turnlog.parent.call"] == "a"
    check = only("execute_tool check", "lead:1:a")
    assert parent_of(check) == researcher_turn
    checker_turn = only("invoke_agent checker", "lead:1:a:1:k1")
    assert parent_of(parent_of(checker_turn)) == check
    assert parent_of(research) == only("invoke_agent lead", "lead")
    # the whole tree nests in time too
    for span in spans:
        if span.parent_id is not None:
            parent = parent_of(span)
            assert parent.start_ns <= span.start_ns <= span.end_ns <= parent.end_ns
    # a child's trace read alone is its part of the root's trace
    assert {span.span_id for span in child_only} < set(by_id)


def test_the_live_export_of_a_tree_equals_its_rebuild(store_url: str) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )
    from traces_support import comparable

    exporter = InMemorySpanExporter()
    researcher = Agent("researcher", model=ScriptedModel(["Paris"]))
    lead = Agent(
        "lead",
        model=ScriptedModel([_ask("research", "a"), "Paris it is"]),
        tools=[researcher.as_tool(name="research")],
    )
    with Runtime.open(store_url, span_exporter=exporter) as rt:
        session = rt.create_session(lead, session_id="live-lead")
        session.prompt("go", timeout=30)
        session.close()
        rt.create_session(researcher, session_id="live-lead:1:a").close()
    live = sorted(comparable(span) for span in exporter.get_finished_spans())
    with Runtime.open(store_url) as rt:
        rebuilt = sorted(comparable(span) for span in session_spans(rt, "live-lead"))
    assert live == rebuilt
    assert {span[0] for span in live} == {trace_id_of("live-lead")}
