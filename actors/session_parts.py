"""The plain parts a SessionActor is made of: shared services, settings, run state."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import msgspec
import pykka

from turnlog.actors.io_loop import IoLoop
from turnlog.domain.run import RunResult, RunStatus


class SessionServices(msgspec.Struct, frozen=True):
    """What every SessionActor of a runtime shares."""

    store: Any
    io_loop: IoLoop
    tool_executor: pykka.ActorRef[Any]
    approval_broker: pykka.ActorRef[Any]


class SessionSettings(msgspec.Struct, frozen=True):
    """Per-session run settings."""

    approval_policy: str = "ask"
    approval_provider: Any = None
    approval_timeout: float | None = None
    idle_timeout: float | None = None
    """Seconds idle before the actor passivates (with a host); None: never."""


class RunState:
    """The run in progress: from an idle session taking input to idle again."""

    def __init__(self, submission_id: str) -> None:
        self.submission_id = submission_id
        self.waiters: list[concurrent.futures.Future[RunResult]] = []
        self.turn_ids: list[str] = []
        self.final_output: str | None = None
        self.status: RunStatus = "completed"
        self.error: str | None = None
