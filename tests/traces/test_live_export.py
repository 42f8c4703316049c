"""Live export to an SDK exporter equals the trace rebuilt from the log."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from traces_support import comparable

from turnlog import (
    Agent,
    ApprovalDecision,
    ApprovalRequest,
    RunConfig,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.traces import session_spans


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key}"


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploys; needs approval."""
    return f"deployed {target}"


class AllowOnce:
    def decide(self, _request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.allow()


def agent(answers: list[object]) -> Agent:
    return Agent("tracer", model=ScriptedModel(answers), tools=[lookup, deploy])


def run_session(url: str, exporter: SpanExporter, session_id: str) -> None:
    config = RunConfig(approval_provider=AllowOnce())
    with Runtime.open(url, run_config=config, span_exporter=exporter) as rt:
        session = rt.create_session(
            agent(
                [
                    calls(tool_call("lookup", {"key": "k"}, call_id="a1")),
                    "first answer",
                    calls(tool_call("deploy", {"target": "prod"}, call_id="b1")),
                    "deployed",
                ]
            ),
            session_id=session_id,
        )
        session.prompt("look it up", timeout=30)
        session.prompt("deploy it", timeout=30)
        session.close()


def test_the_live_export_equals_the_rebuild_from_the_log(store_url: str) -> None:
    exporter = InMemorySpanExporter()
    run_session(store_url, exporter, "live")
    live = sorted(comparable(span) for span in exporter.get_finished_spans())
    with Runtime.open(store_url) as rt:
        rebuilt = sorted(comparable(span) for span in session_spans(rt, "live"))
    assert live == rebuilt
    names = sorted(span[3] for span in live)
    assert names == [
        "chat scripted",
        "chat scripted",
        "chat scripted",
        "chat scripted",
        "execute_tool deploy",
        "execute_tool lookup",
        "invoke_agent tracer",
        "invoke_agent tracer",
        "turnlog.approval deploy",
        "turnlog.session",
    ]
    assert all("turnlog.unfinished" not in span[7] for span in live)


def test_a_session_opened_again_is_traced_from_its_history(sqlite_url: str) -> None:
    """A later process gets the ids, starts and parents spans had in the first."""
    with Runtime.open(sqlite_url) as rt:  # no exporter: nothing traced live
        rt.create_session(agent(["one"]), session_id="again").prompt("1", timeout=30)
    exporter = InMemorySpanExporter()
    with Runtime.open(sqlite_url, span_exporter=exporter) as rt:
        session = rt.create_session(agent(["two"]), session_id="again")
        session.prompt("2", timeout=30)
        session.close()
        rebuilt = {span.span_id: span for span in session_spans(rt, "again")}
    live = [comparable(span) for span in exporter.get_finished_spans()]
    assert [span[3] for span in live] == [
        "chat scripted",
        "invoke_agent tracer",
        "turnlog.session",
    ]
    assert all(span == comparable(rebuilt[span[1]]) for span in live)


class Broken(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: object) -> SpanExportResult:
        self.calls += 1
        raise RuntimeError("collector down")

    def shutdown(self) -> None:
        raise RuntimeError("still down")


def test_a_failing_exporter_costs_no_session(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = Broken()
    with Runtime.open(sqlite_url, span_exporter=exporter) as rt:
        session = rt.create_session(agent(["fine"]), session_id="broken")
        assert session.prompt("hi", timeout=30).final_output == "fine"
    assert exporter.calls >= 1
    assert "the span exporter failed" in caplog.text


def test_spans_are_sdk_readable_spans_with_the_derived_ids(sqlite_url: str) -> None:
    exporter = InMemorySpanExporter()
    with Runtime.open(sqlite_url, span_exporter=exporter) as rt:
        rt.create_session(agent(["x"]), session_id="ids").prompt("hi", timeout=30)
        rebuilt = session_spans(rt, "ids")
    spans = exporter.get_finished_spans()
    assert spans
    assert all(isinstance(span, ReadableSpan) for span in spans)
    # The session is still open: its own span is not exported live yet.
    assert "turnlog.session" not in [span.name for span in spans]
    ids = {f"{span.context.span_id:016x}" for span in spans}
    assert ids < {span.span_id for span in rebuilt}
