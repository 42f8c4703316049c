"""What the actors need from the objects users configure.

The actors depend on these protocols, not on the concrete ``Agent`` and
``FunctionTool`` classes of the public package, so that ``turnlog.actors``
imports nothing but the domain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from turnlog.domain.approval import ApprovalDecision, ApprovalRequest
from turnlog.domain.handoff import HandoffTool
from turnlog.domain.model import ModelProvider, OutputSchema, ToolSpec
from turnlog.domain.run_context import RunContext


class ToolOutcome(Protocol):
    """What running a tool produced (read-only: results are frozen)."""

    @property
    def output(self) -> str: ...

    @property
    def is_error(self) -> bool: ...


class RunnableTool(Protocol):
    """A tool the ToolExecutor can run."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> ToolSpec: ...

    @property
    def timeout(self) -> float | None: ...

    @property
    def idempotent(self) -> bool: ...

    @property
    def is_async(self) -> bool: ...

    @property
    def max_output(self) -> int | None:
        """Characters of a call's output the model sees (None: the agent's)."""
        ...

    @property
    def tool_type(self) -> str:
        """``function`` or ``extension`` (an MCP server's), as traces say."""
        ...

    @property
    def mcp_server(self) -> str:
        """The MCP server that runs it ("" for a function tool)."""
        ...

    def requires_approval(self, arguments: str) -> bool:
        """Whether this call needs a decision before it runs."""
        ...

    def run_sync(self, arguments: str, context: Mapping[str, Any]) -> ToolOutcome:
        """Runs a sync handler (on a worker thread); never raises."""
        ...

    async def run_async(
        self, arguments: str, context: Mapping[str, Any]
    ) -> ToolOutcome:
        """Runs an async handler (on the I/O loop); never raises."""
        ...


class ApprovalDecider(Protocol):
    """Decides approval requests (``turnlog.ApprovalProvider`` is one)."""

    def decide(self, request: ApprovalRequest) -> ApprovalDecision | None:
        """A decision now, or None to answer later."""
        ...


class AnswerFormat(Protocol):
    """An agent's output type as the actors use it (``turnlog.output.OutputType``)."""

    @property
    def schema(self) -> OutputSchema: ...

    def check(self, text: str) -> tuple[object, object]:
        """(typed object, JSON data) of an answer; raises OutputValidationError."""
        ...

    def load(self, data: object) -> object:
        """The typed object of recorded JSON data."""
        ...


class AgentDefinition(Protocol):
    """An agent as the actors see it."""

    @property
    def name(self) -> str: ...

    @property
    def instructions(self) -> str: ...

    @property
    def instructions_function(self) -> Callable[[RunContext[Any]], Any] | None:
        """Gives the instructions per model step, where they are not text."""
        ...

    @property
    def model(self) -> ModelProvider: ...

    @property
    def model_route(self) -> str: ...

    @property
    def tools_by_name(self) -> Mapping[str, RunnableTool]: ...

    @property
    def max_steps(self) -> int: ...

    @property
    def max_tool_output(self) -> int:
        """Characters of a tool call's output the model sees, by default."""
        ...

    @property
    def parallel_tool_calls(self) -> bool:
        """Whether a step's tool calls run together, or one after another."""
        ...

    @property
    def middleware(self) -> Sequence[Any]: ...

    @property
    def usage_observer(self) -> Callable[[str, dict[str, int] | None], None] | None: ...

    @property
    def output_format(self) -> AnswerFormat | None: ...

    @property
    def output_retries(self) -> int: ...

    def provider_for(self, route: str) -> ModelProvider:
        """The provider of a model route; UsageError if unknown."""
        ...

    def digest(self) -> str:
        """A stable digest of the configuration, recorded in the log."""
        ...

    @property
    def handoff_tools(self) -> Mapping[str, HandoffTool]:
        """The agent's handoffs, by tool name."""
        ...

    def handoff_graph(self) -> Mapping[str, AgentDefinition]:
        """Every agent reachable by handoffs, by name (this one included)."""
        ...
