"""Records the golden histories in tests/histories/ (run by hand, rarely).

Each history is one session recorded with the turnlog of the day: its raw
stored events, the EventMsg stream its replay must give, and its
checkpoint. tests/test_histories.py loads them into a fresh store and
checks that every later turnlog still replays them to the same stream and
checkpoint. Never re-record an existing history: a change that breaks one
needs an upcaster. Add a new history when new events appear.

Run: python scripts/record_histories.py NAME [NAME...] (from outside the
checkout's root, or with the package installed, e.g. from scripts/).
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import msgspec
import pydantic

from turnlog import (
    Agent,
    AnswerInfo,
    ApprovalDecision,
    ApprovalRequest,
    Compaction,
    HookResult,
    Middleware,
    ModelRequest,
    ModelResponse,
    ModelRouter,
    RunConfig,
    Runtime,
    ScriptedModel,
    SessionFileReference,
    calls,
    function_tool,
    reply,
    tool_call,
)
from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.domain.protocol import encode_json
from turnlog.hosting.children import descendants
from turnlog.testing import HeldModel

HISTORIES = Path(__file__).resolve().parents[1] / "tests" / "histories"
USAGE = {
    "input_tokens": 10,
    "cached_input_tokens": 4,
    "output_tokens": 3,
    "total_tokens": 13,
}


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return key.upper()


@function_tool
def explode() -> str:
    """Fails."""
    raise ValueError("boom")


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploys (needs approval)."""
    return f"deployed {target}"


class Notes(Middleware):
    """Adds context around tools; rejects prompts that say 'forbidden'."""

    def user_prompt(self, info):
        if "forbidden" in info.text:
            return HookResult.reject_prompt("prompt refused by policy")
        return HookResult.add_context("the user is on the free plan")

    def pre_tool(self, info):
        return HookResult.add_context(f"about to call {info.name}")

    def post_tool(self, info):
        return HookResult.add_context(f"{info.name} answered")


class Compactor(ScriptedModel):
    async def compact(self, request: ModelRequest) -> ModelResponse:
        item = {"type": "compaction", "encrypted_content": "opaque"}
        return ModelResponse((item,), dict(USAGE))


class Answers:
    def __init__(self, *answers: ApprovalDecision) -> None:
        self.answers = list(answers)

    def decide(self, request: ApprovalRequest) -> ApprovalDecision | None:
        return self.answers.pop(0)


def basic(rt: Runtime) -> None:
    model = ScriptedModel(
        [
            calls(
                tool_call("lookup", {"key": "a"}, call_id="c1"),
                text="checking",
                usage=USAGE,
            ),
            reply("A it is", usage=USAGE),
            calls(
                tool_call("explode", call_id="c2"), tool_call("missing", call_id="c3")
            ),
            "recovered",
            "follow-up done",
            RuntimeError("model down"),
        ]
    )
    router = ModelRouter("main", model).register("backup", model)
    agent = Agent("historian", model=router, tools=[lookup, explode])
    session = rt.create_session(
        agent, session_id="basic", shared_state={"plan": "free"}
    )
    attachment = SessionFileReference("f-1", "notes.txt", 12, "text/plain")
    session.prompt("look up a", attachments=[attachment], timeout=10)
    session.update_shared_state(plan="pro")
    session.set_model_route("backup")
    session.follow_up("and then?")
    session.prompt("break something", timeout=10)
    session.prompt("this one fails", timeout=10)


@function_tool(needs_approval=True)
def drop_table(name: str) -> str:
    """Drops a table (needs approval)."""
    return f"dropped {name}"


def approvals(rt: Runtime) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("deploy", {"target": "staging"}, call_id="d1")),
            "staging done",
            calls(tool_call("deploy", {"target": "prod"}, call_id="d2")),
            "prod done",
            calls(tool_call("drop_table", {"name": "users"}, call_id="x1")),
            "not dropped",
            calls(tool_call("drop_table", {"name": "orders"}, call_id="x2")),
        ]
    )
    provider = Answers(
        ApprovalDecision.allow_session(),
        ApprovalDecision.deny(),
        ApprovalDecision.abort(),
    )
    config = RunConfig(approval_provider=provider)
    agent = Agent("historian", model=model, tools=[deploy, drop_table])
    session = rt.create_session(agent, session_id="approvals", run_config=config)
    session.prompt("deploy staging", timeout=10)
    session.prompt("deploy prod", timeout=10)  # allowed for the session: no ask
    session.prompt("drop users", timeout=10)  # denied
    session.prompt("drop orders", timeout=10)  # aborted


def hooks_and_compaction(rt: Runtime) -> None:
    model = Compactor(
        [
            calls(tool_call("lookup", {"key": "b"}, call_id="h1"), usage=USAGE),
            reply("B", usage=USAGE),
        ]
    )
    agent = Agent(
        "historian",
        model=model,
        tools=[lookup],
        middleware=[Compaction(1), Notes()],
    )
    session = rt.create_session(agent, session_id="hooks")
    session.prompt("this is forbidden", timeout=10)
    session.prompt("look up b", timeout=10)


def interrupted(rt: Runtime) -> None:
    held = HeldModel(ScriptedModel(["never"]), hold_all=True)
    agent = Agent("historian", model=held)
    session = rt.create_session(agent, session_id="interrupted")
    session.follow_up("dropped follow-up")
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(session.prompt("wait")))
    worker.start()
    held.entered.wait(10)
    session.steer("hurry up")
    session.interrupt(clear_queue=True)
    worker.join(10)


class Forecast(pydantic.BaseModel):
    """A typed answer."""

    city: str
    celsius: float


class NoFreezing(Middleware):
    """A guardrail on the answer: sends back forecasts below -10 C."""

    name = "no-freezing"

    def final_answer(self, info: AnswerInfo) -> HookResult | None:
        if isinstance(info.output, Forecast) and info.output.celsius < -10:
            return HookResult.reject_answer("that is too cold to be true")
        return None


def typed(rt: Runtime) -> None:
    """A typed answer: one invalid, one a guardrail refuses, one accepted;
    then a turn whose retries run out."""
    model = ScriptedModel(
        [
            reply('{"city": "Oslo"}', usage=USAGE),
            reply('{"city": "Oslo", "celsius": -40}', usage=USAGE),
            reply('{"city": "Oslo", "celsius": -3.5}', usage=USAGE),
            reply("no JSON here", usage=USAGE),
            reply('{"celsius": 1}', usage=USAGE),
            reply('{"city": "Oslo", "celsius": "mild"}', usage=USAGE),
        ]
    )
    agent = Agent(
        "historian",
        model=model,
        output_type=Forecast,
        output_retries=2,
        middleware=[NoFreezing()],
    )
    session = rt.create_session(agent, session_id="typed")
    session.prompt("weather in Oslo?", timeout=30)
    session.prompt("and now?", timeout=30)


def children(rt: Runtime) -> None:
    """A session whose tool runs another agent: its turn records the child."""
    researcher = Agent("researcher", model=ScriptedModel([reply("Paris", usage=USAGE)]))
    model = ScriptedModel(
        [
            calls(tool_call("research", {"input": "capital?"}, call_id="c1")),
            reply("Paris it is", usage=USAGE),
        ]
    )
    agent = Agent("historian", model=model, tools=[researcher.as_tool(name="research")])
    session = rt.create_session(agent, session_id="children")
    session.prompt("where?", timeout=10)


RECORDERS: dict[str, Callable[[Runtime], None]] = {
    "basic": basic,
    "approvals": approvals,
    "hooks": hooks_and_compaction,
    "interrupted": interrupted,
    "typed": typed,
    "children": children,
}


def record(name: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'history.sqlite3'}"
        with Runtime.open(url) as rt:
            RECORDERS[name](rt)
            session_id = {"hooks": "hooks"}.get(name, name)
            # With the child sessions under it (their events sit between its
            # own in the log, and loading keeps every position).
            tree = [
                session_id,
                *(c.session_id for _, c in descendants(rt.store, session_id)),
            ]
            ids = []
            for member in tree:
                turns = rt.store.get(session_uuid(member)).turn_count
                ids += [session_uuid(member)]
                ids += [turn_uuid(member, n) for n in range(1, turns + 1)]
            rows = sorted(rt.store.stored_rows(ids))
            replay = [encode_json(e).decode() for e in rt.replay_events(session_id)]
            checkpoint = msgspec.to_builtins(rt.checkpoints.load(session_id))
    HISTORIES.mkdir(parents=True, exist_ok=True)
    events = HISTORIES / f"{name}.events.jsonl"
    if events.exists():
        raise SystemExit(f"{events} exists: never re-record a history")
    with events.open("w") as out:
        for position, originator, version, topic, state in rows:
            line = {
                "position": position,
                "originator_id": str(originator),
                "originator_version": version,
                "topic": topic,
                "state": msgspec.Raw(state),
            }
            out.write(msgspec.json.encode(line).decode() + "\n")
    (HISTORIES / f"{name}.replay.jsonl").write_text("\n".join(replay) + "\n")
    (HISTORIES / f"{name}.checkpoint.json").write_text(
        msgspec.json.format(msgspec.json.encode(checkpoint), indent=2).decode() + "\n"
    )
    print(f"recorded {name}: {len(rows)} events, {len(replay)} event messages")


if __name__ == "__main__":
    for history in sys.argv[1:] or list(RECORDERS):
        record(history)
