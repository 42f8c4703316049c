"""``turnlog rebuild``: views rebuilt offline equal the live ones, progress is
shown, ``--verify`` names every difference, and an interrupted rebuild
resumes where it stopped."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from cli_support import max_position

from turnlog.cli.progress import ProgressLine, format_eta
from turnlog.projections.rebuild import NEXT_SUFFIX, Progress, rebuild
from turnlog.projections.tables import ViewTables
from turnlog.store.log import Store

VIEWS = ("checkpoints", "transcript", "executions", "sessions")


def snapshot(url: str) -> dict:
    """Every document of every view, with the views' tracking positions."""
    store = Store(url)
    try:
        tables = ViewTables(store)
        documents = {
            (view, part): tables.range(view, part)
            for view in VIEWS
            for part in tables.parts(view)
        }
        tracking = {view: tables.tracking_of(view) for view in VIEWS}
        return {"documents": documents, "tracking": tracking}
    finally:
        store.close()


def table(out: str) -> dict[str, tuple[int, str]]:
    """VIEW -> (events, result) from the summary table."""
    header, *rows = out.splitlines()
    assert header.split() == ["VIEW", "EVENTS", "SECONDS", "RESULT"]
    parsed = {}
    for row in rows:
        match = re.fullmatch(r"(\S+)\s+([\d,]+)\s+\d+\.\d\d  (.+)", row)
        if match is None:
            break  # the lines after the table
        parsed[match[1]] = (int(match[2].replace(",", "")), match[3])
    return parsed


def test_rebuild_equals_the_live_views_and_shows_progress(
    turnlog, store_url: str, filled
) -> None:
    filled(store_url)
    live = snapshot(store_url)
    end = max_position(store_url)

    result = turnlog("--store", store_url, "rebuild")

    assert result.code == 0
    assert table(result.out) == dict.fromkeys(VIEWS, (end, "swapped in"))
    assert snapshot(store_url) == live
    # stderr is no terminal here: plain lines; the views are rebuilt in one
    # pass over the log, so one line names them all and ends at 100%
    views = ", ".join(VIEWS)
    assert re.search(
        rf"^{views}\s+{end}/{end} events  100%  [\d,]+ events/s  ETA 0:00$",
        result.err,
        re.MULTILINE,
    ), result.err


def test_rebuild_of_named_views_only(turnlog, sqlite_url: str, filled) -> None:
    filled(sqlite_url, sessions=("s1",), turns=1)

    result = turnlog("--store", sqlite_url, "rebuild", "transcript", "sessions")

    assert result.code == 0
    assert list(table(result.out)) == ["transcript", "sessions"]


def corrupt_checkpoint(url: str, session_id: str) -> None:
    store = Store(url)
    try:
        tables = ViewTables(store)
        with store.transaction() as cursor:
            cursor.execute(
                store.sql(
                    f"UPDATE {tables.docs} SET doc = ? "
                    f"WHERE gen = {store.backend.tables.generation_of} AND part = ?"
                ),
                (b'{"session_id": "s1", "turn_count": 99}', "checkpoints", session_id),
            )
    finally:
        store.close()


def test_verify_names_every_difference_and_exits_1(
    turnlog, store_url: str, filled
) -> None:
    filled(store_url)
    clean = turnlog("--store", store_url, "rebuild", "--verify")
    assert clean.code == 0
    assert table(clean.out) == {
        view: (max_position(store_url), "verified, 0 differences") for view in VIEWS
    }
    assert clean.out.splitlines()[-1] == (
        "no differences: every view equals its rebuild from the log"
    )
    corrupt_checkpoint(store_url, "s1")
    corrupted = snapshot(store_url)

    result = turnlog("--store", store_url, "rebuild", "checkpoints", "--verify")

    assert result.code == 1
    assert table(result.out) == {
        "checkpoints": (max_position(store_url), "verified, 1 difference")
    }
    (difference,) = result.out.splitlines()[2:]
    assert difference.startswith("checkpoints s1 @0: ")
    assert "turn_count: live 99, rebuilt 2" in difference
    assert "agent_name: live absent, rebuilt 'filler'" in difference
    assert difference.endswith("more fields")
    assert snapshot(store_url) == corrupted  # verifying swapped nothing

    assert turnlog("--store", store_url, "rebuild", "checkpoints").code == 0
    assert turnlog("--store", store_url, "rebuild", "--verify").code == 0


def test_an_unknown_view_is_one_line_listing_the_views(turnlog, tmp_path: Path) -> None:
    log = tmp_path / "log.sqlite3"

    result = turnlog("--store", f"sqlite:///{log}", "rebuild", "transcript", "nope")

    assert (result.code, result.out) == (2, "")
    assert result.error_line() == (
        "turnlog: error: no view named 'nope'; "
        "views: checkpoints, executions, sessions, transcript"
    )
    assert not log.exists()
    missing = turnlog("--store", f"sqlite:///{log}", "rebuild")
    assert missing.code == 2
    assert missing.error_line() == f"turnlog: error: there is no log at {log}"
    assert not log.exists()


def test_an_interrupted_rebuild_resumes_and_equals_a_clean_one(
    turnlog, sqlite_url: str, tmp_path: Path, filled
) -> None:
    filled(sqlite_url, sessions=("s1", "s2", "s3"))
    live = snapshot(sqlite_url)
    end = max_position(sqlite_url)
    stopped: list[int] = []

    def stop_after_the_first_batch(progress: Progress) -> None:
        stopped.append(progress.done)
        raise KeyboardInterrupt

    store = Store(sqlite_url)
    try:
        with pytest.raises(KeyboardInterrupt):
            rebuild(
                store, ["transcript"], progress=stop_after_the_first_batch, batch=10
            )
        assert ViewTables(store).tracking_of("transcript" + NEXT_SUFFIX)[0] == 10
    finally:
        store.close()
    assert stopped == [10]

    result = turnlog("--store", sqlite_url, "rebuild", "--batch", "10")

    assert result.code == 0
    reports = table(result.out)
    assert reports["transcript"] == (end - 10, "swapped in")  # resumed
    assert reports["checkpoints"] == (end, "swapped in")
    assert snapshot(sqlite_url) == live


def test_ctrl_c_says_how_to_resume_and_exits_130(
    turnlog, sqlite_url: str, filled, monkeypatch: pytest.MonkeyPatch
) -> None:
    filled(sqlite_url)
    live = snapshot(sqlite_url)
    end = max_position(sqlite_url)
    shown: list[Progress] = []

    def interrupted(self, progress: Progress) -> None:
        shown.append(progress)
        if len(shown) == 2:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(ProgressLine, "show", interrupted)
        result = turnlog("--store", sqlite_url, "rebuild", "executions", "--batch", "7")

    assert (result.code, result.out) == (130, "")
    assert result.err == (
        "turnlog: rebuild interrupted; it resumes where it stopped: "
        f"turnlog --store {sqlite_url} rebuild executions\n"
    )
    again = turnlog("--store", sqlite_url, "rebuild", "executions", "--batch", "7")
    assert again.code == 0
    assert table(again.out) == {"executions": (end - 14, "swapped in")}
    assert snapshot(sqlite_url) == live


# -- the progress line ----------------------------------------------------------


def progress(view: str, done: int, total: int = 100) -> Progress:
    return Progress(view, done, total, rate=1234.5, eta_seconds=(total - done) / 10)


def test_on_a_terminal_the_line_is_redrawn_in_place() -> None:
    stream = io.StringIO()
    line = ProgressLine(stream, terminal=True)

    line.show(progress("transcript", 50))
    line.show(progress("transcript", 100))
    line.show(progress("sessions", 100))
    line.end()
    line.end()  # idempotent

    first, second, third = stream.getvalue().split("\r")[1:]
    assert first.startswith("transcript  [############............]  50/100 events")
    assert first.endswith("  50%  1,234 events/s  ETA 0:05")
    assert second.startswith("transcript  [########################]  100/100")
    assert second.endswith("ETA 0:00\n")  # a new view starts on a new line
    assert third.startswith("sessions  [")
    assert third.endswith("\n")
    assert stream.getvalue().count("\n") == 2


def test_off_a_terminal_plain_lines_come_every_few_seconds() -> None:
    stream = io.StringIO()
    now = [0.0]
    line = ProgressLine(stream, terminal=False, interval=5, clock=lambda: now[0])

    for done, at in [(10, 0), (20, 1), (30, 4), (40, 5.5), (50, 6), (100, 6.5)]:
        now[0] = at
        line.show(progress("checkpoints", done))
    line.end()

    lines = stream.getvalue().splitlines()
    assert [int(x.split()[1].split("/")[0]) for x in lines] == [10, 40, 100]
    assert "\r" not in stream.getvalue()
    assert "[" not in stream.getvalue()  # no bar in a log file


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "--:--"), (0.4, "0:00"), (59.6, "1:00"), (61, "1:01"), (3725, "1:02:05")],
)
def test_eta(seconds: float | None, text: str) -> None:
    assert format_eta(seconds) == text
