"""The ToolExecutor: concurrency up to a limit, completion order, timeouts."""

from __future__ import annotations

import json
import threading

import pytest

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.actors.actor_pool import ActorPool
from turnlog.actors.io_loop import IoLoop
from turnlog.actors.messages import RunTool
from turnlog.actors.tool_executor import ToolExecutor
from turnlog.domain import protocol as p
from turnlog.domain.turn_facts import ToolFinished
from turnlog.testing import wait_for


def replayed(rt: Runtime, session_id: str, kind: type) -> list:
    return [e.msg for e in rt.replay_events(session_id) if isinstance(e.msg, kind)]


def test_calls_of_one_step_run_concurrently_and_finish_in_completion_order(
    sqlite_url: str,
) -> None:
    both_running = threading.Barrier(2, timeout=10)
    fast_recorded = threading.Event()

    @function_tool
    def slow() -> str:
        """Finishes only after fast's output is in the log."""
        both_running.wait()
        fast_recorded.wait(10)
        return "slow"

    @function_tool
    def fast() -> str:
        """Finishes first."""
        both_running.wait()
        return "fast"

    model = ScriptedModel([calls(tool_call("slow"), tool_call("fast")), "done"])
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[slow, fast]), session_id="c"
        )
        events = session.subscribe()
        results = []
        worker = threading.Thread(target=lambda: results.append(session.prompt("go")))
        worker.start()
        wait_for(
            events, lambda m: isinstance(m, p.ToolCallFinishedMsg) and m.name == "fast"
        )
        fast_recorded.set()
        worker.join(10)
        assert results[0].final_output == "done"
        finished = [end.name for end in replayed(rt, "c", p.ToolCallFinishedMsg)]
        assert finished == ["fast", "slow"]
        # the next request lists every output, in the order they were recorded
        answered = [
            i["output"]
            for i in model.requests[1].items
            if i["type"] == "function_call_output"
        ]
        assert answered == ["fast", "slow"]


def test_no_more_than_the_limit_run_at_once(sqlite_url: str) -> None:
    lock = threading.Lock()
    running = 0
    peak = 0
    gate = threading.Event()
    arrived = threading.Semaphore(0)

    @function_tool
    def work(n: int) -> int:
        """Counts how many run at once."""
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        arrived.release()
        gate.wait(10)
        with lock:
            running -= 1
        return n

    model = ScriptedModel(
        [calls(*(tool_call("work", {"n": n}) for n in range(5))), "ok"]
    )
    with Runtime.open(sqlite_url, max_tool_concurrency=2) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[work]), session_id="l"
        )
        worker = threading.Thread(target=lambda: session.prompt("go", timeout=20))
        worker.start()
        for _ in range(2):
            assert arrived.acquire(timeout=10)
        assert not arrived.acquire(timeout=0.05)  # a third would be over the limit
        gate.set()
        worker.join(20)
    assert peak == 2


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_call_past_its_timeout_is_an_error_output(
    sqlite_url: str, asynchronous: bool
) -> None:
    never = threading.Event()

    if asynchronous:
        import asyncio

        @function_tool(timeout=0.05)
        async def hang() -> str:
            """Never returns."""
            await asyncio.Event().wait()
            return "never"
    else:

        @function_tool(timeout=0.05)
        def hang() -> str:
            """Never returns (until the test ends)."""
            never.wait(10)
            return "never"

    model = ScriptedModel([calls(tool_call("hang")), "moved on"])
    try:
        with Runtime.open(sqlite_url) as rt:
            session = rt.create_session(
                Agent("a", model=model, tools=[hang]), session_id="t"
            )
            assert session.prompt("go", timeout=10).final_output == "moved on"
            (end,) = replayed(rt, "t", p.ToolCallFinishedMsg)
            assert (end.output, end.is_error) == ("tool timed out after 0.05 s", True)
    finally:
        never.set()


def test_each_sync_call_times_out_at_its_own_deadline(sqlite_url: str) -> None:
    # One timer on the I/O loop serves every sync call's deadline: a call
    # whose deadline is earlier than the timer set (for "patient", still
    # running) must still time out on time, and the timer comes again for
    # the deadlines after its own.
    release = threading.Event()

    @function_tool(timeout=600)
    def patient() -> str:
        """Runs until the others have timed out."""
        release.wait(10)
        return "patient"

    def hanging(name: str, timeout: float) -> object:
        def hang() -> str:
            release.wait(10)
            return "never"

        hang.__doc__ = "Hangs until the test ends."
        return function_tool(name=name, timeout=timeout)(hang)

    short, longer = hanging("short", 0.05), hanging("longer", 0.2)
    model = ScriptedModel(
        [calls(tool_call("patient"), tool_call("short"), tool_call("longer")), "ok"]
    )
    try:
        with Runtime.open(sqlite_url) as rt:
            session = rt.create_session(
                Agent("a", model=model, tools=[patient, short, longer]),
                session_id="d",
            )
            events = session.subscribe()
            results = []
            worker = threading.Thread(
                target=lambda: results.append(session.prompt("go", timeout=20))
            )
            worker.start()
            ended = []
            for _ in range(2):
                item, _ = wait_for(
                    events, lambda m: isinstance(m, p.ToolCallFinishedMsg)
                )
                end = item.event.msg  # type: ignore[union-attr]
                ended.append((end.name, end.output, end.is_error))
            assert ended == [
                ("short", "tool timed out after 0.05 s", True),
                ("longer", "tool timed out after 0.2 s", True),
            ]
            release.set()
            worker.join(20)
            assert results[0].final_output == "ok"
    finally:
        release.set()


def test_a_call_abandoned_at_its_timeout_holds_its_thread_until_it_returns(
    sqlite_url: str,
) -> None:
    # A sync handler cannot be stopped: after its timeout it runs on, in
    # its thread. Such threads count against the limit, as a bounded
    # pool's would, so a hung tool cannot take a thread per call; the next
    # call waits for the thread, and runs once it is free.
    release, began = threading.Event(), threading.Event()

    @function_tool(timeout=0.05)
    def stuck() -> str:
        """Returns only when the test releases it."""
        release.wait(10)
        return "late"

    @function_tool
    def after() -> str:
        """Notes that it began."""
        began.set()
        return "after"

    model = ScriptedModel([calls(tool_call("stuck")), calls(tool_call("after")), "ok"])
    try:
        with Runtime.open(sqlite_url, max_tool_concurrency=1) as rt:
            session = rt.create_session(
                Agent("a", model=model, tools=[stuck, after]), session_id="h"
            )
            events = session.subscribe()
            results = []
            worker = threading.Thread(
                target=lambda: results.append(session.prompt("go", timeout=20))
            )
            worker.start()
            wait_for(
                events,
                lambda m: isinstance(m, p.ToolCallStartedMsg) and m.name == "after",
            )
            assert not began.wait(0.2)  # stuck's thread is not free yet
            release.set()
            assert began.wait(10)
            worker.join(20)
            assert results[0].final_output == "ok"
            ends = [
                (e.name, e.output) for e in replayed(rt, "h", p.ToolCallFinishedMsg)
            ]
            assert ends == [
                ("stuck", "tool timed out after 0.05 s"),
                ("after", "after"),
            ]
    finally:
        release.set()


class Told:
    """A reply_to that keeps what it is told."""

    def __init__(self) -> None:
        self.told: list[ToolFinished] = []
        self.any = threading.Event()

    def tell(self, message: ToolFinished) -> None:
        self.told.append(message)
        self.any.set()


def test_a_call_with_no_thread_to_run_on_is_answered_and_never_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[str] = []

    @function_tool
    def record(text: str) -> str:
        """Notes that it ran."""
        ran.append(text)
        return text

    def order(text: str, reply_to: Told) -> RunTool:
        arguments = json.dumps({"text": text})
        return RunTool("k", 1, text, record, arguments, {}, reply_to)

    io_loop = IoLoop()
    pool = ActorPool(name="NoThreadYet")
    executor = ToolExecutor(io_loop, max_concurrency=1, pool=pool)
    try:
        with monkeypatch.context() as patched:

            def no_thread(_thread: threading.Thread) -> None:
                raise RuntimeError("can't start new thread")

            patched.setattr(threading.Thread, "start", no_thread)
            refused = Told()
            executor.run(order("refused", refused))
        assert [(m.output, m.is_error) for m in refused.told] == [
            ("tool not run: the process is exiting", True)
        ]
        # The pool kept the run for its next worker, which skips it, and
        # the one thread the limit allows is free again for the next call.
        later = Told()
        executor.run(order("later", later))
        assert later.any.wait(10)
        assert [m.output for m in later.told] == ["later"]
        assert pool.wait_until_quiet(10)
        assert ran == ["later"]
    finally:
        executor.stop()
        io_loop.close()
