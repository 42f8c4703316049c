"""OpenAIChatCompletionsProvider: model steps over ``/chat/completions``.

The dialect of local servers (vLLM, llama.cpp, Ollama) and of most
OpenAI-compatible services. turnlog's Responses-shaped context is
translated at this edge: the instructions become the system message,
function calls become an assistant message's ``tool_calls``, their
outputs ``tool`` messages, and developer items (hook context, peer and
system input) messages with a clear prefix. The stream's content deltas go
to the subscribers; tool-call deltas, split across chunks and several per
response, are merged by index.
"""

from __future__ import annotations

import uuid
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
from turnlog.providers.base import HttpModelProvider
from turnlog.providers.chat_messages import DeveloperRole, chat_messages
from turnlog.providers.errors import (
    EmptyResponseError,
    MalformedStreamError,
    StreamCutError,
)
from turnlog.providers.http import DEFAULT_BASE_URL, Attempt
from turnlog.providers.settings import RetryPolicy, Timeouts
from turnlog.providers.sse import ServerSentEvent
from turnlog.providers.wire import (
    EventStream,
    decode_body,
    decode_event,
    failure_from,
    is_whole_answer,
    json_schema,
    read_events,
    token_usage,
)

DONE = b"[DONE]"


class OpenAIChatCompletionsProvider(HttpModelProvider):
    """A model provider for the Chat Completions API (``/chat/completions``).

    Args:
        model: the model name as the server knows it.
        api_key: sent only in the ``Authorization`` header; None sends no
            header (local servers often need none).
        base_url: the API root (default ``https://api.openai.com/v1``).
        timeouts: connect / read / write / total timeouts.
        retry: when and how long to retry.
        headers: extra headers sent with every request.
        options: extra request fields merged into every request body
            (``temperature``, ``reasoning``, ...); the fields the provider
            fills itself are refused.
        max_connections: connections kept to the server at most.
        transport: the httpx transport requests go through (default: the
            network), e.g. ``httpx.MockTransport`` in tests.
        developer_role: the role developer items are sent with. ``user``
            (the default) suits every chat template, including those that
            allow a system message only first; ``system`` or ``developer``
            for servers that accept those anywhere. Each such message
            starts with a bracketed label saying where it came from.
        include_usage: ask for usage in the stream
            (``stream_options.include_usage``); turn off for servers that
            refuse the option.
    """

    RESERVED_OPTIONS = frozenset(
        {"model", "messages", "tools", "stream", "stream_options"}
    )

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str = DEFAULT_BASE_URL,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
        developer_role: DeveloperRole = "user",
        include_usage: bool = True,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            timeouts=timeouts,
            retry=retry,
            headers=headers,
            options=options,
            max_connections=max_connections,
            transport=transport,
        )
        if developer_role not in ("user", "system", "developer"):
            msg = (
                "developer_role must be user, system or developer, "
                f"not {developer_role!r}"
            )
            raise UsageError(msg)
        self._developer_role: DeveloperRole = developer_role
        self._include_usage = include_usage

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        """Streams one model step; content deltas go to ``on_delta``."""
        return await self._endpoint.request(
            "/chat/completions",
            self.request_body(request),
            turn=(request.session_id, request.turn_id),
            read=self._read_stream,
            on_delta=on_delta,
        )

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of the ``/chat/completions`` request for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(
                request.instructions, request.items, self._developer_role
            ),
            "stream": True,
        }
        if self._include_usage:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
        body.update(self.options)
        if request.output_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": json_schema(request),
            }
        return body

    async def _read_stream(
        self, response: httpx.Response, attempt: Attempt
    ) -> ModelResponse:
        where = f"{self._endpoint.where}/chat/completions"
        stream = _ChatStream(attempt, where, self._endpoint.redact)
        if is_whole_answer(response.headers, where):
            stream.handle(decode_body(await response.aread(), where))
            return stream.result()
        if await read_events(response, stream.take) or stream.finish_reason is not None:
            return stream.result()  # a server may end without [DONE]
        msg = f"the stream from {where} ended before the completion did"
        raise StreamCutError(msg)


class _ChatStream(EventStream):
    """The state of one streamed completion, fed one chunk at a time."""

    def __init__(
        self, attempt: Attempt, where: str, redact: Callable[[str], str]
    ) -> None:
        super().__init__(attempt, where, redact)
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, int] | None = None

    def take(self, events: list[ServerSentEvent]) -> bool:
        """Takes the events of one network chunk; True at ``[DONE]``."""
        for event in events:
            if event.data == DONE:
                return True
            self.number += 1
            self.handle(decode_event(event, self.number, self.where))
        return False

    def handle(self, chunk: dict[str, Any]) -> bool:
        """Takes one chunk (or a whole non-streamed completion).

        False: a completion ends at ``[DONE]``, which :meth:`take` sees.
        """
        error = chunk.get("error")
        if error is not None:
            raise failure_from(error, self.where, self.redact)
        self.note_model(chunk.get("model"))
        choices = chunk.get("choices")
        if choices:
            if not isinstance(choices, list):
                raise self._malformed("choices is not a list")
            for choice in choices:
                if not isinstance(choice, dict):
                    raise self._malformed("a choice is not an object")
                if choice.get("index", 0) == 0:  # turnlog asks for one choice
                    self._choice(choice)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = chat_usage(usage)
        return False

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or choice.get("message")
        if isinstance(delta, dict):
            for key in ("content", "refusal"):
                text = delta.get(key)
                if isinstance(text, str):
                    if text:
                        self.text.append(text)
                        self.attempt.emit(text)
                elif text is not None:
                    raise self._malformed(f"{key} is not a string")
            tool_calls = delta.get("tool_calls")
            if tool_calls:
                if not isinstance(tool_calls, list):
                    raise self._malformed("tool_calls is not a list")
                for position, call in enumerate(tool_calls):
                    self._merge_call(position, call)
        reason = choice.get("finish_reason")
        if isinstance(reason, str):
            self.finish_reason = reason

    def _merge_call(self, position: int, call: object) -> None:
        if not isinstance(call, dict):
            raise self._malformed("a tool call is not an object")
        index = call.get("index")
        key = index if isinstance(index, int) else position
        entry = self.calls.setdefault(key, {"id": None, "name": None, "arguments": []})
        if isinstance(call.get("id"), str) and call["id"] and entry["id"] is None:
            entry["id"] = call["id"]
        function = call.get("function")
        if not isinstance(function, dict):
            return
        name = function.get("name")
        if isinstance(name, str) and name and entry["name"] is None:
            entry["name"] = name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            entry["arguments"].append(arguments)
        elif isinstance(arguments, dict):  # some servers send the object itself
            entry["arguments"].append(msgspec.json.encode(arguments).decode())

    def result(self) -> ModelResponse:
        """The step's output; EmptyResponseError if it holds nothing."""
        output: list[Item] = []
        text = "".join(self.text)
        if text:
            output.append(assistant_message(text))
        for index in sorted(self.calls):
            entry = self.calls[index]
            if entry["name"] is None:
                raise self._malformed(f"tool call {index} has no function name")
            # Some local servers send no id; the context needs one to pair
            # the call with its output.
            call_id = entry["id"] or f"call_{uuid.uuid4().hex[:24]}"
            output.append(
                function_call(call_id, entry["name"], "".join(entry["arguments"]))
            )
        if not output:
            reason = (
                f" (finish_reason {self.finish_reason})" if self.finish_reason else ""
            )
            msg = f"the model answered no text and no tool call{reason}"
            raise EmptyResponseError(msg)
        return ModelResponse(tuple(output), self.usage, self.model)

    def _malformed(self, what: str) -> MalformedStreamError:
        return MalformedStreamError(f"chunk {self.number} from {self.where}: {what}")


def chat_usage(usage: Mapping[str, Any]) -> dict[str, int] | None:
    """Chat usage in turnlog's counters; None if it holds none."""
    return token_usage(usage, "prompt_tokens", "completion_tokens")
