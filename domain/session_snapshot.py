"""Snapshots of the Session aggregate, so loading a long session stays cheap.

The log keeps one every so many events (``turnlog.store.log``); loading a
Session starts from its latest snapshot and replays only the events after
it. Stored under the stable topic ``turnlog:SessionSnapshot``, whichever
module defines it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from eventsourcing.domain import Snapshot
from eventsourcing.utils import get_topic, register_topic

from turnlog.domain.session import Session

EMPTY_AS_TUPLE = (
    "queued",
    "last_rewrite_reasons",
    "turn_owners",
    "set_aside",
    "set_aside_positions",
    "job_results",
)
"""The Session's sequences that are replaced whenever they change, never
changed in place, and the one empty tuple whenever empty: a list is an
object the cyclic collector walks on every full run, for every live
session, and these are nearly always empty (issue 24). Every event that
sets one keeps to it, and so does loading a snapshot: a Session loaded
either way is the same."""


class SessionSnapshot(Snapshot):
    """A Session's whole state at a version, so loading it stays cheap.

    The state is stored as plain JSON data: timestamps as ISO strings and
    the allowed tools as a sorted list, turned back on loading.
    """

    TOPIC: ClassVar[str] = "turnlog:SessionSnapshot"

    @classmethod
    def take(cls, aggregate: Any) -> SessionSnapshot:
        """A snapshot of ``aggregate`` as it is in memory."""
        state = dict(vars(aggregate))
        for key in ("_id", "_version", "_pending_events"):
            state.pop(key, None)
        state["_created_on"] = aggregate.created_on.isoformat()
        state["_modified_on"] = aggregate.modified_on.isoformat()
        state["allowed_tools"] = sorted(aggregate.allowed_tools)
        return cls(
            originator_id=aggregate.id,
            originator_version=aggregate.version,
            timestamp=cls.create_timestamp(),
            topic=get_topic(type(aggregate)),
            state=state,
        )

    def mutate(self, _: None) -> Any:
        """The Session the snapshot holds."""
        state = dict(self.state)
        state["_created_on"] = datetime.fromisoformat(state["_created_on"])
        state["_modified_on"] = datetime.fromisoformat(state["_modified_on"])
        state["allowed_tools"] = frozenset(state["allowed_tools"])
        state.setdefault("handed_to", "")  # snapshots from before handoffs
        state.setdefault("input_ids", {})  # snapshots from before input ids
        state.setdefault("decided_approvals", {})
        state.setdefault("running_jobs", {})  # snapshots from before jobs
        for name in EMPTY_AS_TUPLE:
            # Missing from snapshots taken before forks or jobs; a list when
            # decoded: empty, it is the empty tuple, as a Session folded from
            # its events holds it.
            state[name] = state.get(name) or ()
        state["_id"] = self.originator_id
        state["_version"] = self.originator_version
        state["_pending_events"] = []
        session = object.__new__(Session)
        object.__setattr__(session, "__dict__", state)
        return session


register_topic(SessionSnapshot.TOPIC, SessionSnapshot)
