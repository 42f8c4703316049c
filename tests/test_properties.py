"""Properties of the log and its views, over generated sessions.

- Replaying the log reproduces the live state: every view rebuilt from the
  log under fresh names equals the view the runtime kept live, and the
  messages a session holds in memory are the checkpoint's.
- A view built in one pass equals one built in chunks of any size, and
  re-delivering events a view has already tracked changes nothing.
- The EventMsg stream replayed from the log is the live stream without its
  transient events.

Sessions are generated as plans: turns of tool steps (a tool that answers,
one that raises, one that needs an approval, one that does not exist),
ending in an answer, a model failure, or a model call held until the test
interrupts it (keeping or dropping queued input); approvals are decided
from a generated list; follow-ups, steers and shared-state updates are
mixed in. Two sessions of an example run at once,
so their events interleave in the log as they do in a busy runtime.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import hypothesis
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog import (
    Agent,
    AgentSession,
    ApprovalDecision,
    ApprovalRequest,
    EventsMissed,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RunConfig,
    RunEvent,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.projections.rebuild import default_projections, rebuild
from turnlog.projections.rows import Projection
from turnlog.projections.runner import ProjectionRunner
from turnlog.projections.tables import ViewTables
from turnlog.store.log import Store

PROPERTY_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
VIEWS = ("checkpoints", "transcript", "executions", "sessions")
WAIT = 20.0
"""Seconds a prompt may take before the test fails instead of hanging."""


# -- the agent's tools --


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return key.upper()


@function_tool
def explode(key: str) -> str:
    """Always fails (the model gets an error output)."""
    msg = f"cannot handle {key}"
    raise ValueError(msg)


@function_tool(needs_approval=True)
def guarded(key: str) -> str:
    """Runs only once approved."""
    return f"guarded {key}"


TOOLS = [lookup, explode, guarded]
TOOL_NAMES = ("lookup", "explode", "guarded", "no_such_tool")


# -- plans: what a generated session does --


class TurnPlan(msgspec.Struct, frozen=True):
    """One prompt of a plan and the model steps scripted for it.

    ``tool_steps`` are the tool names each tool-calling step asks for;
    ``end`` is how the last step goes: ``reply``, ``fail`` (the model
    raises), ``hold`` (the call is held until the test interrupts the turn)
    or ``hold_and_clear`` (the same, dropping queued input too). ``queued``
    is input queued before the prompt: a follow-up (its own turn after the
    prompt's) or a steer (taken into the prompt's turn).

    A step ending its turn early (a failure, an abort) shifts the script:
    later turns then get the responses meant for this one, or run out of
    script, which is a model failure too. Every outcome is a valid session.
    """

    tool_steps: tuple[tuple[str, ...], ...]
    end: str
    queued: str
    shared_state: bool


class Plan(msgspec.Struct, frozen=True):
    """A generated session: its turns and its approval decisions, in order."""

    turns: tuple[TurnPlan, ...]
    decisions: tuple[str, ...]


turns = st.builds(
    TurnPlan,
    tool_steps=st.lists(
        st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=2).map(tuple),
        max_size=2,
    ).map(tuple),
    end=st.sampled_from(("reply", "fail", "hold", "hold_and_clear")),
    queued=st.sampled_from(("", "follow_up", "steer")),
    shared_state=st.booleans(),
)
plans = st.builds(
    Plan,
    turns=st.lists(turns, min_size=1, max_size=3).map(tuple),
    decisions=st.lists(
        st.sampled_from(("allow", "allow_session", "deny", "abort")), max_size=4
    ).map(tuple),
)


class Held(msgspec.Struct, frozen=True):
    """A scripted step whose model call is held until the turn is interrupted."""

    clear_queue: bool


class PlannedModel:
    """A ScriptedModel that can also hold a call and interrupt its turn.

    A held call starts a thread that interrupts the session (the turn is
    running: its step was recorded before the call was made), then waits
    until the interrupt cancels it. Nothing sleeps: the interrupt follows
    from the call itself.
    """

    def __init__(self, script: Sequence[Any]) -> None:
        self.inner = ScriptedModel()
        self.holds: dict[int, Held] = {}
        for index, response in enumerate(script):
            if isinstance(response, Held):
                self.holds[index] = response
            else:
                self.inner.add(response)
        self.session: AgentSession | None = None
        self.interrupters: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self._calls = 0
        self._lock = threading.Lock()

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        """The next scripted response, or a call held until interrupted."""
        with self._lock:
            index, self._calls = self._calls, self._calls + 1
        held = self.holds.get(index)
        if held is None:
            return await self.inner.respond(request, on_delta)
        interrupter = threading.Thread(target=self._interrupt, args=(held,))
        self.interrupters.append(interrupter)
        interrupter.start()
        await asyncio.Event().wait()  # until the interrupt cancels this call
        msg = "a held call was released"
        raise AssertionError(msg)

    def _interrupt(self, held: Held) -> None:
        assert self.session is not None
        try:
            self.session.interrupt(clear_queue=held.clear_queue)
        except Exception as error:
            self.errors.append(error)

    def join(self) -> None:
        """Waits for the interrupts made; raises what any of them raised."""
        for interrupter in self.interrupters:
            interrupter.join(WAIT)
        assert not any(t.is_alive() for t in self.interrupters)
        if self.errors:
            raise self.errors[0]


def script_of(plan: Plan) -> list[Any]:
    """The model's responses for ``plan``, in the order it will be called."""
    script: list[Any] = []
    for number, turn in enumerate(plan.turns):
        for step, names in enumerate(turn.tool_steps):
            items = [
                tool_call(name, {"key": f"t{number}s{step}c{index}"})
                for index, name in enumerate(names)
            ]
            script.append(calls(*items))
        if turn.end == "reply":
            script.append(f"answer {number}")
        elif turn.end == "fail":
            script.append(ProviderError(f"model down in turn {number}"))
        else:
            script.append(Held(clear_queue=turn.end == "hold_and_clear"))
    return script


class ListedDecisions:
    """An approval provider answering from a list, then denying."""

    def __init__(self, decisions: Sequence[str]) -> None:
        self._decisions = list(decisions)
        self._lock = threading.Lock()

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        """The next listed decision (``deny`` once the list is used up)."""
        with self._lock:
            kind = self._decisions.pop(0) if self._decisions else "deny"
        return ApprovalDecision(kind)  # type: ignore[arg-type]


@dataclasses.dataclass
class Ran:
    """What a session did live: its id, the model, and what it published."""

    session_id: str
    session: AgentSession
    model: PlannedModel
    published: list[Any] = dataclasses.field(default_factory=list)


def start_session(rt: Runtime, session_id: str, plan: Plan) -> Ran:
    """Opens the session of ``plan`` and subscribes before its first prompt."""
    model = PlannedModel(script_of(plan))
    config = RunConfig(
        approval_policy="ask", approval_provider=ListedDecisions(plan.decisions)
    )
    session = rt.create_session(
        Agent("prop", model=model, tools=TOOLS),
        session_id=session_id,
        run_config=config,
    )
    model.session = session
    return Ran(session_id, session, model)


def drive(ran: Ran, plan: Plan) -> None:
    """Runs every turn of ``plan``; collects what the session published."""
    subscription = ran.session.subscribe()
    for number, turn in enumerate(plan.turns):
        if turn.queued == "follow_up":
            ran.session.follow_up(f"and then {number}")
        elif turn.queued == "steer":
            ran.session.steer(f"mind the detail {number}")
        if turn.shared_state:
            ran.session.update_shared_state(last_turn=number)
        ran.session.prompt(f"question {number}", timeout=WAIT)
    ran.model.join()
    # Every event of a run is published before its prompt returns.
    ran.published = subscription.drain()
    subscription.close()


def run_plans(rt: Runtime, session_plans: Sequence[Plan]) -> list[Ran]:
    """Runs the plans' sessions at once (one thread each); waits for all."""
    runs = [
        start_session(rt, f"s{index}", plan) for index, plan in enumerate(session_plans)
    ]
    errors: list[BaseException] = []

    def guarded_drive(ran: Ran, plan: Plan) -> None:
        try:
            drive(ran, plan)
        except BaseException as error:
            errors.append(error)

    threads = [
        threading.Thread(target=guarded_drive, args=(ran, plan))
        for ran, plan in zip(runs, session_plans, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 4)
    assert not any(thread.is_alive() for thread in threads)
    if errors:
        raise errors[0]
    return runs


# -- reading views --


def renamed(suffix: str) -> list[Projection]:
    """Every default projection, under a name no view has yet."""
    projections = default_projections()
    for projection in projections:
        projection.name = f"{projection.name}.{suffix}"
    return projections


def documents(tables: ViewTables, view: str) -> dict[str, list[tuple[int, bytes]]]:
    """Every document of ``view``: (position, raw doc) by session."""
    return {part: tables.range(view, part) for part in tables.parts(view)}


def dump(runner: ProjectionRunner) -> dict[str, dict[str, list[tuple[int, bytes]]]]:
    """Every document of the runner's views, keyed by the view's first name."""
    return {
        projection.name.split(".")[0]: documents(runner.tables, projection.name)
        for projection in runner.projections
    }


# -- (a) replaying the log reproduces the live state --


@PROPERTY_SETTINGS
@given(st.lists(plans, min_size=1, max_size=2))
def test_views_rebuilt_from_the_log_equal_the_live_ones(
    session_plans: list[Plan],
) -> None:
    with Runtime.open("memory://") as rt:
        runs = run_plans(rt, session_plans)
        end = rt.projections.catch_up()
        assert end == rt.store.max_position()
        rebuilt = ProjectionRunner(rt.store, renamed(uuid.uuid4().hex[:8]))
        assert rebuilt.catch_up() == end
        live = {view: documents(rt.projections.tables, view) for view in VIEWS}
        assert dump(rebuilt) == live
        assert set(live["checkpoints"]) == {ran.session_id for ran in runs}
        # The offline rebuild, asked to compare instead of swapping, agrees.
        assert all(
            report.differences == [] for report in rebuild(rt.store, verify=True)
        )
        for ran in runs:
            checkpoint = rt.checkpoints.load(ran.session_id)
            assert checkpoint is not None
            assert ran.session.messages() == checkpoint.messages()
            assert ran.session.shared_state() == checkpoint.shared_state
            assert checkpoint.running_turn is None
            assert checkpoint.pending_approval is None
            latest = ran.session.latest_run()
            assert latest is not None
            assert latest.usage == checkpoint.total_usage


# -- (b) one pass equals chunks; re-delivery changes nothing --


@pytest.fixture(scope="module")
def recorded_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A log of three interleaved sessions with every kind of turn in it."""
    url = f"sqlite:///{tmp_path_factory.mktemp('log')}/turnlog.sqlite3"
    every_kind = Plan(
        turns=(
            TurnPlan((("lookup", "explode"),), "reply", "steer", shared_state=True),
            TurnPlan((("guarded",), ("guarded",)), "reply", "follow_up", False),
            TurnPlan((("no_such_tool",),), "fail", "", shared_state=False),
            TurnPlan((("lookup",),), "hold", "follow_up", shared_state=True),
            TurnPlan((("guarded",),), "hold_and_clear", "follow_up", False),
            TurnPlan((("guarded",),), "reply", "", shared_state=False),
        ),
        decisions=("deny", "allow_session", "abort"),
    )
    with Runtime.open(url) as rt:
        run_plans(rt, [every_kind, every_kind, every_kind])
    store = Store(url)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(scope="module")
def one_pass(recorded_log: Store) -> dict[str, Any]:
    """Every view of the recorded log, built in one catch-up."""
    runner = ProjectionRunner(recorded_log, renamed("one-pass"))
    assert runner.catch_up() == recorded_log.max_position()
    views = dump(runner)
    assert all(views[view] for view in VIEWS)
    return views


@PROPERTY_SETTINGS
@given(chunks=st.lists(st.integers(min_value=1, max_value=80), min_size=1))
def test_a_view_built_in_chunks_equals_one_built_in_one_pass(
    recorded_log: Store, one_pass: dict[str, Any], chunks: list[int]
) -> None:
    end = recorded_log.max_position()
    runner = ProjectionRunner(recorded_log, renamed(uuid.uuid4().hex[:8]))
    position, index = 0, 0
    while position < end:
        # The chunk sizes repeat until the log is folded.
        target = position + chunks[index % len(chunks)]
        position = runner.catch_up(until=min(target, end))
        assert position == min(target, end)
        index += 1
    assert dump(runner) == one_pass


@PROPERTY_SETTINGS
@given(data=st.data())
def test_redelivering_tracked_events_changes_nothing(
    recorded_log: Store, one_pass: dict[str, Any], data: st.DataObject
) -> None:
    end = recorded_log.max_position()
    suffix = uuid.uuid4().hex[:8]
    runner = ProjectionRunner(recorded_log, renamed(suffix))
    halfway = data.draw(st.integers(min_value=0, max_value=end), label="halfway")
    runner.catch_up(until=halfway)
    # A second follower of the same views that read their tracking now, then
    # fell behind while the first folded the rest of the log.
    stale = ProjectionRunner(recorded_log, renamed(suffix))
    assert runner.catch_up() == end
    assert stale.catch_up() == end
    assert dump(runner) == one_pass
    # Catching up again, and folding tracked entries straight into the runner
    # (what a redelivery would do; catch_up never hands them out again, so
    # its two steps are called here), leaves the rows and the tracking alone.
    assert runner.catch_up() == end
    positions = data.draw(
        st.lists(st.integers(min_value=1, max_value=end), min_size=1, max_size=5),
        label="redelivered",
    )
    for position in positions:
        batch = recorded_log.notifications(position, 1)
        runner._commit(batch, runner._fold(batch))
    assert dump(runner) == one_pass
    assert all(
        runner.tables.tracking_of(projection.name) == (end, projection.version)
        for projection in runner.projections
    )


# -- (c) the replayed stream is the live one without transient events --


@PROPERTY_SETTINGS
@given(st.lists(plans, min_size=1, max_size=2))
def test_the_replayed_event_stream_equals_the_live_one(
    session_plans: list[Plan],
) -> None:
    with Runtime.open("memory://") as rt:
        runs = run_plans(rt, session_plans)
        for ran in runs:
            assert not any(isinstance(item, EventsMissed) for item in ran.published)
            live = [
                item.event
                for item in ran.published
                if isinstance(item, RunEvent) and not item.event.transient
            ]
            replayed = rt.replay_events(ran.session_id)
            # What the examples covered, for --hypothesis-show-statistics.
            for name in sorted({type(e.msg).__name__ for e in replayed}):
                hypothesis.event(name)
            # The subscription began after the session was created.
            assert isinstance(replayed[0].msg, p.SessionCreatedMsg)
            assert replayed[1:] == live
            assert [event.sequence for event in replayed] == sorted(
                event.sequence for event in replayed
            )
