"""``turnlog traces``: a session's trace, rebuilt from the log, as OTLP/JSON."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from turnlog.cli.exits import EXIT_OK
from turnlog.cli.log_location import session_and_log
from turnlog.cli.reading import open_for_reading
from turnlog.traces import otlp_json, send_otlp, session_spans, traces_url


def command_traces(args: argparse.Namespace) -> int:
    # A bad endpoint is refused before the log is opened.
    url = None if args.endpoint is None else traces_url(args.endpoint)
    session_id, log = session_and_log(args)
    with contextlib.closing(open_for_reading(log)) as store:
        spans = session_spans(store, session_id)
    body = otlp_json(spans)
    count = f"{len(spans)} spans of {session_id!r}"
    if args.output is not None:
        Path(args.output).write_bytes(body + b"\n")
        print(f"wrote {count} to {args.output}")
    if url is not None:
        send_otlp(url, body)
        print(f"sent {count} to {url}")
    if args.output is None and url is None:
        sys.stdout.write(body.decode() + "\n")
    return EXIT_OK
