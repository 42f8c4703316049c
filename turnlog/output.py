"""An agent's ``output_type``: the JSON schema it asks for and its validator.

``OutputType(annotation)`` accepts what users type answers with: a
pydantic model, a dataclass, a TypedDict, a msgspec ``Struct``, a list or
union of them (or any type pydantic's ``TypeAdapter`` takes). msgspec
types are validated by msgspec (``msgspec.json.schema`` and its decoder);
everything else by a pydantic ``TypeAdapter``. One type may not mix the
two.

The model is asked for a JSON object: a root that is not an object with
properties (a list, a union, a scalar) is wrapped as ``{"response": ...}``,
and the wrapper is taken off again when the answer is checked. The schema
is made strict-compatible where it can be (every object closed to extra
properties and every property required, as OpenAI's strict mode wants);
where it cannot (a ``dict[str, X]`` field, say) ``strict`` is False.

What is recorded is the validated answer as JSON data (``check``); the
typed object is rebuilt from it with ``load``, in this process or another.
"""

from __future__ import annotations

import copy
import re
import types
import typing
from collections.abc import Callable
from typing import Any

import msgspec
import pydantic

from turnlog.domain.errors import InvalidInputError, OutputValidationError
from turnlog.domain.model import OutputSchema

WRAPPER = "response"
"""The property a non-object answer is wrapped in."""

MAX_ERRORS = 5
"""Validation errors named in one rejection (the rest are counted)."""

_NOT_STRICT = frozenset(
    {
        "patternProperties",
        "prefixItems",
        "if",
        "then",
        "else",
        "not",
        "dependentRequired",
    }
)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n\s*```$", re.DOTALL)


class OutputType:
    """An ``output_type`` made ready: its schema, a validator, a loader.

    Args:
        annotation: the type of the answer.

    Raises:
        InvalidInputError: no JSON schema can be made for ``annotation``.
    """

    def __init__(self, annotation: object) -> None:
        self.annotation = annotation
        # pydantic validates what it knows; msgspec its own Structs, and
        # what pydantic refuses (a typing.TypedDict before Python 3.12).
        backends: tuple[Callable[[Any], Backend], ...] = (_msgspec_backend,)
        if not _mentions_struct(annotation):
            backends = (_pydantic_backend, _msgspec_backend)
        failures: list[str] = []
        for backend in backends:
            try:
                schema, self._decode, self._dump = backend(annotation)
                break
            except (TypeError, ValueError, pydantic.PydanticUserError) as error:
                failures.append(str(error).split("\n", 1)[0])
        else:
            msg = f"output_type {annotation!r} has no JSON schema: {failures[0]}"
            raise InvalidInputError(msg)
        self._validation_errors: tuple[type[Exception], ...] = (
            msgspec.ValidationError,
            pydantic.ValidationError,
        )
        schema = _inline_root(schema)
        self.wrapped = not (
            schema.get("type") == "object"
            and isinstance(schema.get("properties"), dict)
        )
        if self.wrapped:
            schema = _wrap(schema)
        strict = _strict_schema(schema)
        self.schema = OutputSchema(
            name=_schema_name(annotation),
            schema=strict if strict is not None else schema,
            strict=strict is not None,
            description=str(schema.get("description", "")),
        )

    def check(self, text: str) -> tuple[object, object]:
        """The answer ``text`` validated: (typed object, JSON data to record).

        Raises:
            OutputValidationError: not JSON, or not of the type; the message
                names the field (``answer.items[0].price: ...``).
        """
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced is not None:
            body = fenced.group(1).strip()
        try:
            data = msgspec.json.decode(body)
        except msgspec.DecodeError as error:
            msg = f"answer: not valid JSON ({error})"
            raise OutputValidationError(msg) from None
        if self.wrapped and isinstance(data, dict) and set(data) == {WRAPPER}:
            data = data[WRAPPER]
        typed = self.load(data)
        return typed, self._dump(typed)

    def load(self, data: object) -> object:
        """The typed object of recorded JSON data (OutputValidationError if
        it is not of the type)."""
        try:
            return self._decode(msgspec.json.encode(data))
        except self._validation_errors as error:
            raise OutputValidationError(_describe(error)) from None

    def describe(self) -> dict[str, Any]:
        """What the agent's digest records of it."""
        return {"name": self.schema.name, "schema": self.schema.schema}


# -- the type ------------------------------------------------------------------

Backend = tuple[dict[str, Any], Callable[[bytes], Any], Callable[[Any], Any]]
"""(JSON schema, decode JSON bytes to the typed object, typed object to data)."""


def _pydantic_backend(annotation: Any) -> Backend:
    adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(annotation)
    schema = adapter.json_schema()
    return (
        schema,
        adapter.validate_json,
        lambda value: adapter.dump_python(value, mode="json"),
    )


def _msgspec_backend(annotation: Any) -> Backend:
    schema = msgspec.json.schema(annotation)
    return schema, msgspec.json.Decoder(annotation).decode, msgspec.to_builtins


def _mentions_struct(annotation: Any) -> bool:
    """Whether ``annotation`` is, or holds, a msgspec Struct (at any depth)."""
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return True
    return any(_mentions_struct(arg) for arg in typing.get_args(annotation))


def _schema_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is None and isinstance(annotation, type):
        name = annotation.__name__
    elif origin is list and typing.get_args(annotation):
        name = f"list_of_{_schema_name(typing.get_args(annotation)[0])}"
    elif origin in (typing.Union, types.UnionType):
        name = "_or_".join(_schema_name(arg) for arg in typing.get_args(annotation))
    else:
        name = "answer"
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "answer"


# -- the schema ----------------------------------------------------------------


def _inline_root(schema: dict[str, Any]) -> dict[str, Any]:
    """A root that is only a ``$ref`` (msgspec's way) made the definition."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return schema
    defs = dict(schema.get("$defs", {}))
    root = dict(defs.get(ref.removeprefix("#/$defs/"), {}))
    if not root:
        return schema
    if defs:
        root["$defs"] = defs
    return root


def _wrap(schema: dict[str, Any]) -> dict[str, Any]:
    inner = dict(schema)
    defs = inner.pop("$defs", None)
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {WRAPPER: inner},
        "required": [WRAPPER],
        "additionalProperties": False,
    }
    if defs:
        wrapped["$defs"] = defs
    return wrapped


def _strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` made strict-compatible, or None if it cannot be."""
    defs = schema.get("$defs", {})
    try:
        strict = _unravel(copy.deepcopy(schema), defs, ())
    except RecursionError:
        return None
    return strict if _make_strict(strict) else None


def _unravel(node: Any, defs: dict[str, Any], expanding: tuple[str, ...]) -> Any:
    """``node`` with every ``$ref`` that has sibling keys (a described field)
    replaced by its definition: strict mode takes a ``$ref`` only alone."""
    if isinstance(node, list):
        return [_unravel(child, defs, expanding) for child in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        name = ref.removeprefix("#/$defs/")
        if name in expanding or name not in defs:
            raise RecursionError(ref)  # a recursive type: left non-strict
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        merged = {**copy.deepcopy(defs[name]), **siblings}
        return _unravel(merged, defs, (*expanding, name))
    return {key: _unravel(value, defs, expanding) for key, value in node.items()}


def _make_strict(node: Any) -> bool:
    if isinstance(node, list):
        return all(_make_strict(child) for child in node)
    if not isinstance(node, dict):
        return True
    if _NOT_STRICT & node.keys():
        return False
    node.pop("default", None)  # strict mode has no defaults; validation fills them
    if node.get("type") == "object" or "properties" in node:
        extra = node.get("additionalProperties", False)
        if extra is not False:
            return False
        properties = node.setdefault("properties", {})
        node["additionalProperties"] = False
        node["required"] = list(properties)
    for key, child in node.items():
        if key in ("properties", "$defs"):
            if not all(_make_strict(sub) for sub in child.values()):
                return False
        elif not _make_strict(child):
            return False
    return True


# -- errors --------------------------------------------------------------------


def _describe(error: Exception) -> str:
    if isinstance(error, pydantic.ValidationError):
        problems = error.errors(include_url=False)
        named = [f"{_path(p['loc'])}: {p['msg']}" for p in problems[:MAX_ERRORS]]
        more = len(problems) - len(named)
    else:
        text = str(error)
        where = re.search(r" - at `\$(.*)`$", text)
        if where is None:
            named = [f"answer: {text}"]
        else:
            named = [f"answer{where.group(1)}: {text[: where.start()]}"]
        more = 0
    suffix = f" (and {more} more)" if more > 0 else ""
    return "; ".join(named) + suffix


def _path(location: tuple[int | str, ...]) -> str:
    path = "answer"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path
