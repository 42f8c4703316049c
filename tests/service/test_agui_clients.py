"""Real AG-UI clients, unmodified, against ``turnlog serve`` as a process.

- ``@ag-ui/client``'s ``HttpAgent`` (npm, the version pinned in
  ``agui_client/package-lock.json``; ``npm ci`` installs it into
  ``agui_client/node_modules`` when it is not there) runs a conversation
  on a thread it made up, then an approval interrupt and its resume:
  ``agui_client/run_client.mjs`` prints what the client saw.
- The ``ag-ui-validate`` command line (PyPI, pinned in the ``test``
  extra) checks the live endpoint, which it calls with a thread of its
  own, none created beforehand.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from service_support import HERE
from test_serve_process import TOKEN, client, start_server, stop

pytestmark = pytest.mark.subprocess

CLIENT_DIR = HERE / "agui_client"
VALIDATOR = str(Path(sys.executable).with_name("ag-ui-validate"))


def pinned_client_version() -> str:
    lock = json.loads((CLIENT_DIR / "package-lock.json").read_text())
    return str(lock["packages"]["node_modules/@ag-ui/client"]["version"])


@pytest.fixture(scope="session")
def node_client() -> Path:
    """The pinned ``@ag-ui/client``, installed from the lock file if needed."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed to run @ag-ui/client (node 20+)")
    installed = CLIENT_DIR / "node_modules" / "@ag-ui" / "client" / "package.json"
    # Each test process (pytest-xdist's workers) runs this fixture: the
    # first installs, under a lock, and the others find it installed.
    with (CLIENT_DIR / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (
            not installed.exists()
            or json.loads(installed.read_text())["version"] != pinned_client_version()
        ):
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=CLIENT_DIR,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if done.returncode != 0:
                pytest.fail(f"npm ci failed in {CLIENT_DIR}:\n{done.stderr}")
    return Path(node)


def run_node_client(node: Path, url: str) -> dict[str, Any]:
    env = {**os.environ, "TURNLOG_URL": url, "TURNLOG_TOKEN": TOKEN}
    done = subprocess.run(
        [str(node), "run_client.mjs"],
        cwd=CLIENT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def user_and_answers(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in messages]


@pytest.mark.timeout(180)
def test_httpagent_runs_a_conversation_and_an_approval_on_threads_it_made(
    node_client: Path, tmp_path: Path
) -> None:
    proc, url = start_server(
        f"sqlite:///{tmp_path}/log.sqlite3",
        tmp_path,
        "--demo",
        "--agent",
        "service_agents:approval_agent",
    )
    try:
        report = run_node_client(node_client, url)
        with client(url) as http:
            sessions = {
                s["session_id"]: s["agent"]
                for s in http.get("/sessions").json()["sessions"]
            }
            talk, approval = report["conversation"], report["approval"]
            server_messages = http.get(f"/sessions/{talk['threadId']}").json()[
                "messages"
            ]
            approvals = http.get(f"/sessions/{approval['threadId']}/approvals").json()
    finally:
        stop(proc)

    # Threads the client made (UUIDs) became sessions, with the agents
    # forwardedProps named.
    assert sessions == {talk["threadId"]: "demo", approval["threadId"]: "publisher"}
    uuid.UUID(talk["threadId"])

    first, second = talk["runs"]
    assert first["result"] == "Your message has 3 words."
    assert second["result"] == "Your message has 5 words."
    for one in (first, second):
        assert one["types"][0] == "RUN_STARTED"
        assert one["types"][-1] == "RUN_FINISHED"
        assert "TOOL_CALL_RESULT" in one["types"]
        assert one["newMessageRoles"] == ["assistant", "tool", "assistant"]
    assert user_and_answers(talk["messages"]) == [
        ("user", "three little words"),
        ("assistant", None),
        ("tool", "3"),
        ("assistant", "Your message has 3 words."),
        ("user", "and now five words here"),
        ("assistant", None),
        ("tool", "5"),
        ("assistant", "Your message has 5 words."),
    ]
    assert talk["messages"][5]["toolCalls"] == [
        {"name": "count_words", "arguments": {"text": "and now five words here"}}
    ]
    # What the client holds is what the log holds.
    assert [m["content"] for m in server_messages if m["role"] == "user"] == [
        "three little words",
        "and now five words here",
    ]

    asked, resumed = approval["asked"], approval["resumed"]
    assert asked["types"][-1] == "RUN_FINISHED"
    (interrupt,) = asked["pendingInterrupts"]
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["metadata"] == {
        "toolName": "publish",
        "arguments": {"text": "hello"},
    }
    assert resumed["pendingInterrupts"] == []
    assert resumed["result"] == "All done: counted and published."
    published = [m for m in approval["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in published] == ["3", "published 'hello'"]
    assert approvals["approvals"] == []


@pytest.mark.timeout(120)
def test_ag_ui_validate_passes_against_the_live_endpoint_on_a_new_thread(
    tmp_path: Path,
) -> None:
    proc, url = start_server(f"sqlite:///{tmp_path}/log.sqlite3", tmp_path, "--demo")
    try:
        with client(url) as http:
            assert http.get("/sessions").json()["sessions"] == []
        done = subprocess.run(
            [
                VALIDATOR,
                f"{url}/agui",
                "--header",
                f"Authorization: Bearer {TOKEN}",
                "--json",
                "--max-warnings",
                "0",
                "--timeout",
                "60",
            ],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        with client(url) as http:
            sessions = http.get("/sessions").json()["sessions"]
    finally:
        stop(proc)
    assert done.returncode == 0, (done.stdout, done.stderr)
    report = json.loads(done.stdout)
    assert report["tool"] == {"name": "ag-ui-validate", "version": "0.4.0"}
    assert report["summary"]["errors"] == report["summary"]["warnings"] == 0
    assert report["eventCount"] > 3
    # The validator's own thread id became a session of the default agent.
    (session,) = sessions
    assert session["session_id"].startswith("thread_")
    assert session["agent"] == "demo"
