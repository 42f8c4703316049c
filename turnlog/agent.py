"""The agent: instructions, a model and tools, shared by many sessions."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.model import ModelProvider
from turnlog.tools import FunctionTool

DEFAULT_ROUTE = "default"
DEFAULT_MAX_STEPS = 32


class Agent:
    """What an agent is: a name, instructions, a model and tools.

    Args:
        name: a short name, recorded with each session.
        model: the provider of model steps (a ``ScriptedModel`` in tests).
        instructions: the system instructions sent with every request; they
            are not a message of the conversation.
        tools: the tools the model may call (built with ``function_tool``).
        model_route: the route name recorded with each model call.
        max_steps: model steps one turn may take before it fails.
    """

    def __init__(
        self,
        name: str,
        *,
        model: ModelProvider,
        instructions: str = "",
        tools: Sequence[FunctionTool] = (),
        model_route: str = DEFAULT_ROUTE,
        max_steps: int = DEFAULT_MAX_STEPS,
    ) -> None:
        if not isinstance(name, str) or not name:
            msg = "an agent needs a non-empty name"
            raise InvalidInputError(msg)
        if not isinstance(model, ModelProvider):
            kind = type(model).__name__
            msg = f"model must provide 'async respond(request)', got {kind}"
            raise InvalidInputError(msg)
        if not isinstance(instructions, str):
            msg = "instructions must be a str"
            raise InvalidInputError(msg)
        by_name: dict[str, FunctionTool] = {}
        for tool in tools:
            if not isinstance(tool, FunctionTool):
                msg = (
                    f"tools must be FunctionTool objects (@function_tool), not {tool!r}"
                )
                raise InvalidInputError(msg)
            if tool.name in by_name:
                msg = f"two tools are named {tool.name!r}"
                raise InvalidInputError(msg)
            by_name[tool.name] = tool
        if not isinstance(max_steps, int) or max_steps < 1:
            msg = "max_steps must be a positive int"
            raise InvalidInputError(msg)
        self._name = name
        self._model = model
        self._instructions = instructions
        self._tools = by_name
        self._route = model_route
        self._max_steps = max_steps

    @property
    def name(self) -> str:
        """The agent's name."""
        return self._name

    @property
    def instructions(self) -> str:
        """The system instructions."""
        return self._instructions

    @property
    def model(self) -> ModelProvider:
        """The model provider."""
        return self._model

    @property
    def model_route(self) -> str:
        """The route recorded with model calls."""
        return self._route

    @property
    def tools_by_name(self) -> Mapping[str, FunctionTool]:
        """The tools, by name."""
        return self._tools

    @property
    def max_steps(self) -> int:
        """Model steps one turn may take."""
        return self._max_steps

    def digest(self) -> str:
        """A digest of everything that shapes the agent's behaviour but code."""
        described: dict[str, Any] = {
            "name": self._name,
            "instructions": self._instructions,
            "route": self._route,
            "max_steps": self._max_steps,
            "tools": [msgspec.to_builtins(t.spec) for t in self._tools.values()],
        }
        encoded = msgspec.json.encode(described, order="sorted")
        return hashlib.sha256(encoded).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"Agent({self._name!r}, tools={sorted(self._tools)})"
