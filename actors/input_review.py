"""The user_prompt review of input that is to be queued.

Queued input (a follow-up, a steer, input sent while a turn runs) is
recorded when it is queued, so that it survives a crash. A rejected input
must leave no trace, so the hooks review it before it is recorded: when it
is submitted, not when its turn starts. Reviews run on the I/O loop, never
on the session's thread, one at a time per session so queued input keeps
the order it was submitted in; the caller waits on a future that the
session resolves once the input is recorded (or refused).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import pykka

from turnlog.actors.hooks import review_prompt
from turnlog.actors.io_loop import IoLoop
from turnlog.actors.messages import QueuedInputReviewed
from turnlog.domain.hooks import UserPromptInfo
from turnlog.domain.run_context import RunContext


class PendingInput(msgspec.Struct):
    """Input under review (or waiting for it), and its caller's future."""

    submission_id: str
    kind: str
    text: str
    attachments: list[dict[str, Any]]
    accepted: concurrent.futures.Future[str]
    starts_run: bool
    """Whether it runs on its own if the session is idle once recorded."""
    input_id: str = ""
    """The caller's id for it, and the digest of what it asked ("" if none)."""
    input_digest: str = ""
    for_run: str | None = None
    """The run a run handle gave it to (its submission id): refused if that
    run has ended by the time the hooks accepted it."""


class InputReviews:
    """The session's queue of input waiting for its user_prompt review."""

    def __init__(
        self,
        session_id: str,
        layers: Sequence[Any],
        io_loop: IoLoop,
        session: pykka.ActorRef[Any],
        context_of: Callable[[], RunContext[Any]] | None = None,
    ) -> None:
        self._context_of = context_of
        self._session_id = session_id
        self._layers = layers
        self._io_loop = io_loop
        self._session = session
        self._waiting: deque[PendingInput] = deque()
        self._running: concurrent.futures.Future[Any] | None = None

    def use_layers(self, layers: Sequence[Any]) -> None:
        """Input queued from now on is reviewed by ``layers`` (the hooks of
        the agent a handoff put in charge)."""
        self._layers = layers

    @property
    def busy(self) -> bool:
        """Whether input waits for its review (the session is not idle)."""
        return bool(self._waiting)

    def add(self, pending: PendingInput) -> None:
        """Queues ``pending`` for review, behind any review under way."""
        self._waiting.append(pending)
        if len(self._waiting) == 1:
            self._start(pending)

    def settle(self, fact: QueuedInputReviewed) -> PendingInput | None:
        """The input ``fact`` is about (None if unknown); starts the next review."""
        if not self._waiting or self._waiting[0].submission_id != fact.submission_id:
            return None
        pending = self._waiting.popleft()
        self._running = None
        if self._waiting:
            self._start(self._waiting[0])
        return pending

    def fail_all(self, error: BaseException) -> None:
        """Answers every waiting caller with ``error`` and stops the review."""
        if self._running is not None:
            self._running.cancel()
        while self._waiting:
            pending = self._waiting.popleft()
            if not pending.accepted.done():
                pending.accepted.set_exception(error)

    def _start(self, pending: PendingInput) -> None:
        info = UserPromptInfo(
            self._session_id,
            None,
            pending.text,
            tuple(pending.attachments),
            pending.kind,
            self._context_of() if self._context_of is not None else None,
        )
        submission_id, session = pending.submission_id, self._session

        def reviewed(future: concurrent.futures.Future[Any]) -> None:
            if future.cancelled():
                return  # the session stopped and answered the caller itself
            error = future.exception()
            if error is not None:
                fact = QueuedInputReviewed(submission_id, None, (), None, str(error))
            else:
                review = future.result()
                fact = QueuedInputReviewed(
                    submission_id,
                    review.rejection,
                    review.contexts,
                    review.stop,
                    None,
                    review.rewrite,
                )
            with contextlib.suppress(pykka.ActorDeadError):
                session.tell(fact)

        self._running = self._io_loop.submit(review_prompt(self._layers, info))
        self._running.add_done_callback(reviewed)
