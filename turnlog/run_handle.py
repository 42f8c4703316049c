"""The handle of one run: it steers, follows up and interrupts that run only.

``AgentSession.active_run_handle()`` gives it. A run is a prompt and the
queued input that runs behind it, until the session is idle again
(``turnlog.RunResult``); the handle stands for it by the submission that
started it, and the session's actor checks, as it takes the input, that
this run is still the one in progress. So input given to a handle never
reaches a later run: once its run has ended the handle raises
RunEndedError and nothing is recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from turnlog.actors.messages import FollowUp, ForRun, Submit
from turnlog.domain.inputs import check_attachments, check_input
from turnlog.domain.protocol import Interrupt, SessionFileReference, Steer

if TYPE_CHECKING:
    from turnlog.session import AgentSession


class RunHandle:
    """A run: which submission started it, and the turn it was running.

    It acts on its own run only: once that run has ended, ``steer``,
    ``follow_up`` and ``interrupt`` raise RunEndedError, recording nothing
    (they never reach a later run of the session).
    """

    def __init__(self, session: AgentSession, submission_id: str, turn_id: str | None):
        self.session = session
        self.submission_id = submission_id
        """The submission that started the run: the run's id."""
        self.turn_id = turn_id
        """The turn it was running when the handle was made."""

    def steer(
        self, text: str, *, attachments: Sequence[SessionFileReference] = ()
    ) -> str:
        """Steers the run's running turn (see ``AgentSession.steer``): its
        tool calls that have not started are skipped, and its next model
        call takes ``text`` in. Returns the submission id.

        Raises RunEndedError if the run has ended.
        """
        check_input("steer", text)
        refs = check_attachments(attachments)
        return self._ask(Submit(Steer(text, refs)))

    def follow_up(
        self, text: str, *, attachments: Sequence[SessionFileReference] = ()
    ) -> str:
        """Queues ``text`` to run in this run, after its queued input.

        Returns the submission id. Raises RunEndedError if the run has ended.
        """
        check_input("follow_up", text)
        return self._ask(FollowUp(text, check_attachments(attachments)))

    def interrupt(self) -> None:
        """Aborts the run's running turn (queued input runs next).

        Raises RunEndedError if the run has ended.
        """
        self._ask(Submit(Interrupt()))

    def _ask(self, message: Submit | FollowUp) -> str:
        result: str = self.session._actor.ask(ForRun(self.submission_id, message))
        return result

    def __repr__(self) -> str:
        return f"RunHandle({self.session.session_id!r}, {self.submission_id!r})"
