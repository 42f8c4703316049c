"""The turnlog error tree.

Every error turnlog raises on purpose derives from :class:`TurnlogError`.
Developer mistakes are kept apart from failures at run time::

    TurnlogError
    ├── UsageError                  the caller used the API wrongly
    │   ├── InvalidInputError       a value failed validation at the boundary
    │   ├── StoreURLError           a store URL that names no supported backend
    │   ├── UnknownSessionError     no session with that id in the log
    │   ├── SessionClosedError      the session (or runtime) was closed
    │   └── SessionBusyError        a turn is already running
    ├── StoreError                  the log could not be read or written
    │   ├── NotATurnlogStoreError   the file or database is not a turnlog log
    │   └── ConcurrencyConflictError  another writer appended first
    │       └── LeaseLostError    another process took the session over
    ├── ProviderError               a model provider failed
    ├── ToolError                   a tool failed (reported to the model)
    ├── ReplayError                 the log cannot be replayed
    └── DomainError                 an aggregate refused a command
        └── InvariantViolation      the command would break an invariant

Errors cross actor futures and process boundaries, so each keeps its
constructor arguments in ``args`` and pickles as a plain exception.
"""

from __future__ import annotations


class TurnlogError(Exception):
    """Root of every error turnlog raises on purpose."""


class UsageError(TurnlogError):
    """The API was used wrongly; fix the calling code."""


class InvalidInputError(UsageError, ValueError):
    """A value given to turnlog failed validation; nothing was recorded."""


class StoreURLError(UsageError, ValueError):
    """A store URL names no supported backend or is malformed."""


class UnknownSessionError(UsageError, LookupError):
    """No session with the given id exists in the log."""


class SessionClosedError(UsageError):
    """The session, or the runtime holding it, has been closed."""


class SessionBusyError(UsageError):
    """A turn is already running in the session; nothing was recorded."""


class StoreError(TurnlogError):
    """The event log could not be read or written."""


class NotATurnlogStoreError(StoreError):
    """The file or database at the store URL is not a turnlog log."""


class ConcurrencyConflictError(StoreError):
    """Another writer appended to the same aggregate first.

    The log is never forked: the losing write is refused whole.
    """


class LeaseLostError(ConcurrencyConflictError):
    """This process no longer owns the session: another one took it over.

    Raised by a save the log refused because the session's lease now names
    another owner (or a later takeover); the session is stopped in this
    process, and nothing of the save is recorded.
    """


class ProviderError(TurnlogError):
    """A model provider failed to produce a step."""


class ToolError(TurnlogError):
    """A tool failed; the failure is reported to the model as an output."""


class ReplayError(TurnlogError):
    """A stored history cannot be replayed."""


class DomainError(TurnlogError):
    """An aggregate refused a command."""


class InvariantViolation(DomainError):
    """The command would break an invariant; nothing was recorded."""
