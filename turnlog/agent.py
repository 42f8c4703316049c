"""The agent: instructions, a model and tools, shared by many sessions;
and the agent as a tool of another (``Agent.as_tool``)."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from turnlog.actors.instructions import function_name
from turnlog.agent_parts.as_tool import AgentTool, ChildRunner
from turnlog.agent_parts.checks import (
    check_middleware,
    checked_flag,
    router_of,
    tools_by_name,
)
from turnlog.domain.deps_check import deps_checker
from turnlog.domain.errors import InvalidInputError
from turnlog.domain.handoff import HandoffTool, handoff_tool_name
from turnlog.domain.handoff_graph import handoff_target_name, resolve_graph
from turnlog.domain.model import ModelProvider
from turnlog.domain.run_context import InstructionsFunction
from turnlog.domain.tool_output import DEFAULT_MAX_TOOL_OUTPUT, checked_limit
from turnlog.mcp.tools import McpServer, McpTool, session_tools
from turnlog.middleware import Middleware
from turnlog.output import OutputType
from turnlog.routing import ModelRouter
from turnlog.tools import FunctionTool

UsageObserver = Callable[[str, dict[str, int] | None], None]
"""Called with (route, usage) after each model call, before the usage is
recorded; if it raises, the turn fails and that usage is not recorded."""

DEFAULT_MAX_STEPS = 32


class Agent:
    """What an agent is: a name, instructions, a model and tools.

    Args:
        name: a short name, recorded with each session.
        model: the provider of model steps (a ``ScriptedModel`` in tests), or
            a ``ModelRouter`` of named routes.
        instructions: the system instructions sent with every request; they
            are not a message of the conversation. Or a function (plain or
            ``async``) of a :class:`~turnlog.RunContext` that gives them,
            evaluated before each model step; what it gave is recorded
            with the step (``InstructionsEvaluated``), and the digest names
            the function by ``module.qualname``.
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
        handoffs: agents the model may hand the conversation to, each as
            an ``Agent`` or by name (an agent reachable from the session's
            agent through handoffs: so two agents may hand off to each
            other); the model sees a tool ``transfer_to_<name>`` per target
            (see ``turnlog.domain.handoff_graph``).
        handoff_description: what this agent is for, as the description
            of the tool that hands off to it.
        deps_type: the type of the dependencies given to its sessions
            (``deps=``): anything else is refused with InvalidInputError. A
            class, a generic alias (its origin is checked), a union, or a
            ``@runtime_checkable`` Protocol; ``Any`` or None checks nothing.
        output_type: the type of the final answer (a pydantic model, a
            dataclass, a TypedDict, a msgspec Struct, a list or union of
            them); ``str`` (the default) is free text. The model is asked
            for JSON of its schema, the answer is validated, and
            ``result.output`` is the typed object (see ``turnlog.output``).
        output_retries: how many refused final answers (invalid output, or
            a ``final_answer`` hook's rejection) go back to the model with
            the reason before the turn fails with OutputValidationError.
        max_tool_output: characters of one tool call's output the model
            sees (and the log keeps), for tools that set no ``max_output``
            of their own (None: the default, 30,000); the rest is cut with
            a marker and not kept.
        parallel_tool_calls: whether the tool calls of one model step run
            at the same time (the default) or one after another, in the
            order the model gave them, each once the one before it has its
            output. A steer skips every call that has not started, so with
            False it skips the calls after the one running (README,
            "Steering"). Not sent to the model.
    """

    def __init__(
        self,
        name: str,
        *,
        model: ModelProvider | ModelRouter,
        instructions: str | InstructionsFunction = "",
        tools: Sequence[FunctionTool] = (),
        model_route: str | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        middleware: Sequence[Middleware] = (),
        usage_observer: UsageObserver | None = None,
        mcp_servers: Sequence[McpServer] = (),
        handoffs: Sequence[Agent | str] = (),
        handoff_description: str = "",
        deps_type: object = None,
        output_type: object = str,
        output_retries: int = 1,
        max_tool_output: int | None = DEFAULT_MAX_TOOL_OUTPUT,
        parallel_tool_calls: bool = True,
    ) -> None:
        if not isinstance(name, str) or not name:
            msg = "an agent needs a non-empty name"
            raise InvalidInputError(msg)
        router = router_of(model, model_route)
        route = model_route or router.default
        router.provider(route)  # an unknown route is refused here
        check_middleware(middleware)
        if usage_observer is not None and not callable(usage_observer):
            msg = "usage_observer must be callable"
            raise InvalidInputError(msg)
        function: InstructionsFunction | None = None
        if callable(instructions):
            function, instructions = instructions, ""
        elif not isinstance(instructions, str):
            msg = "instructions must be a str or a function of the RunContext"
            raise InvalidInputError(msg)
        by_name = tools_by_name(tools)
        if not isinstance(max_steps, int) or max_steps < 1:
            msg = "max_steps must be a positive int"
            raise InvalidInputError(msg)
        if (
            isinstance(output_retries, bool)
            or not isinstance(output_retries, int)
            or output_retries < 0
        ):
            msg = "output_retries must be an int, 0 or more"
            raise InvalidInputError(msg)
        self._output_type = output_type
        free_text = output_type is str or output_type is None
        self._output = None if free_text else OutputType(output_type)
        self._output_retries = output_retries
        self._max_tool_output = checked_limit(max_tool_output, "max_tool_output")
        self._parallel_tool_calls = checked_flag(
            parallel_tool_calls, "parallel_tool_calls"
        )
        self._name = name
        self._router = router
        self._instructions = instructions
        self._instructions_function = function
        self._deps_type = deps_type
        self._deps_check = deps_checker(deps_type)
        self._tools = by_name
        self._route = route
        self._max_steps = max_steps
        self._middleware = tuple(middleware)
        self._usage_observer = usage_observer
        self._mcp_servers = _checked_servers(mcp_servers)
        self._all_tools: Mapping[str, FunctionTool | McpTool] = by_name
        self._handoffs = checked_handoffs(name, handoffs, by_name)
        if not isinstance(handoff_description, str):
            msg = "handoff_description must be a str"
            raise InvalidInputError(msg)
        self._handoff_description = handoff_description
        # Set on the copies a session runs (Agent.bound_to).
        self._graph: Mapping[str, Agent] | None = None
        self._handoff_tools: Mapping[str, HandoffTool] = {}
        # The last digest, with the router's routes it was made of: a session
        # opened here checks it several times, and a router can still gain
        # routes after the agent is made (the rest is fixed at construction).
        self._digest_memo: tuple[list[str], str] | None = None

    @property
    def name(self) -> str:
        """The agent's name."""
        return self._name

    @property
    def instructions(self) -> str:
        """The system instructions ("" where a function gives them)."""
        return self._instructions

    @property
    def instructions_function(self) -> InstructionsFunction | None:
        """The function that gives the instructions per step, if any."""
        return self._instructions_function

    @property
    def deps_type(self) -> object:
        """The type sessions' dependencies must have (None: any)."""
        return self._deps_type

    def check_deps(self, deps: object) -> None:
        """Raises InvalidInputError if ``deps`` is not of ``deps_type``.

        None passes: a session may run without dependencies.
        """
        if deps is not None:
            self._deps_check(deps)

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
            "instructions": self._instructions_function or self._instructions,
            "tools": tuple(self._tools.values()),
            "model_route": self._route,
            "max_steps": self._max_steps,
            "middleware": self._middleware,
            "usage_observer": self._usage_observer,
            "mcp_servers": self._mcp_servers,
            "handoffs": self._handoffs,
            "handoff_description": self._handoff_description,
            "deps_type": self._deps_type,
            "output_type": self._output_type,
            "output_retries": self._output_retries,
            "max_tool_output": self._max_tool_output,
            "parallel_tool_calls": self._parallel_tool_calls,
        }
        unknown = set(changes) - set(arguments) - {"name"}
        if unknown:
            msg = f"Agent.clone got unknown arguments: {', '.join(sorted(unknown))}"
            raise InvalidInputError(msg)
        name = changes.pop("name", self._name)
        arguments.update(changes)
        return Agent(name, **arguments)

    @property
    def parallel_tool_calls(self) -> bool:
        """Whether a step's tool calls run together, or one after another."""
        return self._parallel_tool_calls

    @property
    def max_tool_output(self) -> int:
        """Characters of a tool call's output the model sees, unless the tool says."""
        return self._max_tool_output or DEFAULT_MAX_TOOL_OUTPUT

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
    ) -> AgentTool[Agent]:
        """This agent as a tool: each call runs a child session of it.

        The model calls the tool with one argument, ``input`` (the child's
        prompt); the child's final answer is the output. See
        ``turnlog.hosting.children`` for how the child is recorded and recovered.

        Args:
            name: the tool's name (default: the agent's name, which must
                then be a valid tool name).
            description: what the tool does (default: "Ask the <name> agent.").
        """
        return AgentTool(self, name=name, description=description)

    def with_child_runner(self, runner: ChildRunner[Agent]) -> Agent:
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
    def output_type(self) -> object:
        """The type of the final answer (``str``: free text)."""
        return self._output_type

    @property
    def output_format(self) -> OutputType | None:
        """The output type's schema and validator (None for free text)."""
        return self._output

    @property
    def output_retries(self) -> int:
        """Refused final answers that go back to the model before the turn fails."""
        return self._output_retries

    @property
    def max_steps(self) -> int:
        """Model steps one turn may take."""
        return self._max_steps

    def digest(self) -> str:
        """A digest of everything that shapes the agent's behaviour but code."""
        routes = sorted(self._router.routes)
        memo = self._digest_memo
        if memo is not None and memo[0] == routes:
            return memo[1]
        described: dict[str, Any] = {
            "name": self._name,
            "instructions": self._instructions,
            "route": self._route,
            "max_steps": self._max_steps,
            "tools": [msgspec.to_builtins(t.spec) for t in self._tools.values()],
            "middleware": [layer.name for layer in self._middleware],
            "routes": routes,
        }
        if self._mcp_servers:  # absent otherwise: older digests stay as they were
            described["mcp_servers"] = [s.describe() for s in self._mcp_servers]
        if self._handoffs:  # the same
            described["handoffs"] = [handoff_target_name(t) for t in self._handoffs]
        if self._instructions_function is not None:  # likewise
            described["instructions_function"] = function_name(
                self._instructions_function
            )
        if self._output is not None:  # likewise
            described["output"] = self._output.describe()
        if self._output_retries != 1:
            described["output_retries"] = self._output_retries
        if self.max_tool_output != DEFAULT_MAX_TOOL_OUTPUT:  # likewise
            described["max_tool_output"] = self.max_tool_output
        if not self._parallel_tool_calls:  # likewise
            described["parallel_tool_calls"] = False
        encoded = msgspec.json.encode(described, order="sorted")
        digest = hashlib.sha256(encoded).hexdigest()[:16]
        self._digest_memo = (routes, digest)
        return digest

    @property
    def handoffs(self) -> tuple[Agent | str, ...]:
        """The agents the model may hand off to (objects, or names)."""
        return self._handoffs

    @property
    def handoff_description(self) -> str:
        """The description of the tool that hands off to this agent."""
        return self._handoff_description

    @property
    def handoff_tools(self) -> Mapping[str, HandoffTool]:
        """The handoffs as the model sees them, by tool name (resolved
        through the handoff graph of the session's agent)."""
        if self._handoffs and self._graph is None:
            return self.handoff_graph()[self._name].handoff_tools
        return self._handoff_tools

    def handoff_graph(self) -> Mapping[str, Agent]:
        """Every agent reachable from this one by handoffs, by name (this
        one included), as a session runs them.

        Raises:
            InvalidInputError: two of them share a name, or a handoff names
                an agent none of them is.
        """
        if self._graph is not None:
            return self._graph
        return resolve_graph(self)

    def bound_to(
        self, graph: Mapping[str, Agent], handoff_tools: Mapping[str, HandoffTool]
    ) -> Agent:
        """This agent as a session's handoff graph runs it: a copy that
        knows the graph and its handoff tools (``turnlog.domain.handoff_graph``)."""
        bound = copy.copy(self)
        bound._graph = graph
        bound._handoff_tools = handoff_tools
        return bound

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


def checked_handoffs(
    name: str, handoffs: Sequence[Agent | str], tools: Mapping[str, FunctionTool]
) -> tuple[Agent | str, ...]:
    """``handoffs``, refused if one is not an agent or a name, or if two of
    them (or one and a tool) would have the same tool name."""
    if isinstance(handoffs, str | Agent):
        msg = "handoffs must be a list of agents (or agent names)"
        raise InvalidInputError(msg)
    named: dict[str, str] = {}
    for target in handoffs:
        if not isinstance(target, Agent | str) or not handoff_target_name(target):
            msg = f"handoffs must be Agent objects or agent names, not {target!r}"
            raise InvalidInputError(msg)
        target_name = handoff_target_name(target)
        if target_name == name:
            msg = f"agent {name!r} cannot hand off to itself"
            raise InvalidInputError(msg)
        tool_name = handoff_tool_name(target_name)
        if tool_name in tools:
            msg = (
                f"agent {name!r} has a tool named {tool_name!r}, the name of its "
                f"handoff to {target_name!r}: rename the tool"
            )
            raise InvalidInputError(msg)
        if tool_name in named:
            msg = (
                f"agent {name!r} hands off to {named[tool_name]!r} and "
                f"{target_name!r}: both would be the tool {tool_name!r}"
            )
            raise InvalidInputError(msg)
        named[tool_name] = target_name
    return tuple(handoffs)


def session_agent(root: Agent, runner: ChildRunner[Agent] | None = None) -> Agent:
    """``root`` as a session runs it: bound to its handoff graph, each agent
    in it with its MCP servers' tools read now (``Agent.with_mcp_tools``)
    and its agent tools running children with ``runner``.

    Raises:
        InvalidInputError: the graph is refused (see :func:`resolve_graph`).
        McpServerError: an MCP server did not start.
    """

    def bind(agent: Agent) -> Agent:
        bound = agent.with_mcp_tools()
        return bound if runner is None else bound.with_child_runner(runner)

    if not root.handoffs:
        return bind(root)
    session_graph: dict[str, Agent] = {}
    for name, agent in resolve_graph(root).items():
        session_graph[name] = bind(agent).bound_to(session_graph, agent.handoff_tools)
    return session_graph[root.name]
