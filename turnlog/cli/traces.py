"""``turnlog traces``: a session's trace, rebuilt from the log, as OTLP."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from turnlog.cli.exits import EXIT_OK
from turnlog.cli.log_location import session_and_log
from turnlog.cli.reading import open_for_reading
from turnlog.domain.errors import InvalidInputError
from turnlog.traces.otlp import (
    HTTP_JSON,
    HTTP_PROTOBUF,
    checked_protocol,
    otlp_body,
    send_otlp,
    session_spans,
    traces_url,
)

PROTOCOL_VARIABLES = (
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
)
"""The variables an OpenTelemetry exporter reads its protocol from, first first."""


def endpoint_protocol(given: str | None) -> str:
    """The protocol to POST with: ``--protocol``, the OTel variables, or protobuf.

    Raises:
        InvalidInputError: a variable names a protocol turnlog does not send.
    """
    if given is not None:
        return given
    for name in PROTOCOL_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return checked_protocol(value)
            except InvalidInputError as error:
                raise InvalidInputError(f"${name}: {error}") from None
    return HTTP_PROTOBUF


def command_traces(args: argparse.Namespace) -> int:
    # A bad endpoint or protocol is refused before the log is opened.
    url = None if args.endpoint is None else traces_url(args.endpoint)
    sent_as = endpoint_protocol(args.protocol) if url is not None else None
    # A file or the terminal gets JSON, readable, unless asked otherwise.
    written_as = args.protocol or HTTP_JSON
    session_id, log = session_and_log(args)
    with contextlib.closing(open_for_reading(log)) as store:
        spans = session_spans(store, session_id)
    count = f"{len(spans)} spans of {session_id!r}"
    if args.output is not None:
        body = otlp_body(spans, written_as)
        Path(args.output).write_bytes(body + b"\n" if written_as == HTTP_JSON else body)
        print(f"wrote {count} to {args.output}")
    if url is not None and sent_as is not None:
        send_otlp(url, otlp_body(spans, sent_as), protocol=sent_as)
        print(f"sent {count} to {url} as {sent_as}")
    if args.output is None and url is None:
        body = otlp_body(spans, written_as)
        if written_as == HTTP_JSON:
            sys.stdout.write(body.decode() + "\n")
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(body)
    return EXIT_OK
