"""The trace of a session whose process was SIGKILLed mid-turn, and of one
whose process exited cleanly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from traces_support import attributes_of, check_otlp, comparable, kill_child_at

from turnlog import Agent, Runtime, ScriptedModel, function_tool
from turnlog.cli.main import main
from turnlog.traces import session_spans

pytestmark = pytest.mark.subprocess


@function_tool
def write_file(path: str) -> str:
    """Would write a file (it is not run again after the crash)."""
    return "written"


def test_a_killed_session_still_gives_its_trace_and_the_revival_ends_it(
    sqlite_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TURNLOG_STORE", raising=False)
    kill_child_at(sqlite_url, "killed", "in-tool", "TOOL STARTED")
    capsys.readouterr()
    assert main(["--store", sqlite_url, "traces", "killed"]) == 0
    spans = check_otlp(msgspec.json.decode(capsys.readouterr().out))
    by_name = {span["name"]: span for span in spans}
    assert set(by_name) == {
        "turnlog.session",
        "invoke_agent assistant",
        "chat scripted",
        "execute_tool write_file",
    }
    for name in ("invoke_agent assistant", "execute_tool write_file"):
        assert attributes_of(by_name[name])["turnlog.unfinished"] is True
        assert by_name[name]["status"] == {"code": 2, "message": "unfinished"}
    assert "turnlog.unfinished" not in attributes_of(by_name["chat scripted"])
    # The session was not cut off, only its turn: its span is open, not failed.
    root = attributes_of(by_name["turnlog.session"])
    assert "turnlog.unfinished" not in root
    assert root["turnlog.session.closed"] is False
    assert by_name["turnlog.session"]["status"] == {"code": 0}

    # Opened again, the session closes the cut-off turn; exported live, the
    # turn and tool spans keep the ids, starts and parents the killed process
    # gave them, and equal the rebuild.
    exporter = InMemorySpanExporter()
    model = ScriptedModel(["recovered"])
    agent = Agent("assistant", model=model, tools=[write_file])
    with Runtime.open(sqlite_url, span_exporter=exporter) as rt:
        rt.create_session(agent, session_id="killed").close()
        rebuilt = {span.span_id: span for span in session_spans(rt, "killed")}
    live = [comparable(span) for span in exporter.get_finished_spans()]
    assert {span[1] for span in live} >= {
        span["spanId"] for span in spans if span["name"] != "chat scripted"
    }
    for span in live:
        assert span == comparable(rebuilt[span[1]])
        assert "turnlog.unfinished" not in span[7]
    tool = next(span for span in live if span[3] == "execute_tool write_file")
    assert tool[8] == "error"  # closed as interrupted, outcome unknown


def test_a_session_whose_process_exited_cleanly_has_nothing_marked_unfinished(
    tmp_path: Path,
) -> None:
    turnlog = str(Path(sys.executable).with_name("turnlog"))
    env = {k: v for k, v in os.environ.items() if k != "TURNLOG_STORE"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [turnlog, *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    demo = run("demo")
    assert demo.returncode == 0, demo.stderr
    [session_id] = re.findall(r"^session:\s+(\S+)", demo.stdout, re.MULTILINE)
    traces = run("traces", session_id)
    assert traces.returncode == 0, traces.stderr
    spans = check_otlp(msgspec.json.decode(traces.stdout))
    assert len(spans) == 5
    for span in spans:
        assert "turnlog.unfinished" not in attributes_of(span), span["name"]
        assert span["status"] == {"code": 0}
    [root] = [span for span in spans if span["name"] == "turnlog.session"]
    # Still open (it can be taken up again): it ends at its last event.
    assert attributes_of(root)["turnlog.session.closed"] is False
    last = max(int(span["endTimeUnixNano"]) for span in spans)
    assert int(root["endTimeUnixNano"]) == last
