"""A process killed while a background job runs: the tool crash rules.

The child's tool starts a job that never ends; the child is SIGKILLed
with the job running. Reopened, the session records the job as
interrupted (its outcome unknown) and the model is told at its next step;
a job declared idempotent runs again instead, with its recorded arguments.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from kill_support import kill_when  # scenarios/conftest puts this folder on sys.path

from turnlog import (
    Agent,
    Runtime,
    ScriptedModel,
    ToolContext,
    function_tool,
)
from turnlog.domain.jobs import INTERRUPTED_JOB_OUTPUT
from turnlog.events import JobFinishedMsg, JobStartedMsg, RunEvent

pytestmark = pytest.mark.subprocess

CHILD = Path(__file__).with_name("jobs_child.py")
WAIT = 30.0


def job_msgs(rt: Runtime, session_id: str) -> list[object]:
    return [
        e.msg
        for e in rt.replay_events(session_id)
        if isinstance(e.msg, JobStartedMsg | JobFinishedMsg)
    ]


def test_a_job_cut_off_by_a_kill_is_recorded_as_interrupted(store_url: str) -> None:
    kill_when(CHILD, "JOB RUNNING", store_url, "crash-plain", "plain")
    ran: list[str] = []

    @function_tool
    def build(context: ToolContext) -> str:
        """The build tool, here never called."""
        ran.append("build")
        return "unused"

    model = ScriptedModel(["I see it was interrupted"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("worker", model=model, tools=[build]), session_id="crash-plain"
        )
        started, finished = job_msgs(rt, "crash-plain")
        assert isinstance(started, JobStartedMsg)
        assert finished == JobFinishedMsg(
            started.job_id, "build", INTERRUPTED_JOB_OUTPUT, True, interrupted=True
        )
        session.prompt("how did the build go?")
        notes = [
            str(item["content"])
            for item in model.requests[0].items
            if item.get("turnlog_kind") == "job_result"
        ]
        assert len(notes) == 1
        assert started.job_id in notes[0]
        assert notes[0].endswith(INTERRUPTED_JOB_OUTPUT)
    assert ran == []


def test_an_idempotent_job_cut_off_by_a_kill_runs_again(store_url: str) -> None:
    kill_when(CHILD, "JOB RUNNING", store_url, "crash-idem", "idempotent")
    gate = threading.Event()
    sources: list[str] = []

    def fetch_again(source: str) -> str:
        sources.append(source)
        assert gate.wait(WAIT)
        return f"fetched {source}"

    @function_tool(jobs={"fetch": fetch_again})
    def fetch(context: ToolContext) -> str:
        """The download tool, here never called."""
        return "unused"

    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("worker", model=ScriptedModel([]), tools=[fetch]),
            session_id="crash-idem",
        )
        with session.subscribe() as events:
            gate.set()
            done = next(
                item.event.msg
                for item in events
                if isinstance(item, RunEvent)
                and isinstance(item.event.msg, JobFinishedMsg)
            )
        started, finished = job_msgs(rt, "crash-idem")
        assert isinstance(started, JobStartedMsg)
        assert finished == done
        assert done == JobFinishedMsg(
            started.job_id, "fetch", "fetched https://example.test/a", False
        )
    assert sources == ["https://example.test/a"]
