"""What a session's handles are made of: the line to its actor, the waits.

Not public as paths: ``turnlog.AgentSession`` (turnlog/session.py) is the
face, and ``turnlog.AgentHandle`` and ``turnlog.Subscription`` are
exported by ``turnlog``. actor_handle.py is the typed line every handle
asks and tells its session's actor through (and a handle's Subscription);
requests.py is what each handle call sends the actor, its arguments
checked first; run_waiting.py is how an asyncio caller waits for a run;
agent_handle.py is the protocol face (``submit`` an Op, read Events) over
a session.
"""

from turnlog.handles.actor_handle import ActorHandle, Subscription
from turnlog.handles.agent_handle import AgentHandle
from turnlog.handles.run_waiting import await_run

__all__ = ["ActorHandle", "AgentHandle", "Subscription", "await_run"]
