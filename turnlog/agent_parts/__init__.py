"""An Agent's parts: what its constructor checks, and the tool it becomes.

Not public: ``turnlog.Agent`` is the face (turnlog/agent.py). checks.py
holds the checks an Agent runs on its model, middleware and tools when it
is made (nothing is written then); as_tool.py is ``Agent.as_tool``'s
tool, whose calls each run a child session (turnlog/hosting/children.py).
"""

from turnlog.agent_parts.as_tool import AgentTool, ChildRunner
from turnlog.agent_parts.checks import router_of, tools_by_name

__all__ = ["AgentTool", "ChildRunner", "router_of", "tools_by_name"]
