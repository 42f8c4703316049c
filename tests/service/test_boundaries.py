"""Tenants, tokens and bad input: each refusal has its status, a
problem+json body naming the field, no traceback, and records nothing."""

from __future__ import annotations

import asyncio

import pytest
from service_agents import approval_agent
from service_support import TOKEN_A, TOKEN_B, TOKENS
from starlette.testclient import TestClient

from turnlog import Runtime
from turnlog.service import create_app
from turnlog.service.limits import BodyLimit
from turnlog.service.parsing import MAX_JSON_DEPTH
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


def deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # The 2 KB body: a RecursionError and a 500 before.
        (b'{"shared_state": {"a": ' + deep(999) + b"}}", "$.shared_state"),
        (
            b'{"shared_state": {"a": ' + deep(MAX_JSON_DEPTH - 1) + b"}}",
            "$.shared_state",
        ),
        (b'{"agent": "publisher", "x-y": ' + deep(999) + b"}", '$["x-y"]'),
        (deep(999), None),
    ],
)
def test_json_nested_past_the_limit_is_a_422_naming_the_member(
    serve, body, field
) -> None:
    served = serve()  # the default body limit (1 MiB) takes the 2 KB body
    before = served.runtime.store.max_position()
    with served.client() as client:
        response = client.post(
            "/sessions", content=body, headers={"content-type": "application/json"}
        )
    found = problem(response, 422)
    assert found.get("field") == field
    assert f"deeper than {MAX_JSON_DEPTH} levels" in found["detail"]
    assert served.runtime.store.max_position() == before


def test_json_nested_to_the_limit_is_accepted(session) -> None:
    served, _ = session
    # The body is level 1, shared_state 2, "a" 3: the rest fill the limit.
    nested = deep(MAX_JSON_DEPTH - 2)
    with served.client() as client:
        response = client.post(
            "/sessions",
            content=b'{"shared_state": {"a": ' + nested + b"}}",
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("name", ["limit", "before"])
@pytest.mark.parametrize(
    "value", ["²", "٣", "\uff11", "-1", "+1", " 1", "0", "1.0", "9" * 19, "9" * 5000]
)
def test_numeric_queries_take_ascii_digits_in_range_only(session, name, value) -> None:
    served, session_id = session
    with served.client() as client:
        response = client.get(
            f"/sessions/{session_id}/transcript", params={name: value}
        )
    found = problem(response, 422)
    assert found["field"] == name
    assert "ASCII digits" in found["detail"]


@pytest.mark.parametrize("value", ["²", "٣", "9" * 20, "1:٣"])
def test_an_event_id_takes_ascii_digits_in_range_only(session, value) -> None:
    served, session_id = session
    with served.client() as client:
        response = client.get(
            f"/sessions/{session_id}/events", params={"last_event_id": value}
        )
    assert problem(response, 422)["field"] == "last_event_id"


@pytest.mark.parametrize(
    ("path", "body", "field", "escape"),
    [
        ("/prompts", b'{"text": "\\ud800"}', "$.text", "\\ud800"),
        ("/prompts", b'{"text": "ok \\udc00 then"}', "$.text", "\\udc00"),
        (
            "",
            b'{"shared_state": {"notes": ["x", "\\ud83d"]}}',
            "$.shared_state.notes[1]",
            "\\ud83d",
        ),
        ("", b'{"shared_state": {"\\udfff": 1}}', "$.shared_state", "\\udfff"),
    ],
)
def test_a_lone_surrogate_escape_names_its_field_and_why(
    session, path, body, field, escape
) -> None:
    served, session_id = session
    before = served.runtime.store.max_position()
    target = f"/sessions/{session_id}{path}" if path else "/sessions"
    with served.client() as client:
        response = client.post(
            target, content=body, headers={"content-type": "application/json"}
        )
    found = problem(response, 422)
    assert found["field"] == field
    assert "lone UTF-16 surrogate" in found["detail"]
    assert escape in found["detail"]
    assert served.runtime.store.max_position() == before


def test_a_full_surrogate_pair_is_text(session) -> None:
    served, _ = session
    with served.client() as client:
        response = client.post(
            "/sessions",
            content=b'{"shared_state": {"face": "\\ud83d\\ude00"}}',
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 201, response.text
    assert response.json()["shared_state"]["face"] == "\N{GRINNING FACE}"


def test_a_number_out_of_range_names_its_field(session) -> None:
    served, _ = session
    with served.client() as client:
        response = client.post(
            "/sessions",
            content=b'{"shared_state": {"big": 1e999}}',
            headers={"content-type": "application/json"},
        )
    assert problem(response, 422)["field"] == "$.shared_state.big"


def test_a_session_id_no_session_can_have_is_404_without_a_query(store_url) -> None:
    """PostgreSQL refuses NUL in text: a 503 'the log failed' before."""
    with Runtime.open(store_url) as runtime:
        app = create_app(runtime, {"publisher": approval_agent}, TOKENS)
        headers = {"Authorization": f"Bearer {TOKEN_A}"}
        with TestClient(app, raise_server_exceptions=False) as client:
            for path in (
                "/sessions/a%00b",
                "/sessions/a%00b/events",
                "/sessions/%1F/audit",
            ):
                problem(client.get(path, headers=headers), 404)
            problem(
                client.post(
                    "/sessions/a%00b/prompts", json={"text": "hi"}, headers=headers
                ),
                404,
            )
            assert runtime.store.max_position() == 0


@pytest.mark.parametrize("declared", [b"9" * 5000, b"9" * 30, b"-1", b"1e3"])
def test_a_content_length_that_is_no_size_is_413_not_500(declared) -> None:
    """int() refused 5,000 digits with a ValueError, a 500 (a server in
    front of the app may pass such a header on)."""

    async def app(scope, receive, send):
        pytest.fail("the app was called")

    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/sessions",
        "headers": [(b"content-length", declared)],
    }
    asyncio.run(BodyLimit(app, max_body=1000)(scope, receive, send))
    assert sent[0]["status"] == 413
    assert (b"content-type", PROBLEM_JSON.encode()) in sent[0]["headers"]


def test_an_executions_limit_of_5000_digits_is_422_not_500(session) -> None:
    """Found by the fuzz: int() refuses over 4,300 digits with a ValueError."""
    served, session_id = session
    with served.client() as client:
        response = client.get(
            f"/sessions/{session_id}/executions", params={"limit": "9" * 5000}
        )
    assert problem(response, 422)["field"] == "limit"
