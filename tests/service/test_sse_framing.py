"""Every stream the service serves is framed as the AG-UI SDK's encoder
frames it: lines end with ``\\n``, events are apart by ``\\n\\n``, never
``\\r\\n`` (which clients that split on ``\\n\\n`` cannot read). Checked
on the raw bytes, keep-alive comments included."""

from __future__ import annotations

import json
import re

import pydantic
from ag_ui.core import Event
from ag_ui.encoder import EventEncoder
from service_agents import approval_agent, chat_agent

EVENTS = pydantic.TypeAdapter(Event)
AGENTS = {"chat": chat_agent, "publisher": approval_agent}
COMMENT = re.compile(rb": ping - [^\r\n]*\n\n")
ANY_COMMENT = re.compile(rb": ping - [^\r\n]*\r?\n")


def test_an_agui_stream_is_byte_for_byte_what_the_sdk_encoder_writes(serve) -> None:
    served = serve(agents=AGENTS, heartbeat=0.05)
    with served.client() as client:
        created = client.post("/sessions", json={"agent": "chat"}).json()
        body = {
            "threadId": created["session_id"],
            "runId": "run-raw",
            "messages": [{"id": "m1", "role": "user", "content": "hello"}],
        }
        with client.stream("POST", "/agui", json=body) as response:
            assert response.status_code == 200
            raw = b"".join(response.iter_raw())
    assert b"\r" not in raw
    # Keep-alive comments (every 0.05 s) may fall between events; without
    # them, the stream is exactly the SDK encoder's output, event by event.
    events_only = COMMENT.sub(b"", raw)
    blocks = events_only.split(b"\n\n")
    assert blocks[-1] == b""  # the last event ends with its blank line too
    encoder = EventEncoder()
    rebuilt = b"".join(
        encoder.encode(EVENTS.validate_json(block.removeprefix(b"data: "))).encode()
        for block in blocks[:-1]
    )
    assert rebuilt == events_only
    assert json.loads(blocks[-2].removeprefix(b"data: "))["type"] == "RUN_FINISHED"


def test_the_event_stream_ends_every_line_with_lf_comments_included(serve) -> None:
    served = serve(agents=AGENTS, heartbeat=0.05)
    with served.client() as client:
        created = client.post("/sessions", json={"agent": "chat"}).json()
        session_id = created["session_id"]
        done = client.post(
            f"/sessions/{session_id}/prompts",
            params={"wait": "true"},
            json={"text": "hello"},
        )
        assert done.status_code == 200
        raw = b""
        with client.stream("GET", f"/sessions/{session_id}/events") as response:
            for chunk in response.iter_raw():
                raw += chunk
                if b'"turn_complete"' in raw and ANY_COMMENT.search(raw):
                    break
    assert b"\r" not in raw
    # Read until enough was seen, so the last chunk may hold half an event.
    blocks = raw[: raw.rindex(b"\n\n")].split(b"\n\n")
    for block in blocks[:-1]:
        lines = block.split(b"\n")
        if lines[0].startswith(b":"):
            assert len(lines) == 1
            continue
        assert lines[0].startswith(b"id: ")
        assert len(lines) == 2
        assert lines[1].startswith(b"data: ")
        json.loads(lines[1].removeprefix(b"data: "))
