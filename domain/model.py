"""What a model step asks for and what it returns, as plain data.

Context and output items follow the shape of the OpenAI Responses API
(``{"type": "message", ...}``, ``{"type": "function_call", ...}``,
``{"type": "function_call_output", ...}``) because that is the richest
common format; providers for other dialects translate at their edge.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from turnlog.domain.errors import InvalidInputError, InvariantViolation, ProviderError
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.domain.text import encodable_data

Item = dict[str, Any]
"""One context or output item (Responses-API shaped, primitives only)."""

USAGE_FIELDS = (
    "input_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "total_tokens",
)
"""Token counters that usage records may carry, all non-negative ints."""


def check_usage(usage: object) -> dict[str, int] | None:
    """Validates a usage record: known counters, non-negative ints."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        msg = f"usage must be a dict or None, not {type(usage).__name__}"
        raise InvalidInputError(msg)
    checked: dict[str, int] = {}
    for key, value in usage.items():
        if key not in USAGE_FIELDS:
            msg = f"unknown usage counter {key!r}"
            raise InvalidInputError(msg)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            msg = f"usage counter {key!r} must be a non-negative int"
            raise InvariantViolation(msg)
        checked[key] = value
    return checked


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool as the model sees it."""

    name: str
    description: str
    parameters: dict[str, Any]


class OutputSchema(msgspec.Struct, frozen=True):
    """The shape the final answer must have (the agent's ``output_type``).

    ``schema`` is a JSON schema whose root is an object (a list or a
    union is wrapped in ``{"response": ...}``); ``strict`` says whether it
    meets the rules of OpenAI's strict mode (every property required, no
    additional properties), so a provider may ask for strict decoding.
    """

    name: str
    schema: dict[str, Any]
    strict: bool = False
    description: str = ""


class ModelRequest(msgspec.Struct, frozen=True):
    """Everything a provider needs for one model step.

    ``output_schema`` is set when the agent has an ``output_type``: a
    provider asks its API for JSON of that schema where it can (it is None
    for every other agent, and a provider may ignore it: the answer is
    validated either way).
    """

    instructions: str
    items: tuple[Item, ...]
    tools: tuple[ToolSpec, ...]
    route: str
    session_id: str
    turn_id: str
    step: int
    output_schema: OutputSchema | None = None


class ModelResponse(msgspec.Struct, frozen=True):
    """A completed model step.

    ``usage`` is None when the provider did not report it: unknown usage is
    recorded as unknown, never as zero. ``model`` is the model that
    answered, as the response named it (None if it did not).
    """

    output: tuple[Item, ...]
    usage: dict[str, int] | None = None
    model: str | None = None


def model_identity(provider: object) -> tuple[str, str]:
    """(model asked for, provider name) of ``provider``; "" where unknown.

    What a trace reports as ``gen_ai.request.model`` and
    ``gen_ai.provider.name``, read from the provider's ``model`` (the model
    name it sends) and ``provider_name`` (whose it is, as OpenTelemetry
    names it: ``openai``, ``anthropic``, ...) attributes, each if it has
    it. A provider with neither is traced by its route alone.
    """
    model = getattr(provider, "model", None)
    name = getattr(provider, "provider_name", None)
    return (
        model if isinstance(model, str) else "",
        name if isinstance(name, str) else "",
    )


@runtime_checkable
class ModelProvider(Protocol):
    """A source of model steps; called on the runtime's I/O loop."""

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        """Returns the model's output for ``request`` or raises.

        A provider that streams passes each fragment of assistant text to
        ``on_delta`` as it arrives; one that does not may ignore it.
        """
        ...


def is_provider(model: object) -> bool:
    """Whether ``model`` is a ModelProvider (it has an async ``respond``)."""
    return isinstance(model, ModelProvider)


async def respond_streaming(
    provider: ModelProvider, request: ModelRequest, on_delta: DeltaSink
) -> ModelResponse:
    """``provider.respond(request, on_delta)``, or without ``on_delta`` for a
    provider written for the one-argument ``respond(request)``.

    Such a provider still works; it just streams nothing (its step's text
    reaches subscribers once the step completes).
    """
    if _takes_delta_sink(type(provider)):
        return await provider.respond(request, on_delta)
    return await provider.respond(request)


@functools.lru_cache(maxsize=256)
def _takes_delta_sink(cls: type[ModelProvider]) -> bool:
    try:
        inspect.signature(cls.respond).bind(None, None, discard_deltas)
    except (TypeError, ValueError):
        return False
    return True


def assistant_message(text: str) -> Item:
    """An assistant message output item."""
    return {"type": "message", "role": "assistant", "content": text}


def user_message(text: str) -> Item:
    """A user message context item."""
    return {"type": "message", "role": "user", "content": text}


def function_call(call_id: str, name: str, arguments: str) -> Item:
    """A function-call output item; ``arguments`` is a JSON string."""
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


MediaPart = dict[str, str]
"""An image or audio part of a tool output: ``{"type": "image" | "audio",
"mime_type": ..., "data": <base64>}``. Recorded once, in the
``ToolCallFinished`` event; each provider sends what its API accepts."""

MEDIA_TYPES = frozenset({"image", "audio"})


def function_call_output(
    call_id: str, output: str, media: Sequence[Mapping[str, str]] = ()
) -> Item:
    """The answer to a function call, as the next request lists it.

    ``media`` (image and audio parts) rides along under the item's
    ``media`` key, only when there is some.
    """
    item: Item = {"type": "function_call_output", "call_id": call_id, "output": output}
    if media:
        item["media"] = [dict(part) for part in media]
    return item


def tool_calls_in(output: Sequence[Mapping[str, Any]]) -> list[Item]:
    """The function-call items of a model step's output, in order."""
    return [dict(item) for item in output if item.get("type") == "function_call"]


def final_text(output: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of the last assistant message in ``output``, if any."""
    for item in reversed(output):
        if item.get("type") == "message" and item.get("role") == "assistant":
            content = item.get("content")
            return content if isinstance(content, str) else None
    return None


def check_response(response: object) -> ModelResponse:
    """``response`` if it is a well-formed model step, else ProviderError.

    The boundary where a provider's output enters the log: anything that is
    not primitives-only and Responses-shaped is refused here, not stored.
    """
    if not isinstance(response, ModelResponse):
        msg = f"model returned {type(response).__name__}, not a ModelResponse"
        raise ProviderError(msg)
    for index, item in enumerate(response.output):
        if not isinstance(item, dict):
            msg = f"output item {index} is {type(item).__name__}, not a dict"
            raise ProviderError(msg)
        kind = item.get("type")
        if kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                if not isinstance(item.get(key), str):
                    msg = f"function_call output item {index} needs a string {key!r}"
                    raise ProviderError(msg)
        elif kind == "message":
            if not isinstance(item.get("content"), str):
                msg = f"message output item {index} needs string content"
                raise ProviderError(msg)
        elif not isinstance(kind, str):
            msg = f"output item {index} has no type"
            raise ProviderError(msg)
    try:
        try:
            msgspec.json.encode(response.output)
        except UnicodeEncodeError:
            # Text that is not valid Unicode is not refused: it is made
            # encodable, with a note, where the output is recorded.
            msgspec.json.encode(encodable_data(response.output)[0])
    except (TypeError, msgspec.EncodeError) as error:
        msg = f"model output is not plain JSON data: {error}"
        raise ProviderError(msg) from error
    if response.model is not None and not isinstance(response.model, str):
        msg = f"model returned a model name that is not a string: {response.model!r}"
        raise ProviderError(msg)
    call_ids = [item["call_id"] for item in tool_calls_in(response.output)]
    if len(call_ids) != len(set(call_ids)):
        msg = "model output repeats a function call id"
        raise ProviderError(msg)
    if response.usage is not None:
        for key, value in response.usage.items():
            if key not in USAGE_FIELDS or not isinstance(value, int) or value < 0:
                msg = f"bad usage counter {key!r}={value!r}"
                raise ProviderError(msg)
    return response
