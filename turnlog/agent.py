"""The agent: instructions, a model and tools, shared by many sessions;
and the agent as a tool of another (``Agent.as_tool``)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.model import ModelProvider, is_provider
from turnlog.mcp.tools import McpServer, McpTool, session_tools
from turnlog.middleware import Middleware
from turnlog.routing import ModelRouter
from turnlog.tools import FunctionTool, ToolResult

UsageObserver = Callable[[str, dict[str, int] | None], None]
"""Called with (route, usage) after each model call, before the usage is
recorded; if it raises, the turn fails and that usage is not recorded."""

DEFAULT_ROUTE = "default"
DEFAULT_MAX_STEPS = 32


class Agent:
    """What an agent is: a name, instructions, a model and tools.

    Args:
        name: a short name, recorded with each session.
        model: the provider of model steps (a ``ScriptedModel`` in tests), or
            a ``ModelRouter`` of named routes.
        instructions: the system instructions sent with every request; they
            are not a message of the conversation.
        tools: the tools the model may call (built with ``function_tool``).
        model_route: the route new sessions start on (default: the router's
            default, or ``default`` for a single model).
        max_steps: model steps one turn may take before it fails.
        middleware: hooks around each step, in order (see
            ``turnlog.middleware``), including ``Compaction``.
        usage_observer: called with (route, usage) after each model call,
            before the usage is recorded; if it raises, the turn fails.
        mcp_servers: MCP servers whose tools the model may call too; each
            session reads their tool lists when it starts (see
            ``turnlog.McpServer``).
    """

    def __init__(
        self,
        name: str,
        *,
        model: ModelProvider | ModelRouter,
        instructions: str = "",
        tools: Sequence[FunctionTool] = (),
        model_route: str | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        middleware: Sequence[Middleware] = (),
        usage_observer: UsageObserver | None = None,
        mcp_servers: Sequence[McpServer] = (),
    ) -> None:
        if not isinstance(name, str) or not name:
            msg = "an agent needs a non-empty name"
            raise InvalidInputError(msg)
        if isinstance(model, ModelRouter):
            router = model
        elif is_provider(model):
            router = ModelRouter(model_route or DEFAULT_ROUTE, model)
        else:
            kind = type(model).__name__
            msg = (
                f"model must provide 'async respond(request, on_delta=...)', got {kind}"
            )
            raise InvalidInputError(msg)
        route = model_route or router.default
        router.provider(route)  # an unknown route is refused here
        for layer in middleware:
            if not isinstance(layer, Middleware):
                msg = f"middleware must subclass turnlog.Middleware, not {layer!r}"
                raise InvalidInputError(msg)
        if usage_observer is not None and not callable(usage_observer):
            msg = "usage_observer must be callable"
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
        self._router = router
        self._instructions = instructions
        self._tools = by_name
        self._route = route
        self._max_steps = max_steps
        self._middleware = tuple(middleware)
        self._usage_observer = usage_observer
        self._mcp_servers = _checked_servers(mcp_servers)
        self._all_tools: Mapping[str, FunctionTool | McpTool] = by_name

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
        """The provider of the agent's route."""
        return self._router.provider(self._route)

    @property
    def model_route(self) -> str:
        """The route new sessions start on."""
        return self._route

    @property
    def router(self) -> ModelRouter:
        """The named routes."""
        return self._router

    def provider_for(self, route: str) -> ModelProvider:
        """The provider of ``route`` (UsageError if there is none)."""
        return self._router.provider(route)

    @property
    def middleware(self) -> tuple[Middleware, ...]:
        """The middleware, in order."""
        return self._middleware

    @property
    def usage_observer(self) -> UsageObserver | None:
        """The usage observer, if any."""
        return self._usage_observer

    def clone(self, **changes: Any) -> Agent:
        """A copy with ``changes`` (any constructor argument), e.g. a route.

        Everything not changed is shared: tools, middleware, the usage
        observer and the routes.
        """
        arguments: dict[str, Any] = {
            "model": self._router,
            "instructions": self._instructions,
            "tools": tuple(self._tools.values()),
            "model_route": self._route,
            "max_steps": self._max_steps,
            "middleware": self._middleware,
            "usage_observer": self._usage_observer,
            "mcp_servers": self._mcp_servers,
        }
        unknown = set(changes) - set(arguments) - {"name"}
        if unknown:
            msg = f"Agent.clone got unknown arguments: {', '.join(sorted(unknown))}"
            raise InvalidInputError(msg)
        name = changes.pop("name", self._name)
        arguments.update(changes)
        return Agent(name, **arguments)

    @property
    def tools_by_name(self) -> Mapping[str, FunctionTool | McpTool]:
        """The tools, by name (with a session's MCP tools, once it started)."""
        return self._all_tools

    @property
    def mcp_servers(self) -> tuple[McpServer, ...]:
        """The MCP servers whose tools the model may call."""
        return self._mcp_servers

    def with_mcp_tools(self) -> Agent:
        """This agent as one session sees it: with its servers' tools now.

        The servers' tool lists are read (each server starts on first use),
        so a session started after a server's list changed (after
        ``McpServer.refresh()`` or a restart) sees the new list. The digest
        is the agent's own: it names the servers, not their tools.

        Raises:
            McpServerError: a server did not start, or a tool name clashes.
        """
        if not self._mcp_servers:
            return self
        bound = copy.copy(self)
        bound._all_tools = {
            **self._tools,
            **session_tools(self._mcp_servers, self._tools),
        }
        return bound

    def as_tool(
        self, name: str | None = None, description: str | None = None
    ) -> AgentTool:
        """This agent as a tool: each call runs a child session of it.

        The model calls the tool with one argument, ``input`` (the child's
        prompt); the child's final answer is the output. See
        ``turnlog.children`` for how the child is recorded and recovered.

        Args:
            name: the tool's name (default: the agent's name, which must
                then be a valid tool name).
            description: what the tool does (default: "Ask the <name> agent.").
        """
        return AgentTool(self, name=name, description=description)

    def with_child_runner(self, runner: ChildRunner) -> Agent:
        """This agent as one session runs it: its agent tools run children
        with ``runner`` (the runtime binds this; the digest is unchanged)."""
        if not any(isinstance(tool, AgentTool) for tool in self._all_tools.values()):
            return self
        bound = copy.copy(self)
        bound._all_tools = {
            name: tool.bound(runner) if isinstance(tool, AgentTool) else tool
            for name, tool in self._all_tools.items()
        }
        return bound

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
            "middleware": [layer.name for layer in self._middleware],
            "routes": sorted(self._router.routes),
        }
        if self._mcp_servers:  # absent otherwise: older digests stay as they were
            described["mcp_servers"] = [s.describe() for s in self._mcp_servers]
        encoded = msgspec.json.encode(described, order="sorted")
        return hashlib.sha256(encoded).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"Agent({self._name!r}, tools={sorted(self._tools)})"


def _checked_servers(servers: Sequence[McpServer]) -> tuple[McpServer, ...]:
    named: dict[str, McpServer] = {}
    for server in servers:
        if not isinstance(server, McpServer):
            msg = f"mcp_servers must be turnlog.McpServer objects, not {server!r}"
            raise InvalidInputError(msg)
        if server.name in named:
            msg = f"two MCP servers are named {server.name!r}: give each a name="
            raise InvalidInputError(msg)
        named[server.name] = server
    return tuple(named.values())


INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "input": {"type": "string", "description": "What to ask the agent."}
    },
    "required": ["input"],
    "additionalProperties": False,
}


class ChildRunner(Protocol):
    """Runs child sessions for agent tools (the runtime's ``ChildSessions``)."""

    def run_child(
        self, agent: Agent, context: Mapping[str, Any], text: str
    ) -> ToolResult:
        """Runs (or finds) the child of the call in ``context``; never raises."""
        ...

    def cancel_child(self, context: Mapping[str, Any]) -> None:
        """Interrupts the child of the call in ``context``, if it runs."""
        ...


def _unbound(**_: Any) -> str:  # pragma: no cover - never called: run_sync is ours
    return ""


class AgentTool(FunctionTool):
    """A tool whose call runs a child session of ``agent``.

    Build it with :meth:`turnlog.Agent.as_tool`. The model calls it with
    one argument, ``input``, the child's prompt; the call runs a session of the
    agent on the same runtime (a session of its own in the log, linked to the
    parent's call both ways, see ``turnlog.children``), and the child's final
    answer is the call's output. A child whose run fails or is interrupted
    gives an error output that names its session and why.

    The tool is declared idempotent on purpose: running the call again finds
    the child its first run started (the child's id is derived from the
    parent's session, turn and call), takes the child's recorded answer if it
    has one, and never prompts it twice. So a parent revived after a crash runs
    the call again instead of closing it as interrupted, and the child's
    finished work is not redone.

    The runtime binds each session's agent tools to itself when the session
    starts (:meth:`AgentTool.bound`); an unbound tool answers with an error.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        name: str | None = None,
        description: str | None = None,
        runner: ChildRunner | None = None,
    ) -> None:
        super().__init__(
            _unbound,
            name=name or agent.name,
            description=description or f"Ask the {agent.name} agent.",
            parameters=INPUT_SCHEMA,
            idempotent=True,
        )
        self._agent = agent
        self._runner = runner

    @property
    def agent(self) -> Agent:
        """The agent each call runs as a child session."""
        return self._agent

    @property
    def child_agent(self) -> str:
        """The child's agent name (a started call records it)."""
        return self._agent.name

    def bound(self, runner: ChildRunner) -> AgentTool:
        """This tool, running its children with ``runner``."""
        return AgentTool(
            self._agent,
            name=self.name,
            description=self.spec.description,
            runner=runner,
        )

    def run_sync(self, arguments: str, context: Mapping[str, Any]) -> ToolResult:
        """Runs the child session and returns its answer; never raises."""
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as error:
            return ToolResult(f"arguments are not valid JSON: {error}", is_error=True)
        text = parsed.get("input") if isinstance(parsed, dict) else None
        if not isinstance(text, str) or not text.strip():
            msg = f"invalid arguments for {self.name}: input: a non-empty string"
            return ToolResult(msg, is_error=True)
        if self._runner is None:
            msg = f"{self.name} not run: the tool is not bound to a runtime"
            return ToolResult(msg, is_error=True)
        return self._runner.run_child(self._agent, context, text)

    def cancel(self, context: Mapping[str, Any]) -> None:
        """Interrupts the child of a running call (the parent was interrupted)."""
        if self._runner is not None:
            self._runner.cancel_child(context)

    def __repr__(self) -> str:
        return f"AgentTool({self.name!r}, agent={self._agent.name!r})"
