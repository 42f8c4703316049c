"""What a tool and a hook see: the agent, the shared state, the user's deps.

Deps are live objects handed over in the process and never recorded; a
tool's shared-state update is recorded before the call's output.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import pytest

from turnlog import (
    Agent,
    HookResult,
    InvalidInputError,
    Middleware,
    RunConfig,
    RunContext,
    Runtime,
    ScriptedModel,
    SessionClosedError,
    SessionStartInfo,
    StepInfo,
    ToolCallInfo,
    ToolContext,
    UsageError,
    UserInput,
    UserPromptInfo,
    calls,
    function_tool,
    tool_call,
)
from turnlog.events import TurnCompletedMsg

MARKER = "deps-marker-7f3a9c"


@dataclass
class Database:
    """A stand-in for a live client: it must never reach the log."""

    name: str
    secret: str = MARKER

    def __reduce__(self) -> object:
        msg = "a live client cannot be pickled"
        raise TypeError(msg)


@pytest.fixture
def rt(store_url: str) -> Iterator[Runtime]:
    runtime = Runtime.open(store_url)
    yield runtime
    runtime.close()


def stored_states(rt: Runtime) -> list[tuple[str, bytes]]:
    """Every stored event of the log: (topic, state bytes)."""
    return [(n.topic, n.state) for n in rt.store.notifications(1, 100_000)]


def seen_by_tool(seen: list[ToolContext[Database]]) -> Agent:
    @function_tool
    def look(context: ToolContext[Database]) -> str:
        """Looks around."""
        seen.append(context)
        return f"db {context.deps.name}"

    model = ScriptedModel([calls(tool_call("look")), "done"] * 3)
    return Agent("clerk", model=model, tools=[look], deps_type=Database)


def test_a_tool_sees_the_agent_the_shared_state_and_the_deps(rt: Runtime) -> None:
    seen: list[ToolContext[Database]] = []
    db = Database("main")
    session = rt.create_session(
        seen_by_tool(seen), session_id="s", shared_state={"plan": "a"}, deps=db
    )
    result = session.prompt("look")
    assert result.status == "completed"
    [context] = seen
    assert context.agent_name == "clerk"
    assert context.deps is db
    assert context.shared_state["plan"] == "a"
    assert (context.session_id, context.turn_id) == ("s", result.turn_ids[0])
    assert context.call_id


def test_deps_are_never_recorded(rt: Runtime) -> None:
    seen: list[ToolContext[Database]] = []
    session = rt.create_session(seen_by_tool(seen), session_id="s", deps=Database("x"))
    session.prompt("look", deps=Database("y"))
    assert [c.deps.name for c in seen] == ["y"]
    states = stored_states(rt)
    assert states
    assert not [topic for topic, state in states if MARKER.encode() in state]


def test_a_prompts_deps_replace_the_sessions_for_that_run_only(rt: Runtime) -> None:
    seen: list[ToolContext[Database]] = []
    session = rt.create_session(
        seen_by_tool(seen), session_id="s", deps=Database("session")
    )
    session.prompt("look", deps=Database("prompt"))
    session.prompt("look")
    assert [c.deps.name for c in seen] == ["prompt", "session"]


def test_deps_of_the_wrong_type_are_refused_and_nothing_is_recorded(
    rt: Runtime,
) -> None:
    agent = seen_by_tool([])
    with pytest.raises(InvalidInputError, match="deps must be a Database, not str"):
        rt.create_session(agent, session_id="s", deps="postgres://")
    assert rt.store.max_position() == 0
    session = rt.create_session(agent, session_id="s", deps=Database("ok"))
    position = rt.store.max_position()
    with pytest.raises(InvalidInputError, match="not dict"):
        session.prompt("look", deps={"db": 1})
    with pytest.raises(InvalidInputError, match="not int"):
        asyncio.run(session.prompt_async("look", deps=3))
    assert rt.store.max_position() == position
    assert session.messages() == []


def test_deps_types_are_checked_where_they_can_be() -> None:
    model = ScriptedModel(["x"])

    class Untyped(Protocol):
        name: str

    with pytest.raises(InvalidInputError, match="runtime_checkable"):
        Agent("a", model=model, deps_type=Untyped)
    generic = Agent("a", model=model, deps_type=list[int])
    generic.check_deps([1])
    with pytest.raises(InvalidInputError):
        generic.check_deps((1,))
    union = Agent("a", model=model, deps_type=Database | dict[str, str])
    union.check_deps({"a": "b"})
    union.check_deps(Database("d"))
    with pytest.raises(InvalidInputError):
        union.check_deps("d")


def test_a_tools_update_is_recorded_before_its_output_and_survives_reopen(
    store_url: str,
) -> None:
    @function_tool
    def count(context: ToolContext[None]) -> str:
        """Counts, in a plain function."""
        now = context.update_shared_state(count=context.shared_state["count"] + 1)
        return f"count {now['count']}"

    @function_tool
    async def tag(context: ToolContext[None]) -> str:
        """Tags, in a coroutine."""
        now = await context.update_shared_state_async(tag="seen")
        return f"tags {sorted(now)}"

    model = ScriptedModel(
        [calls(tool_call("count")), calls(tool_call("tag")), "done", "again"]
    )
    agent = Agent("a", model=model, tools=[count, tag])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="s", shared_state={"count": 1})
        result = session.prompt("go")
        assert result.status == "completed"
        assert session.shared_state()["count"] == 2
        assert result.shared_state["tag"] == "seen"
        assert "count 2" in model.requests[1].items[-1]["output"]
        kinds = [type(e.msg).__name__ for e in rt.replay_events("s")]
    updated = kinds.index("SharedStateUpdatedMsg")
    assert kinds[updated + 1] == "ToolCallFinishedMsg"
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="s")
        assert session.shared_state() == {"todo_list": [], "count": 2, "tag": "seen"}


def test_an_update_is_refused_once_the_call_ended(rt: Runtime) -> None:
    kept: list[ToolContext[None]] = []

    @function_tool
    def keep(context: ToolContext[None]) -> str:
        """Keeps its context."""
        kept.append(context)
        return "kept"

    @function_tool
    async def blocking(context: ToolContext[None]) -> str:
        """Calls the waiting update on the event loop."""
        context.update_shared_state(x=1)
        return "unreachable"

    model = ScriptedModel(
        [calls(tool_call("keep")), "done", calls(tool_call("blocking")), "done"]
    )
    session = rt.create_session(
        Agent("a", model=model, tools=[keep, blocking]), session_id="s"
    )
    session.prompt("keep")
    with pytest.raises(UsageError, match="no longer running"):
        kept[0].update_shared_state(late=True)
    session.prompt("block")
    output = model.requests[3].items[-1]["output"]
    assert "update_shared_state_async" in output
    session.close()
    with pytest.raises(SessionClosedError):
        kept[0].update_shared_state(late=True)
    names = [topic for topic, _ in stored_states(rt)]
    assert names.count("turnlog:SharedStateUpdated") == 0


def test_an_update_after_the_runtime_closed_is_refused(store_url: str) -> None:
    kept: list[ToolContext[None]] = []

    @function_tool
    def keep(context: ToolContext[None]) -> str:
        """Keeps its context."""
        kept.append(context)
        return "kept"

    agent = Agent(
        "a", model=ScriptedModel([calls(tool_call("keep")), "done"]), tools=[keep]
    )
    with Runtime.open(store_url) as rt:
        rt.create_session(agent, session_id="s").prompt("keep")
    with pytest.raises(SessionClosedError, match="not updated"):
        kept[0].update_shared_state(late=True)


class Watcher(Middleware):
    """Notes what each hook sees of the run."""

    name = "watcher"

    def __init__(self) -> None:
        self.seen: list[tuple[str, object, object]] = []

    def _note(self, hook: str, context: RunContext[object] | None) -> None:
        assert context is not None
        deps = context.deps
        assert isinstance(deps, Database)
        self.seen.append((hook, deps.name, dict(context.shared_state).get("n")))

    def session_start(self, info: SessionStartInfo) -> HookResult | None:
        self._note("session_start", info.context)
        return None

    def user_prompt(self, info: UserPromptInfo) -> HookResult | None:
        self._note("user_prompt", info.context)
        return None

    def pre_model(self, info: StepInfo) -> HookResult | None:
        self._note("pre_model", info.context)
        return None

    async def pre_tool(self, info: ToolCallInfo) -> HookResult | None:
        self._note("pre_tool", info.context)
        return None

    def post_tool(self, info: ToolCallInfo) -> HookResult | None:
        self._note("post_tool", info.context)
        return None


def test_hooks_see_the_deps_and_the_shared_state(rt: Runtime) -> None:
    @function_tool
    def bump(context: ToolContext[Database]) -> str:
        """Bumps n."""
        context.update_shared_state(n=context.shared_state["n"] + 1)
        return "bumped"

    watcher = Watcher()
    model = ScriptedModel([calls(tool_call("bump")), "done", "queued"])
    agent = Agent(
        "a", model=model, tools=[bump], middleware=[watcher], deps_type=Database
    )
    session = rt.create_session(
        agent, session_id="s", shared_state={"n": 1}, deps=Database("hooked")
    )
    assert session.prompt("go", deps=Database("run")).status == "completed"
    assert watcher.seen == [
        ("user_prompt", "run", 1),
        ("session_start", "run", 1),
        ("pre_model", "run", 1),
        ("pre_tool", "run", 1),
        ("post_tool", "run", 2),
        ("pre_model", "run", 2),
    ]
    watcher.seen.clear()
    session.follow_up("later")  # reviewed as it is queued: the session's deps
    assert watcher.seen == [("user_prompt", "hooked", 2)]


def test_a_session_reopened_after_a_restart_takes_new_deps(store_url: str) -> None:
    seen: list[ToolContext[Database]] = []
    agent = seen_by_tool(seen)
    with Runtime.open(store_url) as rt:
        rt.create_session(agent, session_id="s", deps=Database("first")).prompt("a")
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="s", deps=Database("second"))
        session.prompt("b")
        again = rt.create_session(agent, session_id="s", deps=Database("third"))
        again.prompt("c")
    assert [c.deps.name for c in seen] == ["first", "second", "third"]


def test_deps_outlive_passivation_and_an_open_session_takes_new_ones(
    store_url: str,
) -> None:
    seen: list[ToolContext[Database]] = []
    agent = seen_by_tool(seen)
    with Runtime.open(store_url, run_config=RunConfig(idle_timeout=0.2)) as rt:
        session = rt.create_session(agent, session_id="s", deps=Database("kept"))
        session.prompt("a")
        assert session.wait_passivated(10)
        session.prompt("b")  # revived from the log; its deps were kept here
        rt.create_session(agent, session_id="s", deps=Database("new"))
        session.prompt("c")
    assert [c.deps.name for c in seen] == ["kept", "kept", "new"]


def test_an_update_after_the_call_timed_out_is_refused(rt: Runtime) -> None:
    gate = threading.Event()
    refused: list[BaseException] = []
    tried = threading.Event()

    @function_tool(timeout=0.2)
    def slow(context: ToolContext[None]) -> str:
        """Outlives its timeout, then tries to update."""
        gate.wait(10)
        try:
            context.update_shared_state(late=True)
        except UsageError as error:
            refused.append(error)
        finally:
            tried.set()
        return "too late"

    model = ScriptedModel([calls(tool_call("slow")), "gave up"])
    session = rt.create_session(Agent("a", model=model, tools=[slow]), session_id="s")
    result = session.prompt("go")
    assert "timed out" in model.requests[1].items[-1]["output"]
    gate.set()
    assert tried.wait(10)
    assert [str(e) for e in refused] == [
        f"tool call {model.requests[1].items[-1]['call_id']!r} is no longer "
        "running (it timed out, or its turn ended): shared state not updated"
    ]
    assert "late" not in session.shared_state()
    assert result.status == "completed"


def test_the_protocol_face_runs_with_the_sessions_deps(rt: Runtime) -> None:
    seen: list[ToolContext[Database]] = []
    handle = rt.create_agent(seen_by_tool(seen), session_id="s", deps=Database("op"))
    handle.submit(UserInput("look"))
    while not isinstance(handle.next_event(10).msg, TurnCompletedMsg):
        pass
    assert [c.deps.name for c in seen] == ["op"]
    handle.close()
