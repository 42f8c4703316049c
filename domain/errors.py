"""The turnlog error tree.

Every error turnlog raises on purpose derives from :class:`TurnlogError`.
Developer mistakes are kept apart from failures at run time::

    TurnlogError
    ├── UsageError                  the caller used the API wrongly
    │   ├── InvalidInputError       a value failed validation at the boundary
    │   ├── StoreURLError           a store URL that names no supported backend
    │   ├── UnknownSessionError     no session with that id in the log
    │   ├── SessionClosedError      the session (or runtime) was closed
    │   │   └── RuntimeClosedError  the runtime holding it was closed
    │   ├── SessionBusyError        a turn is already running
    │   ├── RunEndedError           a run handle's run has ended
    │   ├── InputRejectedError      a user_prompt hook refused queued input
    │   └── InputConflictError      an input id reused for other input
    ├── StoreError                  the log could not be read or written
    │   ├── NotATurnlogStoreError   the file or database is not a turnlog log
    │   └── ConcurrencyConflictError  another writer appended first
    │       └── LeaseLostError    another process took the session over
    ├── SessionFailedError          a session's actor failed and was stopped
    ├── ProviderError               a model provider failed
    ├── OutputValidationError       the model's answer never fit the output type
    ├── ToolError                   a tool failed (reported to the model)
    │   └── McpServerError          an MCP server did not start or answer
    ├── ReplayError                 the log cannot be replayed
    ├── TraceExportError            an OTLP endpoint refused or missed a trace
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


class RuntimeClosedError(SessionClosedError):
    """The runtime was closed: none of its sessions or read models can be used.

    A SessionClosedError, so code that handles a closed session handles
    this too; catch it alone to tell "this runtime is gone, open another"
    from "this one session was closed".
    """


class SessionBusyError(UsageError):
    """A turn is already running in the session, or another process holds
    it; nothing was recorded.

    Attributes:
        retry_after: For a session another process holds: seconds until
            its lease runs out, unless that process renews it first (then
            this process may take the session over). None otherwise.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[type[SessionBusyError], tuple[str, float | None]]:
        # Errors cross actor futures and processes: keep retry_after too.
        return type(self), (str(self), self.retry_after)


class RunEndedError(UsageError):
    """The run a :class:`~turnlog.RunHandle` stands for has ended: its
    ``steer``, ``follow_up`` and ``interrupt`` refuse, recording nothing.

    The message names the run (its submission id) and the session. Input
    for whatever runs now goes through the session (``session.steer``,
    ``session.follow_up``) or the handle of the run in progress
    (``session.active_run_handle()``).
    """


class InputRejectedError(UsageError):
    """A user_prompt hook refused the input; nothing of it was recorded.

    Raised by ``follow_up``, ``steer``, ``send_input`` (and ``submit``) for
    input that would be queued; the message is the hook's reason.
    """


class InputConflictError(UsageError):
    """An input id (``input_id=``, an ``Idempotency-Key``) was used before
    for other content, or an approval request was decided otherwise;
    nothing was recorded.

    Attributes:
        input_id: The id that was reused (the request id, for an approval).
    """

    def __init__(self, message: str, input_id: str = "") -> None:
        super().__init__(message)
        self.input_id = input_id

    def __reduce__(self) -> tuple[type[InputConflictError], tuple[str, str]]:
        # Errors cross actor futures and processes: keep the id too.
        return type(self), (str(self), self.input_id)


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


class SessionFailedError(TurnlogError):
    """A session's actor failed (a bug, or a fault it could not survive).

    The actor was stopped; every caller waiting on it (a prompt, a
    subscription) gets this error at once, naming the cause, and the
    failure is recorded as the running turn's end when the log allows.
    Reopening the session with ``Runtime.create_session`` revives it.
    """


class ProviderError(TurnlogError):
    """A model provider failed to produce a step."""


class OutputValidationError(TurnlogError, ValueError):
    """The model's final answer did not validate against the agent's
    ``output_type`` (or a ``final_answer`` hook refused it), retries included.

    The message names the field: ``answer.items[0].price: Input should be
    a valid number``.
    """


class ToolError(TurnlogError):
    """A tool failed; the failure is reported to the model as an output."""


class McpServerError(ToolError):
    """An MCP server did not start, or did not list its tools in time.

    Raised when a session starts (its tools are read then); a call that
    fails becomes an error output instead.
    """


class ReplayError(TurnlogError):
    """A stored history cannot be replayed."""


class TraceExportError(TurnlogError):
    """A trace could not be sent to an OTLP endpoint (refused or unreachable)."""


class DomainError(TurnlogError):
    """An aggregate refused a command."""


class InvariantViolation(DomainError):
    """The command would break an invariant; nothing was recorded."""
