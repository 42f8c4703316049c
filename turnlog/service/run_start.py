"""When a prompted run starts, read from the session's subscription.

A prompt answered with 202 names its run's submission, which the
service learns from the run's ``RunStarted``. The read waits on the
service's loop: a worker thread for each prompt waited in the loop's
default executor, whose few threads (``os.cpu_count()`` + 4) every other
blocking call of the service shares.
"""

from __future__ import annotations

from turnlog.domain.errors import TurnlogError
from turnlog.domain.run import RunStarted
from turnlog.handles.actor_handle import Subscription


async def next_run_started(subscription: Subscription, timeout: float) -> str | None:
    """The submission id of the next run to start; None if none started
    within ``timeout`` seconds, or the subscription ended first."""
    while True:
        try:
            item = await subscription.get_async(timeout)
        except (TimeoutError, TurnlogError):  # closed (the run ended) or timed out
            return None
        if isinstance(item, RunStarted):
            return item.submission_id
