"""The ``continue:`` line ``turnlog run`` ends with works as pasted.

It names the full path of the executable that ran, the log, the route
file (made absolute) and the options that shape the session, so pasted
into a shell in another directory, with none of the first run's settings
in the environment, it continues the same session on the same route.
"""

from __future__ import annotations

import importlib
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from fake_openai import FakeOpenAI, Reply
from pty_support import (
    PROMPT,
    TIMEOUT,
    TURNLOG,
    Spawn,
    clean_environment,
    output_of,
    quits,
    started,
)

from turnlog.cli.main import main

pytestmark = pytest.mark.subprocess

CONTINUE = re.compile(r"; continue: (.+)$", re.MULTILINE)


@pytest.fixture
def shell() -> Iterator[list[pexpect.spawn]]:
    """Children started through a shell, stopped after the test."""
    children: list[pexpect.spawn] = []
    yield children
    for child in children:
        if child.isalive():
            child.terminate(force=True)
        child.close(force=True)


def test_the_continue_command_pasted_into_a_shell_continues_the_same_route(
    spawn: Spawn,
    fake: FakeOpenAI,
    tmp_path: Path,
    shell: list[pexpect.spawn],
) -> None:
    # The route the session runs on exists only in this file, outside the
    # working directory and named relative to it.
    (tmp_path / "routes.toml").write_text(
        f"""
default_route = "cloud"

[routes.cloud]
model = "gpt-cloud"
base_url = "{fake.base_url}"

[routes.special]
model = "special-model"
base_url = "{fake.base_url}"
api = "chat"
"""
    )
    fake.script(Reply(text="First answer."), Reply(text="Second answer."))
    first = spawn(
        "--config", "../routes.toml", "--model", "special", "--tools", configured=False
    )
    session_id = started(first)
    first.sendline("remember this")
    first.expect(r"assistant> First answer\.")
    first.expect(PROMPT)
    output = quits(first)
    pasted = CONTINUE.search(output.replace("\r\n", "\n"))
    assert pasted is not None, output
    line = pasted.group(1).strip()
    assert line.startswith(f"{TURNLOG} --store sqlite:////"), line
    assert f"--config {tmp_path / 'routes.toml'}" in line

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = pexpect.spawn(
        "/bin/sh",
        ["-c", line],
        cwd=str(elsewhere),
        env=clean_environment(),  # nothing of the first run's settings
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 400),
    )
    again.logfile_read = io.StringIO()
    shell.append(again)
    again.expect(rf"turnlog run: session {session_id} \(resumed: 2 earlier messages\)")
    again.expect(rf"model: special \(special-model at {re.escape(fake.base_url)}, chat")
    again.expect(PROMPT)
    again.sendline("what did I say?")
    again.expect(r"assistant> Second answer\.")
    again.expect(PROMPT)
    quits(again)
    assert "Traceback" not in output_of(again)
    assert fake.paths() == ["/v1/chat/completions"] * 2
    second = fake.requests[1].body
    assert second["model"] == "special-model"
    assert "remember this" in str(second["messages"])  # the same session
    assert {tool["function"]["name"] for tool in second["tools"]} >= {"read_file"}


def test_the_default_log_is_named_by_its_absolute_path(
    capsys: pytest.CaptureFixture[str],
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without --store the log is .turnlog/turnlog.sqlite3 under the working
    # directory: pasted elsewhere, a bare command would open another log.
    command_line = importlib.import_module("turnlog.cli.main")
    monkeypatch.setattr(
        command_line,
        "run_interactive",
        lambda options, settings, terminal: ("s-1", "somewhere"),
    )
    monkeypatch.setattr(command_line, "load_settings", lambda config: None)

    code = main(["run", "--approval", "deny", "--no-mcp"])

    out = capsys.readouterr().out
    assert code == 0
    log = workspace / ".turnlog" / "turnlog.sqlite3"
    assert out.rstrip().endswith(
        f"continue: {TURNLOG} --store sqlite:///{log} run --session s-1 --no-mcp "
        "--approval deny"
    )
