"""The TurnActor: the slow work of a turn, kept off the session's thread.

A session starts one for each turn. It is a LoopActor: its messages are
handled on the I/O loop, where its coroutines run, so it has no thread of
its own (a session waiting on its model holds one thread, its
SessionActor's) and starting one costs an object, not a thread.

It runs the turn's model calls, middleware hooks and compaction as
coroutines on the I/O loop and hands its tool calls to the ToolExecutor;
results reach the SessionActor as facts straight from where they complete.
It owns what is in flight, so an interrupt (``CancelTurn``) is handled at
once: every coroutine is cancelled (closing an HTTP stream, stopping
between hooks) and the turn's tool calls are cancelled where they can be.
It never writes to the log and never waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

import msgspec
import pykka

from turnlog.actors.answers import AnswerCheck
from turnlog.actors.background_jobs import JobStarter
from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.hooks import (
    HookFailedError,
    any_implements,
    prepare_step,
    review_prompt,
    run_hook,
)
from turnlog.actors.instructions import evaluate_instructions
from turnlog.actors.io_loop import IoLoop
from turnlog.actors.loop_actor import LoopActor, LoopActorRef
from turnlog.actors.messages import (
    CallModel,
    CancelTurn,
    PrepareStep,
    ReviewInput,
    RunCalls,
    RunTool,
    UseAgent,
)
from turnlog.actors.shared_state_writer import SharedStateWriter
from turnlog.actors.tool_executor import ToolExecutor
from turnlog.domain.errors import ProviderError, TurnlogError
from turnlog.domain.hooks import ToolCallInfo
from turnlog.domain.model import (
    ModelRequest,
    check_response,
    final_text,
    respond_streaming,
    tool_calls_in,
)
from turnlog.domain.run_context import RunContext
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.domain.turn_facts import (
    CompactionBegan,
    InputReviewed,
    StepFailed,
    StepPrepared,
    StepSucceeded,
    ToolFinished,
    TurnActorFailed,
)


class TurnActor(LoopActor):
    """Drives the model calls, hooks and tool calls of one running turn."""

    def __init__(
        self,
        *,
        session: pykka.ActorRef[Any],
        session_id: str,
        turn: int,
        turn_id: str,
        agent: AgentDefinition,
        io_loop: IoLoop,
        tool_executor: ToolExecutor,
        deltas: DeltaSink = discard_deltas,
    ) -> None:
        super().__init__(io_loop)
        self._session = session
        # Where the model's streamed fragments go: published from the loop
        # by the turn's DeltaGate (actors.delta_gate), not told the session.
        self._deltas = deltas
        self._session_id = session_id
        self._turn = turn
        self._turn_id = turn_id
        self._agent = agent
        self._tools = tool_executor
        self._layers = tuple(agent.middleware)
        self._inflight: set[asyncio.Task[Any]] = set()
        self._calls: dict[str, tuple[str, str]] = {}
        # The run as the hooks see it, from the session's latest order.
        self._context: RunContext[Any] | None = None
        self._orders: dict[str, RunTool] = {}
        self._answers = AnswerCheck(agent.output_format, self._layers)

    def on_receive(self, message: Any) -> Any:
        match message:
            case CallModel(request=request, context=context):
                self._context = context
                self._start(
                    partial(self._step, request),
                    partial(self._step_failed, request.step),
                )
            case PrepareStep(info=info, startup=startup):
                self._start(
                    partial(self._prepare, info, startup), self._failed_preparation
                )
            case ReviewInput(info=info):
                self._start(partial(self._review, info), self._failed_review)
            case RunCalls(calls=calls, run=run):
                # Only sent when post_tool hooks must see the outputs first
                # (otherwise the session hands its calls to the executor).
                for call in calls:
                    self._calls[call["call_id"]] = (call["name"], call["arguments"])
                    order = tool_order(
                        self._agent,
                        self._session_id,
                        self._turn,
                        self._turn_id,
                        call,
                        reply_to=self.actor_ref,
                        run=run,
                    )
                    self._orders[call["call_id"]] = order
                    self._tools.run(order)
            case ToolFinished():
                self._start(
                    partial(self._post_tool_hooks, message),
                    self._failed_post_tool(message),
                )
            case UseAgent(agent=agent):
                self._agent, self._layers = agent, tuple(agent.middleware)
                self._answers = AnswerCheck(agent.output_format, self._layers)
            case CancelTurn():
                self._cancel_all()
                self.stop()
            case _:
                msg = f"TurnActor got an unknown message: {message!r}"
                raise TypeError(msg)

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        _traceback: object,
    ) -> None:
        # The session waits on this actor's facts: without this one, its
        # turn (and every prompt waiting on it) would wait forever.
        self._cancel_all()
        name = getattr(exception_type, "__name__", "error")
        with contextlib.suppress(pykka.ActorDeadError):
            self._session.tell(
                TurnActorFailed(
                    self._turn, f"the turn actor failed: {name}: {exception_value}"
                )
            )

    def _cancel_all(self) -> None:
        """Cancels every coroutine and tool call of the current turn."""
        for future in list(self._inflight):
            future.cancel()
        self._inflight.clear()
        self._calls.clear()
        self._orders.clear()
        self._tools.cancel(self._turn_id)

    def _start(
        self,
        work: Callable[[], Coroutine[Any, Any, Any]],
        on_error: Callable[[BaseException], Any],
    ) -> None:
        """Runs ``work()`` on the I/O loop; tells the session its fact."""
        task = self.io_loop.create_task(self._report(work, on_error))
        self._inflight.add(task)

    async def _report(
        self,
        work: Callable[[], Coroutine[Any, Any, Any]],
        on_error: Callable[[BaseException], Any],
    ) -> None:
        """Awaits ``work()`` and tells the session its fact (``on_error``'s
        if it raised).

        The fact is told as the work ends, in the same step of the loop,
        not from a done callback the loop would run a step later. The
        work's coroutine is made once the task runs: a task cancelled
        before its first step leaves none behind that was never awaited.
        A method, not a closure: a session waiting on its model keeps this
        coroutine alive, and a closure's cells and function are objects
        the collector walks besides (issue 24).
        """
        task = asyncio.current_task()
        try:
            fact = await work()
        except asyncio.CancelledError as error:
            if task is not None and task.cancelling():
                raise  # the turn ended (or the runtime); the session knows
            fact = on_error(error)  # cancelled inside: named, not lost
        except Exception as error:  # noqa: BLE001 - the fact names it
            fact = on_error(error)
        finally:
            self._inflight.discard(task)
        if fact is not None:
            # try, not contextlib.suppress: three Python calls less on every
            # model step's report.
            try:  # noqa: SIM105
                self._session.tell(fact)
            except pykka.ActorDeadError:
                pass  # the session stopped

    # -- model steps -----------------------------------------------------------

    async def _step(self, request: ModelRequest) -> StepSucceeded | StepFailed:
        provider = self._agent.provider_for(request.route)
        try:
            response = check_response(
                await respond_streaming(provider, request, self._deltas)
            )
        except ProviderError as bad:
            return StepFailed(self._turn, request.step, type(bad).__name__, str(bad))
        observer = self._agent.usage_observer
        if observer is not None:
            try:
                await asyncio.to_thread(observer, request.route, response.usage)
            except Exception as error:  # noqa: BLE001 - the turn fails, named
                message = f"usage observer failed: {type(error).__name__}: {error}"
                return StepFailed(
                    self._turn, request.step, "UsageObserverError", message
                )
        contexts: list[tuple[str, str]] = []
        stop: str | None = None
        known = self._agent.tools_by_name
        calls = tool_calls_in(response.output)
        for call in calls:
            if call["name"] not in known or stop is not None:
                continue
            info = ToolCallInfo(
                self._session_id,
                self._turn_id,
                call["call_id"],
                call["name"],
                call["arguments"],
                context=self._context,
            )
            for layer in self._layers:
                result = await run_hook(layer, "pre_tool", info)
                if result is not None and result.context:
                    contexts.append((call["call_id"], result.context))
                if result is not None and result.stop is not None:
                    stop = result.stop
                    break
        answer = None
        if not calls and stop is None and self._answers.needed:
            text = final_text(response.output)
            answer = await self._answers.check(
                self._session_id, self._turn_id, request.step, text
            )
        return StepSucceeded(
            self._turn, request.step, response, tuple(contexts), stop, answer
        )

    def _step_failed(self, step: int, error: BaseException) -> StepFailed:
        """The fact of model step ``step`` that raised ``error``."""
        if isinstance(error, asyncio.CancelledError):
            return StepFailed(self._turn, step, "Cancelled", "model call was cancelled")
        return StepFailed(self._turn, step, type(error).__name__, str(error))

    # -- preparation and review --------------------------------------------------

    async def _prepare(self, info: Any, startup: bool) -> StepPrepared:
        session, turn = self._session, self._turn
        self._context = info.context
        instructions = self._agent.instructions
        given = None
        function = self._agent.instructions_function
        if function is not None:  # evaluated first: compaction sends them too
            given = instructions = await evaluate_instructions(function, info.context)

        def began(compaction_id: str, reason: str) -> None:
            session.tell(CompactionBegan(turn, compaction_id, reason))

        provider = self._agent.provider_for(info.route)
        prepared = await prepare_step(
            layers=self._layers,
            provider=provider,
            instructions=instructions,
            info=info,
            startup=startup,
            compaction_began=began,
        )
        return StepPrepared(
            turn,
            tuple(prepared.contexts),
            prepared.compaction,
            prepared.stop,
            None,
            given,
        )

    def _failed_preparation(self, error: BaseException) -> StepPrepared:
        return StepPrepared(self._turn, (), None, None, _describe(error))

    async def _review(self, info: Any) -> InputReviewed:
        review = await review_prompt(self._layers, info)
        return InputReviewed(
            self._turn,
            review.rejection,
            review.contexts,
            review.stop,
            None,
            review.rewrite,
        )

    def _failed_review(self, error: BaseException) -> InputReviewed:
        return InputReviewed(self._turn, None, (), None, _describe(error))

    # -- tools -------------------------------------------------------------------

    async def _post_tool_hooks(self, finished: ToolFinished) -> ToolFinished:
        name, arguments = self._calls.get(finished.call_id, ("", ""))
        info = ToolCallInfo(
            self._session_id,
            self._turn_id,
            finished.call_id,
            name,
            arguments,
            finished.output,
            finished.is_error,
            self._after_call(finished.call_id),
        )
        texts = []
        for layer in self._layers:
            result = await run_hook(layer, "post_tool", info)
            if result is not None and result.context:
                texts.append(result.context)
        return msgspec.structs.replace(finished, post_context="\n".join(texts) or None)

    def _failed_post_tool(
        self, finished: ToolFinished
    ) -> Callable[[BaseException], ToolFinished]:
        def fact(error: BaseException) -> ToolFinished:
            # The tool's output stands; the hook's failure fails the turn.
            return msgspec.structs.replace(
                finished, post_context=None, hook_error=_describe(error)
            )

        return fact

    def _after_call(self, call_id: str) -> RunContext[Any] | None:
        """The run as a post_tool hook sees it: with the call's own updates."""
        order = self._orders.pop(call_id, None)
        context = self._context
        if context is None or order is None:
            return context
        writer = order.context.get("shared_state_writer")
        if not isinstance(writer, SharedStateWriter):
            return context
        return dataclasses.replace(
            context, turn_id=self._turn_id, shared_state=writer.state
        )


def has_post_tool_hooks(agent: AgentDefinition) -> bool:
    """Whether a tool's output must pass the agent's post_tool hooks."""
    return any_implements(tuple(agent.middleware), "post_tool")


def tool_order(
    agent: AgentDefinition,
    session_id: str,
    turn: int,
    turn_id: str,
    call: dict[str, Any],
    *,
    reply_to: pykka.ActorRef[Any] | LoopActorRef,
    run: dict[str, Any] | None = None,
) -> RunTool:
    """The ToolExecutor's order to run ``call`` (recorded as started).

    ``run`` (``SessionState.tool_run``) adds what the call's ToolContext
    carries: the agent's name, the shared state, the deps, a writer
    through which the call updates the shared state, and a starter of its
    background jobs.
    """
    context: dict[str, Any] = {
        "session_id": session_id,
        "turn_id": turn_id,
        "turn": turn,
        "call_id": call["call_id"],
        "name": call["name"],
    }
    if run is not None:
        context["agent_name"] = run["agent_name"]
        context["shared_state"] = run["shared_state"]
        context["deps"] = run["deps"]
        context["shared_state_writer"] = SharedStateWriter(
            run["session"], session_id, turn_id, call["call_id"], run["shared_state"]
        )
    tool = agent.tools_by_name[call["name"]]
    limit = tool.max_output
    if run is not None:
        context["job_starter"] = JobStarter(
            run["session"],
            session_id,
            call=(turn_id, call["call_id"]),
            tool=call["name"],
            declared=getattr(tool, "jobs", {}),
            max_output=agent.max_tool_output if limit is None else limit,
        )
    return RunTool(
        key=turn_id,
        turn=turn,
        call_id=call["call_id"],
        tool=tool,
        arguments=call["arguments"],
        context=context,
        reply_to=reply_to,
        max_output=agent.max_tool_output if limit is None else limit,
    )


def _describe(error: BaseException) -> str:
    if isinstance(error, HookFailedError | TurnlogError):
        return str(error)
    return f"{type(error).__name__}: {error}"
