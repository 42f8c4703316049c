"""function_tool: schemas from type hints, validation before the call,
errors as outputs, and the options the executor and broker read."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from turnlog import (
    FunctionTool,
    InvalidInputError,
    ToolContext,
    ToolResult,
    function_tool,
)

CONTEXT = {"session_id": "s", "turn_id": "t", "call_id": "c"}


def test_the_schema_comes_from_the_type_hints_and_the_docstring() -> None:
    @function_tool
    def search(
        query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast"
    ) -> str:
        """Searches the notes."""
        return query

    spec = search.spec
    assert (spec.name, spec.description) == ("search", "Searches the notes.")
    assert spec.parameters["required"] == ["query"]
    assert spec.parameters["properties"]["limit"]["type"] == "integer"
    assert spec.parameters["properties"]["mode"]["enum"] == ["fast", "deep"]
    assert spec.parameters["additionalProperties"] is False


def test_arguments_are_validated_and_converted_before_the_call() -> None:
    seen: list[tuple[str, int]] = []

    @function_tool
    def repeat(text: str, times: int) -> str:
        """Repeats text."""
        seen.append((text, times))
        return text * times

    assert repeat.run_sync('{"text": "ab", "times": 2}', CONTEXT) == ToolResult("abab")
    bad = repeat.run_sync('{"text": "ab"}', CONTEXT)
    extra = repeat.run_sync('{"text": "ab", "times": 1, "sudo": true}', CONTEXT)
    assert bad.is_error
    assert "times: Field required" in bad.output
    assert extra.is_error
    assert "sudo: Extra inputs are not permitted" in extra.output
    assert seen == [("ab", 2)]


def test_an_explicit_schema_replaces_the_hints() -> None:
    schema = {"type": "object", "properties": {}, "required": []}
    tool = FunctionTool(lambda: "ok", name="noop", parameters=schema)
    assert tool.spec.parameters == schema
    assert tool.run_sync("{}", CONTEXT).output == "ok"
    assert tool.run_sync("[1]", CONTEXT).is_error
    with pytest.raises(InvalidInputError):
        FunctionTool(lambda: "ok", name="bad", parameters={"type": "array"})


def test_async_handlers_and_the_context_parameter() -> None:
    @function_tool
    async def where(context: ToolContext) -> dict[str, str]:
        """Says where it runs."""
        await asyncio.sleep(0)
        return {"session": context.session_id, "call": context.call_id}

    assert where.is_async
    assert "context" not in where.spec.parameters["properties"]
    result = asyncio.run(where.run_async("{}", CONTEXT))
    assert result == ToolResult('{"session":"s","call":"c"}')


def test_a_raising_handler_is_an_error_output_never_an_exception() -> None:
    @function_tool
    def fail() -> str:
        """Fails."""
        raise KeyError("missing")

    assert fail.run_sync("{}", CONTEXT) == ToolResult(
        "fail failed: KeyError: 'missing'", True
    )


def test_options_are_checked_at_the_boundary() -> None:
    @function_tool(needs_approval=lambda args: args["amount"] > 100, timeout=2.5)
    def pay(amount: int) -> str:
        """Pays."""
        return "paid"

    assert pay.timeout == 2.5
    assert pay.requires_approval('{"amount": 500}')
    assert not pay.requires_approval('{"amount": 5}')
    assert pay.requires_approval("not json")  # cannot judge: ask
    with pytest.raises(InvalidInputError, match="timeout"):
        function_tool(timeout=0)(lambda: None)
    with pytest.raises(InvalidInputError, match="needs_approval"):
        function_tool(needs_approval="yes")(lambda: None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="name"):
        FunctionTool(lambda: None, name="has space")

    def spread(*values: int) -> None:
        """Takes *args."""

    with pytest.raises(InvalidInputError, match=r"\*args"):
        function_tool(spread)
