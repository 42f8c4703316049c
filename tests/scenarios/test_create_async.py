"""create_session_async: durable before it returns, commits shared, loop kept free.

A creation's commit is held on purpose (the recorder's lone-save insert
waits for the test) to see what happens meanwhile: the caller's loop runs
on, creations awaited together queue behind it and commit together, a
cancelled creation still finishes, a closing runtime lets creations
finish or refuses them whole.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kill_support import kill_when

from turnlog import (
    Agent,
    AgentSession,
    InvalidInputError,
    RunConfig,
    Runtime,
    RuntimeClosedError,
    ScriptedModel,
    UsageError,
)
from turnlog.domain.ids import session_uuid
from turnlog.hosting.creation import CreationPool
from turnlog.store.log import Store

WAIT = 20.0
CHILD = Path(__file__).with_name("create_async_child.py")


def agent(*answers: str) -> Agent:
    return Agent("a", model=ScriptedModel(list(answers) or ["unused"]))


TYPED = Agent("typed", model=ScriptedModel([]), deps_type=int)
UNKNOWN_HANDOFF = Agent("h", model=ScriptedModel([]), handoffs=["nobody"])


class HeldCommit:
    """Holds the first lone save's commit until :meth:`release`."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self._release = threading.Event()
        recorder: Any = store._app.recorder
        real = recorder.insert_events

        def held(*args: Any, **kwargs: Any) -> Any:
            if not self.entered.is_set():
                self.entered.set()
                assert self._release.wait(WAIT)
            return real(*args, **kwargs)

        monkeypatch.setattr(recorder, "insert_events", held)

    def release(self) -> None:
        self._release.set()


@pytest.fixture
def runtime(store_url: str) -> Iterator[Runtime]:
    rt = Runtime.open(store_url)
    yield rt
    rt.close()


def creation_threads() -> list[str]:
    return [
        t.name for t in threading.enumerate() if t.name.startswith("turnlog-create")
    ]


def test_creations_awaited_together_share_one_commit(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldCommit(runtime.store, monkeypatch)
    writer = runtime.store._writer
    names = [f"together-{n}" for n in range(8)]

    async def scenario() -> list[AgentSession]:
        first = asyncio.ensure_future(
            runtime.create_session_async(agent(), session_id="first")
        )
        assert await asyncio.to_thread(held.entered.wait, WAIT)
        rest = asyncio.gather(
            *(runtime.create_session_async(agent(), session_id=n) for n in names)
        )
        # Each waits on the held commit on a thread of the runtime's.
        assert await asyncio.to_thread(writer.wait_for_queue, len(names), WAIT)
        held.release()
        return [await first, *await rest]

    before = writer.commits
    sessions = asyncio.run(scenario())
    assert [s.session_id for s in sessions] == ["first", *names]
    assert writer.commits - before == 2  # the held one, then all the others
    for name in ["first", *names]:
        assert runtime.store.get_session(name) is not None


def test_the_loop_runs_on_while_a_creation_waits_on_its_commit(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldCommit(runtime.store, monkeypatch)

    async def scenario() -> tuple[int, AgentSession]:
        ticks = 0

        async def heartbeat() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        creating = asyncio.ensure_future(
            runtime.create_session_async(agent("hello"), session_id="free")
        )
        beating = asyncio.create_task(heartbeat())
        assert await asyncio.to_thread(held.entered.wait, WAIT)
        counted = ticks
        while ticks < counted + 3:  # the heartbeat goes on meanwhile
            await asyncio.sleep(0)
        assert not creating.done()
        held.release()
        session = await asyncio.wait_for(creating, WAIT)
        beating.cancel()
        return ticks, session

    ticks, session = asyncio.run(scenario())
    assert ticks >= 3
    assert session.prompt("hi", timeout=WAIT).final_output == "hello"


def test_a_created_session_is_in_the_log_when_the_await_returns(store_url: str) -> None:
    kill_when(CHILD, "CREATED", store_url, "killed-after")
    store = Store(store_url)
    try:
        stored = store.get_session("killed-after")
        assert stored is not None
        assert stored.shared_state["made_by"] == "child"
    finally:
        store.close()
    # Its lease died with the process: this runtime takes the session over.
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent("after"), session_id="killed-after")
        assert session.shared_state()["made_by"] == "child"
        assert session.prompt("hi", timeout=WAIT).final_output == "after"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"agent": "not an agent"}, InvalidInputError),
        ({"session_id": "a\nb"}, InvalidInputError),
        ({"session_id": 7}, InvalidInputError),
        ({"shared_state": ["not", "a", "dict"]}, InvalidInputError),
        ({"shared_state": {"x": object()}}, InvalidInputError),
        ({"run_config": {"idle_timeout": 1}}, InvalidInputError),
        ({"deps": "not deps", "agent": TYPED}, InvalidInputError),
        ({"agent": UNKNOWN_HANDOFF}, UsageError),
    ],
)
def test_bad_input_is_refused_at_the_boundary_and_records_nothing(
    sqlite_url: str, arguments: dict[str, Any], error: type[Exception]
) -> None:
    given = {"agent": agent(), "session_id": "bad", **arguments}
    with Runtime.open(sqlite_url) as rt:
        before = rt.store.max_position()
        with pytest.raises(error):
            asyncio.run(rt.create_session_async(**given))
        assert rt.store.max_position() == before
        assert rt.store.get(session_uuid("bad")) is None
        assert creation_threads() == []  # refused before any thread was asked


def test_an_existing_session_is_opened_as_create_session_opens_it(
    store_url: str,
) -> None:
    with Runtime.open(store_url) as rt:
        first = rt.create_session(agent("one"), session_id="known")
        assert first.prompt("first", timeout=WAIT).final_output == "one"
    with Runtime.open(store_url) as rt:
        again = asyncio.run(
            rt.create_session_async(
                agent("two"), session_id="known", shared_state={"added": 1}
            )
        )
        # Open here now: the same session, and an agent that is not its own refused.
        same = asyncio.run(rt.create_session_async(agent("two"), session_id="known"))
        with pytest.raises(UsageError):
            asyncio.run(rt.create_session_async(TYPED, session_id="known"))
        assert same.session_id == again.session_id == "known"
        assert same.shared_state()["added"] == 1
        assert again.prompt("second", timeout=WAIT).final_output == "two"
        texts = [m.content for m in again.messages() if m.role == "user"]
        assert texts == ["first", "second"]


def test_a_cancelled_creation_finishes_and_the_session_exists(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldCommit(runtime.store, monkeypatch)

    async def scenario() -> AgentSession:
        creating = asyncio.ensure_future(
            runtime.create_session_async(agent("still"), session_id="cancelled")
        )
        assert await asyncio.to_thread(held.entered.wait, WAIT)
        creating.cancel()
        with pytest.raises(asyncio.CancelledError):
            await creating
        held.release()
        # Opening it again waits for the creation under way, and finds it made.
        return await runtime.create_session_async(
            agent("still"), session_id="cancelled"
        )

    commits = runtime.store._writer.commits
    session = asyncio.run(scenario())
    assert runtime.store._writer.commits - commits == 1  # made once, whole
    assert runtime.store.get_session("cancelled") is not None
    assert session.prompt("hi", timeout=WAIT).final_output == "still"


def test_closing_lets_a_creation_under_way_finish_and_refuses_the_rest(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = Runtime.open(sqlite_url)
    rt._creations = CreationPool(max_threads=1)  # the second and third queue
    held = HeldCommit(rt.store, monkeypatch)

    async def scenario() -> list[Any]:
        creations = [
            asyncio.ensure_future(rt.create_session_async(agent(), session_id=n))
            for n in ("under-way", "queued-1", "queued-2")
        ]
        assert await asyncio.to_thread(held.entered.wait, WAIT)
        closing = asyncio.ensure_future(asyncio.to_thread(rt.close))
        assert await asyncio.to_thread(rt._closed.wait, WAIT)
        held.release()
        await asyncio.wait_for(closing, WAIT)
        return await asyncio.gather(*creations, return_exceptions=True)

    outcomes = asyncio.run(scenario())
    assert isinstance(outcomes[0], AgentSession)
    assert [type(o) for o in outcomes[1:]] == [RuntimeClosedError] * 2
    assert creation_threads() == []
    with pytest.raises(RuntimeClosedError):
        asyncio.run(rt.create_session_async(agent(), session_id="after-close"))
    store = Store(sqlite_url)
    try:
        assert store.get_session("under-way") is not None
        assert store.get(session_uuid("queued-1")) is None
        assert store.get(session_uuid("queued-2")) is None
    finally:
        store.close()


def test_run_config_session_id_is_used(runtime: Runtime) -> None:
    session = asyncio.run(
        runtime.create_session_async(
            agent(), run_config=RunConfig(session_id="from-config")
        )
    )
    assert session.session_id == "from-config"
    assert runtime.store.get_session("from-config") is not None
