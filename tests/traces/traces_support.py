"""Helpers of the trace tests: golden histories as events, span comparison,
a recording OTLP/HTTP server, and a turnlog process to SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
from eventsourcing.persistence import StoredEvent

from turnlog.projections.spans import SpanRecord
from turnlog.store.log import Store
from turnlog.traces import session_events

TESTS = Path(__file__).parent.parent
HISTORIES = TESTS / "histories"
CRASH_CHILD = TESTS / "scenarios" / "crash_child.py"
NAMES = sorted(
    p.name.removesuffix(".events.jsonl") for p in HISTORIES.glob("*.events.jsonl")
)


class _Line(msgspec.Struct):
    originator_id: str
    originator_version: int
    topic: str
    state: msgspec.Raw


def history_events(name: str) -> list[Any]:
    """The domain events of golden history ``name``, decoded as the log does."""
    lines = [
        msgspec.json.decode(raw, type=_Line)
        for raw in (HISTORIES / f"{name}.events.jsonl").read_bytes().splitlines()
    ]
    store = Store("memory://")
    try:
        store.insert_stored(
            [
                StoredEvent(
                    originator_id=uuid.UUID(line.originator_id),
                    originator_version=line.originator_version,
                    topic=line.topic,
                    state=bytes(line.state),
                )
                for line in lines
            ]
        )
        return session_events(store, name)
    finally:
        store.close()


def comparable(span: Any) -> tuple[Any, ...]:
    """What a live (SDK ReadableSpan) or rebuilt span says, as one tuple."""
    if isinstance(span, SpanRecord):
        return (
            span.trace_id,
            span.span_id,
            span.parent_id,
            span.name,
            span.kind,
            span.start_ns,
            span.end_ns,
            span.attributes,
            span.status,
            span.status_message,
            [(e.name, e.time_ns, e.attributes) for e in span.events],
        )
    parent = span.parent
    status = span.status.status_code.name.lower()
    return (
        f"{span.context.trace_id:032x}",
        f"{span.context.span_id:016x}",
        None if parent is None else f"{parent.span_id:016x}",
        span.name,
        span.kind.name.lower(),
        span.start_time,
        span.end_time,
        {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items()},
        status,
        span.status.description or "",
        [(e.name, e.timestamp, dict(e.attributes)) for e in span.events],
    )


class Received(msgspec.Struct):
    """One request the recording server got."""

    path: str
    content_type: str
    body: bytes


@contextmanager
def otlp_server(status: int = 200) -> Iterator[tuple[str, list[Received]]]:
    """An HTTP server on 127.0.0.1 that records what is POSTed to it."""
    received: list[Received] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            received.append(
                Received(
                    self.path,
                    self.headers.get("Content-Type", ""),
                    self.rfile.read(length),
                )
            )
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def kill_child_at(url: str, session_id: str, mode: str, marker: str) -> None:
    """Runs tests/scenarios/crash_child.py until ``marker``, then SIGKILLs it."""
    with subprocess.Popen(
        [sys.executable, str(CRASH_CHILD), url, session_id, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if line.startswith(marker):
                    break
            else:
                raise AssertionError(f"child exited early ({proc.wait()})")
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


_ANY_VALUE = {"stringValue", "intValue", "boolValue", "doubleValue", "arrayValue"}


def _check_value(value: dict[str, Any]) -> None:
    (kind,) = value  # exactly one of AnyValue's fields
    assert kind in _ANY_VALUE, kind
    if kind == "intValue":
        assert isinstance(value[kind], str)
        int(value[kind])  # int64 travels as a decimal string
    if kind == "arrayValue":
        for item in value[kind]["values"]:
            _check_value(item)


def _is_hex(text: str, length: int) -> bool:
    return len(text) == length and text == text.lower() and int(text, 16) != 0


def check_otlp(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Checks the OTLP/JSON shape of an ExportTraceServiceRequest; its spans."""
    spans: list[dict[str, Any]] = []
    for resource_spans in doc["resourceSpans"]:
        for attribute in resource_spans["resource"]["attributes"]:
            _check_value(attribute["value"])
        for scope_spans in resource_spans["scopeSpans"]:
            assert isinstance(scope_spans["scope"]["name"], str)
            spans += scope_spans["spans"]
    for span in spans:
        assert _is_hex(span["traceId"], 32)
        assert _is_hex(span["spanId"], 16)
        assert "parentSpanId" not in span or _is_hex(span["parentSpanId"], 16)
        assert span["kind"] in {1, 3}
        start, end = span["startTimeUnixNano"], span["endTimeUnixNano"]
        assert isinstance(start, str)
        assert isinstance(end, str)
        assert 0 < int(start) <= int(end)
        for attribute in span["attributes"]:
            assert isinstance(attribute["key"], str)
            _check_value(attribute["value"])
        for event in span["events"]:
            int(event["timeUnixNano"])
        assert span["status"]["code"] in {0, 2}
    return spans


def _json_value(value: dict[str, Any]) -> Any:
    ((kind, inner),) = value.items()
    if kind == "arrayValue":
        return [_json_value(item) for item in inner["values"]]
    return int(inner) if kind == "intValue" else inner


def json_spans(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What an OTLP/JSON request says of each span, comparable with protobuf's."""
    return [
        (
            span["traceId"],
            span["spanId"],
            span.get("parentSpanId", ""),
            span["name"],
            span["kind"],
            int(span["startTimeUnixNano"]),
            int(span["endTimeUnixNano"]),
            {a["key"]: _json_value(a["value"]) for a in span["attributes"]},
            [(e["name"], int(e["timeUnixNano"])) for e in span["events"]],
            span["status"]["code"],
            span["status"].get("message", ""),
        )
        for span in check_otlp(doc)
    ]


def _protobuf_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_protobuf_value(item) for item in value.array_value.values]
    return getattr(value, kind)


def protobuf_spans(body: bytes) -> list[tuple[Any, ...]]:
    """What a protobuf OTLP request says of each span (opentelemetry-proto reads it)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return [
        (
            span.trace_id.hex(),
            span.span_id.hex(),
            span.parent_span_id.hex(),
            span.name,
            span.kind,
            span.start_time_unix_nano,
            span.end_time_unix_nano,
            {a.key: _protobuf_value(a.value) for a in span.attributes},
            [(e.name, e.time_unix_nano) for e in span.events],
            span.status.code,
            span.status.message,
        )
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


def attributes_of(span: dict[str, Any]) -> dict[str, Any]:
    """An OTLP/JSON span's attributes as a plain dict."""
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
