"""How a SessionActor takes input: prompts, queued input, approval answers.

An object the :class:`~turnlog.actors.session_actor.SessionActor` owns:
input that starts a turn goes to its turn driver; input for later is
queued in the Session (after its user_prompt review, with hooks). Input
with the caller's id is first matched against what the session recorded
(actors.retried_inputs), so a retry is answered and never recorded twice.
Everything here runs on the session actor's thread.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import msgspec

from turnlog.actors.hooks import HookFailedError
from turnlog.actors.input_review import InputReviews, PendingInput
from turnlog.actors.messages import QueuedInputReviewed, RunWaiter, StartPrompt
from turnlog.actors.retried_inputs import (
    already_decided,
    answer_retried_prompt,
    retried_submission,
)
from turnlog.actors.session_parts import check_run
from turnlog.actors.session_state import SessionState
from turnlog.actors.turn_driver import TurnDriver
from turnlog.domain.errors import (
    InputRejectedError,
    InvalidInputError,
    SessionBusyError,
    TurnlogError,
)
from turnlog.domain.ids import new_submission_id
from turnlog.domain.input_ids import seen_submission
from turnlog.domain.protocol import SessionFileReference
from turnlog.domain.rewrites import InputRewrite
from turnlog.domain.run import RunResult
from turnlog.domain.text import check_encodable
from turnlog.domain.turn_facts import Decide


class SessionInputs:
    """Takes one session's input: starts its turns, or queues it."""

    def __init__(
        self, state: SessionState, turns: TurnDriver, reviews: InputReviews
    ) -> None:
        self._state = state
        self._turns = turns
        self._input_reviews = reviews

    def submit(
        self,
        text: str,
        attachments: tuple[SessionFileReference, ...],
        kind: str,
        input_id: str,
        waiter: Any,
    ) -> str | concurrent.futures.Future[str]:
        """Input that starts a turn, or waits behind the running one
        (``kind`` prompt, peer or system); a retry answers the original."""
        check_text(text)
        state = self._state
        original, digest = retried_submission(state, input_id, kind, text, attachments)
        if original is not None:
            return original
        state.check_accepting()
        submitted: str | concurrent.futures.Future[str]
        if state.session.running or state.run is not None:
            queued_kind = "follow_up" if kind == "prompt" else kind
            submitted = self.queue(
                text, attachments, queued_kind, starts_run=True, input_id=input_id
            )
        else:
            submitted = new_submission_id()
            ids = (input_id, digest)
            self._turns.start(submitted, kind, text, attachments, input_id=ids)
        if waiter is not None and state.run is not None:
            state.run.waiters.append(waiter)
        return submitted

    def queue(
        self,
        text: str,
        attachments: tuple[SessionFileReference, ...],
        kind: str = "follow_up",
        *,
        starts_run: bool = False,
        input_id: str = "",
        for_run: str | None = None,
    ) -> str | concurrent.futures.Future[str]:
        """Records queued input, or (with a user_prompt hook) has it reviewed.

        With a hook the caller gets a future for the submission id, resolved
        once the input is recorded, or failed if the hook refused it: the
        handle waits on it, off this thread. Input whose ``input_id`` was
        recorded before answers the original submission (a prompt queued
        behind a run, ``starts_run``, is matched as a prompt). Input a run
        handle gives its run (``for_run``) is refused if that run has ended
        by the time its review accepts it.
        """
        check_text(text)
        asked = "prompt" if starts_run and kind == "follow_up" else kind
        state = self._state
        original, digest = retried_submission(state, input_id, asked, text, attachments)
        if original is not None:
            return original
        state.check_accepting()
        submission_id = new_submission_id()
        refs = [msgspec.to_builtins(a) for a in attachments]
        if self._turns.reviews_input:
            accepted: concurrent.futures.Future[str] = concurrent.futures.Future()
            pending = PendingInput(
                submission_id,
                kind,
                text,
                refs,
                accepted,
                starts_run,
                input_id,
                digest,
                for_run,
            )
            self._input_reviews.use_layers(self._state.agent.middleware)
            self._input_reviews.add(pending)
            return accepted
        self._record_queued(submission_id, kind, text, refs, (input_id, digest))
        return submission_id

    def _record_queued(
        self,
        submission_id: str,
        kind: str,
        text: str,
        refs: list[dict[str, Any]],
        input_id: tuple[str, str] = ("", ""),
        *,
        rewrite: InputRewrite | None = None,
    ) -> None:
        if kind == "steer":  # the turn machine's: it skips calls not started
            self._turns.steer(submission_id, text, refs, input_id, rewrite)
            return
        session = self._state.session
        # As the hooks rewrote it: a redacted original is stored nowhere.
        rewritten_by, original = (
            ((), None) if rewrite is None else (rewrite.hooks, rewrite.original)
        )

        def decide() -> list[Any]:
            session.queue_input(
                submission_id,
                kind,
                text if rewrite is None else rewrite.text,
                refs,
                input_id=input_id[0],
                input_digest=input_id[1],
                rewritten_by=rewritten_by,
                original_text=original,
            )
            return [session]

        self._state.record(decide)

    def decide(self, fact: Decide) -> None:
        """Records the user's decision; a repeat of a recorded one is a no-op."""
        if not already_decided(self._state, fact):
            self._turns.decide(fact)

    def reviewed(self, fact: QueuedInputReviewed) -> None:
        pending = self._input_reviews.settle(fact)
        if pending is None:
            return
        accepted, state = pending.accepted, self._state
        if fact.error is not None:
            accepted.set_exception(HookFailedError(fact.error))
            return
        if fact.rejection is not None:
            accepted.set_exception(InputRejectedError(fact.rejection))
            return
        try:
            state.check_accepting()
            if pending.for_run is not None:  # its run may have ended meanwhile
                check_run(state.run, pending.for_run, state.session_id)
            # The same input may have been recorded while this one was reviewed.
            original = seen_submission(
                self._state.session.input_ids, pending.input_id, pending.input_digest
            )
            if original is not None:
                accepted.set_result(original)
                return
            ids = (pending.input_id, pending.input_digest)
            self._record_queued(
                pending.submission_id,
                pending.kind,
                pending.text,
                pending.attachments,
                ids,
                rewrite=fact.rewrite,
            )
        except TurnlogError as error:
            accepted.set_exception(error)
            return
        self._state.reviewed[pending.submission_id] = (fact.contexts, fact.stop)
        accepted.set_result(pending.submission_id)
        if pending.starts_run and state.run is None and not state.session.running:
            self._turns.start_next_queued()  # the run it was queued behind ended

    def start_prompt(
        self,
        text: str,
        attachments: tuple[SessionFileReference, ...],
        waiter: RunWaiter[RunResult],
        message: StartPrompt,
    ) -> str:
        check_text(text)
        state, input_id = self._state, message.input_id
        original, digest = retried_submission(
            state, input_id, "prompt", text, attachments
        )
        if original is not None:
            answer_retried_prompt(state, original, waiter)
            return original
        self._state.check_accepting()
        if self._state.run is not None or self._state.session.running:
            msg = (
                f"session {self._state.session_id!r} is running; wait for the run "
                "to end or queue the input with follow_up()"
            )
            raise SessionBusyError(msg)
        submission_id = new_submission_id()
        ids = (input_id, digest)
        self._turns.start(
            submission_id, "prompt", text, attachments, message.deps, input_id=ids
        )
        assert self._state.run is not None
        self._state.run.waiters.append(waiter)
        return submission_id


def check_text(text: object) -> None:
    if not isinstance(text, str):
        msg = f"input text must be a str, not {type(text).__name__}"
        raise InvalidInputError(msg)
    check_encodable(text, "input text")
