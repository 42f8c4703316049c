"""AG-UI clients make their own thread ids: a tenant's new ``threadId``
starts a session of that tenant under that id; anyone else's is the 404
every session that is not yours gets; an id that cannot be a session id
is a 422 naming ``$.threadId``; a refused request records nothing; and
first runs racing on one new id make one session, never a 500."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pydantic
import pytest
from ag_ui.core import Event, EventType
from service_agents import approval_agent, chat_agent
from service_support import TOKEN_A, TOKEN_B, TOKENS, ServerThread, SSEReader

from turnlog import Runtime
from turnlog.service import create_app

EVENTS = pydantic.TypeAdapter(Event)
AGENTS = {"chat": chat_agent, "publisher": approval_agent}


def run_body(
    thread_id: str,
    prompt: str | None = "hello",
    *,
    agent: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"threadId": thread_id, "runId": "run-1", "messages": []}
    if prompt is not None:
        # A message id is the prompt's input id: each new prompt has its own.
        message_id = f"m-{uuid.uuid4().hex}"
        body["messages"] = [{"id": message_id, "role": "user", "content": prompt}]
    if agent is not None:
        body["forwardedProps"] = {"agent": agent}
    return {**body, **extra}


def run(client: httpx.Client, body: dict[str, Any]) -> list[Any]:
    """A run that must stream: its events, checked by the SDK's models."""
    events = []
    with client.stream("POST", "/agui", json=body) as response:
        assert response.status_code == 200, response.read()
        reader = SSEReader(response)
        while True:
            try:
                events.append(EVENTS.validate_json(reader.next().data))
            except EOFError:
                return events


def refused(client: httpx.Client, body: dict[str, Any], status: int) -> Any:
    answer = client.post("/agui", json=body)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    return answer.json()


def listed(client: httpx.Client) -> list[dict[str, Any]]:
    return list(client.get("/sessions").json()["sessions"])


def test_a_new_thread_id_starts_a_session_of_the_tenant_under_that_id(
    serve,
) -> None:
    served = serve(agents=AGENTS)
    thread = str(uuid.uuid4())  # as HttpAgent makes it
    with served.client() as client:
        events = run(client, run_body(thread, agent="chat"))
        assert events[0].thread_id == thread
        assert events[-1].type == EventType.RUN_FINISHED
        assert events[-1].result == "Hello there, this is a streamed answer."
        assert [(s["session_id"], s["agent"]) for s in listed(client)] == [
            (thread, "chat")
        ]
        # The same thread goes on, as any session: a second turn.
        again = run(client, run_body(thread, "more", agent="chat"))
        assert again[-1].result == "Hello there, this is a streamed answer."
        messages = client.get(f"/sessions/{thread}").json()["messages"]
        assert [m["content"] for m in messages if m["role"] == "user"] == [
            "hello",
            "more",
        ]
    with served.client(TOKEN_B) as other:
        assert other.get(f"/sessions/{thread}").status_code == 404


def test_a_run_that_ends_before_its_start_is_read_still_streams(
    serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a loaded machine the read of the run's start from the
    # subscription may get its turn only after the whole run has ended:
    # that is made certain here. The run must stream all the same.
    from turnlog.service import agui
    from turnlog.session import AgentSession

    ended = threading.Event()
    prompt = AgentSession.prompt_async

    async def prompt_then_note(self: AgentSession, *args: Any, **kw: Any) -> Any:
        try:
            return await prompt(self, *args, **kw)
        finally:
            ended.set()

    read_start = agui.next_run_started

    async def read_start_late(subscription: Any, timeout: float) -> str | None:
        assert await asyncio.to_thread(ended.wait, 10)
        return await read_start(subscription, timeout)

    monkeypatch.setattr(AgentSession, "prompt_async", prompt_then_note)
    monkeypatch.setattr(agui, "next_run_started", read_start_late)
    served = serve(agents=AGENTS)
    with served.client() as client:
        events = run(client, run_body(str(uuid.uuid4()), agent="chat"))
    assert events[0].type == EventType.RUN_STARTED
    assert events[-1].type == EventType.RUN_FINISHED
    assert events[-1].result == "Hello there, this is a streamed answer."


def test_a_new_thread_naming_no_agent_runs_the_default_one(serve) -> None:
    served = serve(agents=AGENTS, default_agent="publisher")
    with served.client() as client:
        events = run(client, run_body("thread_0a1b2c3d"))  # as ag-ui-validate
        assert events[-1].outcome.type == "interrupt"
        assert [s["agent"] for s in listed(client)] == ["publisher"]


def test_another_tenants_thread_is_the_404_of_any_session_not_yours(
    serve,
) -> None:
    served = serve(agents=AGENTS)
    thread = str(uuid.uuid4())
    with served.client() as owner:
        run(owner, run_body(thread, agent="chat"))
        before = owner.get(f"/sessions/{thread}/transcript").json()["items"]
    unowned = "made-by-the-embedded-api"  # a session no tenant owns
    served.runtime.create_session(chat_agent(), session_id=unowned)
    sessions = served.runtime.sessions()
    with served.client(TOKEN_B) as other:
        for thread_id in (thread, unowned):
            never_yours = other.get(f"/sessions/{thread_id}")
            assert never_yours.status_code == 404
            for body in (
                run_body(thread_id, agent="chat"),
                run_body(thread_id, agent="publisher"),
                run_body(thread_id),  # no agent named
            ):
                assert refused(other, body, 404) == never_yours.json()
        # A resume of a thread the tenant never used: nothing to resume.
        resume = [{"interruptId": "x", "status": "resolved", "payload": "allow"}]
        fresh = str(uuid.uuid4())
        assert refused(other, run_body(fresh, None, resume=resume), 404) == (
            other.get(f"/sessions/{fresh}").json()
        )
        assert listed(other) == []
    with served.client() as owner:
        after = owner.get(f"/sessions/{thread}/transcript").json()["items"]
        assert after == before
        assert [s["session_id"] for s in listed(owner)] == [thread]
    assert served.runtime.sessions() == sessions


@pytest.mark.parametrize(
    "thread_id",
    ["", "has space", "a/b", "caf\u00e9", "x" * 201, "tab\there", "q?x=1"],
)
def test_a_thread_id_that_cannot_be_a_session_id_is_a_422_naming_it(
    serve, thread_id: str
) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        problem = refused(client, run_body(thread_id, agent="chat"), 422)
        assert problem["field"] == "$.threadId"
        assert "threadId" in problem["detail"]
        assert listed(client) == []
    assert served.runtime.sessions() == []


def test_a_new_thread_needs_an_agent_the_service_has(serve) -> None:
    served = serve(agents=AGENTS)  # two agents, no default
    thread = str(uuid.uuid4())
    with served.client() as client:
        for body, words in (
            (run_body(thread), "name the agent"),
            (run_body(thread, agent="nobody"), "no agent 'nobody'"),
            (run_body(thread, forwardedProps={"agent": 7}), "a string"),
        ):
            problem = refused(client, body, 422)
            assert problem["field"] == "$.forwardedProps.agent"
            assert words in problem["detail"]
        # A refused prompt records nothing either: not even the session.
        no_prompt = run_body(thread, None, agent="chat")
        no_prompt["messages"] = [{"id": "a", "role": "assistant", "content": "hi"}]
        assert refused(client, no_prompt, 422)["field"] == "$.messages"
        assert listed(client) == []
        # Once made, the thread keeps its agent: another one is a conflict.
        run(client, run_body(thread, agent="chat"))
        problem = refused(client, run_body(thread, agent="publisher"), 409)
        assert problem["field"] == "$.forwardedProps.agent"
    assert served.runtime.sessions() == [thread]


def race(urls: list[str], body: dict[str, Any]) -> list[int]:
    """Posts ``body`` from one client per URL at the same moment; statuses."""
    start = threading.Barrier(len(urls))

    def post(url: str) -> int:
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN_A}"}, timeout=30
        ) as client:
            start.wait()
            with client.stream("POST", "/agui", json=body) as response:
                response.read()  # to the end of the run, if it streams
                return response.status_code

    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(post, urls))


def one_session(client: httpx.Client, thread: str) -> None:
    assert [s["session_id"] for s in listed(client)] == [thread]
    items = client.get(f"/sessions/{thread}/transcript").json()["items"]
    assert [item["event"] for item in items].count("SessionCreated") == 1


def test_first_runs_racing_on_a_new_thread_make_one_session(serve) -> None:
    served = serve(agents=AGENTS)
    thread = str(uuid.uuid4())
    statuses = race([served.url] * 8, run_body(thread, agent="chat"))
    # The session is busy with the winner's run, or free again after it.
    assert set(statuses) <= {200, 409}, statuses
    assert 200 in statuses
    with served.client() as client:
        one_session(client, thread)


@pytest.fixture
def two_services(postgres_schema_url: str) -> Iterator[list[str]]:
    """Two services, each over its own runtime, on one PostgreSQL schema."""
    Runtime.open(postgres_schema_url).close()  # the tables, made once
    runtimes = [Runtime.open(postgres_schema_url) for _ in range(2)]
    servers = []
    try:
        for runtime in runtimes:
            app = create_app(runtime, AGENTS, TOKENS)
            servers.append(ServerThread(app).__enter__())
        yield [f"http://127.0.0.1:{server.port}" for server in servers]
    finally:
        for server in servers:
            server.__exit__()
        for runtime in runtimes:
            runtime.close()


@pytest.mark.postgres
def test_first_runs_racing_in_two_processes_make_one_session(
    two_services: list[str],
) -> None:
    thread = str(uuid.uuid4())
    statuses = race(two_services * 3, run_body(thread, agent="chat"))
    # Whoever did not win finds the session running, or held by the other
    # service (SessionBusyError): 409, never a 500.
    assert set(statuses) <= {200, 409}, statuses
    assert 200 in statuses
    with httpx.Client(
        base_url=two_services[0], headers={"Authorization": f"Bearer {TOKEN_A}"}
    ) as client:
        one_session(client, thread)
