"""User-facing run configuration (pydantic: validated at the boundary)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol, runtime_checkable

import pydantic

from turnlog.domain.approval import ApprovalDecision, ApprovalRequest
from turnlog.domain.errors import InvalidInputError

DEFAULT_IDLE_TIMEOUT = 60.0
"""Seconds an idle session keeps its actor before it passivates."""


@runtime_checkable
class ApprovalProvider(Protocol):
    """Decides approval requests for a session.

    ``decide`` runs on a worker thread. It may return a decision now, return
    None and answer later with ``session.approve(request.request_id, ...)``,
    or call ``session.approve`` itself before returning None.
    """

    def decide(self, request: ApprovalRequest) -> ApprovalDecision | None:
        """A decision now, or None to answer later."""
        ...


class RunConfig(pydantic.BaseModel):
    """How a session runs, when the per-session options say nothing else.

    Args:
        session_id: the session to open when ``create_session`` names none.
        approval_policy: ``ask`` (default: tools that need approval wait for
            a decision), ``allow`` (run them) or ``deny`` (refuse them).
        approval_provider: who decides when the policy is ``ask``; without
            one, decisions come from ``session.approve(...)``.
        approval_timeout: seconds a request may wait; then it is decided as
            ``timeout`` (recorded) and the tool does not run. None: no limit.
        event_buffer: events buffered per subscriber before a slow one
            starts missing events.
        idle_timeout: seconds a session may sit idle before it passivates:
            its actor (a thread) stops and its lease is given back, and its
            handle starts it again on the next call. A session waiting only
            for an approval decision counts as idle. None: never.

    Raises:
        InvalidInputError: a value is out of range or of the wrong type.
    """

    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True, frozen=True)

    session_id: str | None = None
    approval_policy: Literal["allow", "deny", "ask"] = "ask"
    approval_provider: Annotated[ApprovalProvider | None, pydantic.SkipValidation] = (
        None  # checked by _provider_decides: a Protocol is no pydantic type
    )
    approval_timeout: float | None = pydantic.Field(default=None, gt=0)
    event_buffer: int = pydantic.Field(default=10_000, ge=1)
    idle_timeout: float | None = pydantic.Field(
        default=DEFAULT_IDLE_TIMEOUT, gt=0, allow_inf_nan=False
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except pydantic.ValidationError as error:
            # A caller's mistake, in turnlog's error tree (it is a ValueError
            # too, as pydantic's error was).
            raise InvalidInputError(f"bad RunConfig: {error}") from None

    @pydantic.field_validator("approval_provider", mode="before")
    @classmethod
    def _provider_decides(cls, value: object) -> ApprovalProvider | None:
        if value is not None and not isinstance(value, ApprovalProvider):
            msg = "approval_provider must have a decide(request) method"
            raise ValueError(msg)
        return value
