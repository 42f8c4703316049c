"""``turnlog backup``: a verified copy of a live SQLite log, and a PostgreSQL
log backed up with pg_dump and checked by ``turnlog audit --verify --all``.

Each backup is restored (copied to a new place, or loaded into a database
made for the test) and verified there.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.cli.main import main


def _agent() -> Agent:
    return Agent("a", model=ScriptedModel(["ok"] * 10_000))


def _write(url: str, sessions: int, prefix: str = "s") -> None:
    with Runtime.open(url) as rt:
        for n in range(sessions):
            rt.create_session(_agent(), session_id=f"{prefix}{n}").prompt(
                "hi", timeout=30
            )


def test_a_backup_of_a_live_log_is_consistent_and_verifies_once_restored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/live.sqlite3"
    _write(url, 5)
    stop = threading.Event()
    written: list[int] = []

    def keep_writing() -> None:  # sessions go on beside the backup
        with Runtime.open(url) as rt:
            n = 0
            while not stop.is_set():
                rt.create_session(_agent(), session_id=f"w{n}").prompt("hi", timeout=30)
                written.append(n)
                n += 1

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        while len(written) < 3:
            stop.wait(0.05)
        backup = tmp_path / "backups" / "copy.sqlite3"
        backup.parent.mkdir()
        assert main(["--store", url, "backup", str(backup)]) == 0
    finally:
        stop.set()
        writer.join(60)
    said = capsys.readouterr().out
    assert f"backed up the log to {backup}" in said
    assert "events verified" in said
    assert sorted(p.name for p in backup.parent.iterdir()) == ["copy.sqlite3"]
    # Restore: the copy, moved anywhere, is a log that verifies on its own.
    restored = tmp_path / "restored.sqlite3"
    shutil.copy(backup, restored)
    assert main(["--store", f"sqlite:///{restored}", "audit", "--verify", "--all"]) == 0
    verdicts = capsys.readouterr().out
    for n in range(5):
        assert f"s{n}" in verdicts
    assert "w0" in verdicts  # written before the backup started


def test_a_backup_never_overwrites_and_postgresql_is_told_to_use_pg_dump(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/live.sqlite3"
    _write(url, 1)
    there = tmp_path / "there.sqlite3"
    there.write_bytes(b"keep me")
    assert main(["--store", url, "backup", str(there)]) == 2
    assert there.read_bytes() == b"keep me"
    assert "exists" in capsys.readouterr().err
    missing = tmp_path / "nothing.sqlite3"
    assert main(["--store", f"sqlite:///{missing}", "backup", str(tmp_path / "b")]) == 2
    assert not missing.exists()
    assert not (tmp_path / "b").exists()
    pg = "postgresql://postgres@127.0.0.1:5432/test?schema=x"
    assert main(["--store", pg, "backup", str(tmp_path / "b")]) == 2
    assert "pg_dump" in capsys.readouterr().err


def test_a_pg_dump_of_the_schema_restores_into_another_database_and_verifies(
    postgres_schema_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    psycopg = pytest.importorskip("psycopg")
    if shutil.which("pg_dump") is None or shutil.which("psql") is None:
        pytest.skip("pg_dump and psql are not installed")
    _write(postgres_schema_url, 3)
    base, query = postgres_schema_url.split("?", 1)
    schema = query.split("schema=", 1)[1]
    dump = tmp_path / "turnlog.sql"
    # As the README says: a dump of the log's schema, taken while it is live.
    subprocess.run(
        ["pg_dump", "--schema", schema, "--no-owner", "--file", str(dump), base],
        check=True,
        timeout=120,
    )
    database = f"turnlog_restore_{uuid.uuid4().hex[:10]}"
    server = base.rsplit("/", 1)[0]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    try:
        restored = f"{server}/{database}"
        subprocess.run(
            [
                "psql",
                "--quiet",
                "--set",
                "ON_ERROR_STOP=1",
                "--file",
                str(dump),
                restored,
            ],
            check=True,
            timeout=120,
            capture_output=True,
        )
        store = f"{restored}?schema={schema}"
        assert main(["--store", store, "audit", "--verify", "--all"]) == 0
        verdicts = capsys.readouterr().out
        assert all(f"s{n}" in verdicts for n in range(3))
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
