"""Every route of the service, fuzzed in-process: paths, queries, headers
and bodies (deep nesting, lone surrogates, Unicode digits, huge numbers,
wrong types, bytes that are no JSON at all). Whatever comes, the answer
is never a 5xx, every error is application/problem+json, and a refusal
records nothing in the log.

The requests go straight to the ASGI app through a small client of this
module, which leaves once a response has begun (as a browser leaving a
page would): the streams (``/events``, ``/agui``) then end like any
stream whose client left, instead of running on.
"""

from __future__ import annotations

import asyncio
import json
import string
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlencode

import hypothesis
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_agents import chat_agent
from service_support import TOKEN_A, TOKEN_B, TOKENS
from starlette.routing import Route

from turnlog import AgentSession, RunFinished, Runtime
from turnlog.service import create_app
from turnlog.service.problems import PROBLEM_JSON

RESPONSE_TIMEOUT = 30.0
"""Seconds a request may take to begin its answer before the test fails."""

FUZZ_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    error: BaseException | None = None


@dataclass
class Sent:
    method: str
    raw_path: str
    query: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes

    def __str__(self) -> str:
        return (
            f"{self.method} {self.raw_path}?{self.query.decode()} {self.body[:200]!r}"
        )


async def call(app: Any, sent: Sent) -> Answer:
    """One request to ``app``, as uvicorn would pass it; the client leaves
    once the response has begun."""
    method, raw_path, query, headers, body = (
        sent.method,
        sent.raw_path,
        sent.query,
        sent.headers,
        sent.body,
    )
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        # uvicorn decodes %XX as UTF-8, invalid bytes as U+FFFD.
        "path": unquote(raw_path),
        "raw_path": raw_path.encode("ascii"),
        "query_string": query,
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    started = asyncio.Event()
    answer = Answer(0, {}, b"")
    body_sent = False

    async def receive() -> dict[str, Any]:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await started.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {
                name.decode("latin-1").lower(): value.decode("latin-1")
                for name, value in message.get("headers", [])
            }
            started.set()
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")

    task = asyncio.ensure_future(app(scope, receive, send))
    waiter = asyncio.ensure_future(started.wait())
    await asyncio.wait(
        {task, waiter}, timeout=RESPONSE_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
    )
    waiter.cancel()
    if not started.is_set() and not task.done():
        task.cancel()
        pytest.fail(f"{method} {raw_path} did not answer in {RESPONSE_TIMEOUT} s")
    try:  # a stream ends once it sees that its client left
        await asyncio.wait_for(task, RESPONSE_TIMEOUT)
    except Exception as error:  # what the app raised is the finding
        answer.error = error
    return answer


def _wait_for_run_end(handle: AgentSession) -> None:
    """Returns once ``handle``'s session has no run going on."""
    with handle.subscribe() as events:  # subscribed first: no end slips past
        while handle.running():
            while not isinstance(events.get(timeout=RESPONSE_TIMEOUT), RunFinished):
                pass


class Target:
    """The app over a fresh log, the loop it runs on, and known ids."""

    def __init__(self, store_url: str) -> None:
        self.runtime = Runtime.open(store_url)
        self.app = create_app(self.runtime, {"chat": chat_agent}, TOKENS)
        self.context = self.app.state.turnlog
        self.loop = asyncio.Runner()
        mine = self.request(Sent("POST", "/sessions", b"", _headers(TOKEN_A), b"{}"))
        theirs = self.request(Sent("POST", "/sessions", b"", _headers(TOKEN_B), b"{}"))
        self.session_ids = [
            json.loads(mine.body)["session_id"],
            json.loads(theirs.body)["session_id"],
        ]

    def request(self, sent: Sent) -> Answer:
        return self.loop.run(call(self.app, sent))

    def settle(self) -> None:
        """Waits until no run goes on (runs started by earlier examples)."""
        self.loop.run(self._settle())

    async def _settle(self) -> None:
        async with asyncio.timeout(RESPONSE_TIMEOUT):
            # The service's own runs are tasks: wait for them to end.
            while self.context.running_tasks:
                await asyncio.wait(set(self.context.running_tasks))
            # A run the service no longer holds (queued input going on):
            # wait for its session's RunFinished.
            for session_id in await asyncio.to_thread(self.runtime.sessions):
                handle = self.context.live(session_id)
                if handle is not None:
                    await asyncio.to_thread(_wait_for_run_end, handle)

    def close(self) -> None:
        self.loop.run(asyncio.sleep(0))
        self.context.close()
        self.loop.close()
        self.runtime.close()


@pytest.fixture
def target(sqlite_url: str) -> Iterator[Target]:
    served = Target(sqlite_url)
    yield served
    served.close()


def _headers(token: str | None, **extra: str) -> list[tuple[bytes, bytes]]:
    headers = [(b"content-type", b"application/json")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    headers.extend(
        (name.lower().replace("_", "-").encode(), value.encode())
        for name, value in extra.items()
    )
    return headers


# -- what the fuzzer sends --

SURROGATES = st.characters(categories=["Cs"])
TEXT = st.text(st.one_of(st.characters(), SURROGATES), max_size=12)
NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([2**63, 2**64, 10**400, -(2**63) - 1]),
    st.floats(allow_nan=False, allow_infinity=False),
)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(TEXT, children, max_size=3),
    ),
    max_leaves=8,
)
FIELDS = {
    "/sessions": ["shared_state", "agent"],
    "/sessions/{session_id}/prompts": ["text"],
    "/sessions/{session_id}/follow-ups": ["text"],
    "/sessions/{session_id}/steer": ["text"],
    "/sessions/{session_id}/interrupt": ["clear_queue"],
    "/sessions/{session_id}/approvals/{request_id}": ["decision"],
    "/sessions/{session_id}/fork": [
        "before_input",
        "after_turn",
        "session_id",
        "keep_allowances",
    ],
    "/sessions/{session_id}/rewind": ["before_input", "after_turn"],
    "/agui": ["state", "forwardedProps", "threadId", "runId", "messages", "resume"],
}
"""The fields each route's body has (the fuzzer sends others too)."""

ALL_FIELDS = sorted({field for fields in FIELDS.values() for field in fields})
WORDS = ["allow", "deny", "abort", "chat", "hello", "thread-1", "user"]


def valid_body(draw: st.DrawFn, template: str, session_ids: list[str]) -> Any:
    """What a well-behaved client sends to the route (its text may be odd)."""
    text = st.one_of(st.sampled_from(["hello"]), TEXT)
    match template:
        case "/sessions":
            return {
                "shared_state": draw(st.dictionaries(TEXT, JSON_VALUES, max_size=3))
            }
        case "/sessions/{session_id}/interrupt":
            return {"clear_queue": draw(st.booleans())}
        case "/sessions/{session_id}/approvals/{request_id}":
            return {"decision": draw(st.sampled_from(WORDS[:3]))}
        case "/sessions/{session_id}/fork" | "/sessions/{session_id}/rewind":
            name = draw(st.sampled_from(["before_input", "after_turn"]))
            return {name: draw(st.integers(-1, 4))}
        case "/agui":
            return {
                "threadId": draw(st.sampled_from([*session_ids, "thread-1", "bad id"])),
                "runId": "run-1",
                "messages": [{"id": "m1", "role": "user", "content": draw(text)}],
                "state": draw(st.one_of(st.just({}), JSON_VALUES)),
                "tools": [],
                "context": [],
                "forwardedProps": draw(
                    st.sampled_from([{}, {"agent": "chat"}, {"agent": 5}])
                ),
            }
        case _:
            return {"text": draw(text)}


@st.composite
def bodies(draw: st.DrawFn, template: str, session_ids: list[str]) -> bytes:
    """A body: what the route takes, or its fields with wrong values, often
    nested deep or with odd escapes; or bytes that are no JSON at all."""
    kind = draw(
        st.sampled_from(["deep", "valid", "fields", "deep", "value", "raw", "empty"])
    )
    if kind == "empty":
        return b""
    if kind == "raw":
        return draw(st.binary(max_size=64))
    if kind == "value":
        return json.dumps(draw(JSON_VALUES)).encode()
    fields = FIELDS.get(template, []) if draw(st.integers(0, 4)) < 4 else ALL_FIELDS
    fields = fields or ALL_FIELDS
    if kind == "deep":
        # Hypothesis raises the recursion limit while it runs a test: only
        # far deeper than 1,000 shows what a server would do. (Shallow
        # nesting comes with every JSON value drawn.)
        levels = draw(st.sampled_from([20_000, 3000, 999, 65, 64, 63]))
        opener, closer = draw(st.sampled_from([('{"a":', "}"), ("[", "]")]))
        # Inside an object: a field of any JSON (shared_state) takes it in.
        inner = '{"a":' + opener * levels + "1" + closer * levels + "}"
        return f'{{"{draw(st.sampled_from(fields))}": {inner}}}'.encode()
    if kind == "valid":
        value = valid_body(draw, template, session_ids)
    else:
        value = draw(
            st.dictionaries(
                st.sampled_from(fields),
                st.one_of(JSON_VALUES, st.sampled_from(WORDS)),
                max_size=3,
            )
        )
    encoded = json.dumps(value)  # a lone surrogate becomes its \\u escape
    if draw(st.integers(0, 2)) == 2:
        escape = draw(st.sampled_from(["\\ud800", "\\udfff", "\\u0000", "\\ud83d"]))
        encoded = encoded.replace("hello", escape, 1).replace("chat", escape, 1)
    return encoded.encode()


QUERY_VALUES = st.one_of(
    st.sampled_from(
        ["²", "9" * 5000, "9" * 19, "٣", "\uff11", "-1", "0", "1", "1:2", "true", ""]
    ),
    st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=3),
    st.integers(min_value=0, max_value=10**25).map(str),
    st.text(max_size=8),
)
QUERY_NAMES = ["limit", "before", "last_event_id", "wait", "x"]
PATH_TEXT = st.one_of(
    st.sampled_from(["%00", "%ED%A0%80", "%FF", "..", "a%2Fb", "x" * 300, "%20"]),
    st.text(string.ascii_letters + string.digits + "-_.~:", min_size=1, max_size=20),
    st.text(max_size=10).map(lambda text: quote(text, safe="")),
)
METHODS = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])


def app_routes(app: Any, *methods: str) -> list[tuple[str, str]]:
    """Every (path template, method) the app serves (of ``methods``, if given)."""
    return [
        (route.path, method)
        for route in app.routes
        if isinstance(route, Route)
        for method in sorted(route.methods or ())
        if method in methods or not methods
    ]


@st.composite
def requests(draw: st.DrawFn, target: Target, focus: str) -> Sent:
    """A request to one of the app's routes.

    ``focus`` says what varies most: the ``body`` of a POST, the ``query``
    of a GET, or the ``path`` (and method, and token) of any route; the
    rest is then mostly what a well-behaved client sends.
    """
    if focus.startswith("/"):  # one route's body
        template, method, focus = focus, "POST", "body"
    elif focus.startswith("GET /"):  # one route's query
        template, method, focus = focus.removeprefix("GET "), "GET", "query"
    else:
        template, method = draw(st.sampled_from(app_routes(target.app)))
    if focus == "path" and draw(st.integers(0, 4)) == 4:
        method = draw(METHODS)
    path = template
    for name in ("session_id", "request_id"):
        if "{" + name + "}" in path:
            if focus != "path":  # the caller's own session (tenant A's)
                value = target.session_ids[0]
            elif draw(st.booleans()):  # tenant A's or B's
                value = draw(st.sampled_from(target.session_ids))
            else:
                value = draw(PATH_TEXT)
            path = path.replace("{" + name + "}", quote(value, safe="%:~"))
    names = QUERY_NAMES if focus == "query" else ["wait", "x"]
    query = urlencode(
        draw(st.dictionaries(st.sampled_from(names), QUERY_VALUES, max_size=3))
    ).encode()
    token = TOKEN_A
    if focus == "path":
        token = draw(st.sampled_from([TOKEN_A, TOKEN_B, None, "nope"]))
    extra = {}
    if focus == "query" and draw(st.booleans()):
        extra["last_event_id"] = draw(QUERY_VALUES.filter(str.isprintable))
    if focus == "path" and draw(st.booleans()):
        # What a server in front passes on as it came (uvicorn checks it).
        extra["content_length"] = draw(
            st.sampled_from(["9" * 5000, "9" * 30, "-1", "1e3", "12"])
        )
    headers = _headers(token, **extra)
    # (Hypothesis draws small numbers most: a rare case is a large one.)
    if draw(st.integers(0, 9)) == 9:
        headers[0] = (b"content-type", b"text/plain")
    body = draw(bodies(template, target.session_ids)) if focus != "query" else b""
    hypothesis.event(f"{method} {template}")
    return Sent(method, path, query, headers, body)


def check(target: Target, sent: Sent) -> None:
    target.settle()
    before = target.runtime.store.max_position()
    answer = target.request(sent)
    hypothesis.event(f"status {answer.status}")
    assert answer.error is None, f"{sent} raised {answer.error!r}"
    assert answer.status < 500, f"{sent}: {answer.status} {answer.body[:300]!r}"
    if answer.status >= 400:
        assert answer.headers.get("content-type") == PROBLEM_JSON, str(sent)
        if sent.method != "HEAD":
            assert json.loads(answer.body)["status"] == answer.status, str(sent)
        target.settle()
        assert target.runtime.store.max_position() == before, f"{sent} recorded"


POST_ROUTES = [
    "/sessions",
    "/sessions/{session_id}/prompts",
    "/sessions/{session_id}/follow-ups",
    "/sessions/{session_id}/steer",
    "/sessions/{session_id}/interrupt",
    "/sessions/{session_id}/approvals/{request_id}",
    "/sessions/{session_id}/fork",
    "/sessions/{session_id}/rewind",
    "/agui",
]


def test_every_route_that_takes_a_body_is_fuzzed(target: Target) -> None:
    assert {path for path, _ in app_routes(target.app, "POST")} == set(POST_ROUTES)


@pytest.mark.parametrize("route", POST_ROUTES)
@settings(FUZZ_SETTINGS, max_examples=60)
@given(data=st.data())
def test_no_body_gets_a_5xx_and_no_refused_one_records_anything(
    target: Target, route: str, data: st.DataObject
) -> None:
    check(target, data.draw(requests(target, route)))


def _get_routes() -> list[str]:
    """Every GET route of the app (any may read a query: all are fuzzed)."""
    with Runtime.open("memory://") as runtime:
        app = create_app(runtime, {"chat": chat_agent}, TOKENS)
        app.state.turnlog.close()
        return [path for path, _ in app_routes(app, "GET")]


@pytest.mark.parametrize("route", _get_routes())
@settings(FUZZ_SETTINGS, max_examples=40)
@given(data=st.data())
def test_no_query_gets_a_5xx(target: Target, route: str, data: st.DataObject) -> None:
    check(target, data.draw(requests(target, f"GET {route}")))


@FUZZ_SETTINGS
@given(data=st.data())
def test_no_path_method_or_token_gets_a_5xx_and_no_refusal_records_anything(
    target: Target, data: st.DataObject
) -> None:
    check(target, data.draw(requests(target, "path")))
