"""Views fold this process's saves from their recordings; gaps are read from the log.

The runner is given each save's recordings (its Store listener). Where
they follow its position without a hole it folds them as they are, with
no read of the log; another writer's commits, or recordings it dropped,
are read from the log. Either way the views equal a rebuild from the log.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from eventsourcing.persistence import Notification, Recording

from turnlog import (
    Agent,
    ApprovalDecision,
    ApprovalRequest,
    RunConfig,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain.errors import ReplayError
from turnlog.projections.checkpoints import CheckpointProjection
from turnlog.projections.handover import Handover
from turnlog.projections.rebuild import rebuild
from turnlog.projections.runner import ProjectionRunner
from turnlog.projections.tables import ViewTables
from turnlog.store.log import Store

VIEWS = ("checkpoints", "transcript", "executions", "sessions")


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return key.upper()


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploys; always asks."""
    return f"deployed {target}"


class Allow:
    def decide(self, request: ApprovalRequest) -> ApprovalDecision | None:
        return ApprovalDecision.allow()


def run_turns(rt: Runtime, session_id: str, turns: int) -> None:
    """``turns`` turns of ``session_id``: a tool call, an approved call, an answer."""
    model = ScriptedModel()
    for turn in range(turns):
        model.add(
            calls(tool_call("lookup", {"key": f"k{turn}"})),
            calls(tool_call("deploy", {"target": f"t{turn}"})),
            f"answer {turn}",
        )
    session = rt.create_session(
        Agent("a", model=model, tools=[lookup, deploy]), session_id=session_id
    )
    for turn in range(turns):
        session.prompt(f"question {turn}", timeout=10)


@contextmanager
def unfollowed(url: str) -> Iterator[tuple[Runtime, list[int]]]:
    """A runtime whose views catch up only when asked (no follower thread to
    race the test), given its saves' recordings as a following one is;
    and the starts of the runner's reads of the log."""
    store = Store(url)
    reads: list[int] = []
    read = store.notifications

    def counted(start: int, limit: int, topics: Any = ()) -> Any:
        reads.append(start)
        return read(start, limit, topics)

    store.notifications = counted  # type: ignore[method-assign]
    with Runtime(
        store,
        follow_projections=False,
        run_config=RunConfig(approval_provider=Allow()),
    ) as rt:
        store.add_listener(rt.projections.notify)
        yield rt, reads


def views(store: Store) -> dict[tuple[str, str], Any]:
    tables = ViewTables(store)
    return {
        (view, part): tables.range(view, part)
        for view in VIEWS
        for part in tables.parts(view)
    }


def equals_a_rebuild(url: str, live: dict[tuple[str, str], Any]) -> bool:
    """Whether the views rebuilt from the log alone are ``live``."""
    store = Store(url)
    try:
        rebuild(store)
        return views(store) == live
    finally:
        store.close()


def test_own_saves_are_folded_from_their_recordings_without_reading_the_log(
    sqlite_url: str,
) -> None:
    with unfollowed(sqlite_url) as (rt, reads):
        run_turns(rt, "s1", 3)
        run_turns(rt, "s2", 2)
        end = rt.store.max_position()
        assert rt.projections.catch_up() == end
        assert reads == []
        assert rt.checkpoints.load("s1", context=False).turn_count == 3
        live = views(rt.store)
    assert equals_a_rebuild(sqlite_url, live)


def test_a_gap_another_store_wrote_is_read_from_the_log(store_url: str) -> None:
    with unfollowed(store_url) as (rt, reads):
        run_turns(rt, "mine", 1)
        rt.projections.catch_up()
        assert reads == []
        theirs = rt.store.max_position() + 1
        # Another writer on the same database: its saves never reach this
        # runtime's listener, so they are a gap in what it was handed.
        with Runtime(Store(store_url), follow_projections=False) as other:
            other.create_session(
                Agent("b", model=ScriptedModel(["theirs"])), session_id="theirs"
            ).prompt("hi", timeout=10)
        run_turns(rt, "mine-too", 2)
        end = rt.store.max_position()
        assert rt.projections.catch_up() == end
        # Read from the gap on, once (to the end: one query, not one a gap).
        assert reads == [theirs]
        assert rt.checkpoints.load("theirs", context=False).turn_count == 1
        assert rt.checkpoints.load("mine-too", context=False).turn_count == 2
        live = views(rt.store)
    assert equals_a_rebuild(store_url, live)


def test_a_runner_that_falls_behind_keeps_a_bounded_handover_and_reads_the_rest(
    sqlite_url: str,
) -> None:
    with unfollowed(sqlite_url) as (rt, reads):
        handover = rt.projections._handover
        handover.limit = 10
        run_turns(rt, "s", 4)
        assert len(handover) == 10
        end = rt.store.max_position()
        assert end > 10
        assert rt.projections.catch_up() == end
        assert reads == [1]  # what was dropped came from the log
        assert len(handover) == 0
        live = views(rt.store)
    assert equals_a_rebuild(sqlite_url, live)


def test_recordings_handed_over_are_the_events_the_log_holds(sqlite_url: str) -> None:
    """The events a fold is handed are what a decode of the log would give,
    after the sessions that made them went on (nothing shares them and
    changes them later)."""
    given: list[Recording[uuid.UUID]] = []
    with unfollowed(sqlite_url) as (rt, _):
        rt.store.add_listener(given.extend)
        run_turns(rt, "s1", 3)
        run_turns(rt, "s2", 2)
        rt.projections.catch_up()
        end = rt.store.max_position()
        assert sorted(r.notification.id for r in given) == list(range(1, end + 1))
        for recording in given:
            assert recording.domain_event == rt.store.decode(recording.notification)


class Fussy(CheckpointProjection):
    """Checkpoints that cannot fold a UsageRecorded after log position ``after``."""

    name = "fussy"

    def __init__(self, after: int) -> None:
        self.after = after

    def fold(self, rows: Any, session_id: str, entries: Any) -> None:
        for position, event in entries:
            if type(event).__name__ == "UsageRecorded" and position > self.after:
                raise ValueError("cannot digest this")
        super().fold(rows, session_id, entries)


def test_a_recording_no_view_can_fold_stops_the_views_at_it_as_a_read_one_does(
    sqlite_url: str,
) -> None:
    with unfollowed(sqlite_url) as (rt, reads):
        fussy = ProjectionRunner(rt.store, [Fussy(after=15)])
        rt.store.add_listener(fussy.notify)
        run_turns(rt, "s", 2)
        with pytest.raises(ReplayError) as raised:
            fussy.catch_up()
        assert reads == []
        message = str(raised.value)
        poison = int(message.split("log entry ")[1].split(" ", maxsplit=1)[0])
        assert poison > 15
        assert (
            f"view 'fussy' cannot fold log entry {poison} (turnlog:UsageRecorded)"
            in message
        )
        # everything before it is in; the view and its tracking agree
        assert fussy.position("fussy") == poison - 1
        assert fussy.tables.tracking_of("fussy") == (poison - 1, Fussy.version)


def _recording(position: int) -> Recording[uuid.UUID]:
    notification = Notification(
        id=position,
        originator_id=uuid.uuid4(),
        originator_version=1,
        topic="t",
        state=b"{}",
    )
    return Recording(domain_event=object(), notification=notification)


def test_the_handover_gives_only_a_run_without_holes_from_the_start() -> None:
    handover = Handover()
    handover.give([_recording(p) for p in (5, 6, 8)])
    handover.give([_recording(4)])
    assert handover.take(3, 10) == []  # 3 is not held: read the log
    assert [r.notification.id for r in handover.take(4, 10)] == [4, 5, 6]
    assert [r.notification.id for r in handover.take(9, 10)] == []
    assert len(handover) == 0  # 8 is behind the runner now
    handover.give([_recording(7)])  # folded already: not kept
    assert len(handover) == 0


def test_the_handover_keeps_at_most_its_limit_dropping_the_oldest() -> None:
    handover = Handover(limit=3)
    handover.give([_recording(p) for p in range(1, 6)])
    assert len(handover) == 3
    assert handover.take(1, 10) == []
    assert [r.notification.id for r in handover.take(3, 10)] == [3, 4, 5]


def test_the_handover_takes_at_most_the_limit_asked() -> None:
    handover = Handover()
    handover.give([_recording(p) for p in range(1, 6)])
    assert [r.notification.id for r in handover.take(1, 2)] == [1, 2]
    handover.folded(3)
    assert [r.notification.id for r in handover.take(4, 10)] == [4, 5]
