"""The ``turnlog`` command line: demo, sessions and errors, run in-process.

Each test calls ``main([...])`` against its own SQLite file; one test runs
the installed console script as a real process to check the default store
location and the exit code the shell sees.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from cli_support import (
    FINAL_ANSWER,
    audit_lines,
    one_error_line,
    run,
    run_demo,
)

from turnlog import (
    Agent,
    RunEvent,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.cli.demo import AGENT_NAME, QUESTION, turnlog_executable
from turnlog.cli.main import main
from turnlog.domain.protocol import ToolCallStartedMsg

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
    assert header.split() == [
        "SESSION",
        "TURNS",
        "STATE",
        "LAST",
        "ACTIVITY",
        "(UTC)",
        "FIRST",
        "PROMPT",
    ]
    name, turns, status, last_activity, *prompt = row.split()
    assert (name, turns, status) == (session_id, "1", "idle")
    assert " ".join(prompt) == QUESTION
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
                if isinstance(msg, ToolCallStartedMsg):
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
