"""The ``turnlog`` command line: demo, sessions and audit, run in-process.

Each test calls ``main([...])`` against its own SQLite file; one test runs
the installed console script as a real process to check the default store
location and the exit code the shell sees.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest

from turnlog import (
    Agent,
    ProviderError,
    RunConfig,
    RunEvent,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.cli.demo import AGENT_NAME, QUESTION, turnlog_executable
from turnlog.cli.main import main
from turnlog.domain.protocol import ToolCallBegin

FINAL_ANSWER = "100 days after 2024-02-10 is 2024-05-20 (Monday)."
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
AUDIT_LINE = re.compile(rf"^\s*(\d+)  ({TIME})  (\w+)\s+(.*)$")
DEMO_EVENTS = [
    "SessionCreated",
    "TurnStarted",
    "TurnOpened",
    "InputAccepted",
    "ModelStepStarted",
    "ModelStepCompleted",
    "UsageRecorded",
    "ToolCallStarted",
    "ToolCallFinished",
    "ModelStepStarted",
    "ModelStepCompleted",
    "UsageRecorded",
    "TurnCompleted",
]


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "log.sqlite3"


@pytest.fixture
def store(log_path: Path) -> str:
    return f"sqlite:///{log_path}"  # four slashes: log_path is absolute


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_demo(capsys: pytest.CaptureFixture[str], store: str, *extra: str) -> str:
    """Runs the demo, checks it succeeded, returns its session id."""
    code, out, err = run(capsys, "--store", store, "demo", *extra)
    assert (code, err) == (0, "")
    match = re.search(r"^session:\s+(\S+) \(run completed\)$", out, re.MULTILINE)
    assert match is not None, out
    return match.group(1)


def audit_lines(out: str) -> list[tuple[int, str, str, str]]:
    header, *lines = out.splitlines()
    assert header.split() == ["SEQ", "TIME", "(UTC)", "EVENT", "SUMMARY"]
    parsed = []
    for line in lines:
        match = AUDIT_LINE.match(line)
        assert match is not None, line
        sequence, time, name, summary = match.groups()
        parsed.append((int(sequence), time, name, summary))
    return parsed


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("turnlog: error: ")
    assert "Traceback" not in err
    return lines[0]


# -- demo -------------------------------------------------------------------


def test_demo_prints_the_conversation_and_where_it_is_logged(
    capsys: pytest.CaptureFixture[str], store: str, log_path: Path
) -> None:
    code, out, err = run(capsys, "--store", store, "demo")

    assert (code, err) == (0, "")
    expected_in_order = [
        f"user         {QUESTION}",
        'tool call    add_days {"start": "2024-02-10", "days": 100}',
        "tool result  add_days -> 2024-05-20 (Monday)",
        f"assistant    {FINAL_ANSWER}",
        f"final answer: {FINAL_ANSWER}",
        "session:      demo-",
        f"log:          {log_path}",
        f"audit it:     {turnlog_executable()} --store {store} audit demo-",
        "next steps:",
        f"then {turnlog_executable()} --store {store} run",
        f"{turnlog_executable()} --store {store} sessions",
    ]
    positions = [out.find(text) for text in expected_in_order]
    assert -1 not in positions, out
    assert positions == sorted(positions), out
    assert log_path.exists()


def test_each_demo_run_gets_a_fresh_session(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    first = run_demo(capsys, store)
    second = run_demo(capsys, store)

    assert first != second
    assert re.fullmatch(r"demo-[0-9a-f]{12}", first)
    code, out, _ = run(capsys, "--store", store, "sessions")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == [first, second]


def test_demo_with_session_continues_that_session(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    assert run_demo(capsys, store, "--session", "mine") == "mine"
    assert run_demo(capsys, store, "--session", "mine") == "mine"

    code, out, _ = run(capsys, "--store", store, "sessions")
    assert code == 0
    assert out.splitlines()[1].split()[:3] == ["mine", "2", "idle"]
    code, out, _ = run(capsys, "--store", store, "audit", "mine")
    names = [name for _, _, name, _ in audit_lines(out)]
    assert names.count("TurnCompleted") == 2
    # Each run's tool call has its own id, as a real model's would.
    call_ids = re.findall(r"\(call (\S+)\)", out)
    assert len(call_ids) == 2
    assert len(set(call_ids)) == 2


def test_demo_rejects_an_unusable_session_id(
    capsys: pytest.CaptureFixture[str], store: str, log_path: Path
) -> None:
    code, out, err = run(capsys, "--store", store, "demo", "--session", "a\tb")

    assert code == 2
    assert out == ""
    assert "printable" in one_error_line(err)
    assert not log_path.exists()


def test_demo_will_not_take_over_a_running_session(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    # Opening a session with a running turn closes that turn as crashed: the
    # demo must not do that to a turn another runtime is running right now.
    with turn_in_progress(store, "busy", AGENT_NAME):
        code, out, err = run(capsys, "--store", store, "demo", "--session", "busy")

        assert (code, out) == (2, "")
        assert "has a turn running" in one_error_line(err)
    # Leaving turn_in_progress checked that the turn then completed normally.


def test_demo_will_not_write_to_another_agents_session(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    with Runtime.open(store) as runtime:
        agent = Agent("assistant", model=ScriptedModel(["hello"]))
        runtime.create_session(agent, session_id="theirs").prompt("hi", timeout=10)
    _, before, _ = run(capsys, "--store", store, "audit", "theirs")

    code, out, err = run(capsys, "--store", store, "demo", "--session", "theirs")

    assert (code, out) == (2, "")
    assert one_error_line(err) == (
        "turnlog: error: session 'theirs' belongs to agent 'assistant'; "
        "the demo continues only its own sessions"
    )
    _, after, _ = run(capsys, "--store", store, "audit", "theirs")
    assert after == before


# -- sessions ---------------------------------------------------------------


def test_sessions_lists_turns_status_and_last_activity(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    session_id = run_demo(capsys, store)

    code, out, err = run(capsys, "--store", store, "sessions")

    assert (code, err) == (0, "")
    header, row = out.splitlines()
    assert header.split() == ["SESSION", "TURNS", "STATUS", "LAST", "ACTIVITY", "(UTC)"]
    name, turns, status, last_activity = row.split()
    assert (name, turns, status) == (session_id, "1", "idle")
    _, out, _ = run(capsys, "--store", store, "audit", session_id)
    assert last_activity == audit_lines(out)[-1][1]


def test_sessions_shows_closed_and_idle_sessions(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    with Runtime.open(store) as runtime:
        agent = Agent("quiet", model=ScriptedModel(["done"]))
        runtime.create_session(agent, session_id="closed-one").close()
        runtime.create_session(agent, session_id="idle-one")

    code, out, _ = run(capsys, "--store", store, "sessions")

    assert code == 0
    statuses = {line.split()[0]: line.split()[2] for line in out.splitlines()[1:]}
    assert statuses == {"closed-one": "closed", "idle-one": "idle"}


@contextmanager
def turn_in_progress(store: str, session_id: str, agent_name: str) -> Iterator[None]:
    """Holds a turn of ``session_id`` mid-way (its tool blocks) until exit.

    On exit the tool is released and the turn must complete normally.
    """
    release = threading.Event()

    @function_tool
    def wait_for_release() -> str:
        """Blocks until the test lets it finish."""
        release.wait(timeout=20)
        return "released"

    model = ScriptedModel([calls(tool_call("wait_for_release")), "done"])
    agent = Agent(agent_name, model=model, tools=[wait_for_release])
    with Runtime.open(store) as runtime, ThreadPoolExecutor(1) as pool:
        session = runtime.create_session(agent, session_id=session_id)
        events = session.subscribe()
        run_result = pool.submit(session.prompt, "go", timeout=20)
        try:
            while True:  # until the tool call is recorded: the turn is mid-way
                item = events.get(timeout=20)
                msg = item.event.msg if isinstance(item, RunEvent) else None
                if isinstance(msg, ToolCallBegin):
                    break
            yield
        finally:
            release.set()
        assert run_result.result(timeout=20).completed


def test_sessions_shows_a_session_whose_turn_is_running(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    with turn_in_progress(store, "busy", "slow"):
        code, running, _ = run(capsys, "--store", store, "sessions")

    assert code == 0
    assert running.splitlines()[1].split()[:3] == ["busy", "1", "running"]
    _, idle, _ = run(capsys, "--store", store, "sessions")
    assert idle.splitlines()[1].split()[:3] == ["busy", "1", "idle"]


def test_sessions_says_so_when_there_are_none(
    capsys: pytest.CaptureFixture[str], store: str, log_path: Path
) -> None:
    code, out, err = run(capsys, "--store", store, "sessions")
    assert (code, err) == (0, "")
    assert (
        out == f"no sessions: there is no log at {log_path} yet (try `turnlog demo`)\n"
    )
    assert not log_path.exists()  # looking did not create a log

    Runtime.open(store).close()
    code, out, err = run(capsys, "--store", store, "sessions")
    assert (code, err) == (0, "")
    assert out == f"no sessions in the log at {log_path}\n"


# -- audit ------------------------------------------------------------------


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
        {"sequence", "session_seq", "time", "event", "data"}
    ] * len(DEMO_EVENTS)
    assert [record["event"] for record in records] == DEMO_EVENTS
    # its place in the session, which the hash chain numbers from 1
    assert [r["session_seq"] for r in records] == list(range(1, len(DEMO_EVENTS) + 1))
    text_lines = audit_lines(text)
    assert [r["sequence"] for r in records] == [line[0] for line in text_lines]
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


# -- errors -----------------------------------------------------------------


COMMANDS = [
    ["demo"],
    ["sessions"],
    ["audit", "s1"],
    ["audit", "s1", "--verify"],
    ["audit", "--verify", "--all"],
    ["replay", "s1"],
    ["export", "s1"],
    ["rebuild"],
    ["project"],
]
"""Every command that opens a log, with arguments it accepts."""


@pytest.mark.parametrize(
    "url", ["ftp://x", "no-scheme", "sqlite:/relative", "memory://extra"]
)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_store_url_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], url: str, command: list[str]
) -> None:
    code, out, err = run(capsys, "--store", url, *command)

    assert (code, out) == (2, "")
    assert url in one_error_line(err)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_that_is_not_a_log_is_refused_and_left_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    garbage = tmp_path / "garbage.bin"
    content = bytes(range(256)) * 4
    garbage.write_bytes(content)

    code, out, err = run(capsys, "--store", f"sqlite:///{garbage}", *command)

    assert code == 1
    assert out == ""
    assert one_error_line(err) == (
        f"turnlog: error: {garbage} is not a turnlog log (not an SQLite database)"
    )
    assert garbage.read_bytes() == content


def test_the_log_is_intact_after_failed_commands(
    capsys: pytest.CaptureFixture[str], store: str, tmp_path: Path
) -> None:
    session_id = run_demo(capsys, store)
    _, before, _ = run(capsys, "--store", store, "audit", session_id)
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\x00not a database\xff" * 64)

    failures = [
        ["--store", "ftp://x", "audit", session_id],
        ["--store", f"sqlite:///{garbage}", "demo"],
        ["--store", store, "audit", "nope"],
        ["--store", store, "demo", "--session", ""],
        ["--store", store, "frobnicate"],
    ]
    for argv in failures:
        assert main(argv) != 0
    capsys.readouterr()

    code, after, err = run(capsys, "--store", store, "audit", session_id)
    assert (code, err) == (0, "")
    assert after == before
    _, out, _ = run(capsys, "--store", store, "sessions")
    assert [line.split()[0] for line in out.splitlines()[1:]] == [session_id]


def test_store_comes_from_turnlog_store_when_not_given(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: str,
    log_path: Path,
) -> None:
    monkeypatch.setenv("TURNLOG_STORE", store)

    code, out, _ = run(capsys, "demo")

    assert code == 0
    assert f"log:          {log_path}" in out
    # The variable applies to the next command too, so the hint omits it.
    hint = rf"^audit it:     {re.escape(turnlog_executable())} audit demo-\w+$"
    assert re.search(hint, out, re.MULTILINE)
    assert log_path.exists()


def test_usage_errors_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "required: COMMAND" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "audit" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == "turnlog 0.1.0\n"


# -- the installed console script --------------------------------------------


def console_script() -> Path:
    script = Path(sys.executable).parent / "turnlog"
    assert script.exists(), "install the package: pip install -e ."
    return script


@pytest.mark.subprocess
def test_console_script_demo_uses_the_default_store_in_the_working_directory(
    tmp_path: Path,
) -> None:
    env = {key: value for key, value in os.environ.items() if key != "TURNLOG_STORE"}

    def turnlog(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [console_script(), *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    demo = turnlog("demo")

    default_log = tmp_path / ".turnlog" / "turnlog.sqlite3"
    assert (demo.returncode, demo.stderr) == (0, "")
    assert default_log.exists()
    assert f"log:          {default_log}" in demo.stdout
    hint = re.search(r"^audit it:     (\S+) audit (demo-\w+)$", demo.stdout, re.M)
    assert hint is not None, demo.stdout
    assert hint.group(1) == str(console_script().absolute())

    # The hint runs as printed, without the venv's bin on PATH.
    audit = subprocess.run(
        shlex.split(hint.group(0).removeprefix("audit it:")),
        cwd=tmp_path,
        env={**env, "PATH": os.defpath},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (audit.returncode, audit.stderr) == (0, "")
    assert "TurnCompleted" in audit.stdout

    unknown = turnlog("audit", "nope")
    assert unknown.returncode == 2
    assert unknown.stdout == ""
    one_error_line(unknown.stderr)
