"""Tenants, tokens and bad input: each refusal has its status, a
problem+json body naming the field, no traceback, and records nothing."""

from __future__ import annotations

import pytest
from service_support import TOKEN_B

from turnlog.service.problems import PROBLEM_JSON


def problem(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    body = response.json()
    assert body["status"] == status
    assert "Traceback" not in response.text
    return body


@pytest.fixture
def session(serve):
    served = serve(max_body=1000)
    with served.client() as client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
    return served, session_id


def test_no_token_or_a_wrong_one_is_401(session) -> None:
    served, session_id = session
    for token in (None, "not-a-token"):
        with served.client(token=token) as client:
            for path in (
                "/sessions",
                f"/sessions/{session_id}",
                f"/sessions/{session_id}/events",
            ):
                response = client.get(path)
                problem(response, 401)
                assert response.headers["www-authenticate"] == "Bearer"


def test_another_tenants_session_is_404_like_one_that_does_not_exist(session) -> None:
    served, session_id = session
    before = served.runtime.store.max_position()
    with served.client(token=TOKEN_B) as other:
        assert other.get("/sessions").json() == {"sessions": []}
        for path in ("", "/events", "/approvals", "/transcript", "/audit"):
            theirs = problem(other.get(f"/sessions/{session_id}{path}"), 404)
            missing = problem(other.get(f"/sessions/no-such-session{path}"), 404)
            assert theirs["title"] == missing["title"]
        problem(other.post(f"/sessions/{session_id}/prompts", json={"text": "hi"}), 404)
    assert served.runtime.store.max_position() == before


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b"{not json", 400, None),
        (b'{"text": 5}', 422, "$.text"),
        (b'{"text": "hi", "extra": 1}', 422, "$.extra"),
        (b"[]", 422, None),
        (b"x" * 2000, 413, None),
    ],
)
def test_bad_bodies_get_their_status_and_record_nothing(
    session, body, status, field
) -> None:
    served, session_id = session
    before = served.runtime.store.max_position()
    with served.client() as client:
        response = client.post(
            f"/sessions/{session_id}/prompts",
            content=body,
            headers={"content-type": "application/json"},
        )
    found = problem(response, status)
    assert found.get("field") == field
    assert served.runtime.store.max_position() == before


def test_a_chunked_body_over_the_limit_is_413(session) -> None:
    served, session_id = session
    before = served.runtime.store.max_position()

    def chunks():
        for _ in range(20):
            yield b'{"text": "' + b"x" * 100

    with served.client() as client:
        response = client.post(
            f"/sessions/{session_id}/prompts",
            content=chunks(),
            headers={"content-type": "application/json"},
        )
    problem(response, 413)
    assert served.runtime.store.max_position() == before


def test_unknown_ids_and_bad_values_name_what_is_wrong(session) -> None:
    served, session_id = session
    before = served.runtime.store.max_position()
    with served.client() as client:
        problem(client.post("/sessions/nope/prompts", json={"text": "hi"}), 404)
        problem(
            client.post(
                f"/sessions/{session_id}/approvals/nope", json={"decision": "allow"}
            ),
            404,
        )
        body = problem(
            client.post(
                f"/sessions/{session_id}/approvals/x", json={"decision": "maybe"}
            ),
            422,
        )
        assert body["field"] == "$.decision"
        assert (
            problem(client.post("/sessions", json={"agent": "nobody"}), 422)["field"]
            == "$.agent"
        )
        assert (
            problem(client.get(f"/sessions/{session_id}/transcript?limit=x"), 422)[
                "field"
            ]
            == "limit"
        )
        assert (
            problem(
                client.get(
                    f"/sessions/{session_id}/events", headers={"Last-Event-ID": "x"}
                ),
                422,
            )["field"]
            == "Last-Event-ID"
        )
        problem(client.post(f"/sessions/{session_id}/interrupt", json={}), 409)
        problem(client.get("/no/such/route"), 404)
        problem(
            client.post(
                f"/sessions/{session_id}/prompts",
                content=b"hi",
                headers={"content-type": "text/plain"},
            ),
            415,
        )
    assert served.runtime.store.max_position() == before


def test_a_failure_inside_is_a_500_without_a_traceback(session, monkeypatch) -> None:
    served, _ = session
    context = served.app.state.turnlog

    def broken(*_args, **_kwargs):
        raise RuntimeError("secret internals /etc/passwd")

    monkeypatch.setattr(context.owners, "list", broken)
    with served.client() as client:
        body = problem(client.get("/sessions"), 500)
    assert "secret" not in str(body)


def test_cors_is_off_unless_configured(serve) -> None:
    origin = {"Origin": "https://app.example"}
    plain = serve()
    with plain.client() as client:
        assert (
            "access-control-allow-origin"
            not in client.get("/sessions", headers=origin).headers
        )
    allowed = serve(cors_origins=["https://app.example"])
    with allowed.client() as client:
        response = client.get("/sessions", headers=origin)
    assert response.headers["access-control-allow-origin"] == "https://app.example"
