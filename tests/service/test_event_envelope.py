"""The service's streams carry the envelope (issue 23, item 2): SSE events'
JSON has each Event's id, timestamp, trace and schema version, as
``rt.replay_events`` gives them; AG-UI events carry ``timestamp``."""

from __future__ import annotations

import json

from service_support import SSEReader
from test_agui import AGENTS, new_session, run
from test_stream import read_until, run_to_approval

from turnlog.domain import protocol as p
from turnlog.service.agui_events import timestamp_ms


def test_sse_events_carry_the_envelope_of_the_replay(serve) -> None:
    served = serve()
    with served.client() as client:
        session_id, request_id = run_to_approval(client)
        with client.stream("GET", f"/sessions/{session_id}/events") as response:
            reader = SSEReader(response)
            sent = read_until(reader, "approval_request")
            client.post(
                f"/sessions/{session_id}/approvals/{request_id}",
                json={"decision": "allow"},
            )
            sent += read_until(reader, "turn_complete")
    replayed = served.runtime.replay_events(session_id)
    documents = [json.loads(event.data) for event in sent]
    durable = [d for d in documents if d["msg"]["type"] != "agent_message_delta"]
    assert [p.decode_event(json.dumps(d)) for d in durable] == replayed
    for document in documents:
        assert document["timestamp"]
        assert document["schema_version"] == p.EVENT_SCHEMA_VERSION
        assert document["trace_id"] == replayed[0].trace_id
    deltas = [d for d in documents if d["msg"]["type"] == "agent_message_delta"]
    assert deltas
    assert all(d["event_id"] is None for d in deltas)


def test_agui_events_carry_the_time_of_the_facts_they_report(serve) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        thread = new_session(client, "demo")
        events = run(client, thread, prompt="three little words")
    assert all(isinstance(event.timestamp, int) for event in events)
    recorded = {
        type(e.msg): timestamp_ms(e.timestamp)
        for e in served.runtime.replay_events(thread)
        if e.timestamp is not None
    }
    by_type = {event.type.value: event.timestamp for event in events}
    assert by_type["TOOL_CALL_START"] == recorded[p.ToolCallStartedMsg]
    assert by_type["TOOL_CALL_RESULT"] == recorded[p.ToolCallFinishedMsg]
    assert by_type["TEXT_MESSAGE_END"] == recorded[p.AgentMessageMsg]
    assert by_type["RUN_FINISHED"] == recorded[p.TurnCompletedMsg]
