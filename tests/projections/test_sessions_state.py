"""The sessions view records where each session stands and how it began:
its state, from its lifecycle events, and a preview of its first prompt."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from turnlog.domain import session as s
from turnlog.domain import turn_events as t
from turnlog.projections.sessions import (
    PROMPT_PREVIEW_LIMIT,
    SessionIndexProjection,
    SessionState,
    SessionSummary,
)

_ID = uuid.uuid4()
_WHEN = datetime(2025, 1, 1, tzinfo=UTC)


class Docs(dict):
    def get(self, part: str, position: int) -> Any:  # type: ignore[override]
        return super().get((part, position))

    def put(self, part: str, position: int, doc: Any) -> None:
        self[(part, position)] = doc


def made(event_class: type, **fields: Any) -> Any:
    return event_class(
        originator_id=_ID,
        originator_version=1,
        timestamp=_WHEN,
        session_id="s",
        **fields,
    )


def created() -> Any:
    return made(
        s.SessionCreated,
        agent_name="a",
        agent_digest="d",
        shared_state={},
        model_route="default",
        originator_topic="turnlog:Session",
    )


def started(number: int = 1) -> Any:
    return made(s.TurnStarted, turn_id=f"t{number}", number=number, submission_id="x")


def prompt(text: str) -> Any:
    return made(
        t.InputAccepted, submission_id="x", kind="prompt", text=text, attachments=[]
    )


def completed(number: int = 1) -> Any:
    return made(s.TurnCompleted, turn_id=f"t{number}", number=number, final_output="ok")


def aborted(number: int = 1, *, failed: bool) -> Any:
    return made(
        s.TurnAborted, turn_id=f"t{number}", number=number, reason="r", failed=failed
    )


def asked(request: str) -> Any:
    return made(
        t.ApprovalRequested,
        request_id=request,
        call_id="c",
        name="deploy",
        arguments="{}",
    )


def decided(request: str) -> Any:
    return made(
        t.ApprovalDecided,
        request_id=request,
        call_id="c",
        decision="allow",
        decided_by="ann",
    )


def fold(*events: Any) -> SessionSummary:
    docs = Docs()
    SessionIndexProjection().fold(docs, "s", list(enumerate(events, start=1)))
    summary: SessionSummary = docs.get("s", 0)
    return summary


@pytest.mark.parametrize(
    ("events", "state"),
    [
        pytest.param([created()], SessionState.IDLE, id="new"),
        pytest.param([created(), started()], SessionState.RUNNING, id="running"),
        pytest.param([created(), started(), completed()], SessionState.IDLE, id="done"),
        pytest.param(
            [created(), started(), aborted(failed=True)],
            SessionState.FAILED,
            id="failed",
        ),
        pytest.param(
            [created(), started(), aborted(failed=False)],
            SessionState.ABORTED,
            id="interrupted",
        ),
        pytest.param(
            [created(), started(), asked("r1")],
            SessionState.WAITING_FOR_APPROVAL,
            id="waiting",
        ),
        pytest.param(
            [created(), started(), asked("r1"), asked("r2"), decided("r1")],
            SessionState.WAITING_FOR_APPROVAL,
            id="one-of-two-decided",
        ),
        pytest.param(
            [created(), started(), asked("r1"), decided("r1")],
            SessionState.RUNNING,
            id="decided",
        ),
        pytest.param(
            [created(), started(), asked("r1"), aborted(failed=False)],
            SessionState.ABORTED,
            id="aborted-while-waiting",
        ),
        pytest.param(
            [created(), started(1), aborted(1, failed=True), started(2), completed(2)],
            SessionState.IDLE,
            id="failed-then-done",
        ),
        pytest.param(
            [created(), started(), completed(), made(s.SessionClosed)],
            SessionState.CLOSED,
            id="closed",
        ),
    ],
)
def test_the_state_follows_the_lifecycle_events(
    events: list[Any], state: SessionState
) -> None:
    assert fold(*events).state is state


def test_the_state_is_the_same_folded_in_one_run_or_event_by_event() -> None:
    events = [created(), started(), asked("r1"), asked("r2"), decided("r2")]
    docs = Docs()
    for position, event in enumerate(events, start=1):
        SessionIndexProjection().fold(docs, "s", [(position, event)])
    assert docs.get("s", 0) == fold(*events)


def test_the_first_prompt_is_kept_on_one_short_line() -> None:
    long = "Deploy\nthe   service " + "x" * 200
    summary = fold(
        created(), started(1), prompt(long), completed(1), started(2), prompt("later")
    )
    assert summary.first_prompt.startswith("Deploy the service xxx")
    assert summary.first_prompt.endswith("...")
    assert len(summary.first_prompt) == PROMPT_PREVIEW_LIMIT


def test_a_session_without_a_prompt_has_no_preview() -> None:
    assert fold(created()).first_prompt == ""
