"""OpenTelemetry traces of sessions, made from the log.

Offline (``otlp``): :func:`session_spans` rebuilds a session's spans from
its events (the spans fold, :mod:`turnlog.projections.spans`), and
:func:`otlp_json`, :func:`otlp_protobuf` and :func:`send_otlp` encode and
send them. Live (``live``): ``LiveTraces`` feeds an OpenTelemetry
``SpanExporter`` as the runtime saves; it needs the ``otel`` extra, so it
is not imported here (``Runtime.open(..., span_exporter=...)`` uses it).
"""

from turnlog.traces.otlp import (
    HoldsLog,
    otlp_body,
    otlp_json,
    otlp_protobuf,
    send_otlp,
    session_events,
    session_spans,
)

__all__ = [
    "HoldsLog",
    "otlp_body",
    "otlp_json",
    "otlp_protobuf",
    "send_otlp",
    "session_events",
    "session_spans",
]
