"""How a Runtime hosts sessions: opening them, off the caller's loop or on it.

Not public: ``turnlog.Runtime`` is the face (turnlog/runtime.py); these
are its parts for creating a session (creation.py: the checks at the
boundary and the threads behind ``create_session_async``) and starting
its actor (session_starts.py).
"""

from turnlog.hosting.creation import Creation, CreationPool, check_creation
from turnlog.hosting.session_starts import SessionStarts

__all__ = ["Creation", "CreationPool", "SessionStarts", "check_creation"]
