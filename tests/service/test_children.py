"""A session's child sessions through the service: listed for its tenant
as a tree with usage by agent, their approvals listed and decided through
the parent's approvals resource."""

from __future__ import annotations

from service_support import TOKEN_B, await_event

from turnlog.domain import protocol as p


def test_a_childs_approval_is_decided_through_the_parent_and_children_listed(
    serve,
) -> None:
    from service_agents import delegating_agent

    served = serve({"lead": delegating_agent})
    with served.client() as client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
        base = f"/sessions/{session_id}"
        assert client.get(f"{base}/children").json()["children"] == []
        client.post(f"{base}/prompts", json={"text": "go"})
        child_id = f"{session_id}:1:ask"
        with served.runtime.follow(child_id) as follower:
            while not isinstance(follower.get(10).msg, p.ApprovalRequestedMsg):
                pass
        (pending,) = client.get(f"{base}/approvals").json()["approvals"]
        assert (pending["session_id"], pending["tool_name"]) == (child_id, "publish")
        decided = client.post(
            f"{base}/approvals/{pending['request_id']}", json={"decision": "allow"}
        )
        assert decided.status_code == 200
        await_event(client, session_id, "turn_complete")
        listed = client.get(f"{base}/children").json()
        (child,) = listed["children"]
        assert (child["session_id"], child["agent"], child["parent_call"]) == (
            child_id,
            "publisher",
            "ask",
        )
        assert child["turn_count"] == 1
        assert not child["running"]
        assert child["children"] == []
        assert set(listed["usage_by_agent"]) == {"lead", "publisher"}
        assert listed["usage_by_agent"]["publisher"] == child["usage"]
        # The child is read, never driven, by the parent's tenant.
        read = client.get(f"/sessions/{child_id}").json()
        assert (read["agent_name"], read["turn_count"]) == ("publisher", 1)
        audit = client.get(f"/sessions/{child_id}/audit").json()
        assert audit["verification"]["ok"] is True
        created = audit["timeline"][0]
        assert created["event"] == "SessionCreated"
        assert (created["data"]["parent_session"], created["data"]["parent_call"]) == (
            session_id,
            "ask",
        )
        assert client.get(f"/sessions/{child_id}/transcript").json()["items"]
        prompted = client.post(f"/sessions/{child_id}/prompts", json={"text": "hi"})
        assert prompted.status_code == 404


def test_another_tenant_can_read_neither_the_children_nor_a_child(serve) -> None:
    from service_agents import delegating_agent

    served = serve({"lead": delegating_agent})
    with served.client() as client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
        client.post(f"/sessions/{session_id}/prompts", json={"text": "go"})
        child_id = f"{session_id}:1:ask"
        with served.runtime.follow(child_id) as follower:
            follower.get(10)  # the child exists
    with served.client(token=TOKEN_B) as client:
        assert client.get(f"/sessions/{session_id}/children").status_code == 404
        assert client.get(f"/sessions/{child_id}").status_code == 404
        assert client.get(f"/sessions/{child_id}/audit").status_code == 404
