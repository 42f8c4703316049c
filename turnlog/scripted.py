"""ScriptedModel: a model that plays back given responses, for tests and demos.

It returns its responses in order and records every request it received,
so a test can check both what the session did and what the model saw. A
response may be an exception (raised as that step's failure) or a callable
taking the request (to answer from what the model was sent).
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Protocol, TypeAlias

import msgspec
import pydantic

from turnlog.domain.errors import ProviderError
from turnlog.domain.model import (
    Item,
    ModelRequest,
    ModelResponse,
    assistant_message,
    final_text,
    function_call,
)
from turnlog.domain.streaming import DeltaSink, discard_deltas


class DataclassAnswer(Protocol):
    """A dataclass instance (a typed answer)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


TypedAnswer: TypeAlias = (
    dict[str, Any]
    | list[object]
    | msgspec.Struct
    | pydantic.BaseModel
    | DataclassAnswer
)
"""A typed answer a script plays as its JSON text."""

Scripted: TypeAlias = (
    "ModelResponse | str | BaseException | TypedAnswer"
    " | Callable[[ModelRequest], Scripted]"
)
"""One scripted answer: a response, a text, an error to raise, a typed
answer (a dict, a list, a dataclass, a msgspec Struct or a pydantic model,
played as its JSON text), or a function of the request that returns one
of these."""


def reply(text: str, *, usage: Mapping[str, int] | None = None) -> ModelResponse:
    """A final answer: one assistant message."""
    return ModelResponse((assistant_message(text),), _usage(usage))


def tool_call(
    name: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None
) -> Item:
    """A function-call output item (arguments given as a dict)."""
    encoded = msgspec.json.encode(dict(arguments or {})).decode()
    # Unique across processes: a session continued elsewhere must not see
    # the same call id twice in its context.
    return function_call(call_id or f"call_{uuid.uuid4().hex[:12]}", name, encoded)


def calls(
    *items: Item, text: str | None = None, usage: Mapping[str, int] | None = None
) -> ModelResponse:
    """A step that calls tools (optionally with a text preamble)."""
    output: list[Item] = [assistant_message(text)] if text is not None else []
    output.extend(items)
    return ModelResponse(tuple(output), _usage(usage))


def _usage(usage: Mapping[str, int] | None) -> dict[str, int] | None:
    return None if usage is None else dict(usage)


DEFAULT_USAGE = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}


class ScriptedModel:
    """Returns the scripted responses in order; records every request.

    Args:
        responses: what each model step returns; a ``str`` is a final
            answer, a typed answer (dict, list, dataclass, msgspec Struct,
            pydantic model) is a final answer as JSON text, an exception is
            raised as the step's failure, a callable gets the request and
            returns any of these.
        usage: usage reported with ``str`` responses (None: unreported).
        stream_chunk: if set, the answer's text is also streamed in
            fragments of this many characters (transient deltas).
        model: the name it answers as (traces report it as the model asked
            for and the model that answered).
    """

    provider_name = "turnlog.scripted"
    """Whose model this is, as traces report it: no provider's, turnlog's script."""

    def __init__(
        self,
        responses: Iterable[Scripted] = (),
        *,
        usage: Mapping[str, int] | None = DEFAULT_USAGE,
        stream_chunk: int | None = None,
        model: str = "scripted",
    ) -> None:
        self.model = model
        self._script: deque[Scripted] = deque(responses)
        self._usage = None if usage is None else dict(usage)
        self._stream_chunk = stream_chunk
        self._lock = threading.Lock()
        self.requests: list[ModelRequest] = []

    def add(self, *responses: Scripted) -> None:
        """Appends responses to the script."""
        with self._lock:
            self._script.extend(responses)

    @property
    def remaining(self) -> int:
        """How many scripted responses are left."""
        with self._lock:
            return len(self._script)

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        """The next scripted response."""
        with self._lock:
            self.requests.append(request)
            if not self._script:
                msg = (
                    f"the script is exhausted after {len(self.requests) - 1} responses"
                )
                raise ProviderError(msg)
            scripted = self._script.popleft()
        response = self._resolve(scripted, request)
        if response.model is None:
            response = msgspec.structs.replace(response, model=self.model)
        if self._stream_chunk:
            # Stream the answer's text in fragments, as a real provider would.
            text = final_text(response.output) or ""
            for start in range(0, len(text), self._stream_chunk):
                on_delta(text[start : start + self._stream_chunk])
        return response

    def _resolve(self, scripted: Scripted, request: ModelRequest) -> ModelResponse:
        if isinstance(scripted, BaseException):
            raise scripted
        if isinstance(scripted, str):
            return ModelResponse((assistant_message(scripted),), self._usage)
        if isinstance(scripted, ModelResponse):
            return scripted
        if callable(scripted):
            return self._resolve(scripted(request), request)
        text = typed_answer_text(scripted)
        if text is not None:
            return ModelResponse((assistant_message(text),), self._usage)
        msg = f"cannot play back {scripted!r}"
        raise ProviderError(msg)


def typed_answer_text(value: object) -> str | None:
    """The JSON text of a typed answer (None if ``value`` is not one)."""
    dump = getattr(value, "model_dump_json", None)  # a pydantic model
    if callable(dump):
        return str(dump())
    if isinstance(value, dict | list | msgspec.Struct) or dataclasses.is_dataclass(
        value
    ):
        try:
            return msgspec.json.encode(value).decode()
        except (TypeError, msgspec.EncodeError):
            return None
    return None
