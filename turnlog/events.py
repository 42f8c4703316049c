"""The events a session reports: what subscribers and ``next_event`` match on.

``session.subscribe()`` yields :class:`RunStarted`, :class:`RunEvent`,
:class:`RunFinished` and :class:`EventsMissed`; a ``RunEvent`` carries an
:class:`Event` envelope whose ``msg`` is one of the ``EventMsg`` classes
here (``AgentMessage``, ``ToolCallBegin``, ``ApprovalRequested``...).
``AgentHandle.next_event()`` returns the ``Event`` envelopes directly::

    from turnlog.events import AgentMessage, RunEvent, RunFinished

    for item in session.subscribe():
        if isinstance(item, RunEvent) and isinstance(item.event.msg, AgentMessage):
            print(item.event.msg.text)
        elif isinstance(item, RunFinished):
            break

Each ``EventMsg`` has a ``type`` tag (snake_case) on the wire; the tags,
not the class names, are what JSON consumers see.
"""

from __future__ import annotations

from turnlog.domain.protocol import (
    AgentMessage,
    AgentMessageDelta,
    ApprovalRequested,
    ApprovalResolved,
    ContextRewritten,
    Event,
    EventMsg,
    Frontend,
    HookContext,
    InputRejected,
    ModelRouteChanged,
    ModelStepCompleted,
    ModelStepFailed,
    ModelStepStarted,
    QueuedInputDropped,
    RenderBlock,
    SessionClosed,
    SessionConfigured,
    SharedStateChanged,
    TokenCount,
    ToolAllowedForSession,
    ToolCallBegin,
    ToolCallEnd,
    TurnAborted,
    TurnComplete,
    TurnStarted,
    UserInputQueued,
    UserMessage,
    WarningMessage,
)
from turnlog.domain.run import (
    EventsMissed,
    RunEvent,
    RunFinished,
    RunStarted,
    SessionEvent,
)

__all__ = [
    "AgentMessage",
    "AgentMessageDelta",
    "ApprovalRequested",
    "ApprovalResolved",
    "ContextRewritten",
    "Event",
    "EventMsg",
    "EventsMissed",
    "Frontend",
    "HookContext",
    "InputRejected",
    "ModelRouteChanged",
    "ModelStepCompleted",
    "ModelStepFailed",
    "ModelStepStarted",
    "QueuedInputDropped",
    "RenderBlock",
    "RunEvent",
    "RunFinished",
    "RunStarted",
    "SessionClosed",
    "SessionConfigured",
    "SessionEvent",
    "SharedStateChanged",
    "TokenCount",
    "ToolAllowedForSession",
    "ToolCallBegin",
    "ToolCallEnd",
    "TurnAborted",
    "TurnComplete",
    "TurnStarted",
    "UserInputQueued",
    "UserMessage",
    "WarningMessage",
]
