"""What an Agent's constructor checks of its model, middleware and tools."""

from __future__ import annotations

from collections.abc import Sequence

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.model import ModelProvider, is_provider
from turnlog.middleware import Middleware
from turnlog.routing import ModelRouter
from turnlog.tools import FunctionTool

DEFAULT_ROUTE = "default"
"""The route of an agent given one model (not a ModelRouter)."""


def router_of(
    model: ModelProvider | ModelRouter, model_route: str | None
) -> ModelRouter:
    if isinstance(model, ModelRouter):
        return model
    if is_provider(model):
        return ModelRouter(model_route or DEFAULT_ROUTE, model)
    kind = type(model).__name__
    msg = f"model must provide 'async respond(request, on_delta=...)', got {kind}"
    raise InvalidInputError(msg)


def check_middleware(middleware: Sequence[Middleware]) -> None:
    for layer in middleware:
        if not isinstance(layer, Middleware):
            msg = f"middleware must subclass turnlog.Middleware, not {layer!r}"
            raise InvalidInputError(msg)


def tools_by_name(tools: Sequence[FunctionTool]) -> dict[str, FunctionTool]:
    by_name: dict[str, FunctionTool] = {}
    for tool in tools:
        if not isinstance(tool, FunctionTool):
            msg = f"tools must be FunctionTool objects (@function_tool), not {tool!r}"
            raise InvalidInputError(msg)
        if tool.name in by_name:
            msg = f"two tools are named {tool.name!r}"
            raise InvalidInputError(msg)
        by_name[tool.name] = tool
    return by_name


def checked_flag(value: object, name: str) -> bool:
    """``value`` if it is a bool; InvalidInputError naming ``name`` if not."""
    if not isinstance(value, bool):
        msg = f"{name} must be a bool, not {type(value).__name__}"
        raise InvalidInputError(msg)
    return value
