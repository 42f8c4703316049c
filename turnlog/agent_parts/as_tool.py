"""An agent used as a tool of another (``Agent.as_tool``): each call runs a
child session of that agent on the same runtime (``turnlog.hosting.children``).

Generic over the agent's class, so that this module needs nothing of
``turnlog.agent`` (which builds these tools) and the runtime's runner
takes the agent it was given back, typed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar

from turnlog.tools import FunctionTool, ToolResult


class NamedAgent(Protocol):
    """What an agent tool needs of its agent: the name."""

    @property
    def name(self) -> str:
        """The agent's name."""
        ...


AgentT = TypeVar("AgentT", bound=NamedAgent)
AgentT_contra = TypeVar("AgentT_contra", bound=NamedAgent, contravariant=True)


INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "input": {"type": "string", "description": "What to ask the agent."}
    },
    "required": ["input"],
    "additionalProperties": False,
}


class ChildRunner(Protocol[AgentT_contra]):
    """Runs child sessions for agent tools (the runtime's ``ChildSessions``)."""

    def run_child(
        self, agent: AgentT_contra, context: Mapping[str, Any], text: str
    ) -> ToolResult:
        """Runs (or finds) the child of the call in ``context``; never raises."""
        ...

    def cancel_child(self, context: Mapping[str, Any]) -> None:
        """Interrupts the child of the call in ``context``, if it runs."""
        ...


def _unbound(**_: Any) -> str:  # pragma: no cover - never called: run_sync is ours
    return ""


class AgentTool(FunctionTool, Generic[AgentT]):
    """A tool whose call runs a child session of ``agent``.

    Build it with :meth:`turnlog.Agent.as_tool`. The model calls it with
    one argument, ``input``, the child's prompt; the call runs a session of the
    agent on the same runtime (a session of its own in the log, linked to the
    parent's call both ways, see ``turnlog.hosting.children``), and the child's final
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
        agent: AgentT,
        *,
        name: str | None = None,
        description: str | None = None,
        runner: ChildRunner[AgentT] | None = None,
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
    def agent(self) -> AgentT:
        """The agent each call runs as a child session."""
        return self._agent

    @property
    def child_agent(self) -> str:
        """The child's agent name (a started call records it)."""
        return self._agent.name

    def bound(self, runner: ChildRunner[AgentT]) -> AgentTool[AgentT]:
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
