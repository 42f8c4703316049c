"""The plain parts a SessionActor is made of: shared services, settings, run state."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec
import pykka
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import Recording

from turnlog.actors.contracts import ApprovalDecider
from turnlog.actors.io_loop import IoLoop
from turnlog.actors.messages import RunWaiter
from turnlog.actors.tool_executor import ToolExecutor
from turnlog.domain.errors import RunEndedError
from turnlog.domain.run import RunResult, RunStatus


class CanRecordSessions(Protocol):
    """What the actors need of the log (``turnlog.store.Store`` is one).

    Declared here, not imported, so that ``turnlog.actors`` depends on the
    log's behaviour and not on the store package, which sits below it.
    """

    def save(self, *aggregates: Aggregate) -> Sequence[Recording[uuid.UUID]]:
        """Saves the aggregates' pending events in one transaction."""
        ...

    def get(
        self, aggregate_id: uuid.UUID, version: int | None = None
    ) -> Aggregate | None:
        """The aggregate rebuilt from the log (as it was at ``version``), or None."""
        ...

    def stored_rows(
        self, aggregate_ids: Sequence[uuid.UUID]
    ) -> list[tuple[int, uuid.UUID, int, str, bytes]]:
        """The stored events of these aggregates (read by SessionHistory)."""
        ...

    def stored_before(
        self, aggregate_id: uuid.UUID, position: int, limit: int = 1
    ) -> list[tuple[int, uuid.UUID, int, str, bytes]]:
        """Up to ``limit`` stored events of an aggregate before a log position."""
        ...

    def events(self, aggregate_id: uuid.UUID, *, gt: int | None = None) -> list[Any]:
        """The domain events of one aggregate after version ``gt``, in order."""
        ...


class SessionServices(msgspec.Struct, frozen=True):
    """What every SessionActor of a runtime shares."""

    store: CanRecordSessions
    io_loop: IoLoop
    tool_executor: ToolExecutor
    approval_broker: pykka.ActorRef[Any]


class SessionDeps:
    """The user's dependencies for a session, held in memory only.

    One box per open session, shared by every actor the session has here
    (it survives passivation); ``Runtime.create_session(deps=...)`` on an
    open session puts new ones in it. Never recorded, never pickled.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any = None) -> None:
        self.value = value


class SessionSettings(msgspec.Struct, frozen=True):
    """Per-session run settings."""

    approval_policy: str = "ask"
    approval_provider: ApprovalDecider | None = None
    approval_timeout: float | None = None
    idle_timeout: float | None = None
    """Seconds idle before the actor passivates (with a host); None: never."""
    deps: SessionDeps = msgspec.field(default_factory=SessionDeps)
    """The session's dependencies (a live object; see SessionDeps)."""


class RunState:
    """The run in progress: from an idle session taking input to idle again."""

    def __init__(self, submission_id: str, deps: Any = None) -> None:
        self.submission_id = submission_id
        self.deps = deps
        """The dependencies the prompt gave (None: the session's)."""
        self.waiters: list[RunWaiter[RunResult]] = []
        self.turn_ids: list[str] = []
        self.final_output: str | None = None
        self.status: RunStatus = "completed"
        self.error: str | None = None
        self.output: Any = msgspec.UNSET
        """The last turn's validated answer (JSON data), with an output type."""


def check_run(active: RunState | None, run: str, session_id: str) -> None:
    """Raises RunEndedError unless ``active`` is the run ``run`` started:
    a run handle's input never reaches another run."""
    if active is None or active.submission_id != run:
        msg = (
            f"run {run!r} of session {session_id!r} has ended; use the session "
            "(or session.active_run_handle()) for what runs now"
        )
        raise RunEndedError(msg)
