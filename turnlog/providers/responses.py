"""OpenAIResponsesProvider: model steps over the OpenAI Responses API.

``POST {base_url}/responses`` with ``stream: true``: text deltas
(``response.output_text.delta``) are streamed to the subscribers as they
arrive; completed items (``response.output_item.done``) become the step's
output; ``response.completed`` carries the usage. turnlog keeps the whole
context itself, so requests are sent with ``store: false`` and the full
input every time. ``compact()`` calls ``POST {base_url}/responses/compact``,
whose output (the user messages and an opaque compaction item) replaces
the context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx

from turnlog.domain.model import (
    Item,
    ModelRequest,
    ModelResponse,
    assistant_message,
    function_call,
)
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.providers.base import HttpModelProvider
from turnlog.providers.errors import (
    EmptyResponseError,
    MalformedStreamError,
    StreamCutError,
)
from turnlog.providers.http import DEFAULT_BASE_URL, Attempt
from turnlog.providers.responses_items import (
    compacted_item,
    responses_input,
    responses_usage,
)
from turnlog.providers.settings import RetryPolicy, Timeouts
from turnlog.providers.wire import (
    EventStream,
    cache_key,
    decode_body,
    failure_from,
    is_whole_answer,
    json_schema,
    read_events,
)


class OpenAIResponsesProvider(HttpModelProvider):
    """A model provider for the OpenAI Responses API (``/responses``).

    Args:
        model: the model name, e.g. ``gpt-5``.
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
        cache_breakpoints: send turnlog's prompt cache breakpoint (it
            closes a compacted prefix) as an explicit breakpoint
            (``prompt_cache_breakpoint: {"mode": "explicit"}``); turn it off
            for servers that do not know the field.
        prompt_cache_key: send a key derived from the session id, so the
            server routes a session's requests to the same prompt cache.
    """

    RESERVED_OPTIONS = frozenset({"model", "input", "instructions", "tools", "stream"})

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
        cache_breakpoints: bool = True,
        prompt_cache_key: bool = True,
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
        self._cache_breakpoints = cache_breakpoints
        self._prompt_cache_key = prompt_cache_key

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        """Streams one model step; text deltas go to ``on_delta``."""
        return await self._endpoint.request(
            "/responses",
            self.request_body(request),
            turn=(request.session_id, request.turn_id),
            read=self._read_stream,
            on_delta=on_delta,
        )

    async def compact(self, request: ModelRequest) -> ModelResponse:
        """Compacts the context natively; the output replaces the context."""
        body: dict[str, Any] = {
            "model": self.model,
            "input": responses_input(request.items, self._cache_breakpoints),
        }
        if request.instructions:
            body["instructions"] = request.instructions
        if self._prompt_cache_key:
            body["prompt_cache_key"] = cache_key(request.session_id)
        return await self._endpoint.request(
            "/responses/compact",
            body,
            turn=(request.session_id, request.turn_id),
            read=self._read_compacted,
        )

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of the ``/responses`` request for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            "input": responses_input(request.items, self._cache_breakpoints),
            "stream": True,
            "store": False,
        }
        if request.instructions:
            body["instructions"] = request.instructions
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    # Responses defaults to strict schemas, which plain JSON
                    # schemas of tool arguments rarely satisfy.
                    "strict": False,
                }
                for tool in request.tools
            ]
        if self._prompt_cache_key:
            body["prompt_cache_key"] = cache_key(request.session_id)
        body.update(self.options)
        if request.output_schema is not None:
            # Kept beside options' own text settings (verbosity, say).
            text = dict(body.get("text") or {})
            text["format"] = {"type": "json_schema", **json_schema(request)}
            body["text"] = text
        return body

    async def _read_stream(
        self, response: httpx.Response, attempt: Attempt
    ) -> ModelResponse:
        where = f"{self._endpoint.where}/responses"
        stream = _ResponseStream(attempt, where, self._endpoint.redact)
        if is_whole_answer(response.headers, where):
            stream.finish(decode_body(await response.aread(), where))
            result = stream.result()
            for item in result.output:  # subscribers still see the text
                if item["type"] == "message":
                    attempt.emit(item["content"])
            return result
        if await read_events(response, stream.take):
            return stream.result()
        msg = f"the stream from {where} ended before response.completed"
        raise StreamCutError(msg)

    async def _read_compacted(
        self, response: httpx.Response, attempt: Attempt
    ) -> ModelResponse:
        where = f"{self._endpoint.where}/responses/compact"
        payload = decode_body(await response.aread(), where)
        output = payload.get("output")
        if not isinstance(output, list) or not output:
            msg = f"the compaction from {where} has no output items"
            raise EmptyResponseError(msg)
        items = [compacted_item(item, where) for item in output]
        return ModelResponse(tuple(items), responses_usage(payload.get("usage")))


class _ResponseStream(EventStream):
    """The state of one streamed response, fed one event at a time."""

    def __init__(
        self, attempt: Attempt, where: str, redact: Callable[[str], str]
    ) -> None:
        super().__init__(attempt, where, redact)
        self.texts: dict[int, list[str]] = {}
        self.items: dict[int, Item] = {}
        self.calls: dict[int, dict[str, Any]] = {}
        self.final_output: list[Any] = []
        self.usage: dict[str, int] | None = None
        self.incomplete: str | None = None

    def handle(self, event: dict[str, Any]) -> bool:
        """Takes one event; True once the response is complete."""
        kind = event.get("type")
        if kind in {"response.output_text.delta", "response.refusal.delta"}:
            delta = event.get("delta")
            if not isinstance(delta, str):
                raise self._malformed(f"{kind} without a string delta")
            self.texts.setdefault(_index(event), []).append(delta)
            self.attempt.emit(delta)
        elif kind in {"response.output_item.added", "response.output_item.done"}:
            item = event.get("item")
            if not isinstance(item, dict):
                raise self._malformed(f"{kind} without an item")
            if kind == "response.output_item.done":
                self.items[_index(event)] = item
            elif item.get("type") == "function_call":
                self.calls[_index(event)] = dict(item)
        elif kind == "response.function_call_arguments.delta":
            call = self.calls.get(_index(event))
            if call is not None:
                call["arguments"] = (
                    f"{call.get('arguments') or ''}{event.get('delta', '')}"
                )
        elif kind == "response.function_call_arguments.done":
            call = self.calls.get(_index(event))
            if call is not None and isinstance(event.get("arguments"), str):
                call["arguments"] = event["arguments"]
        elif kind in ("response.completed", "response.incomplete"):
            response = event.get("response")
            if not isinstance(response, dict):
                raise self._malformed(f"{kind} without a response object")
            self.finish(response)
            return True
        elif kind == "response.failed":
            response = event.get("response")
            error = response.get("error") if isinstance(response, dict) else None
            raise failure_from(error or "the response failed", self.where, self.redact)
        elif kind == "error":
            raise failure_from(event, self.where, self.redact)
        return False

    def finish(self, response: dict[str, Any]) -> None:
        """Takes the final response object (its output, usage and status)."""
        output = response.get("output")
        self.final_output = output if isinstance(output, list) else []
        self.usage = responses_usage(response.get("usage"))
        self.note_model(response.get("model"))
        if response.get("status") == "incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            self.incomplete = str(reason or "unknown reason")

    def result(self) -> ModelResponse:
        """The step's output; EmptyResponseError if it holds nothing."""
        items: dict[int, Item] = {**self.calls, **self.items}
        if not items and self.final_output:
            items = dict(enumerate(self.final_output))
        output: list[Item] = []
        for index in sorted(set(items) | set(self.texts)):
            converted = self._convert(items.get(index), self.texts.get(index))
            if converted is not None:
                output.append(converted)
        if not output:
            reason = f" (incomplete: {self.incomplete})" if self.incomplete else ""
            msg = f"the model answered no text and no tool call{reason}"
            raise EmptyResponseError(msg)
        return ModelResponse(tuple(output), self.usage, self.model)

    def _convert(self, item: Any, deltas: list[str] | None) -> Item | None:
        if item is not None and not isinstance(item, dict):
            raise self._malformed("an output item is not an object")
        if item is None or item.get("type") == "message":
            text = None
            if item is not None:
                text = _message_text(item.get("content"))
            if not text and deltas:
                text = "".join(deltas)
            return assistant_message(text) if text else None
        if item.get("type") == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            arguments = item.get("arguments")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise self._malformed("a function_call item without call_id or name")
            return function_call(
                call_id, name, arguments if isinstance(arguments, str) else ""
            )
        return None  # reasoning and hosted-tool items are not part of turnlog's context

    def _malformed(self, what: str) -> MalformedStreamError:
        return MalformedStreamError(f"event {self.number} from {self.where}: {what}")


def _index(event: Mapping[str, Any]) -> int:
    index = event.get("output_index", 0)
    return index if isinstance(index, int) else 0


def _message_text(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        if isinstance(part, dict):
            text = (
                part.get("text")
                if part.get("type") != "refusal"
                else part.get("refusal")
            )
            if isinstance(text, str):
                texts.append(text)
    return "".join(texts)
