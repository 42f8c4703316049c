"""Runs the service started outlive their requests (issue 23, item 4).

Cancelling the task that awaits ``prompt_async`` interrupts its run; the
service starts runs with ``detach_on_cancel=True``, so a service that
stops (its lifespan cancels the request tasks still waiting on runs)
leaves them going, as before: a person can still answer the approval the
run waits on, through the runtime, and the run completes.
"""

from __future__ import annotations

import httpx
from service_agents import approval_agent
from service_support import TOKEN_A, TOKENS, ServerThread, await_event

from turnlog import RunFinished, Runtime
from turnlog.service import create_app
from turnlog.testing import wait_for


def test_a_run_outlives_the_service_that_started_it(store_url: str) -> None:
    with Runtime.open(store_url) as runtime:
        app = create_app(runtime, {"publisher": approval_agent}, TOKENS)
        with ServerThread(app) as server:
            url = f"http://127.0.0.1:{server.port}"
            headers = {"Authorization": f"Bearer {TOKEN_A}"}
            with httpx.Client(base_url=url, headers=headers, timeout=20) as client:
                session_id = client.post("/sessions", json={}).json()["session_id"]
                started = client.post(
                    f"/sessions/{session_id}/prompts", json={"text": "publish it"}
                )
                assert started.status_code == 202
                asked, _ = await_event(client, session_id, "approval_request")
        # The server stopped: its lifespan cancelled the task awaiting the run.
        session = runtime.create_session(approval_agent(), session_id=session_id)
        with session.subscribe() as events:
            session.approve(asked["request_id"], "allow")
            finished, _ = wait_for(events, lambda m: isinstance(m, RunFinished))
        assert isinstance(finished, RunFinished)
        assert finished.result.final_output == "All done: counted and published."
        names = [type(e.msg).__name__ for e in runtime.replay_events(session_id)]
        assert "TurnAbortedMsg" not in names
        assert names[-1] == "TurnCompletedMsg"
