"""AnthropicMessagesProvider: model steps over Anthropic's Messages API.

``POST {base_url}/v1/messages`` with ``stream: true``. The stream is a
sequence of content blocks, each opened (``content_block_start``), grown
(``content_block_delta``: text, tool input JSON, thinking, signature) and
closed; text deltas go to the subscribers as they arrive. Text blocks
become one assistant message, ``tool_use`` blocks function calls, and
thinking blocks ``anthropic_thinking`` items that the next request sends
back (see :mod:`turnlog.providers.anthropic_messages`). Usage comes in
``message_start`` and ``message_delta``, cache reads and writes included;
``message_stop`` ends the step. The key goes in ``x-api-key``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import msgspec

from turnlog.domain.errors import UsageError
from turnlog.domain.model import (
    Item,
    ModelRequest,
    ModelResponse,
    assistant_message,
    function_call,
)
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.providers.anthropic_messages import (
    EPHEMERAL,
    anthropic_messages,
    anthropic_usage,
    thinking_item,
)
from turnlog.providers.base import HttpModelProvider
from turnlog.providers.errors import (
    EmptyResponseError,
    MalformedStreamError,
    StreamCutError,
)
from turnlog.providers.http import Attempt
from turnlog.providers.settings import RetryPolicy, Timeouts
from turnlog.providers.wire import (
    EventStream,
    decode_body,
    failure_from,
    is_whole_answer,
    read_events,
)

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
MESSAGES_PATH = "/v1/messages"


class AnthropicMessagesProvider(HttpModelProvider):
    """A model provider for Anthropic's Messages API (``/v1/messages``).

    Args:
        model: the model name, e.g. ``claude-sonnet-4-5``.
        api_key: sent only in the ``x-api-key`` header.
        base_url: the API root, without ``/v1`` (default
            ``https://api.anthropic.com``, as ``ANTHROPIC_BASE_URL`` is).
        timeouts: connect / read / write / total timeouts.
        retry: when and how long to retry (529 overloaded is a 5xx).
        headers: extra headers sent with every request (``anthropic-beta``).
        options: extra request fields merged into every request body
            (``thinking``, ``temperature``, ...); the fields the provider
            fills itself are refused.
        max_connections: connections kept to the server at most.
        transport: the httpx transport requests go through (default: the
            network), e.g. ``httpx.MockTransport`` in tests.
        max_tokens: the most tokens one step may generate (the API needs it).
        cache_control: mark prompt-cache breakpoints (``cache_control:
            ephemeral``) on the system prompt (or the last tool, without
            one), on the context's breakpoint and on the conversation's
            last block; turn off for servers that do not know the field.
    """

    RESERVED_OPTIONS = frozenset(
        {"model", "messages", "system", "tools", "stream", "max_tokens"}
    )
    API_KEY_HEADER = "x-api-key"
    PROVIDER_NAME = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str = ANTHROPIC_BASE_URL,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
        max_tokens: int = 8192,
        cache_control: bool = True,
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            msg = f"max_tokens must be an int, not {type(max_tokens).__name__}"
            raise UsageError(msg)
        if max_tokens < 1:
            msg = f"max_tokens must be at least 1, not {max_tokens}"
            raise UsageError(msg)
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            timeouts=timeouts,
            retry=retry,
            headers={"anthropic-version": ANTHROPIC_VERSION, **dict(headers or {})},
            options=options,
            max_connections=max_connections,
            transport=transport,
        )
        self.max_tokens = max_tokens
        self._cache_control = cache_control

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        """Streams one model step; text deltas go to ``on_delta``."""
        answer_tool = None if request.output_schema is None else _answer_tool(request)
        return await self._endpoint.request(
            MESSAGES_PATH,
            self.request_body(request),
            turn=(request.session_id, request.turn_id),
            read=functools.partial(self._read_stream, answer_tool=answer_tool),
            on_delta=on_delta,
        )

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of the ``/v1/messages`` request for ``request``."""
        cache = self._cache_control
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": anthropic_messages(request.items, cache),
            "stream": True,
        }
        tools = [
            {
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.parameters,
            }
            for tool in request.tools
        ]
        schema = request.output_schema
        if schema is not None:
            # A typed answer is asked for as a tool the model must call (the
            # only one, or one of any when it has tools of its own); its
            # input is the answer, turned back into a message on the way in.
            tools.append(
                {
                    "name": _answer_tool(request),
                    "description": (ANSWER_TOOL_DESCRIPTION + schema.description),
                    "input_schema": schema.schema,
                }
            )
        if tools:
            body["tools"] = tools
        if request.instructions:
            system: dict[str, Any] = {"type": "text", "text": request.instructions}
            if cache:  # the cached prefix runs tools, system, messages
                system["cache_control"] = dict(EPHEMERAL)
            body["system"] = [system]
        elif tools and cache:
            tools[-1]["cache_control"] = dict(EPHEMERAL)
        body.update(self.options)
        if schema is not None:
            body["tool_choice"] = _answer_choice(request, "thinking" in body)
        return body

    async def _read_stream(
        self,
        response: httpx.Response,
        attempt: Attempt,
        answer_tool: str | None = None,
    ) -> ModelResponse:
        where = f"{self._endpoint.where}{MESSAGES_PATH}"
        stream = _MessageStream(attempt, where, self._endpoint.redact, answer_tool)
        if is_whole_answer(response.headers, where):
            stream.whole(decode_body(await response.aread(), where))
            return stream.result()
        if await read_events(response, stream.take):
            return stream.result()
        msg = f"the stream from {where} ended before message_stop"
        raise StreamCutError(msg)


class _MessageStream(EventStream):
    """The state of one streamed message, fed one event at a time."""

    def __init__(
        self,
        attempt: Attempt,
        where: str,
        redact: Callable[[str], str],
        answer_tool: str | None = None,
    ) -> None:
        super().__init__(attempt, where, redact)
        self.answer_tool = answer_tool
        self.blocks: dict[int, dict[str, Any]] = {}
        self.parts: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None

    def handle(self, event: dict[str, Any]) -> bool:
        """Takes one event; True at ``message_stop``."""
        kind = event.get("type")
        if kind == "content_block_delta":
            self._delta(_index(event), event.get("delta"))
        elif kind == "content_block_start":
            block = event.get("content_block")
            if not isinstance(block, dict):
                raise self._malformed("content_block_start without a content_block")
            index = _index(event)
            self.blocks[index] = dict(block)
            text = block.get("text")
            if block.get("type") == "text" and isinstance(text, str) and text:
                self.parts[index] = [text]
                self.attempt.emit(text)
        elif kind == "message_start":
            message = event.get("message")
            if isinstance(message, dict):
                self._usage(message.get("usage"))
                self.note_model(message.get("model"))
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self.stop_reason = delta["stop_reason"]
            self._usage(event.get("usage"))
        elif kind == "message_stop":
            return True
        elif kind == "error":
            raise failure_from(event.get("error"), self.where, self.redact)
        # ping, content_block_stop and event types added later need nothing.
        return False

    def _delta(self, index: int, delta: object) -> None:
        block = self.blocks.get(index)
        if block is None or not isinstance(delta, dict):
            raise self._malformed(f"a delta for content block {index}, never started")
        kind = delta.get("type")
        field = {
            "text_delta": "text",
            "input_json_delta": "partial_json",
            "thinking_delta": "thinking",
            "signature_delta": "signature",
        }.get(str(kind))
        if field is None:
            return  # citations and later delta types do not change turnlog's items
        piece = delta.get(field)
        if not isinstance(piece, str):
            raise self._malformed(f"{kind} without a string {field}")
        if kind == "signature_delta":
            block["signature"] = f"{block.get('signature') or ''}{piece}"
            return
        self.parts.setdefault(index, []).append(piece)
        if kind == "text_delta" or (
            kind == "input_json_delta"
            and self.answer_tool is not None
            and block.get("name") == self.answer_tool
        ):
            self.attempt.emit(piece)  # a typed answer streams as its JSON

    def _usage(self, usage: object) -> None:
        if isinstance(usage, dict):
            # message_delta's counts are cumulative: they replace the start's.
            self.usage.update({k: v for k, v in usage.items() if v is not None})

    def whole(self, message: dict[str, Any]) -> None:
        """Takes a whole, non-streamed message (a server ignored ``stream``)."""
        if message.get("type") == "error":
            raise failure_from(message.get("error"), self.where, self.redact)
        content = message.get("content")
        if not isinstance(content, list):
            raise self._malformed("a message without a content list")
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                raise self._malformed("a content block is not an object")
            self.blocks[index] = dict(block)
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                self.attempt.emit(block["text"])  # subscribers still see the text
        self._usage(message.get("usage"))
        self.note_model(message.get("model"))
        reason = message.get("stop_reason")
        self.stop_reason = reason if isinstance(reason, str) else None

    def result(self) -> ModelResponse:
        """The step's output; EmptyResponseError if it holds no text or call."""
        output: list[Item] = []
        texts: list[str] = []
        text_at: int | None = None
        for index in sorted(self.blocks):
            block, parts = self.blocks[index], self.parts.get(index)
            kind = block.get("type")
            if kind == "text":
                text = "".join(parts) if parts is not None else block.get("text")
                if isinstance(text, str) and text:
                    texts.append(text)
                    text_at = len(output) if text_at is None else text_at
            elif kind == "tool_use":
                output.append(self._call(block, parts))
            elif kind == "thinking":
                thinking = "".join(parts) if parts else block.get("thinking", "")
                output.append(thinking_item({**block, "thinking": thinking}))
            elif kind == "redacted_thinking":
                output.append(thinking_item(block))
            # server tool blocks (web search, ...) are not part of turnlog's context
        if text_at is not None:
            output.insert(text_at, assistant_message("".join(texts)))
        if self.answer_tool is not None:
            output = answer_as_message(output, self.answer_tool)
        if not any(item["type"] in ("message", "function_call") for item in output):
            reason = f" (stop_reason {self.stop_reason})" if self.stop_reason else ""
            msg = f"the model answered no text and no tool call{reason}"
            raise EmptyResponseError(msg)
        return ModelResponse(tuple(output), anthropic_usage(self.usage), self.model)

    def _call(self, block: dict[str, Any], parts: list[str] | None) -> Item:
        call_id, name = block.get("id"), block.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise self._malformed("a tool_use block without id or name")
        if parts:
            arguments = "".join(parts)
        else:  # no input deltas: the input came whole in the block (or is empty)
            arguments = msgspec.json.encode(block.get("input") or {}).decode()
        return function_call(call_id, name, arguments)

    def _malformed(self, what: str) -> MalformedStreamError:
        return MalformedStreamError(f"event {self.number} from {self.where}: {what}")


ANSWER_TOOL = "final_answer"
ANSWER_TOOL_DESCRIPTION = (
    "Give your final answer by calling this tool with it as the input. "
)


def _answer_tool(request: ModelRequest) -> str:
    """The name of the tool that carries a typed answer (clear of the agent's)."""
    names = {tool.name for tool in request.tools}
    return ANSWER_TOOL if ANSWER_TOOL not in names else f"turnlog_{ANSWER_TOOL}"


def _answer_choice(request: ModelRequest, thinking: bool) -> dict[str, Any]:
    if thinking:  # extended thinking refuses a forced tool: the model may write JSON
        return {"type": "auto"}
    if request.tools:
        return {"type": "any"}
    return {"type": "tool", "name": _answer_tool(request)}


def answer_as_message(output: list[Item], answer_tool: str) -> list[Item]:
    """``output`` with a call of the answer tool made the final answer (its
    input, as JSON text); dropped if the model called other tools too."""
    answers = [
        item
        for item in output
        if item["type"] == "function_call" and item["name"] == answer_tool
    ]
    if not answers:
        return output
    kept = [item for item in output if not any(item is a for a in answers)]
    if any(item["type"] == "function_call" for item in kept):
        return kept  # tools first: the answer comes in a later step
    return [*kept, assistant_message(answers[0]["arguments"])]


def _index(event: Mapping[str, Any]) -> int:
    index = event.get("index", 0)
    return index if isinstance(index, int) else 0
