"""What a session's turn machine is told of its agent: built once, shared.

The :class:`~turnlog.domain.turn_facts.TurnRules` of an agent hold a few
functions over its tools and routes (does a call need approval, which
model a route names, ...). They depend on the agent and the session's
approval policy alone, so they are built once per (agent, policy) and
every session of that agent shares them: a session adds only its id. A
thousand sessions of one agent keep one set of those functions alive,
not a thousand, which the cyclic garbage collector would otherwise walk
on every full collection (issue 24).
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable

import msgspec

from turnlog.actors.contracts import AgentDefinition, RunnableTool
from turnlog.actors.hooks import any_implements
from turnlog.domain.errors import UsageError
from turnlog.domain.model import model_identity
from turnlog.domain.turn_facts import TurnRules

_SHARED: weakref.WeakKeyDictionary[AgentDefinition, dict[str, TurnRules]] = (
    weakref.WeakKeyDictionary()
)
"""The rules built so far, by agent, then approval policy; an agent's go
with it. Sessions on many threads read and fill it: a race builds the
same rules twice, and either copy is right."""


def agent_rules(agent: AgentDefinition, approval_policy: str) -> TurnRules:
    """The rules of ``agent`` under ``approval_policy``, for no session
    (``session_id`` is ""): the same object for every call with the same
    agent and policy."""
    try:
        by_policy = _SHARED.get(agent)
    except TypeError:  # an agent that cannot be weakly referenced or hashed
        return _build(agent, approval_policy)
    if by_policy is None:
        by_policy = _SHARED.setdefault(agent, {})
    rules = by_policy.get(approval_policy)
    if rules is None:
        rules = by_policy.setdefault(approval_policy, _build(agent, approval_policy))
    return rules


def session_rules(
    agent: AgentDefinition, approval_policy: str, session_id: str
) -> TurnRules:
    """The rules of ``agent`` for session ``session_id``: the shared rules
    with the session's id (their functions are the shared ones)."""
    return msgspec.structs.replace(
        agent_rules(agent, approval_policy), session_id=session_id
    )


def _build(agent: AgentDefinition, approval_policy: str) -> TurnRules:
    # Methods of a lookup that holds the agent weakly, not closures: no
    # cells, nothing of a session, and no way back to the agent (see
    # _AgentLookup). Its tools' names are copied for the same reason.
    lookup = _AgentLookup(agent)
    needs_approval: Callable[[str, str], bool] = (
        _never if approval_policy == "allow" else lookup.needs_approval
    )
    return TurnRules(
        session_id="",
        max_steps=agent.max_steps,
        # A function's instructions are evaluated as a step is prepared.
        prepares_steps=bool(agent.middleware)
        or agent.instructions_function is not None,
        reviews_input=any_implements(agent.middleware, "user_prompt"),
        tool_names=frozenset(agent.tools_by_name),
        needs_approval=needs_approval,
        new_request_id=_new_request_id,
        model_identity=lookup.route_identity,
        tool_identity=lookup.tool_identity,
        agent_name=agent.name,
        handoffs=agent.handoff_tools,
        output_retries=agent.output_retries,
        child_agent=lookup.child_agent,
        parallel_tool_calls=agent.parallel_tool_calls,
    )


def _never(_name: str, _arguments: str) -> bool:
    return False


def _new_request_id() -> str:
    return uuid.uuid4().hex


class _AgentLookup:
    """What the machine asks of an agent's tools and routes, by name.

    It holds its agent weakly: the rules are kept by the agent (in
    ``_SHARED``), and any strong way back to it (the agent itself, or its
    tools, which may close over a session that holds the agent) would keep
    the agent, and all it refers to, for the life of the process. A
    session using the rules holds its agent.
    """

    __slots__ = ("_agent",)

    def __init__(self, agent: AgentDefinition) -> None:
        self._agent: Callable[[], AgentDefinition | None]
        try:
            self._agent = weakref.ref(agent)
        except TypeError:  # not weakly referenced, so not shared: held here
            self._agent = lambda: agent

    def _tool(self, name: str) -> RunnableTool | None:
        agent = self._agent()
        return None if agent is None else agent.tools_by_name.get(name)

    def needs_approval(self, name: str, arguments: str) -> bool:
        tool = self._tool(name)
        # A tool gone with its agent: ask rather than run unchecked.
        return True if tool is None else bool(tool.requires_approval(arguments))

    def tool_identity(self, name: str) -> tuple[str, str]:
        tool = self._tool(name)
        return ("", "") if tool is None else (tool.tool_type, tool.mcp_server)

    def child_agent(self, name: str) -> str:
        # Only an agent used as a tool names one (turnlog.AgentTool).
        return str(getattr(self._tool(name), "child_agent", ""))

    def route_identity(self, route: str) -> tuple[str, str]:
        agent = self._agent()
        if agent is None:
            return "", ""
        try:
            return model_identity(agent.provider_for(route))
        except UsageError:  # no such route: the model call fails, named
            return "", ""
