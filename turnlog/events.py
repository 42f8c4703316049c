"""The events a session reports: what subscribers and ``next_event`` match on.

``session.subscribe()`` yields :class:`RunStarted`, :class:`RunEvent`,
:class:`RunFinished` and :class:`EventsMissed`; a ``RunEvent`` carries an
:class:`Event` envelope whose ``msg`` is one of the ``EventMsg`` classes
here (``AgentMessageMsg``, ``ToolCallStartedMsg``, ``ApprovalRequestedMsg``...).
``AgentHandle.next_event()`` returns the ``Event`` envelopes directly::

    from turnlog.events import AgentMessageMsg, RunEvent, RunFinished

    for item in session.subscribe():
        msg = item.event.msg if isinstance(item, RunEvent) else None
        if isinstance(msg, AgentMessageMsg):
            print(msg.text)
        elif isinstance(item, RunFinished):
            break

An ``EventMsg`` class is named ``<Fact>Msg``: the domain event it reports
(``ToolCallStartedMsg`` reports ``ToolCallStarted``), or, for one that
reports no single domain event, its wire tag (``AgentMessageDeltaMsg``,
``FrontendMsg``). Each has a ``type`` tag (snake_case) on the wire; the
tags, not the class names, are what JSON consumers see, and they do not
change with the class names.

Besides its place (``session_id``, ``submission_id``, ``turn_id``,
``sequence``), an ``Event`` carries ``event_id`` (stable across replays,
restarts and processes), ``timestamp`` (when its fact was recorded),
``trace_id`` (the session's trace, as ``turnlog traces`` shows it) and
``schema_version`` (``turnlog.domain.protocol.EVENT_SCHEMA_VERSION``).
"""

from __future__ import annotations

from turnlog.domain.protocol import (
    AgentHandedOffMsg,
    AgentMessageDeltaMsg,
    AgentMessageMsg,
    AnswerRejectedMsg,
    ApprovalDecidedMsg,
    ApprovalFailedMsg,
    ApprovalRequestedMsg,
    ContextRewrittenMsg,
    Event,
    EventMsg,
    FrontendMsg,
    HookContextAddedMsg,
    InputAcceptedMsg,
    InputQueuedMsg,
    InputRejectedMsg,
    JobFinishedMsg,
    JobStartedMsg,
    ModelRouteChangedMsg,
    ModelStepCompletedMsg,
    ModelStepFailedMsg,
    ModelStepStartedMsg,
    QueuedInputDroppedMsg,
    RenderBlock,
    SessionClosedMsg,
    SessionCreatedMsg,
    SharedStateUpdatedMsg,
    ToolAllowedForSessionMsg,
    ToolCallFinishedMsg,
    ToolCallStartedMsg,
    TurnAbortedMsg,
    TurnCompletedMsg,
    TurnStartedMsg,
    UsageRecordedMsg,
    WarningRaisedMsg,
)
from turnlog.domain.run import (
    EventsMissed,
    RunEvent,
    RunFinished,
    RunStarted,
    SessionEvent,
)

__all__ = [
    "AgentHandedOffMsg",
    "AgentMessageDeltaMsg",
    "AgentMessageMsg",
    "AnswerRejectedMsg",
    "ApprovalDecidedMsg",
    "ApprovalFailedMsg",
    "ApprovalRequestedMsg",
    "ContextRewrittenMsg",
    "Event",
    "EventMsg",
    "EventsMissed",
    "FrontendMsg",
    "HookContextAddedMsg",
    "InputAcceptedMsg",
    "InputQueuedMsg",
    "InputRejectedMsg",
    "JobFinishedMsg",
    "JobStartedMsg",
    "ModelRouteChangedMsg",
    "ModelStepCompletedMsg",
    "ModelStepFailedMsg",
    "ModelStepStartedMsg",
    "QueuedInputDroppedMsg",
    "RenderBlock",
    "RunEvent",
    "RunFinished",
    "RunStarted",
    "SessionClosedMsg",
    "SessionCreatedMsg",
    "SessionEvent",
    "SharedStateUpdatedMsg",
    "ToolAllowedForSessionMsg",
    "ToolCallFinishedMsg",
    "ToolCallStartedMsg",
    "TurnAbortedMsg",
    "TurnCompletedMsg",
    "TurnStartedMsg",
    "UsageRecordedMsg",
    "WarningRaisedMsg",
]
