"""The handoff graph of a session: every agent reachable by handoffs.

An agent's handoffs name other agents, as objects or by name; the graph of
a session is every agent reachable from the one it is opened with. It is
resolved when the session opens (lazily, so two agents may hand off to each
other by name) and refused there, before anything is written, if two agents
in it share a name or a handoff names no agent in it. A session runs copies
of its agents bound to the graph: each knows its handoff tools (target,
route, spec) and the graph, so the session can switch to any agent in it.

Generic over the agent's class (:class:`GraphAgent`), so that
``turnlog.agent`` uses this module and not the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, Self, TypeVar

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.handoff import HandoffTool, handoff_spec, handoff_tool_name


class GraphAgent(Protocol):
    """What the graph needs of an agent."""

    @property
    def name(self) -> str:
        """The agent's name: handoffs find their target by it."""
        ...

    @property
    def handoffs(self) -> tuple[Self | str, ...]:
        """The agents it may hand off to (objects, or names)."""
        ...

    @property
    def model_route(self) -> str:
        """The route a session takes when it hands off to this agent."""
        ...

    @property
    def handoff_description(self) -> str:
        """The description of the tool that hands off to it."""
        ...

    def bound_to(
        self, graph: Mapping[str, Self], handoff_tools: Mapping[str, HandoffTool]
    ) -> Self:
        """A copy that knows the graph and its handoff tools."""
        ...


AgentT = TypeVar("AgentT", bound=GraphAgent)


def handoff_target_name(target: GraphAgent | str) -> str:
    """The name of a handoff target."""
    return target if isinstance(target, str) else target.name


def resolve_graph(root: AgentT) -> Mapping[str, AgentT]:
    """Every agent reachable from ``root`` by handoffs, by name, bound.

    Raises:
        InvalidInputError: two agents in the graph share a name, or a
            handoff names an agent that is not in it.
    """
    if not root.handoffs:
        return {root.name: root}
    found: dict[str, AgentT] = {}
    pending = [root]
    while pending:
        agent = pending.pop()
        known = found.get(agent.name)
        if known is agent:
            continue
        if known is not None:
            msg = (
                f"two agents are named {agent.name!r} in the handoffs of "
                f"{root.name!r}: a handoff finds its agent by name, give each "
                "a name of its own"
            )
            raise InvalidInputError(msg)
        found[agent.name] = agent
        pending.extend(t for t in agent.handoffs if not isinstance(t, str))
    for agent in found.values():
        for target in agent.handoffs:
            if handoff_target_name(target) not in found:
                msg = (
                    f"agent {agent.name!r} hands off to {target!r}, but no agent "
                    f"reachable from {root.name!r} is named so: pass that Agent "
                    "in the handoffs of one of them"
                )
                raise InvalidInputError(msg)
    graph: dict[str, AgentT] = {}
    for name, agent in found.items():
        # The graph binds its own copies (the dict is filled as they are made).
        graph[name] = agent.bound_to(graph, _tools_of(agent, found))
    return graph


def _tools_of(
    agent: GraphAgent, found: Mapping[str, GraphAgent]
) -> dict[str, HandoffTool]:
    tools: dict[str, HandoffTool] = {}
    for target in agent.handoffs:
        other = found[handoff_target_name(target)]
        spec = handoff_spec(other.name, other.handoff_description)
        tools[handoff_tool_name(other.name)] = HandoffTool(
            other.name, other.model_route, spec
        )
    return tools
