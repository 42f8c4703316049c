"""Timeouts and the retry policy of an HTTP model provider."""

from __future__ import annotations

import pydantic


class Timeouts(pydantic.BaseModel, frozen=True, extra="forbid"):
    """How long a model call may take, in seconds.

    Attributes:
        connect: to open a connection to the server.
        read: the longest silence between two pieces of the answer; a
            streaming model that thinks long before its first token needs
            this to be generous.
        write: to send the request.
        total: one attempt, from sending the request to the end of the
            answer (retries get a fresh one).
    """

    connect: float = pydantic.Field(default=10.0, gt=0)
    read: float = pydantic.Field(default=300.0, gt=0)
    write: float = pydantic.Field(default=60.0, gt=0)
    total: float = pydantic.Field(default=900.0, gt=0)


class RetryPolicy(pydantic.BaseModel, frozen=True, extra="forbid"):
    """When and how long to retry a model call that failed on the way.

    Retried: 408, 429 and 5xx answers, connection failures, and a stream
    cut before any text reached the subscribers. Never retried: 401/403,
    other 4xx, timeouts after the connection was made (a hung model would
    only hang again), malformed streams, and a stream that already
    delivered text (a retry would show it twice).

    Attributes:
        max_attempts: attempts per model call, the first included.
        initial_backoff: the wait before the first retry.
        multiplier: each further wait is this many times the previous.
        max_backoff: the longest single wait between attempts.
        jitter: the wait varies randomly by up to this fraction either
            way, so clients that failed together do not retry together.
        max_retry_sleep_per_turn: the most time one turn may spend
            waiting between attempts, over all its model calls; a server
            asking (``Retry-After``) for more than is left fails the call
            at once.
    """

    max_attempts: int = pydantic.Field(default=4, ge=1)
    initial_backoff: float = pydantic.Field(default=0.5, ge=0)
    multiplier: float = pydantic.Field(default=2.0, ge=1)
    max_backoff: float = pydantic.Field(default=20.0, ge=0)
    jitter: float = pydantic.Field(default=0.25, ge=0, le=1)
    max_retry_sleep_per_turn: float = pydantic.Field(default=60.0, ge=0)

    def backoff(self, retry: int, random_fraction: float) -> float:
        """The wait before retry number ``retry`` (1-based).

        ``random_fraction`` is a uniform draw from [0, 1).
        """
        base = min(
            self.max_backoff, self.initial_backoff * self.multiplier ** (retry - 1)
        )
        spread = self.jitter * (2.0 * random_fraction - 1.0)
        return max(0.0, base * (1.0 + spread))
