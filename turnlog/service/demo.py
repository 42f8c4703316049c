"""The agent of ``turnlog serve --demo``: offline, scripted, never exhausted.

Every prompt runs one tool call (``count_words``, on the prompt's text)
and an answer that quotes the tool's result, streamed in small deltas as
a real model streams, so the stream, the audit and the approvals have
something to show on a machine with no model and no network.
"""

from __future__ import annotations

from turnlog.agent import Agent
from turnlog.domain.model import ModelRequest, ModelResponse
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.scripted import calls, reply, tool_call
from turnlog.tools import function_tool

DEMO_AGENT = "demo"
"""The demo agent's name in the service."""


@function_tool
def count_words(text: str) -> int:
    """Counts the words of ``text``."""
    return len(text.split())


class DemoModel:
    """Answers every prompt with a ``count_words`` call, then its result."""

    def __init__(self, stream_chunk: int = 8) -> None:
        self._stream_chunk = stream_chunk

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        """The next step: call the tool, or answer with what it returned."""
        last = request.items[-1] if request.items else {}
        if last.get("type") == "function_call_output":
            text = f"Your message has {last['output']} words."
            for start in range(0, len(text), self._stream_chunk):
                on_delta(text[start : start + self._stream_chunk])
            return reply(text, usage={"input_tokens": 20, "output_tokens": 8})
        prompt = next(
            (
                item.get("content")
                for item in reversed(request.items)
                if item.get("role") == "user"
            ),
            "",
        )
        words = prompt if isinstance(prompt, str) else str(prompt)
        return calls(
            tool_call("count_words", {"text": words}),
            usage={"input_tokens": 12, "output_tokens": 6},
        )


def demo_agent() -> Agent:
    """A new demo agent (its model keeps no state; one is enough)."""
    return Agent(
        DEMO_AGENT,
        model=DemoModel(),
        tools=[count_words],
        instructions="Count the words of each message with count_words.",
    )


__all__ = ["DEMO_AGENT", "DemoModel", "count_words", "demo_agent"]
