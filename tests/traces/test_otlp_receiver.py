"""``turnlog traces --endpoint`` against a real OTLP/HTTP protobuf receiver.

The receiver is Arize Phoenix from PyPI (see ``otlp_receiver``), which
takes protobuf only and keeps what it decoded: the test asks it what it
received. The session is one ``turnlog demo`` run in its own process that
exits cleanly; its trace is sent by ``turnlog traces`` in another.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from otlp_receiver import Phoenix, attributes, running_phoenix

from turnlog import Runtime
from turnlog.traces import session_spans

# The first run installs Phoenix from PyPI (about 1.5 minutes here).
pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(1200)]

TURNLOG = str(Path(sys.executable).with_name("turnlog"))


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


def turnlog(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.pop("TURNLOG_STORE", None)
    return subprocess.run(
        [TURNLOG, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_demo_session_arrives_whole_in_a_protobuf_only_receiver(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    demo = turnlog(tmp_path, "demo")
    assert demo.returncode == 0, demo.stderr
    match = re.search(r"^session:\s+(\S+)", demo.stdout, re.MULTILINE)
    assert match is not None, demo.stdout
    session_id = match.group(1)
    url = f"sqlite:///{tmp_path / '.turnlog' / 'turnlog.sqlite3'}"

    sent = turnlog(tmp_path, "traces", session_id, "--endpoint", phoenix.otlp_endpoint)
    assert sent.returncode == 0, sent.stderr
    assert "as http/protobuf" in sent.stdout

    with Runtime.open(url) as rt:
        expected = {span.span_id: span for span in session_spans(rt, session_id)}
    [trace_id] = {span.trace_id for span in expected.values()}
    received = phoenix.wait_for_spans(trace_id, len(expected))
    got = {span["span_id"]: span for span in received}
    # Every span arrived, with the ids, parents, names and times turnlog gave.
    assert set(got) == set(expected)
    for span_id, span in got.items():
        mine = expected[span_id]
        assert span["trace_id"] == trace_id
        assert span["parent_span_id"] == mine.parent_id
        assert span["name"] == mine.name
        # Phoenix keeps times to the microsecond, and hands them back
        # through a float: equal to within that.
        assert abs(int(span["start_time_unix_nano"]) - mine.start_ns) <= 1000
        assert abs(int(span["end_time_unix_nano"]) - mine.end_ns) <= 1000
    names = sorted(span["name"] for span in received)
    assert names == [
        "chat scripted",
        "chat scripted",
        "execute_tool add_days",
        "invoke_agent date-helper",
        "turnlog.session",
    ]
    by_name = {span["name"]: attributes(span) for span in received}
    chat = by_name["chat scripted"]
    assert chat["gen_ai.request.model"] == "scripted"
    assert chat["gen_ai.response.model"] == "scripted"
    assert chat["gen_ai.provider.name"] == "turnlog.scripted"
    assert chat["turnlog.model.route"] == "default"
    assert chat["gen_ai.usage.input_tokens"] > 0
    # Phoenix reads the GenAI conventions: it files the call under the model.
    assert chat["llm.model_name"] == "scripted"
    tool = by_name["execute_tool add_days"]
    assert (tool["gen_ai.tool.name"], tool["gen_ai.tool.type"]) == (
        "add_days",
        "function",
    )
    # The demo exited cleanly: nothing was cut off, nothing is marked so.
    assert all("turnlog.unfinished" not in attributes(s) for s in received)
    assert all(span["status"]["code"] == 0 for span in received)
    assert by_name["turnlog.session"]["turnlog.session.closed"] is False


def test_json_is_refused_by_a_protobuf_only_receiver_in_one_line(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    demo = turnlog(tmp_path, "demo")
    session_id = re.findall(r"^session:\s+(\S+)", demo.stdout, re.MULTILINE)[0]
    refused = turnlog(
        tmp_path,
        *("traces", session_id, "--endpoint", phoenix.otlp_endpoint),
        *("--protocol", "http/json"),
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith("turnlog: error: ")
    assert "HTTP 415" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1
