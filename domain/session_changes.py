"""Events that change a Session's running totals and settings.

Usage, shared state, allowances and the model route: facts the Session aggregate
(domain.session) records and folds. Kept apart from it so that module
stays about the session's lifecycle and input; ``aggregate`` is a
Session (typed ``Any``, as domain.lineage does, to keep the import one way).
"""

from __future__ import annotations

from typing import Any

from turnlog.domain.events import TurnlogEvent


class UsageRecorded(TurnlogEvent):
    """Tokens spent by one model call; ``usage`` None means unreported.

    ``kind`` is ``model`` for a model step and ``compaction`` for a
    compaction call; both count toward the totals, only model steps are
    the session's "last usage".
    """

    turn_id: str
    step: int
    route: str
    kind: str
    usage: dict[str, int] | None

    def apply(self, aggregate: Any) -> None:
        if self.kind == "model":
            aggregate.last_usage = None if self.usage is None else dict(self.usage)
        if self.usage is None:
            return
        totals = dict(aggregate.usage_totals)
        for key, value in self.usage.items():
            totals[key] = totals.get(key, 0) + value
        aggregate.usage_totals = totals


class ToolAllowedForSession(TurnlogEvent):
    """Calls of ``tool_name`` need no approval for the rest of the session."""

    tool_name: str
    request_id: str

    def apply(self, aggregate: Any) -> None:
        aggregate.allowed_tools = aggregate.allowed_tools | {self.tool_name}


class SharedStateUpdated(TurnlogEvent):
    """Keys of the shared state were set (a shallow merge)."""

    changes: dict[str, Any]

    def apply(self, aggregate: Any) -> None:
        aggregate.shared_state = {**aggregate.shared_state, **self.changes}


class ModelRouteChanged(TurnlogEvent):
    """Later model calls go to another named route."""

    route: str

    def apply(self, aggregate: Any) -> None:
        aggregate.model_route = self.route
