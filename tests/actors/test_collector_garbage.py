"""What sessions leave to the cyclic garbage collector (issue 24).

Objects in reference cycles are freed only by the collector, whose runs
hold the GIL; objects that stay alive are walked by every full run. A
session's turn and its passivation must leave none of its actors' objects
in cycles, and what its threads keep must be shared where it can be.
Checked with ``gc.DEBUG_SAVEALL`` (the collector's state is restored after).
"""

from __future__ import annotations

import collections
import gc
from collections.abc import Iterator
from contextlib import contextmanager

from turnlog import (
    Agent,
    RunConfig,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.actors.actor_pool import POOL
from turnlog.domain.turn_facts import TurnRules

WAIT = 10.0

SESSION_KINDS = {
    "SessionActor",
    "SessionState",
    "SessionInputs",
    "InputReviews",
    "TurnDriver",
    "TurnMachine",
    "TurnActorSlot",
    "TurnActor",
    "LoopActorRef",
    "AnswerCheck",
}
"""What a session's actors are made of: none of it may be left in a cycle."""


def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


def adding_agent(turns: int) -> Agent:
    """An agent whose every turn calls the tool ``add`` once, then answers."""
    script: list[object] = []
    for n in range(turns):
        script += [calls(tool_call("add", {"a": n, "b": 1}, call_id=f"c{n}")), "done"]
    tool = function_tool(add, name="add", description="Adds two numbers.")
    return Agent("adder", model=ScriptedModel(script), tools=[tool])


@contextmanager
def collector_garbage() -> Iterator[collections.Counter[str]]:
    """Counts, by type, what a collection at the end of the block finds
    unreachable (objects refcounting could not free); only the names are
    kept, so nothing found stays alive."""
    enabled = gc.isenabled()
    gc.disable()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found: collections.Counter[str] = collections.Counter()
    try:
        yield found
        gc.collect()
        found.update(type(o).__qualname__ for o in gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        if enabled:
            gc.enable()


def test_a_turn_and_a_passivation_leave_nothing_of_the_session_in_cycles() -> None:
    with Runtime.open("memory://", run_config=RunConfig(idle_timeout=0.2)) as rt:
        warm = rt.create_session(adding_agent(1), session_id="warm")
        warm.prompt("add", timeout=WAIT)  # imports and pools made outside
        assert warm.wait_passivated(WAIT)
        with collector_garbage() as found:
            session = rt.create_session(adding_agent(2), session_id="s")
            assert session.prompt("add", timeout=WAIT).status == "completed"
            assert session.prompt("add", timeout=WAIT).status == "completed"
            assert session.wait_passivated(WAIT)
            # The worker that ran its last handler lets go of the actor.
            assert POOL.wait_until_quiet(WAIT)
        left = {kind: n for kind, n in found.items() if kind in SESSION_KINDS}
        assert left == {}


def test_sessions_of_one_agent_share_its_rules_functions() -> None:
    agent = adding_agent(2)
    with Runtime.open("memory://") as rt:
        for name in ("one", "two"):
            rt.create_session(agent, session_id=name).prompt("add", timeout=WAIT)
        rules = {
            o.session_id: o
            for o in gc.get_objects()
            if isinstance(o, TurnRules) and o.session_id in {"one", "two"}
        }
        one, two = rules["one"], rules["two"]
        assert one is not two  # each has its own session id
        for field in ("needs_approval", "model_identity", "tool_identity"):
            assert getattr(one, field) is getattr(two, field), field
