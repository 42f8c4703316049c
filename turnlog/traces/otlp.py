"""A session's trace, made from the log: OpenTelemetry spans, as OTLP.

The spans are a projection of the session's events
(:mod:`turnlog.projections.spans`), so they can be made at any time after
the fact, also for a session whose process was killed: no tracer had to be
running. OTLP/HTTP's default encoding is protobuf, built with the
``opentelemetry-proto`` types (a dependency of turnlog); its JSON mapping
needs nothing::

    spans = session_spans(runtime, "s1")
    body = otlp_protobuf(spans)           # an ExportTraceServiceRequest
    send_otlp("http://collector:4318", body)    # as application/x-protobuf
    send_otlp(url, otlp_json(spans), protocol=HTTP_JSON)  # or as JSON

To export live, as the runtime saves, pass an OpenTelemetry ``SpanExporter``
to ``Runtime.open(..., span_exporter=...)`` (the ``otel`` extra; see
:mod:`turnlog.traces.live`). Both give the same spans: same ids, names, times and
attributes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, cast
from urllib.parse import urlsplit, urlunsplit

import httpx
import msgspec
from eventsourcing.persistence import Notification

from turnlog.domain import turn_events as t
from turnlog.domain.errors import (
    InvalidInputError,
    TraceExportError,
    UnknownSessionError,
    UsageError,
)
from turnlog.projections.spans import (
    SpanEvent,
    SpanFold,
    SpanRecord,
    span_id_of,
    spans_of,
    trace_id_of,
)
from turnlog.store.log import Store
from turnlog.store.transfer import session_rows
from turnlog.version import __version__

SCOPE_NAME = "turnlog"
"""The instrumentation scope every turnlog span is reported under."""

SEND_TIMEOUT = 10.0
"""Seconds :func:`send_otlp` waits for the endpoint."""

HTTP_PROTOBUF = "http/protobuf"
"""OTLP over HTTP, protobuf-encoded: OTLP/HTTP's default, and turnlog's."""
HTTP_JSON = "http/json"
"""OTLP over HTTP in protobuf's JSON mapping."""
PROTOCOLS = (HTTP_PROTOBUF, HTTP_JSON)
"""The protocols turnlog sends, named as ``OTEL_EXPORTER_OTLP_PROTOCOL`` names them."""
CONTENT_TYPES = {HTTP_PROTOBUF: "application/x-protobuf", HTTP_JSON: "application/json"}
"""The ``Content-Type`` OTLP/HTTP gives each encoding."""

_KIND = {"internal": 1, "client": 3}  # OTLP's SpanKind numbers
_STATUS = {"unset": 0, "ok": 1, "error": 2}  # and StatusCode numbers


def checked_protocol(protocol: str) -> str:
    """``protocol`` if turnlog sends it, else InvalidInputError naming those it does."""
    if protocol in PROTOCOLS:
        return protocol
    msg = f"turnlog sends OTLP as {' or '.join(PROTOCOLS)}, not {protocol!r}" + (
        " (gRPC is not supported)" if protocol == "grpc" else ""
    )
    raise InvalidInputError(msg)


def session_events(store: Store, session_id: str) -> list[Any]:
    """The domain events of a session (its Session and Turns), in log order.

    Raises:
        UnknownSessionError: the log holds no session ``session_id``.
    """
    return [
        store.decode(
            Notification(
                id=position,
                originator_id=originator,
                originator_version=version,
                topic=topic,
                state=state,
            )
        )
        for position, originator, version, topic, state in session_rows(
            store, session_id
        )
    ]


class HoldsLog(Protocol):
    """What holds a log other than the store itself: a ``turnlog.Runtime``.

    Declared here, where it is used, so that the traces need not import the
    runtime that exports them live.
    """

    @property
    def store(self) -> Store:
        """The log."""
        ...


def session_spans(source: HoldsLog | Store, session_id: str) -> list[SpanRecord]:
    """Every span of a session's trace, rebuilt from the log, with those of
    the child sessions under it (agents its tool calls ran).

    Spans the log has not ended (a turn cut off by a kill, a session still
    open) are ended at the session's last event and marked unfinished.

    Args:
        source: the runtime, or the store, whose log holds the session.
        session_id: the session.

    Raises:
        UnknownSessionError: the log holds no session ``session_id``.
    """
    store = source if isinstance(source, Store) else source.store
    spans: list[SpanRecord] = []
    # The session's child sessions (agents its tool calls ran) are in its
    # trace, nested under those calls: their spans come with it.
    pending = [session_id]
    while pending:
        current = pending.pop(0)
        try:
            events = session_events(store, current)
        except UnknownSessionError:
            if current == session_id:
                raise
            continue  # a child its call never got to create
        spans += spans_of(current, events)
        pending += [
            e.child_session for e in events if isinstance(e, t.ChildSessionStarted)
        ]
    return spans


def _value(value: Any) -> dict[str, Any]:
    """An attribute value in OTLP/JSON's AnyValue form."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # int64 is a string in OTLP/JSON
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _attributes(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in attributes.items()]


def _event(event: SpanEvent) -> dict[str, Any]:
    return {
        "timeUnixNano": str(event.time_ns),
        "name": event.name,
        "attributes": _attributes(event.attributes),
    }


def _span(span: SpanRecord) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "traceId": span.trace_id,
        "spanId": span.span_id,
        "name": span.name,
        "kind": _KIND[span.kind],
        "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns),
        "attributes": _attributes(span.attributes),
        "events": [_event(event) for event in span.events],
        "status": {"code": _STATUS[span.status]},
    }
    if span.parent_id is not None:
        doc["parentSpanId"] = span.parent_id
    if span.status_message:
        doc["status"]["message"] = span.status_message
    return doc


def otlp_json(spans: Iterable[SpanRecord], *, service_name: str = "turnlog") -> bytes:
    """``spans`` as an OTLP ExportTraceServiceRequest in its JSON mapping.

    Ids are hex, times are nanoseconds as strings, enums are numbers, as
    the OTLP/JSON encoding has them; any OTLP/HTTP endpoint takes it.

    Args:
        spans: the spans (of one session or many).
        service_name: the resource's ``service.name``.
    """
    request = {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": service_name})},
                "scopeSpans": [
                    {
                        "scope": {"name": SCOPE_NAME, "version": __version__},
                        "spans": [_span(span) for span in spans],
                    }
                ],
            }
        ]
    }
    return msgspec.json.encode(request)


def otlp_protobuf(
    spans: Iterable[SpanRecord], *, service_name: str = "turnlog"
) -> bytes:
    """``spans`` as a protobuf-encoded OTLP ExportTraceServiceRequest.

    The same request as :func:`otlp_json`, in OTLP/HTTP's default encoding,
    built with the ``opentelemetry-proto`` message types.

    Args:
        spans: the spans (of one session or many).
        service_name: the resource's ``service.name``.

    Raises:
        UsageError: the ``opentelemetry-proto`` package is not installed.
    """
    pb = _protobuf_types()
    request = pb.ExportTraceServiceRequest(
        resource_spans=[
            pb.ResourceSpans(
                resource=pb.Resource(
                    attributes=_pb_attributes(pb, {"service.name": service_name})
                ),
                scope_spans=[
                    pb.ScopeSpans(
                        scope=pb.InstrumentationScope(
                            name=SCOPE_NAME, version=__version__
                        ),
                        spans=[_pb_span(pb, span) for span in spans],
                    )
                ],
            )
        ]
    )
    return bytes(request.SerializeToString())


class _ProtobufTypes:
    """The OTLP message classes, imported once they are needed."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1 import (  # noqa: PLC0415
            trace_service_pb2,
        )
        from opentelemetry.proto.common.v1 import common_pb2  # noqa: PLC0415
        from opentelemetry.proto.resource.v1 import resource_pb2  # noqa: PLC0415
        from opentelemetry.proto.trace.v1 import trace_pb2  # noqa: PLC0415

        self.ExportTraceServiceRequest = trace_service_pb2.ExportTraceServiceRequest
        self.ResourceSpans = trace_pb2.ResourceSpans
        self.ScopeSpans = trace_pb2.ScopeSpans
        self.Span = trace_pb2.Span
        self.Status = trace_pb2.Status
        self.Resource = resource_pb2.Resource
        self.InstrumentationScope = common_pb2.InstrumentationScope
        self.KeyValue = common_pb2.KeyValue
        self.AnyValue = common_pb2.AnyValue
        self.ArrayValue = common_pb2.ArrayValue


def _protobuf_types() -> _ProtobufTypes:
    try:
        return _ProtobufTypes()
    except ImportError as error:
        msg = (
            "sending OTLP as protobuf needs the opentelemetry-proto package "
            "(pip install opentelemetry-proto), or send JSON: --protocol http/json"
        )
        raise UsageError(msg) from error


def _pb_value(pb: _ProtobufTypes, value: Any) -> Any:
    if isinstance(value, bool):
        return pb.AnyValue(bool_value=value)
    if isinstance(value, int):
        return pb.AnyValue(int_value=value)
    if isinstance(value, float):
        return pb.AnyValue(double_value=value)
    if isinstance(value, list | tuple):
        values = [_pb_value(pb, item) for item in value]
        return pb.AnyValue(array_value=pb.ArrayValue(values=values))
    return pb.AnyValue(string_value=str(value))


def _pb_attributes(pb: _ProtobufTypes, attributes: Mapping[str, Any]) -> list[Any]:
    return [
        pb.KeyValue(key=key, value=_pb_value(pb, value))
        for key, value in attributes.items()
    ]


def _pb_span(pb: _ProtobufTypes, span: SpanRecord) -> Any:
    return pb.Span(
        trace_id=bytes.fromhex(span.trace_id),
        span_id=bytes.fromhex(span.span_id),
        parent_span_id=b"" if span.parent_id is None else bytes.fromhex(span.parent_id),
        name=span.name,
        kind=cast(Any, _KIND[span.kind]),  # the stubs want the enum's own type
        start_time_unix_nano=span.start_ns,
        end_time_unix_nano=span.end_ns,
        attributes=_pb_attributes(pb, span.attributes),
        events=[
            pb.Span.Event(
                time_unix_nano=event.time_ns,
                name=event.name,
                attributes=_pb_attributes(pb, event.attributes),
            )
            for event in span.events
        ],
        status=pb.Status(
            code=cast(Any, _STATUS[span.status]), message=span.status_message
        ),
    )


def otlp_body(
    spans: Iterable[SpanRecord], protocol: str, *, service_name: str = "turnlog"
) -> bytes:
    """``spans`` as the body of an OTLP/HTTP request in ``protocol``.

    Raises:
        InvalidInputError: ``protocol`` is neither http/protobuf nor http/json.
        UsageError: protobuf was asked for and opentelemetry-proto is missing.
    """
    if checked_protocol(protocol) == HTTP_JSON:
        return otlp_json(spans, service_name=service_name)
    return otlp_protobuf(spans, service_name=service_name)


def traces_url(endpoint: str) -> str:
    """The URL to POST traces to: ``/v1/traces`` under a bare endpoint.

    As OpenTelemetry's ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL) and
    ``..._TRACES_ENDPOINT`` (the full URL) do: an endpoint with no path gets
    ``/v1/traces``; one with a path is taken as it is.

    Raises:
        InvalidInputError: not an http(s) URL.
    """
    parts = urlsplit(endpoint)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        msg = f"an OTLP endpoint is an http:// or https:// URL, not {endpoint!r}"
        raise InvalidInputError(msg)
    if parts.path in {"", "/"}:
        parts = parts._replace(path="/v1/traces")
    return urlunsplit(parts)


def send_otlp(
    endpoint: str,
    body: bytes,
    *,
    protocol: str = HTTP_PROTOBUF,
    headers: Mapping[str, str] | None = None,
    timeout: float = SEND_TIMEOUT,
    transport: httpx.BaseTransport | None = None,
) -> None:
    """POSTs an OTLP request to an OTLP/HTTP endpoint.

    Args:
        endpoint: the collector's base URL, or its full traces URL.
        body: the request, as :func:`otlp_protobuf` (or, with ``protocol``
            http/json, :func:`otlp_json`) made it.
        protocol: the body's encoding, which sets its ``Content-Type``.
        headers: extra headers (an API key, say).
        timeout: seconds to wait for the endpoint.
        transport: an httpx transport, for tests or a custom network.

    Raises:
        InvalidInputError: ``endpoint`` is not an http(s) URL, or
            ``protocol`` not one turnlog sends.
        TraceExportError: the endpoint could not be reached or refused it.
    """
    url = traces_url(endpoint)
    sent = {
        "Content-Type": CONTENT_TYPES[checked_protocol(protocol)],
        **(headers or {}),
    }
    try:
        with httpx.Client(timeout=timeout, transport=transport) as client:
            response = client.post(url, content=body, headers=sent)
    except httpx.HTTPError as error:
        msg = f"could not send the trace to {url}: {error}"
        raise TraceExportError(msg) from error
    if not response.is_success:
        msg = (
            f"{url} refused the trace: HTTP {response.status_code} "
            f"{response.text[:200]}"
        )
        raise TraceExportError(msg)


__all__ = [
    "CONTENT_TYPES",
    "HTTP_JSON",
    "HTTP_PROTOBUF",
    "PROTOCOLS",
    "SpanEvent",
    "SpanFold",
    "SpanRecord",
    "checked_protocol",
    "otlp_body",
    "otlp_json",
    "otlp_protobuf",
    "send_otlp",
    "session_events",
    "session_spans",
    "span_id_of",
    "spans_of",
    "trace_id_of",
    "traces_url",
]
