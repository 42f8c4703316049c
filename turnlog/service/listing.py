"""What ``GET /sessions`` says of each session: beside its id, agent and
creation time, where it stands (its state) and how it began (its first
prompt), from the sessions view, so a listing reads like a list of
conversations rather than of ids.
"""

from __future__ import annotations

from typing import Any

from turnlog.runtime import Runtime
from turnlog.service.tenancy import OwnedSession


def session_entries(
    runtime: Runtime, owned: list[OwnedSession]
) -> list[dict[str, Any]]:
    """The listing of a tenant's sessions, in the order given (blocking).

    A session whose owner row was written but whose first event never was
    (a crash between the two) has no summary and is left out: it is no
    session a client could open.
    """
    entries = []
    for session in owned:
        summary = runtime.summaries.load(session.session_id)
        if summary is None:
            continue
        entries.append(
            {
                "session_id": session.session_id,
                "agent": session.agent,
                "agent_in_charge": summary.agent_in_charge or session.agent,
                "created": session.created,
                "state": str(summary.state),
                "first_prompt": summary.first_prompt,
                "turns": summary.turns,
                "last_activity": None
                if summary.last_activity is None
                else summary.last_activity.isoformat(),
            }
        )
    return entries


__all__ = ["session_entries"]
