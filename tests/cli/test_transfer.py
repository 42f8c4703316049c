"""``turnlog export`` and ``import``: a session moves between logs
and backends verbatim, replays identically and still verifies; anything that
is not an intact export is refused whole."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import msgspec
import pytest
from cli_support import max_position

from turnlog import (
    InvalidInputError,
    function_tool,
)
from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.store.log import Store
from turnlog.store.opening import location_of
from turnlog.store.transfer import export_session, import_events
from turnlog.store.verify import verify_session


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return key.upper()


def stored(url: str, session_id: str, turns: int = 2) -> list[tuple]:
    """(aggregate, version, topic, state bytes) of a session, in log order."""
    store = Store(url)
    try:
        ids = [session_uuid(session_id)]
        ids += [turn_uuid(session_id, n) for n in range(1, turns + 1)]
        rows = sorted(store.stored_rows(ids))
    finally:
        store.close()
    return [row[1:] for row in rows]


def verdict(url: str, session_id: str) -> tuple[bool, int]:
    store = Store(url)
    try:
        report = verify_session(store, session_id)
    finally:
        store.close()
    return report.ok, report.events


# -- export -------------------------------------------------------------------


def test_export_writes_the_stored_events_verbatim_in_log_order(
    turnlog, sqlite_url: str, tmp_path: Path, filled
) -> None:
    filled(sqlite_url)
    rows = stored(sqlite_url, "s1")

    result = turnlog("--store", sqlite_url, "export", "s1")

    assert (result.code, result.err) == (0, "")
    header, *lines = result.out.splitlines()
    records = [json.loads(line) for line in lines]
    last = records[-1]["state"]
    assert json.loads(header) == {
        "turnlog_export": 1,
        "heads": {"s1": {"seq": len(rows), "sha256": last["chain"]}},
    }
    assert [set(r) for r in records] == [
        {"originator_id", "originator_version", "topic", "state"}
    ] * len(rows)
    assert [
        (r["originator_id"], r["originator_version"], r["topic"]) for r in records
    ] == [(str(aggregate), version, topic) for aggregate, version, topic, _ in rows]
    # the state is the stored JSON object, byte for byte
    for line, (_, _, _, state) in zip(lines, rows, strict=True):
        assert line.endswith(',"state":' + state.decode() + "}")
    assert [r["state"]["session_seq"] for r in records] == list(range(1, len(rows) + 1))
    assert {r["state"]["session_id"] for r in records} == {"s1"}  # not s2's

    target = tmp_path / "s1.jsonl"
    written = turnlog("--store", sqlite_url, "export", "s1", "-o", str(target))
    assert (written.code, written.err) == (0, "")
    assert written.out == f"exported {len(rows)} events of 's1' to {target}\n"
    assert target.read_text() == result.out


def test_export_refuses_an_unknown_session_and_an_unwritable_file(
    turnlog, sqlite_url: str, tmp_path: Path, filled
) -> None:
    filled(sqlite_url, sessions=("s1",), turns=1)
    target = tmp_path / "out.jsonl"

    unknown = turnlog("--store", sqlite_url, "export", "nope", "-o", str(target))
    assert (unknown.code, unknown.out) == (2, "")
    assert "no session 'nope'" in unknown.error_line()
    assert not target.exists()

    nowhere = tmp_path / "missing-dir" / "out.jsonl"
    failed = turnlog("--store", sqlite_url, "export", "s1", "-o", str(nowhere))
    assert failed.code == 2
    assert failed.error_line() == (
        f"turnlog: error: cannot write {nowhere}: No such file or directory"
    )


# -- import -------------------------------------------------------------------


def round_trip(turnlog, source: str, target: str, tmp_path: Path) -> str:
    """Exports s1 from ``source``, imports it into ``target``; returns the export."""
    export = tmp_path / f"export-{len(list(tmp_path.iterdir()))}.jsonl"
    assert turnlog("--store", source, "export", "s1", "-o", str(export)).code == 0
    result = turnlog("--store", target, "import", str(export))
    assert (result.code, result.err) == (0, "")
    assert result.out.startswith("imported ")
    return export.read_text()


@pytest.mark.postgres
def test_a_session_round_trips_sqlite_postgresql_sqlite(
    turnlog,
    sqlite_url: str,
    postgres_schema_url: str,
    tmp_path: Path,
    filled,
) -> None:
    filled(sqlite_url)
    back = f"sqlite:///{tmp_path}/back.sqlite3"
    replay = turnlog("--store", sqlite_url, "replay", "s1").out
    rows = stored(sqlite_url, "s1")

    first = round_trip(turnlog, sqlite_url, postgres_schema_url, tmp_path)
    second = round_trip(turnlog, postgres_schema_url, back, tmp_path)

    assert second == first  # exported from PostgreSQL: the same bytes
    for url in (postgres_schema_url, back):
        assert turnlog("--store", url, "replay", "s1").out == replay
        assert stored(url, "s1") == rows
        assert verdict(url, "s1") == (True, len(rows))
        sessions = turnlog("--store", url, "sessions").out.splitlines()
        assert [line.split()[:2] for line in sessions[1:]] == [["s1", "2"]]


@pytest.mark.postgres
def test_import_names_the_schema_it_wrote_into(
    turnlog, sqlite_url: str, postgres_schema_url: str, tmp_path: Path, filled
) -> None:
    filled(sqlite_url, sessions=("s1",), turns=1)
    export = tmp_path / "s1.jsonl"
    assert turnlog("--store", sqlite_url, "export", "s1", "-o", str(export)).code == 0

    result = turnlog("--store", postgres_schema_url, "import", str(export))

    assert (result.code, result.err) == (0, "")
    schema = postgres_schema_url.rsplit("schema=", 1)[1]
    assert result.out.rstrip().endswith(f"?schema={schema}")


def test_a_postgresql_location_keeps_its_schema_and_drops_the_password() -> None:
    where = location_of("postgresql://ann:secret@db.example:5433/app?schema=tenant_a")
    assert where == "postgresql://db.example:5433/app?schema=tenant_a"
    assert location_of("postgresql://ann:secret@db.example/app") == (
        "postgresql://db.example:5432/app"
    )


def test_an_imported_session_replays_verifies_and_audits_the_same(
    turnlog, sqlite_url: str, tmp_path: Path, filled
) -> None:
    filled(sqlite_url)
    target = f"sqlite:///{tmp_path}/target.sqlite3"
    filled(target, sessions=("other",), turns=1)  # the events land after these

    export = round_trip(turnlog, sqlite_url, target, tmp_path)

    assert turnlog("--store", target, "replay", "s1").out == (
        turnlog("--store", sqlite_url, "replay", "s1").out
    )
    assert stored(target, "s1") == stored(sqlite_url, "s1")
    assert verdict(target, "s1") == (True, len(export.splitlines()) - 1)
    assert verdict(target, "other")[0]

    def audit(url: str) -> list[dict]:
        records = [
            json.loads(line)
            for line in turnlog(
                "--store", url, "audit", "s1", "--json"
            ).out.splitlines()
        ]
        for record in records:
            del record["position"]  # the log position differs, nothing else
        return records

    assert audit(target) == audit(sqlite_url)


def test_import_reads_stdin(
    turnlog,
    sqlite_url: str,
    tmp_path: Path,
    filled,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    filled(sqlite_url, sessions=("s1",), turns=1)
    export = turnlog("--store", sqlite_url, "export", "s1").out
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(export.encode())))
    target = f"sqlite:///{tmp_path}/target.sqlite3"

    result = turnlog("--store", target, "import", "-")

    count = len(export.splitlines()) - 1  # after the header
    assert (result.code, result.err) == (0, "")
    assert (
        result.out
        == f"imported {count} events into the log at {tmp_path}/target.sqlite3\n"
    )
    assert verdict(target, "s1") == (True, count)


def test_importing_a_session_the_log_has_changes_nothing(
    turnlog, store_url: str, tmp_path: Path, filled
) -> None:
    filled(store_url, sessions=("s1",), turns=1)
    export = tmp_path / "s1.jsonl"
    assert turnlog("--store", store_url, "export", "s1", "-o", str(export)).code == 0
    before = max_position(store_url)

    result = turnlog("--store", store_url, "import", str(export))

    assert (result.code, result.out) == (2, "")
    store = Store(store_url)
    location = store.location
    store.close()
    assert result.error_line() == (
        f"turnlog: error: session 's1' is already in the log at {location}; "
        "nothing was imported"
    )
    assert max_position(store_url) == before


def test_a_clash_found_by_the_log_itself_writes_nothing(
    sqlite_url: str, tmp_path: Path, filled, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer adds the session between the check and the insert."""
    filled(sqlite_url)
    store = Store(sqlite_url)
    try:
        lines = export_session(store, "s1")
        before = store.max_position()
        # The pre-check sees no session: as if it had run just before the
        # other writer's commit. Only the log's own constraint is left.
        monkeypatch.setattr(store, "stored_rows", lambda ids: [])
        with pytest.raises(InvalidInputError, match="already holds events of 's1'"):
            import_events(store, lines)
        monkeypatch.undo()
        assert store.max_position() == before
    finally:
        store.close()


def tampered(export: str, edit) -> bytes:
    lines = export.splitlines()
    return ("\n".join(edit(lines)) + "\n").encode()


def replace_in_line(index: int, old: str, new: str):
    def edit(lines: list[str]) -> list[str]:
        assert old in lines[index]
        lines[index] = lines[index].replace(old, new)
        return lines

    return edit


def without_line(index: int):
    def edit(lines: list[str]) -> list[str]:
        del lines[index]
        return lines

    return edit


def swapped(first: int):
    def edit(lines: list[str]) -> list[str]:
        lines[first], lines[first + 1] = lines[first + 1], lines[first]
        return lines

    return edit


BAD_FILES = {
    "empty": lambda export: b"",
    "binary": lambda export: bytes(range(256)),
    "text": lambda export: b"root:x:0:0:root:/root:/bin/bash\n",
    "a JSON array": lambda export: b"[1, 2, 3]\n",
    "an audit": lambda export: (
        b'{"position":1,"sequence":1,"time":"x","event":"E","data":{}}\n'
    ),
    "a line without state": lambda export: tampered(
        export, replace_in_line(1, ',"state":', ',"other":')
    ),
    "a bad version": lambda export: tampered(
        export, replace_in_line(1, '"originator_version":1', '"originator_version":0')
    ),
    "an unknown topic": lambda export: tampered(
        export, replace_in_line(3, '"topic":"turnlog:', '"topic":"turnlog:Nope')
    ),
    "an altered event": lambda export: tampered(
        export, replace_in_line(-1, "answer 0", "answer 9")
    ),
    "a missing event": lambda export: tampered(export, without_line(6)),
    "reordered events": lambda export: tampered(export, swapped(4)),
    "a foreign aggregate": lambda export: tampered(
        export, replace_in_line(1, '"originator_id":"', '"originator_id":"0')
    ),
    "the last events cut off": lambda export: tampered(
        export, lambda lines: lines[:-2]
    ),
    "no header": lambda export: tampered(export, lambda lines: lines[1:]),
    "only a header": lambda export: tampered(export, lambda lines: lines[:1]),
    "a cut-off file": lambda export: "\n".join(
        [*export.splitlines()[:3], export.splitlines()[3][:40]]
    ).encode(),
}

EXPECTED_ERRORS = {
    "empty": "the file holds no events",
    "binary": "line 1 is not a turnlog export event",
    "text": "line 1 is not a turnlog export event: JSON is malformed",
    "a JSON array": "line 1 is not a turnlog export event: Expected `object`",
    "an audit": "line 1 is not a turnlog export event: Object contains unknown field",
    "a line without state": "line 2 is not a turnlog export event",
    "a bad version": "line 2 is not a turnlog export event: Expected `int` >= 1",
    "an unknown topic": "line 4 has topic 'turnlog:Nope",
    "an altered event": "is altered: its content does not match its link",
    "a missing event": "is missing: events with sequence 6 to 6 are gone",
    "reordered events": "is reordered",
    "a foreign aggregate": "line 2 is not a turnlog export event: Invalid UUID",
    "a cut-off file": "line 4 is not a turnlog export event: Input data was truncated",
    "the last events cut off": (
        "session 's1' is cut short after line 12 (ModelStepCompleted, sequence "
        "11): the chain ends here, but the export header holds its head at "
        "sequence 13: events with sequence 12 to 13 are gone"
    ),
    "no header": "no export header names the head of session 's1'",
    "only a header": "the file holds no events",
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_a_file_that_is_not_an_intact_export_is_refused_whole(
    turnlog, sqlite_url: str, tmp_path: Path, filled, kind: str
) -> None:
    filled(sqlite_url, sessions=("s1",), turns=1)
    export = turnlog("--store", sqlite_url, "export", "s1").out
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(BAD_FILES[kind](export))
    target = f"sqlite:///{tmp_path}/target.sqlite3"
    filled(target, sessions=("other",), turns=1)
    before = max_position(target)

    result = turnlog("--store", target, "import", str(bad))

    assert (result.code, result.out) == (2, "")
    assert EXPECTED_ERRORS[kind] in result.error_line()
    assert max_position(target) == before


def test_an_event_moved_to_another_session_is_refused(
    turnlog, sqlite_url: str, tmp_path: Path, filled
) -> None:
    filled(sqlite_url, sessions=("s1", "s2"), turns=1)
    one = turnlog("--store", sqlite_url, "export", "s1").out.splitlines()
    two = turnlog("--store", sqlite_url, "export", "s2").out.splitlines()
    record = json.loads(two[-1])
    record["state"]["session_id"] = "s1"  # claims s1, but is s2's aggregate
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*one, json.dumps(record)]) + "\n")
    target = f"sqlite:///{tmp_path}/target.sqlite3"

    result = turnlog("--store", target, "import", str(bad))

    assert result.code == 2
    assert result.error_line() == (
        f"turnlog: error: line {len(one) + 1} (TurnCompleted) belongs to no "
        "aggregate of session 's1'"
    )
    assert max_position(target) == 0


def test_two_sessions_in_one_file_import_together(
    turnlog, sqlite_url: str, tmp_path: Path, filled
) -> None:
    filled(sqlite_url, sessions=("s1", "s2"), turns=1)
    both = tmp_path / "both.jsonl"
    both.write_text(
        turnlog("--store", sqlite_url, "export", "s1").out
        + turnlog("--store", sqlite_url, "export", "s2").out
    )
    target = f"sqlite:///{tmp_path}/target.sqlite3"

    result = turnlog("--store", target, "import", str(both))

    assert result.code == 0
    for session_id in ("s1", "s2"):
        assert verdict(target, session_id)[0]
        assert turnlog("--store", target, "replay", session_id).out == (
            turnlog("--store", sqlite_url, "replay", session_id).out
        )


def test_import_of_a_missing_file_is_one_line(
    turnlog, sqlite_url: str, tmp_path: Path
) -> None:
    result = turnlog("--store", sqlite_url, "import", str(tmp_path / "nope.jsonl"))
    assert result.code == 2
    assert result.error_line() == (
        f"turnlog: error: cannot read {tmp_path}/nope.jsonl: No such file or directory"
    )


def test_export_lines_are_what_import_reads(sqlite_url: str, filled) -> None:
    filled(sqlite_url, sessions=("s1",), turns=1)
    store = Store(sqlite_url)
    try:
        lines = export_session(store, "s1")
    finally:
        store.close()
    assert all(line.endswith(b"\n") for line in lines)
    assert msgspec.json.decode(lines[0])["heads"]["s1"]["seq"] == len(lines) - 1
    assert [msgspec.json.decode(line)["originator_version"] for line in lines[1:3]] == [
        1,
        2,
    ]


def test_import_into_what_is_not_a_log_changes_nothing(
    turnlog, sqlite_url: str, tmp_path: Path, filled
) -> None:
    filled(sqlite_url, sessions=("s1",), turns=1)
    export = tmp_path / "s1.jsonl"
    assert turnlog("--store", sqlite_url, "export", "s1", "-o", str(export)).code == 0
    garbage = tmp_path / "garbage.bin"
    content = bytes(range(256)) * 4
    garbage.write_bytes(content)

    into_garbage = turnlog("--store", f"sqlite:///{garbage}", "import", str(export))
    bad_url = turnlog("--store", "ftp://x", "import", str(export))

    assert into_garbage.code == 1
    assert into_garbage.error_line() == (
        f"turnlog: error: {garbage} is not a turnlog log (not an SQLite database)"
    )
    assert garbage.read_bytes() == content
    assert bad_url.code == 2
    assert "ftp://x" in bad_url.error_line()


def test_a_cut_export_with_its_header_edited_imports_but_fails_its_anchor(
    turnlog, sqlite_url: str, tmp_path: Path, filled
) -> None:
    filled(sqlite_url, sessions=("s1",), turns=1)
    anchor = turnlog("--store", sqlite_url, "audit", "--head", "s1").out.strip()
    _, *events = turnlog("--store", sqlite_url, "export", "s1").out.splitlines()
    kept = events[:-2]
    last = json.loads(kept[-1])["state"]
    forged = {
        "turnlog_export": 1,
        "heads": {"s1": {"seq": last["session_seq"], "sha256": last["chain"]}},
    }
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join([json.dumps(forged), *kept]) + "\n")
    target = f"sqlite:///{tmp_path}/target.sqlite3"

    imported = turnlog("--store", target, "import", str(cut))
    checked = turnlog("--store", target, "audit", "s1", "--verify", "--against", anchor)

    assert imported.code == 0  # the file is consistent with itself
    assert checked.code == 1
    assert checked.out.startswith("s1: FAILED, truncated after log position ")
    assert checked.out.endswith(
        f"but the anchor holds its head at sequence {len(events)}: events with "
        f"sequence {len(events) - 1} to {len(events)} are gone\n"
    )
