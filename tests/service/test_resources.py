"""Each JSON resource against a real server: sessions, prompts, input,
approvals, transcript pages, the audit with its chain verdict, OpenAPI."""

from __future__ import annotations

from service_support import await_event


def test_sessions_are_created_listed_and_read(serve) -> None:
    served = serve()
    with served.client() as client:
        created = client.post("/sessions", json={"shared_state": {"plan": "x"}})
        assert created.status_code == 201
        session_id = created.json()["session_id"]
        assert created.json()["shared_state"]["plan"] == "x"
        listed = client.get("/sessions").json()["sessions"]
        assert [(s["session_id"], s["agent"]) for s in listed] == [
            (session_id, "publisher")
        ]
        read = client.get(f"/sessions/{session_id}").json()
        assert read["agent_name"] == "publisher"
        assert read["turn_count"] == 0


def test_prompt_steer_follow_up_approvals_and_interrupt(serve) -> None:
    served = serve()
    with served.client() as client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
        base = f"/sessions/{session_id}"
        started = client.post(f"{base}/prompts", json={"text": "first"})
        assert started.status_code == 202
        assert started.json()["submission_id"]
        busy = client.post(f"{base}/prompts", json={"text": "again"})
        assert busy.status_code == 409
        withdrawn, asked = await_event(client, session_id, "approval_request")
        # A steer withdraws the call still waiting for approval (it has not
        # started); the next step takes the steer in and asks again.
        steer = client.post(f"{base}/steer", json={"text": "be brief"})
        follow = client.post(f"{base}/follow-ups", json={"text": "and then"})
        assert steer.status_code == follow.status_code == 202
        pending, asked = await_event(
            client, session_id, "approval_request", after=asked
        )
        assert pending["request_id"] != withdrawn["request_id"]
        (listed,) = client.get(f"{base}/approvals").json()["approvals"]
        assert listed["request_id"] == pending["request_id"]
        assert listed["tool_name"] == "publish"
        assert (
            client.post(
                f"{base}/approvals/{pending['request_id']}", json={"decision": "deny"}
            ).status_code
            == 200
        )
        # The follow-up runs next in the same run and waits for its own approval.
        request, asked = await_event(
            client, session_id, "approval_request", after=asked
        )
        again = client.get(f"{base}/approvals").json()["approvals"]
        assert [a["request_id"] for a in again] == [request["request_id"]]
        assert request["request_id"] != pending["request_id"]
        assert (
            client.post(f"{base}/interrupt", json={"clear_queue": True}).status_code
            == 202
        )
        await_event(client, session_id, "turn_aborted", after=asked)
        assert not client.get(base).json()["running_turn"]
        texts = [m["content"] for m in client.get(base).json()["messages"]]
        assert texts[:2] == ["first", "be brief"]


def test_a_prompt_with_wait_true_answers_with_the_finished_run(serve) -> None:
    from turnlog.service import demo_agent

    served = serve(agents={"demo": demo_agent})
    with served.client() as client:
        session_id = client.post("/sessions", json={"agent": "demo"}).json()[
            "session_id"
        ]
        result = client.post(
            f"/sessions/{session_id}/prompts",
            params={"wait": "true"},
            json={"text": "four words right here"},
        )
        assert result.status_code == 200
        assert result.json()["status"] == "completed"
        assert result.json()["final_output"] == "Your message has 4 words."


def test_the_transcript_pages_back_and_the_audit_verifies(serve) -> None:
    served = serve()
    with served.client() as client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
        base = f"/sessions/{session_id}"
        client.post(f"{base}/prompts", json={"text": "go"})
        pending, asked = await_event(client, session_id, "approval_request")
        client.post(
            f"{base}/approvals/{pending['request_id']}", json={"decision": "allow"}
        )
        await_event(client, session_id, "turn_complete", after=asked)
        assert not client.get(base).json()["running_turn"]
        positions: list[int] = []
        page = client.get(f"{base}/transcript", params={"limit": 5}).json()
        while True:
            positions[:0] = [item["position"] for item in page["items"]]
            if page["next_before"] is None:
                break
            page = client.get(
                f"{base}/transcript", params={"limit": 5, "before": page["next_before"]}
            ).json()
        audit = client.get(f"{base}/audit").json()
        assert positions == [r["position"] for r in audit["timeline"]]
        assert positions == sorted(set(positions))
        assert audit["timeline"][0]["event"] == "SessionCreated"
        # position: the place in the whole log; sequence: in the session
        sequences = [r["sequence"] for r in audit["timeline"]]
        assert sequences == list(range(1, len(positions) + 1))
        assert "updated_position" in client.get(base).json()
        assert audit["verification"]["ok"] is True
        assert audit["verification"]["events"] == len(positions)
        document = client.get("/openapi.json").json()
        assert "/sessions/{session_id}/events" in document["paths"]
