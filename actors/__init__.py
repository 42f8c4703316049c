"""The actors of a runtime: one SessionActor per live session, the TurnActor
it runs its turns on, and one ApprovalBroker per runtime; and the one
ToolExecutor (a thread-safe object, not an actor) they hand tool calls to.

Actors talk in typed messages (``turnlog.actors.messages``); the
SessionActor alone writes its session's events.
"""

from turnlog.actors.approval_broker import ApprovalBrokerActor
from turnlog.actors.session_actor import SessionActor
from turnlog.actors.session_parts import SessionServices, SessionSettings
from turnlog.actors.tool_executor import ToolExecutor
from turnlog.actors.turn_actor import TurnActor

__all__ = [
    "ApprovalBrokerActor",
    "SessionActor",
    "SessionServices",
    "SessionSettings",
    "ToolExecutor",
    "TurnActor",
]
