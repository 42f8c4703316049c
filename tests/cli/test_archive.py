"""``turnlog archive``: finished sessions move to an archive that verifies on
its own, leave the live log and its views in one step, and ``audit`` says
where they went; a SIGKILL mid-archive loses no session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import BinaryIO

import pytest

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.cli.main import main
from turnlog.domain.ids import session_uuid
from turnlog.store.archive import archived_session
from turnlog.store.log import Store
from turnlog.store.transfer import export_heads


def _write(url: str, names: list[str], turns: int = 2) -> None:
    with Runtime.open(url) as rt:
        for name in names:
            agent = Agent("a", model=ScriptedModel(["ok"] * turns))
            session = rt.create_session(agent, session_id=name)
            for _ in range(turns):
                session.prompt("hi", timeout=30)


RUN_TURNLOG = "import sys; from turnlog.cli.main import main; sys.exit(main())\n"

# Prefixed to RUN_TURNLOG: the child says so once the archive file is in
# place, then waits (on its stdin, which the test never writes) before it
# removes the sessions from the log, so the kill lands between the two
# without the test polling for the file.
WAIT_BEFORE_REMOVING = """\
import sys
from turnlog.store import archive

remove = archive._remove

def announced(*args):
    print("archived", flush=True)
    sys.stdin.read()
    return remove(*args)

archive._remove = announced
"""


def _open_for_reading(
    fifo: Path, opened: list[BinaryIO], done: threading.Event
) -> None:
    """Opens ``fifo`` for reading, which returns once a writer opens it, and
    keeps it open (in ``opened``, for the test to close) without reading:
    the writer stays blocked until it is killed."""
    opened.append(fifo.open("rb"))
    done.set()


def _in_log(url: str, session_id: str) -> bool:
    store = Store(url)
    try:
        return bool(store.stored_rows([session_uuid(session_id)]))
    finally:
        store.close()


def test_an_archived_session_leaves_the_log_and_audit_says_where_it_went(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(store_url, ["old", "kept"])
    archive = tmp_path / "archive.jsonl"
    assert (
        main(["--store", store_url, "archive", "--session", "old", "-o", str(archive)])
        == 0
    )
    assert "archived 1 sessions" in capsys.readouterr().out
    assert not _in_log(store_url, "old")
    assert _in_log(store_url, "kept")
    assert set(export_heads(archive.read_bytes().splitlines())) == {"old"}
    # The live log and its views: the session is gone, the rest verifies.
    assert main(["--store", store_url, "sessions"]) == 0
    listed = capsys.readouterr().out
    assert "kept" in listed
    assert "old" not in listed
    assert main(["--store", store_url, "audit", "--verify", "--all"]) == 0
    assert "old" not in capsys.readouterr().out
    # audit says where it went, and checks the archive against the log's record.
    assert main(["--store", store_url, "audit", "old"]) == 0
    said = capsys.readouterr().out
    assert f"old: archived to {archive}" in said
    assert "--against" in said
    command = ["--store", store_url, "audit", "old", "--verify", "--against"]
    assert main([*command, str(archive)]) == 0
    assert "old: ok" in capsys.readouterr().out
    # An archive edited afterwards fails against the head the log recorded.
    lines = archive.read_bytes().splitlines()
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(b"\n".join(lines[:-1]) + b"\n")
    assert main([*command, str(forged)]) == 1
    assert "FAILED" in capsys.readouterr().out
    # The archive imports, whole, into another log, and verifies there.
    other = f"sqlite:///{tmp_path}/other.sqlite3"
    assert main(["--store", other, "import", str(archive)]) == 0
    assert main(["--store", other, "audit", "old", "--verify"]) == 0
    # Imported back into the live log and archived again: the newest counts.
    assert main(["--store", store_url, "import", str(archive)]) == 0
    again = tmp_path / "again.jsonl"
    assert (
        main(["--store", store_url, "archive", "--session", "old", "-o", str(again)])
        == 0
    )
    capsys.readouterr()
    assert main(["--store", store_url, "audit", "old"]) == 0
    assert f"archived to {again}" in capsys.readouterr().out
    # Archiving to a file that exists is refused; nothing moves.
    assert (
        main(["--store", store_url, "archive", "--session", "kept", "-o", str(archive)])
        == 2
    )
    assert _in_log(store_url, "kept")


def test_before_a_date_selects_the_finished_sessions_last_active_before_it(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(sqlite_url, ["a1", "a2"])
    out = tmp_path / "none.jsonl"
    assert (
        main(
            ["--store", sqlite_url, "archive", "--before", "2000-01-01", "-o", str(out)]
        )
        == 0
    )
    assert "no finished sessions" in capsys.readouterr().out
    assert not out.exists()
    assert (
        main(
            ["--store", sqlite_url, "archive", "--before", "2999-01-01", "-o", str(out)]
        )
        == 0
    )
    assert not _in_log(sqlite_url, "a1")
    assert not _in_log(sqlite_url, "a2")
    assert set(export_heads(out.read_bytes().splitlines())) == {"a1", "a2"}
    assert (
        main(["--store", sqlite_url, "archive", "--before", "someday", "-o", "x"]) == 2
    )


@pytest.mark.parametrize("kill_when", ["partial", "archive"])
def test_a_sigkill_mid_archive_loses_no_session(
    store_url: str, tmp_path: Path, kill_when: str
) -> None:
    names = [f"s{n}" for n in range(12)]
    _write(store_url, names, turns=3)
    archive = tmp_path / "archive.jsonl"
    watched = (
        archive.with_name(f".{archive.name}.partial")
        if kill_when == "partial"
        else archive
    )
    writing = threading.Event()
    held: list[BinaryIO] = []
    if kill_when == "partial":
        # The partial archive's name made a FIFO: the child's open for
        # writing waits for a reader, so the child stops right there, mid
        # archive, until this process opens it (on a thread: that open
        # waits for the child's). No race with a child that runs the whole
        # archive while this process waits for a core.
        os.mkfifo(watched)
        reader = threading.Thread(
            target=_open_for_reading, args=(watched, held, writing)
        )
        reader.start()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (WAIT_BEFORE_REMOVING if kill_when == "archive" else "") + RUN_TURNLOG,
            "--store",
            store_url,
            "archive",
            "--before",
            "2999-01-01",
            "-o",
            str(archive),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,  # not the checkout, whose turnlog/ is not the package
    )
    assert child.stdin is not None
    assert child.stdout is not None
    assert child.stderr is not None
    try:
        if kill_when == "partial":
            assert writing.wait(120), "the archive did not start"
        else:
            # The line comes once the archive is in place; EOF if it ended.
            assert child.stdout.readline() == b"archived\n", child.communicate()[1]
            assert watched.exists()
        assert child.poll() is None, child.communicate()[1]
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(30)
        for pipe in (child.stdin, child.stdout, child.stderr):
            pipe.close()
        if kill_when == "partial":
            if not writing.is_set():  # the child never opened it: free the reader
                os.close(os.open(watched, os.O_WRONLY | os.O_NONBLOCK))
            reader.join(30)
            for file in held:
                file.close()
    # Every session is whole in the live log, or archived in a file that
    # verifies, with the log's record of where: never neither.
    archived = (
        export_heads(archive.read_bytes().splitlines()) if archive.exists() else {}
    )
    store = Store(store_url)
    try:
        for name in names:
            if store.stored_rows([session_uuid(name)]):
                continue
            record = archived_session(store, name)
            assert record is not None, f"{name} is gone, and recorded nowhere"
            assert name in archived
            assert (archived[name][1].seq, archived[name][1].sha256) == (
                record.head_seq,
                record.head_sha256,
            )
    finally:
        store.close()
    assert main(["--store", store_url, "audit", "--verify", "--all"]) == 0


def test_a_session_with_a_turn_in_progress_is_not_archived(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import threading

    from turnlog import ApprovalDecision, calls, function_tool, tool_call
    from turnlog.events import ApprovalRequestedMsg
    from turnlog.testing import wait_for

    @function_tool(needs_approval=True)
    def deploy() -> str:
        return "deployed"

    _write(sqlite_url, ["done"])
    model = ScriptedModel([calls(tool_call("deploy", {})), "ok"])
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[deploy]), session_id="busy"
        )
        idle = rt.create_session(
            Agent("a", model=ScriptedModel(["ok"])), session_id="open"
        )
        idle.prompt("hi", timeout=30)  # finished, but open here (a live lease)
        asked = session.subscribe()
        prompting = threading.Thread(target=lambda: session.prompt("go", timeout=60))
        prompting.start()
        wait_for(asked, lambda m: isinstance(m, ApprovalRequestedMsg), timeout=30)
        asked.close()
        assert session.pending_approvals()
        out = tmp_path / "a.jsonl"
        busy = ["--store", sqlite_url, "archive", "--session", "busy", "-o", str(out)]
        assert main(busy) == 2
        assert "waiting_for_approval" in capsys.readouterr().err
        assert (
            main(
                [
                    "--store",
                    sqlite_url,
                    "archive",
                    "--before",
                    "2999-01-01",
                    "-o",
                    str(out),
                ]
            )
            == 0
        )
        assert "skipped 1 sessions open in a runtime: open" in capsys.readouterr().out
        assert set(export_heads(out.read_bytes().splitlines())) == {"done"}
        opened = ["--store", sqlite_url, "archive", "--session", "open", "-o", "b"]
        assert main(opened) == 2
        assert "open in a runtime" in capsys.readouterr().err
        session.approve(
            session.pending_approvals()[0].request_id, ApprovalDecision.deny()
        )
        prompting.join(60)
    assert _in_log(sqlite_url, "busy")
    assert _in_log(sqlite_url, "open")
    assert not _in_log(sqlite_url, "done")
