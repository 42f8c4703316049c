"""The handoff graph: the agents a session may be in the charge of.

An agent's ``handoffs`` name other agents, as objects or by name; the
graph of a session is every agent reachable from the one it is opened
with. It is resolved when the session opens (lazily, so two agents may
hand off to each other by name) and refused there, before anything is
written, if two agents in it share a name or a handoff names no agent in
it. A session runs copies of its agents bound to the graph: each knows its
handoff tools (target, route, spec) and the graph, so the session can
switch to any agent in it by name.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from turnlog.agent import Agent, handoff_target_name
from turnlog.domain.errors import InvalidInputError
from turnlog.domain.handoff import HandoffTool, handoff_spec, handoff_tool_name


def resolve_graph(root: Agent) -> Mapping[str, Agent]:
    """Every agent reachable from ``root`` by handoffs, by name, bound.

    Raises:
        InvalidInputError: two agents in the graph share a name, or a
            handoff names an agent that is not in it.
    """
    if not root.handoffs:
        return {root.name: root}
    found: dict[str, Agent] = {}
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
        pending.extend(t for t in agent.handoffs if isinstance(t, Agent))
    for agent in found.values():
        for target in agent.handoffs:
            if handoff_target_name(target) not in found:
                msg = (
                    f"agent {agent.name!r} hands off to {target!r}, but no agent "
                    f"reachable from {root.name!r} is named so: pass that Agent "
                    "in the handoffs of one of them"
                )
                raise InvalidInputError(msg)
    graph: dict[str, Agent] = {}
    for name, agent in found.items():
        bound = copy.copy(agent)
        bound._graph = graph
        bound._handoff_tools = _tools_of(agent, found)
        graph[name] = bound
    return graph


def _tools_of(agent: Agent, found: Mapping[str, Agent]) -> dict[str, HandoffTool]:
    tools: dict[str, HandoffTool] = {}
    for target in agent.handoffs:
        other = found[handoff_target_name(target)]
        spec = handoff_spec(other.name, other.handoff_description)
        tools[handoff_tool_name(other.name)] = HandoffTool(
            other.name, other.model_route, spec
        )
    return tools


def session_agent(root: Agent) -> Agent:
    """``root`` as a session runs it: bound to its handoff graph, each agent
    in it with its MCP servers' tools read now (``Agent.with_mcp_tools``).

    Raises:
        InvalidInputError: the graph is refused (see :func:`resolve_graph`).
        McpServerError: an MCP server did not start.
    """
    if not root.handoffs:
        return root.with_mcp_tools()
    graph = resolve_graph(root)
    if any(agent.mcp_servers for agent in graph.values()):
        bound = dict(graph)
        for name, agent in graph.items():
            bound[name] = agent.with_mcp_tools()
            bound[name]._graph = bound
        graph = bound
    return graph[root.name]
