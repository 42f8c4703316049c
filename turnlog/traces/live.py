"""Live trace export to an OpenTelemetry ``SpanExporter`` (the ``otel`` extra).

``Runtime.open(url, span_exporter=exporter)`` follows the log in-process:
the store calls :meth:`LiveTraces.notify` after every save, which only
queues the saved events, so a session's thread never waits for tracing.
One thread folds them into spans (the same fold as the offline rebuild,
:mod:`turnlog.projections.spans`) and hands each span to the exporter once
the log ends it, taking whatever is queued as one batch.

A session this process did not start (revived after a crash, or opened
after a restart) is first folded from its history in the log, so a span
opened by an earlier process still gets its start, its id and its parent.
Spans are exported when they end; a span the log has not ended when the
runtime closes is not exported live (``turnlog traces`` shows it: cut-off
work marked unfinished, an open session ended at its last event), since a
later process may still end it: the session's own span is exported when
the session is closed.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from turnlog.domain.session import SessionClosed
from turnlog.projections.spans import SpanFold, SpanRecord
from turnlog.store.log import Store
from turnlog.traces.otlp import SCOPE_NAME, session_events
from turnlog.version import __version__

logger = logging.getLogger(__name__)

MAX_BATCH = 512
"""Spans handed to the exporter in one call, at most (the SDK's default)."""

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_STOP = object()


def _context(trace_id: str, span_id: str) -> SpanContext:
    return SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=False, trace_flags=_SAMPLED
    )


def readable_span(
    record: SpanRecord, resource: Resource, scope: InstrumentationScope
) -> ReadableSpan:
    """A span record as the SDK's ``ReadableSpan``, with its derived ids."""
    parent = (
        None
        if record.parent_id is None
        else _context(record.trace_id, record.parent_id)
    )
    status = (
        Status(StatusCode.ERROR, record.status_message or None)
        if record.status == "error"
        else Status(StatusCode.UNSET)
    )
    return ReadableSpan(
        name=record.name,
        context=_context(record.trace_id, record.span_id),
        parent=parent,
        resource=resource,
        attributes=record.attributes,
        events=[
            Event(event.name, attributes=event.attributes, timestamp=event.time_ns)
            for event in record.events
        ],
        kind=SpanKind.CLIENT if record.kind == "client" else SpanKind.INTERNAL,
        status=status,
        start_time=record.start_ns,
        end_time=record.end_ns,
        instrumentation_scope=scope,
    )


class LiveTraces:
    """Feeds a ``SpanExporter`` the spans of the sessions a store saves.

    Args:
        store: the log; its saves are followed once :meth:`start` ran.
        exporter: any OpenTelemetry span exporter (OTLP, console, in-memory).
        service_name: the resource's ``service.name``.
    """

    def __init__(
        self, store: Store, exporter: SpanExporter, *, service_name: str = "turnlog"
    ) -> None:
        self.store = store
        self.exporter = exporter
        self.resource = Resource({"service.name": service_name})
        self.scope = InstrumentationScope(SCOPE_NAME, __version__)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._folds: dict[str, SpanFold] = {}
        self._thread = threading.Thread(
            target=self._run, name="turnlog-traces", daemon=True
        )

    def notify(self, recordings: Sequence[Any]) -> None:
        """Queues the events of one save (the store calls it after each)."""
        self._queue.put(recordings)

    def start(self) -> None:
        """Starts the thread that folds and exports."""
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Exports what is queued, then shuts the exporter down."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout)
        try:
            self.exporter.shutdown()
        except Exception:  # a broken exporter must not stop the runtime closing
            logger.warning("the span exporter failed to shut down", exc_info=True)

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            while True:  # take what is queued, don't wait
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            spans: list[SpanRecord] = []
            stop = False
            for item in items:
                if item is _STOP:
                    stop = True
                    continue
                for recording in item:
                    spans += self._fold(recording.domain_event)
            self._export(spans)
            if stop:
                return

    def _fold(self, event: Any) -> list[SpanRecord]:
        session_id = getattr(event, "session_id", None)
        if not isinstance(session_id, str):
            return []
        fold = self._folds.get(session_id)
        if fold is None:
            fold = self._folds[session_id] = self._resume(session_id, event)
        try:
            ended = fold.apply(event)
        except Exception:  # a span lost must never cost a session
            logger.exception("could not fold %r into spans", type(event).__name__)
            return []
        if isinstance(event, SessionClosed):
            del self._folds[session_id]
        return ended

    def _resume(self, session_id: str, event: Any) -> SpanFold:
        """A fold of the session's events logged before ``event``."""
        fold = SpanFold(session_id)
        if event.session_seq <= 1:
            return fold  # a new session: nothing came before
        try:
            for earlier in session_events(self.store, session_id):
                if earlier.session_seq >= event.session_seq:
                    break
                fold.apply(earlier)  # ended before: by now, exported or not
        except Exception:  # the log is unreadable now: trace from here on
            logger.exception("could not read the history of session %r", session_id)
        return fold

    def _export(self, spans: list[SpanRecord]) -> None:
        for start in range(0, len(spans), MAX_BATCH):
            batch = [
                readable_span(span, self.resource, self.scope)
                for span in spans[start : start + MAX_BATCH]
            ]
            try:
                result = self.exporter.export(batch)
            except Exception:  # the exporter's fault: log it, keep tracing
                logger.exception("the span exporter failed")
                continue
            if result is not SpanExportResult.SUCCESS:
                logger.warning("the span exporter refused %d spans", len(batch))


__all__ = ["LiveTraces", "readable_span"]
