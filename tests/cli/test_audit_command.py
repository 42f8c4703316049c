"""``turnlog audit SESSION``: the timeline, read from the log as it stands."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest
from cli_support import (
    DEMO_EVENTS,
    FINAL_ANSWER,
    audit_lines,
    one_error_line,
    run,
    run_demo,
)

from turnlog import (
    Agent,
    ProviderError,
    RunConfig,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.cli.demo import QUESTION


def test_audit_shows_the_demo_timeline_in_log_order(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    session_id = run_demo(capsys, store)

    code, out, err = run(capsys, "--store", store, "audit", session_id)

    assert (code, err) == (0, "")
    lines = audit_lines(out)
    assert [name for _, _, name, _ in lines] == DEMO_EVENTS
    sequences = [sequence for sequence, _, _, _ in lines]
    assert sequences == sorted(set(sequences))
    times = [time for _, time, _, _ in lines]
    assert times == sorted(times)
    summaries = {name: summary for _, _, name, summary in lines}
    assert summaries["InputAccepted"] == f'prompt "{QUESTION}"'
    assert summaries["ToolCallStarted"].startswith(
        'add_days {"start": "2024-02-10", "days": 100} (call call_'
    )
    assert summaries["ToolCallFinished"] == 'add_days ok: "2024-05-20 (Monday)"'
    assert summaries["TurnCompleted"] == f'turn 1, "{FINAL_ANSWER}"'
    # The dict kept the last of the two model steps: the final answer.
    assert summaries["ModelStepCompleted"] == (
        f'step 2, route default, usage in=61 out=14 total=75, says "{FINAL_ANSWER}"'
    )
    first_step = next(s for _, _, n, s in lines if n == "ModelStepCompleted")
    assert first_step.startswith(
        "step 1, route default, usage in=48 out=22 total=70, calls add_days"
    )
    assert summaries["UsageRecorded"] == (
        "model call, step 2, route default, usage in=61 out=14 total=75"
    )


def test_audit_json_prints_one_object_per_event(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    session_id = run_demo(capsys, store)
    _, text, _ = run(capsys, "--store", store, "audit", session_id)

    code, out, err = run(capsys, "--store", store, "audit", session_id, "--json")

    assert (code, err) == (0, "")
    records = [json.loads(line) for line in out.splitlines()]
    assert [set(record) for record in records] == [
        {"position", "sequence", "time", "event", "data"}
    ] * len(DEMO_EVENTS)
    assert [record["event"] for record in records] == DEMO_EVENTS
    # its place in the session, which the hash chain numbers from 1
    assert [r["sequence"] for r in records] == list(range(1, len(DEMO_EVENTS) + 1))
    text_lines = audit_lines(text)
    # its place in the whole log, which the text timeline's POS column shows
    assert [r["position"] for r in records] == [line[0] for line in text_lines]
    # Same instants as the text timeline, at full (microsecond) precision.
    for record, line in zip(records, text_lines, strict=True):
        assert re.fullmatch(r"\S+\.\d{6}Z", record["time"])
        assert record["time"][:23] == line[1][:23]
    finished = records[DEMO_EVENTS.index("ToolCallFinished")]["data"]
    assert finished["output"] == "2024-05-20 (Monday)"
    assert finished["is_error"] is False
    assert finished["session_id"] == session_id


def test_audit_summarizes_approvals_and_failures(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    @function_tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Deletes a file."""
        return f"deleted {path}"  # never runs: the policy denies it

    model = ScriptedModel(
        [
            calls(tool_call("delete_file", {"path": "notes.txt"})),
            "I was not allowed to delete it.",
            ProviderError("backend unavailable"),
        ]
    )
    agent = Agent("careful", model=model, tools=[delete_file])
    with Runtime.open(store) as runtime:
        session = runtime.create_session(
            agent, session_id="s1", run_config=RunConfig(approval_policy="deny")
        )
        assert session.prompt("delete notes.txt", timeout=10).completed
        assert session.prompt("try again", timeout=10).status == "failed"

    code, out, err = run(capsys, "--store", store, "audit", "s1")

    assert (code, err) == (0, "")
    summaries = {name: summary for _, _, name, summary in audit_lines(out)}
    requested = re.fullmatch(
        r'delete_file \{"path": "notes.txt"\} \(request (\S+)\)',
        summaries["ApprovalRequested"],
    )
    assert requested is not None, summaries["ApprovalRequested"]
    # The decision names the tool, found through its request id.
    decided = re.fullmatch(
        rf"delete_file: deny by policy, waited (\d+) ms \(request {requested[1]}\)",
        summaries["ApprovalDecided"],
    )
    assert decided is not None, summaries["ApprovalDecided"]
    # how long the request waited: between the two events' own timestamps
    _, records, _ = run(capsys, "--store", store, "audit", "s1", "--json")
    times = {
        record["event"]: datetime.fromisoformat(record["time"])
        for record in map(json.loads, records.splitlines())
    }
    waited = times["ApprovalDecided"] - times["ApprovalRequested"]
    assert int(decided[1]) == round(waited.total_seconds() * 1000)
    assert summaries["ToolCallFinished"].startswith('delete_file error: "')
    assert summaries["ModelStepFailed"] == (
        "step 1, route default, ProviderError: backend unavailable"
    )
    assert summaries["TurnAborted"] == (
        "turn 2 failed: model step failed: ProviderError: backend unavailable"
    )


def test_audit_escapes_control_characters_from_the_log(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    model = ScriptedModel(["fine"])
    with Runtime.open(store) as runtime:
        session = runtime.create_session(Agent("a", model=model), session_id="s1")
        session.prompt("red \x1b[31malert\x1b[0m\nsecond line " + "x" * 80, timeout=10)

    _, out, _ = run(capsys, "--store", store, "audit", "s1")

    assert "\x1b" not in out
    prompt = next(s for _, _, n, s in audit_lines(out) if n == "InputAccepted")
    assert prompt.startswith(r'prompt "red \x1b[31malert\x1b[0m second line xxx')
    assert prompt.endswith('..."')
    assert len(prompt) == len('prompt ""') + 60


def test_audit_of_an_unknown_session_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], store: str, log_path: Path
) -> None:
    code, out, err = run(capsys, "--store", store, "audit", "nope")
    assert (code, out) == (2, "")
    assert "'nope'" in one_error_line(err)
    assert not log_path.exists()  # no log yet, and asking made none

    run_demo(capsys, store)
    code, out, err = run(capsys, "--store", store, "audit", "nope")
    assert (code, out) == (2, "")
    assert one_error_line(err) == (
        f"turnlog: error: no session 'nope' in the log at {log_path}"
    )
