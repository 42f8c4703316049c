"""Agents for the service tests; importable by name in server subprocesses.

Their models decide from the request alone (how many tool outputs the
turn has so far), so a session continued in another process, with a new
agent object, goes on exactly where it was.
"""

from __future__ import annotations

from turnlog import Agent, function_tool
from turnlog.domain.model import ModelRequest, ModelResponse
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.scripted import calls, reply, tool_call


@function_tool
def count_words(text: str) -> int:
    """Counts words."""
    return len(text.split())


@function_tool(needs_approval=True)
def publish(text: str) -> str:
    """Publishes (needs approval)."""
    return f"published {text!r}"


class TwoToolModel:
    """count_words, then publish (approval), then an answer, streamed."""

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        outputs = 0
        for item in reversed(request.items):
            if item.get("role") == "user":
                break
            if item.get("type") == "function_call_output":
                outputs += 1
        if outputs == 0:
            return calls(tool_call("count_words", {"text": "one two three"}))
        if outputs == 1:
            return calls(tool_call("publish", {"text": "hello"}))
        text = "All done: counted and published."
        for start in range(0, len(text), 5):
            on_delta(text[start : start + 5])
        return reply(text)


def approval_agent() -> Agent:
    """An agent whose every turn waits for one approval."""
    return Agent("publisher", model=TwoToolModel(), tools=[count_words, publish])


class ChatModel:
    """Answers every prompt with streamed text and no tool call."""

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        text = "Hello there, this is a streamed answer."
        for start in range(0, len(text), 6):
            on_delta(text[start : start + 6])
        return reply(text)


def chat_agent() -> Agent:
    """An agent that only talks."""
    return Agent("chat", model=ChatModel())


class DelegatingModel:
    """Asks the ``research`` tool (a child agent) once, then answers."""

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        if any(item.get("type") == "function_call_output" for item in request.items):
            return reply("The researcher is done.")
        return calls(tool_call("research", {"input": "publish it"}, call_id="ask"))


def delegating_agent() -> Agent:
    """An agent whose ``research`` tool runs the publisher as a child session
    (whose turn waits for one approval)."""
    return Agent(
        "lead",
        model=DelegatingModel(),
        tools=[approval_agent().as_tool(name="research")],
    )
