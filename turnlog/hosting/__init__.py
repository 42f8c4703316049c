"""How a Runtime hosts sessions: opening them, off the caller's loop or on it.

Not public: ``turnlog.Runtime`` is the face (turnlog/runtime.py); these
are its parts for creating a session (creation.py: the checks at the
boundary and the threads behind ``create_session_async``) and starting
its actor (session_starts.py), and counting the actors that run
(live_sessions.py).
"""

from turnlog.hosting.creation import Creation, CreationPool, check_creation
from turnlog.hosting.live_sessions import LiveSessions
from turnlog.hosting.session_starts import SessionStarts

__all__ = [
    "Creation",
    "CreationPool",
    "LiveSessions",
    "SessionStarts",
    "check_creation",
]
