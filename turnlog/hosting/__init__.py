"""How a Runtime hosts sessions: opening them, off the caller's loop or on it.

Not public: ``turnlog.Runtime`` is the face (turnlog/runtime.py); these
are its parts: the services its sessions share (services.py), the table
of its sessions and opening one here (session_table.py), creating a
session (creation.py: the checks at the boundary and the threads behind
``create_session_async``), starting its actor (session_starts.py),
running the child sessions of agents used as tools (children.py),
recording a fork (forking.py), counting the actors that run and waiting
for fewer (live_sessions.py), and closing the runtimes a program left
open when it exits (exit_hook.py).
"""

from turnlog.hosting.children import ChildSessions
from turnlog.hosting.creation import Creation, CreationPool, check_creation
from turnlog.hosting.forking import record_fork
from turnlog.hosting.live_sessions import LiveSessions
from turnlog.hosting.services import RuntimeServices
from turnlog.hosting.session_starts import SessionStarts
from turnlog.hosting.session_table import SessionTable

__all__ = [
    "ChildSessions",
    "Creation",
    "CreationPool",
    "LiveSessions",
    "RuntimeServices",
    "SessionStarts",
    "SessionTable",
    "check_creation",
    "record_fork",
]
