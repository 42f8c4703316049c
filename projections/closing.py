"""Bringing the views to the log's head as a runtime closes.

The live follower folds new events a moment after they are saved. A
runtime closed right after its sessions' last turns would otherwise stop
it before it folded them, leaving a sessions view whose heads fall short
of the log: a later ``turnlog audit --verify`` then could not see events
removed from the end of a session's chain.
"""

from __future__ import annotations

import logging
import time

from turnlog.domain.errors import TurnlogError
from turnlog.projections.runner import ProjectionRunner
from turnlog.store.log import Store

logger = logging.getLogger("turnlog.runtime")

VIEWS_TIMEOUT = 10.0
"""Seconds ``Runtime.close`` waits, by default, for the views to reach the
log's head."""

_ELECTION = 0.5
"""Seconds to wait for this process's follower to be elected (a runtime
just opened); a follower elsewhere keeps the lock, and the views, longer."""

_LOOK = 0.5
"""Seconds between looks at how far the views got (they are also woken)."""


def bring_views_to_head(
    store: Store, projections: ProjectionRunner, timeout: float
) -> bool:
    """Waits up to ``timeout`` seconds for the views to fold the log's head.

    Wakes this process's follower and waits on it; if another process
    keeps the views (this one is not elected within a moment), this one
    cannot see them move and does not wait.
    Returns whether they got there; if not, logs a warning saying how far.
    """
    try:
        head = store.max_position()
    except TurnlogError as error:  # the store failed: nothing to wait for
        logger.warning("closing with the views unchecked: %s", error)
        return False
    deadline = time.monotonic() + timeout
    projections.hurry()
    folded = projections.position_folded()
    while folded < head:
        left = deadline - time.monotonic()
        why = None
        if projections.failure is not None:
            why = f"a view failed: {projections.failure}"
        elif projections.follower_trouble is not None:
            why = f"they cannot be written: {projections.follower_trouble}"
        elif not projections.leading and not projections.wait_leading(
            min(max(left, 0.0), _ELECTION)
        ):
            why = "another process keeps them"
        elif left <= 0:
            why = f"they did not get there in {timeout:g} s"
        if why is not None:
            logger.warning(
                "closing with the views at log position %d of %d (%s); the next "
                "runtime on this log or `turnlog project` brings them up to date",
                folded,
                head,
                why,
            )
            return False
        folded = projections.wait_folded(folded, min(left, _LOOK))
    return True
