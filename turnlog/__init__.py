"""turnlog: an agent runtime for LLM sessions on an event-sourced log."""

from turnlog.agent import Agent
from turnlog.agent_parts.as_tool import AgentTool
from turnlog.approvals import ApprovalBroker
from turnlog.config import ApprovalProvider, RunConfig
from turnlog.domain.approval import ApprovalDecision, ApprovalRequest
from turnlog.domain.context import Message
from turnlog.domain.errors import (
    ConcurrencyConflictError,
    DomainError,
    InputConflictError,
    InputRejectedError,
    InvalidInputError,
    InvariantViolation,
    LeaseLostError,
    McpServerError,
    NotATurnlogStoreError,
    OutputValidationError,
    ProviderError,
    ReplayError,
    RunEndedError,
    RuntimeClosedError,
    SessionBusyError,
    SessionClosedError,
    SessionFailedError,
    StoreError,
    StoreURLError,
    ToolError,
    TraceExportError,
    TurnlogError,
    UnknownSessionError,
    UsageError,
)
from turnlog.domain.hooks import (
    AnswerInfo,
    CompactionInfo,
    HookResult,
    SessionStartInfo,
    StepInfo,
    ToolCallInfo,
    UserPromptInfo,
)
from turnlog.domain.model import (
    ModelProvider,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    ToolSpec,
)
from turnlog.domain.protocol import (
    ApprovalResponse,
    Event,
    EventMsg,
    Interrupt,
    Op,
    PeerInput,
    SessionFileReference,
    Shutdown,
    Steer,
    UserInput,
)
from turnlog.domain.run import (
    EventsMissed,
    QueuedInput,
    RunEvent,
    RunFinished,
    RunResult,
    RunStarted,
    SessionEvent,
)
from turnlog.domain.run_context import RunContext
from turnlog.handles.agent_handle import AgentHandle
from turnlog.hosting.children import ChildSession
from turnlog.mcp.tools import McpServer, McpTool
from turnlog.middleware import Compaction, Middleware
from turnlog.output import OutputType
from turnlog.projections.checkpoint_reader import Checkpoint
from turnlog.projections.executions import Execution
from turnlog.projections.readers import (
    ExecutionPage,
    TranscriptItem,
    TranscriptPage,
    replay_events,
)
from turnlog.routing import ModelRouter
from turnlog.runtime import Runtime
from turnlog.scripted import ScriptedModel, calls, reply, tool_call
from turnlog.session import AgentSession, RunHandle, Subscription
from turnlog.store.lineage import HistoryPoint
from turnlog.tools import FunctionTool, ToolContext, ToolResult, function_tool
from turnlog.version import __version__ as __version__

__all__ = [
    "Agent",
    "AgentHandle",
    "AgentSession",
    "AgentTool",
    "AnswerInfo",
    "ApprovalBroker",
    "ApprovalDecision",
    "ApprovalProvider",
    "ApprovalRequest",
    "ApprovalResponse",
    "Checkpoint",
    "ChildSession",
    "Compaction",
    "CompactionInfo",
    "ConcurrencyConflictError",
    "DomainError",
    "Event",
    "EventMsg",
    "EventsMissed",
    "Execution",
    "ExecutionPage",
    "FunctionTool",
    "HistoryPoint",
    "HookResult",
    "InputConflictError",
    "InputRejectedError",
    "Interrupt",
    "InvalidInputError",
    "InvariantViolation",
    "LeaseLostError",
    "McpServer",
    "McpServerError",
    "McpTool",
    "Message",
    "Middleware",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ModelRouter",
    "NotATurnlogStoreError",
    "Op",
    "OutputSchema",
    "OutputType",
    "OutputValidationError",
    "PeerInput",
    "ProviderError",
    "QueuedInput",
    "ReplayError",
    "RunConfig",
    "RunContext",
    "RunEndedError",
    "RunEvent",
    "RunFinished",
    "RunHandle",
    "RunResult",
    "RunStarted",
    "Runtime",
    "RuntimeClosedError",
    "ScriptedModel",
    "SessionBusyError",
    "SessionClosedError",
    "SessionEvent",
    "SessionFailedError",
    "SessionFileReference",
    "SessionStartInfo",
    "Shutdown",
    "Steer",
    "StepInfo",
    "StoreError",
    "StoreURLError",
    "Subscription",
    "ToolCallInfo",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "TraceExportError",
    "TranscriptItem",
    "TranscriptPage",
    "TurnlogError",
    "UnknownSessionError",
    "UsageError",
    "UserInput",
    "UserPromptInfo",
    "calls",
    "function_tool",
    "replay_events",
    "reply",
    "tool_call",
]
