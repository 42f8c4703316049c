"""Forks, rewinds, history and lineage through the service, on both stores:
the tenant's own sessions only, bad input refused with nothing written."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from service_agents import approval_agent
from service_support import TOKEN_B, TOKENS, Served, ServerThread, await_event

from turnlog import Runtime
from turnlog.service import create_app, demo_agent


@pytest.fixture
def served(store_url: str) -> Iterator[Callable[..., Served]]:
    """A server over a runtime on each store in turn; stopped after."""
    stack: list[tuple[ServerThread, Runtime]] = []

    def start() -> Served:
        runtime = Runtime.open(store_url)
        app = create_app(
            runtime,
            {"demo": demo_agent, "publisher": approval_agent},
            TOKENS,
            default_agent="demo",
        )
        server = ServerThread(app).__enter__()
        stack.append((server, runtime))
        return Served(f"http://127.0.0.1:{server.port}", runtime, app)

    yield start
    for server, runtime in reversed(stack):
        server.__exit__()
        runtime.close()


def talk(client: httpx.Client, session_id: str, *texts: str) -> None:
    for text in texts:
        answer = client.post(
            f"/sessions/{session_id}/prompts",
            params={"wait": "true"},
            json={"text": text},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "completed"


def contents(client: httpx.Client, session_id: str) -> list[str]:
    read = client.get(f"/sessions/{session_id}")
    assert read.status_code == 200, read.text
    return [m["content"] for m in read.json()["messages"]]


def test_a_fork_from_before_an_input_has_the_history_up_to_it(served) -> None:
    with served().client() as client:
        source = client.post("/sessions", json={}).json()["session_id"]
        talk(client, source, "one", "one two")
        points = client.get(f"/sessions/{source}/history").json()["points"]
        assert [(p["after_turn"], p["input"]) for p in points] == [
            (0, 1),
            (1, 2),
            (2, None),
        ]
        assert points[1]["preview"] == "one two"

        forked = client.post(
            f"/sessions/{source}/fork",
            json={"before_input": 2, "session_id": "the-fork"},
        )
        assert forked.status_code == 201, forked.text
        assert forked.json()["session_id"] == "the-fork"
        read = client.get("/sessions/the-fork").json()
        assert read["forked_from"]["session_id"] == source
        assert read["forked_from"]["position"] == points[1]["position"]
        assert contents(client, "the-fork") == ["one", "Your message has 1 words."]

        talk(client, "the-fork", "a b c")
        assert contents(client, "the-fork")[2:] == [
            "a b c",
            "Your message has 3 words.",
        ]
        assert len(contents(client, source)) == 4  # the source is untouched

        # The fork counts the inputs of the history it shares with its source.
        again = client.post("/sessions/the-fork/fork", json={"before_input": 2})
        assert (
            contents(client, again.json()["session_id"]) == contents(client, source)[:2]
        )
        # A fork of the fork, at its latest point (neither point named).
        grand = client.post("/sessions/the-fork/fork", json={}).json()["session_id"]
        assert contents(client, grand) == contents(client, "the-fork")
        listed = {s["session_id"] for s in client.get("/sessions").json()["sessions"]}
        assert {source, "the-fork", grand} <= listed

        lineage = client.get(f"/sessions/{source}/lineage").json()
        assert lineage["forked_from"] is None
        (fork,) = lineage["forks"]
        assert (fork["session_id"], fork["position"]) == (
            "the-fork",
            points[1]["position"],
        )
        assert {f["session_id"] for f in fork["forks"]} == {
            again.json()["session_id"],
            grand,
        }
        above = client.get(f"/sessions/{grand}/lineage").json()["sources"]
        assert [(s["session_id"], s["fork"]) for s in above] == [
            ("the-fork", grand),
            (source, "the-fork"),
        ]


def test_edit_and_resend_is_a_rewind_then_a_prompt(served) -> None:
    with served().client() as client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
        base = f"/sessions/{session_id}"
        talk(client, session_id, "one", "one two", "one two three")
        rewound = client.post(f"{base}/rewind", json={"before_input": 2})
        assert rewound.status_code == 200, rewound.text
        assert rewound.json() == {"session_id": session_id, "set_aside": [2, 3]}
        talk(client, session_id, "x y y y")
        assert contents(client, session_id) == [
            "one",
            "Your message has 1 words.",
            "x y y y",
            "Your message has 4 words.",
        ]
        read = client.get(base).json()
        assert read["rewound_turns"] == [2, 3]
        assert read["turn_count"] == 4  # turn numbers go on
        points = client.get(f"{base}/history").json()["points"]
        assert {p["after_turn"] for p in points if p["rewound"]} == {2, 3}
        (rewind,) = client.get(f"{base}/lineage").json()["rewinds"]
        assert (rewind["to_turn"], rewind["set_aside"]) == (1, [2, 3])
        # The turns set aside are still in the audit.
        timeline = client.get(f"{base}/audit").json()["timeline"]
        assert sum(r["event"] == "TurnCompleted" for r in timeline) == 4
        set_aside = client.get(f"{base}/lineage").json()["set_aside_positions"]
        completed = [r["position"] for r in timeline if r["event"] == "TurnCompleted"]
        assert [
            any(after < p < before for after, before in set_aside) for p in completed
        ] == [False, True, True, False]
        # A fork after the edit carries what was set aside, still set aside.
        fork = client.post(f"{base}/fork", json={}).json()["session_id"]
        assert contents(client, fork) == contents(client, session_id)
        assert client.get(f"/sessions/{fork}/lineage").json()[
            "set_aside_positions"
        ] == [set_aside[0]]


def test_a_rewind_while_a_turn_runs_is_409_until_interrupted(served) -> None:
    with served().client() as client:
        session_id = client.post("/sessions", json={"agent": "publisher"}).json()[
            "session_id"
        ]
        base = f"/sessions/{session_id}"
        assert client.post(f"{base}/prompts", json={"text": "go"}).status_code == 202
        _, asked = await_event(client, session_id, "approval_request")
        busy = client.post(f"{base}/rewind", json={"after_turn": 0})
        assert busy.status_code == 409
        assert "interrupt it first" in busy.json()["detail"]
        # A fork of the running session starts quiet, at its last quiet point.
        running = client.post(f"{base}/fork", json={"after_turn": 1})
        assert running.status_code == 422
        assert "still running" in running.json()["detail"]
        quiet = client.post(f"{base}/fork", json={})
        assert quiet.status_code == 201, quiet.text
        fork = quiet.json()["session_id"]
        assert client.get(f"/sessions/{fork}/approvals").json()["approvals"] == []
        assert not client.get(f"/sessions/{fork}").json()["running_turn"]
        client.post(f"{base}/interrupt", json={})
        await_event(client, session_id, "turn_aborted", after=asked)
        done = client.post(f"{base}/rewind", json={"after_turn": 0})
        assert done.status_code == 200, done.text
        assert done.json()["set_aside"] == [1]
        assert client.get(f"{base}/approvals").json()["approvals"] == []


def test_another_tenants_sessions_and_forks_are_404(served) -> None:
    server = served()
    with server.client() as client, server.client(TOKEN_B) as other:
        source = client.post("/sessions", json={}).json()["session_id"]
        talk(client, source, "one")
        fork = client.post(f"/sessions/{source}/fork", json={"after_turn": 1})
        fork_id = fork.json()["session_id"]
        for session_id in (source, fork_id):
            base = f"/sessions/{session_id}"
            for response in (
                other.post(f"{base}/fork", json={}),
                other.post(f"{base}/rewind", json={"after_turn": 0}),
                other.get(f"{base}/history"),
                other.get(f"{base}/lineage"),
                other.get(base),
            ):
                assert response.status_code == 404, response.text
        # Tenant B's own fork of its own session is B's, and A's tree omits it.
        mine = other.post("/sessions", json={}).json()["session_id"]
        talk(other, mine, "b")
        theirs = other.post(f"/sessions/{mine}/fork", json={}).json()["session_id"]
        assert client.get(f"/sessions/{theirs}").status_code == 404
        assert other.get(f"/sessions/{theirs}").status_code == 200
        assert [s["session_id"] for s in other.get("/sessions").json()["sessions"]] == [
            mine,
            theirs,
        ]
        # An id another tenant's session has is taken: 409, and still theirs.
        taken = client.post(f"/sessions/{source}/fork", json={"session_id": theirs})
        assert taken.status_code == 409
        assert client.get(f"/sessions/{theirs}").status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"before_input": 0}, 422, "$.before_input"),
        ({"after_turn": -1}, 422, "$.after_turn"),
        ({"before_input": 1, "after_turn": 0}, 422, None),
        ({"before_input": "1"}, 422, "$.before_input"),
        ({"before_input": True}, 422, "$.before_input"),
        ({"before_input": 9}, 422, None),
        ({"after_turn": 7}, 422, None),
        ({"point": 1}, 422, None),
        ({"session_id": "a\u0000b"}, 422, "$.session_id"),
        ({"keep_allowances": "yes"}, 422, "$.keep_allowances"),
    ],
)
def test_a_bad_fork_is_refused_and_writes_nothing(
    served, body: dict[str, Any], status: int, field: str | None
) -> None:
    server = served()
    with server.client() as client:
        source = client.post("/sessions", json={}).json()["session_id"]
        talk(client, source, "one")
        before = server.runtime.store.max_position()
        sessions = client.get("/sessions").json()["sessions"]
        refused = client.post(f"/sessions/{source}/fork", json=body)
        assert refused.status_code == status, refused.text
        assert refused.json()["detail"]
        if field is not None:
            assert refused.json()["field"] == field
        rewind_body = {k: v for k, v in body.items() if k != "session_id"} or {
            "after_turn": 5
        }
        if "keep_allowances" not in body:
            again = client.post(f"/sessions/{source}/rewind", json=rewind_body)
            assert again.status_code == 422, again.text
        assert server.runtime.store.max_position() == before
        assert client.get("/sessions").json()["sessions"] == sessions


def test_a_taken_fork_id_is_409_and_a_rewind_needs_a_point(served) -> None:
    server = served()
    with server.client() as client:
        source = client.post("/sessions", json={}).json()["session_id"]
        talk(client, source, "one")
        before = server.runtime.store.max_position()
        taken = client.post(f"/sessions/{source}/fork", json={"session_id": source})
        assert taken.status_code == 409
        assert "exists already" in taken.json()["detail"]
        bare = client.post(f"/sessions/{source}/rewind", json={})
        assert bare.status_code == 422
        assert "name the point" in bare.json()["detail"]
        assert server.runtime.store.max_position() == before


def test_openapi_documents_forks_rewinds_history_and_lineage(served) -> None:
    with served().client() as client:
        paths = client.get("/openapi.json").json()["paths"]
    fork = paths["/sessions/{session_id}/fork"]["post"]
    properties = fork["requestBody"]["content"]["application/json"]["schema"][
        "properties"
    ]
    assert set(properties) == {
        "before_input",
        "after_turn",
        "session_id",
        "keep_allowances",
    }
    assert {"201", "404", "409", "422"} <= set(fork["responses"])
    rewind = paths["/sessions/{session_id}/rewind"]["post"]
    assert {"200", "404", "409", "422"} <= set(rewind["responses"])
    assert "get" in paths["/sessions/{session_id}/history"]
    assert "get" in paths["/sessions/{session_id}/lineage"]
