"""The asyncio face: prompt_async, async iteration, next_event_async.

None of them may block the event loop: a heartbeat task keeps ticking
while a turn is held open.
"""

from __future__ import annotations

import asyncio

from turnlog import Agent, RunEvent, RunFinished, Runtime, ScriptedModel, UserInput
from turnlog.domain import protocol as p
from turnlog.testing import HeldModel


def test_prompt_async_and_async_iteration_keep_the_loop_free(sqlite_url: str) -> None:
    held = HeldModel(ScriptedModel(["async answer"]))

    async def scenario(rt: Runtime) -> tuple[str | None, list[str], int]:
        session = rt.create_session(Agent("a", model=held), session_id="aio")
        subscription = session.subscribe()
        ticks = 0

        async def heartbeat() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        beating = asyncio.create_task(heartbeat())
        prompting = asyncio.create_task(session.prompt_async("question"))
        await asyncio.get_running_loop().run_in_executor(None, held.entered.wait, 10)
        ticks_while_held = ticks
        held.release()
        result = await asyncio.wait_for(prompting, 10)
        names: list[str] = []
        async for item in subscription:
            if isinstance(item, RunEvent):
                names.append(type(item.event.msg).__name__)
            if isinstance(item, RunFinished):
                break
        beating.cancel()
        subscription.close()
        return result.final_output, names, ticks_while_held

    with Runtime.open(sqlite_url) as rt:
        final, names, ticks = asyncio.run(scenario(rt))
    assert final == "async answer"
    assert names[0] == "TurnStartedMsg"
    assert names[-1] == "TurnCompletedMsg"
    assert ticks > 0


def test_next_event_async_reads_the_protocol_stream(sqlite_url: str) -> None:
    async def scenario(rt: Runtime) -> list[str]:
        handle = rt.create_agent(
            Agent("a", model=ScriptedModel(["hi"])), session_id="p"
        )
        handle.submit(UserInput("hello"))
        seen: list[str] = []
        while not seen or seen[-1] != "TurnCompletedMsg":
            event = await asyncio.wait_for(handle.next_event_async(), 10)
            seen.append(type(event.msg).__name__)
        handle.close()
        return seen

    with Runtime.open(sqlite_url) as rt:
        seen = asyncio.run(scenario(rt))
    assert seen[0] == "TurnStartedMsg"
    assert "AgentMessageMsg" in seen
    assert p.TurnCompletedMsg.__name__ == seen[-1]
