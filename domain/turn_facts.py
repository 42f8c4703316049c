"""What a turn's state machine is given, takes in (facts) and gives out (effects).

Facts are what happened: input arrived, the TurnActor reports a model
step or the hooks' answers, the ToolExecutor a tool's output, the
approval broker or a caller a decision. The SessionActor carries each one
to the :class:`~turnlog.domain.turn_machine.TurnMachine`; the ones other
actors report travel as actor messages in these same structs.

Effects are what the actors must do once the transition's events are
recorded: call the model, have the hooks prepare a step, run tools, ask
for approvals, end the turn. They name what to do, not how: the actors
add what only they hold (the context as recorded, the agent's
instructions, the actor addresses).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

import msgspec

from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.handoff import HandoffTool
from turnlog.domain.hooks import UserPromptInfo
from turnlog.domain.model import Item, ModelResponse
from turnlog.domain.protocol import Interrupt
from turnlog.domain.rewrites import InputRewrite
from turnlog.domain.run import RunStatus
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn


class Phase(enum.Enum):
    """Where a running turn is; derived from the aggregates, never stored."""

    IDLE = "Idle"
    """No turn runs."""
    REVIEWING = "Reviewing"
    """The user_prompt hooks review the input the turn was started for."""
    PREPARING = "Preparing"
    """The hooks (and compaction) prepare the next model step."""
    MODEL_CALL = "ModelCall"
    """A model step runs."""
    TOOLS = "Tools"
    """Calls of the last step have no output yet; none waits for approval."""
    APPROVAL = "Approval"
    """A call of the last step waits for an approval decision."""


Reviewed = tuple[tuple[tuple[str, str], ...], str | None]
"""What user_prompt hooks answered for input: (hook contexts, stop)."""

# --- facts ----------------------------------------------------------------------


class TurnInput(msgspec.Struct, frozen=True):
    """Input that starts a turn: a prompt, or the oldest queued input.

    ``reviewed`` holds what the user_prompt hooks answered if they already
    saw it (queued input is reviewed when it is submitted); None if they
    have yet to.
    """

    submission_id: str
    kind: str
    text: str
    attachments: list[dict[str, Any]]
    reviewed: Reviewed | None = None
    input_id: str = ""
    """The caller's id for the input ("" if none; see domain.input_ids)."""
    input_digest: str = ""
    """Digest of the input as the caller asked for it ("" if no id)."""
    rewritten_by: tuple[str, ...] = ()
    """The hooks that rewrote queued input when it was queued (its text is
    theirs)."""
    original_text: str | None = None
    """The user's text of queued input a hook rewrote, if it was kept."""


class InputReviewed(msgspec.Struct, frozen=True):
    """The user_prompt hooks settled: ``rejection`` set means refused."""

    turn: int
    rejection: str | None
    contexts: tuple[tuple[str, str], ...]
    stop: str | None
    error: str | None
    rewrite: InputRewrite | None = None
    """What the hooks rewrote the input to (None: its text as given)."""


class CompactionBegan(msgspec.Struct, frozen=True):
    """The hooks preparing a step started compacting the context."""

    turn: int
    compaction_id: str
    reason: str


class StepPrepared(msgspec.Struct, frozen=True):
    """The hooks before a step settled (see actors.hooks.prepare_step)."""

    turn: int
    contexts: tuple[tuple[str, str], ...]
    compaction: tuple[str, list[Any], dict[str, int] | None] | None
    stop: str | None
    error: str | None
    instructions: str | None = None
    """What the agent's instructions function gave for the step (None when
    the agent's instructions are static text)."""


class AnswerChecked(msgspec.Struct, frozen=True):
    """What the output type and the final_answer hooks made of a final answer.

    Only an agent with an ``output_type`` or a ``final_answer`` hook has
    its answers checked; for any other, a step's ``answer`` is None.
    """

    output: Any = msgspec.UNSET
    """The validated answer as JSON data (UNSET: the agent has no output type)."""
    rejection: str | None = None
    """Why the answer goes back to the model (a validation error, or a
    hook's feedback); None if it was accepted."""
    rejected_by: str = ""
    """``output_type``, or the name of the middleware that refused it."""
    stop: str | None = None
    """A final_answer hook stopped the turn: the answer is not delivered."""


class StepSucceeded(msgspec.Struct, frozen=True):
    """The model answered; pre_tool hooks added ``pre_tool`` (call id, text).

    ``answer`` is what checking a final answer found (see AnswerChecked).
    """

    turn: int
    step: int
    response: ModelResponse
    pre_tool: tuple[tuple[str, str], ...] = ()
    stop: str | None = None
    answer: AnswerChecked | None = None


class StepFailed(msgspec.Struct, frozen=True):
    """The model call of ``step`` failed (or was cancelled)."""

    turn: int
    step: int
    error_type: str
    message: str


class ToolFinished(msgspec.Struct, frozen=True):
    """A tool call produced an output (and its post_tool hooks answered)."""

    turn: int
    call_id: str
    output: str
    is_error: bool
    post_context: str | None = None
    hook_error: str | None = None
    media: tuple[dict[str, str], ...] = ()


class Decide(msgspec.Struct, frozen=True):
    """Decide a pending approval (from the caller or the broker)."""

    request_id: str
    decision: str
    decided_by: str
    input_id: str = ""
    """The caller's id for its answer ("" if none)."""


class ApprovalProviderFailed(msgspec.Struct, frozen=True):
    """The approval provider failed on a pending request (from the broker):
    it raised, or returned something that is not a decision."""

    request_id: str
    error: str


class TurnActorFailed(msgspec.Struct, frozen=True):
    """The turn's actor work broke: its TurnActor died (a handler raised) or
    the ToolExecutor it hands calls to is gone; ``error`` says which and why.
    """

    turn: int
    error: str


class TurnFailed(msgspec.Struct, frozen=True):
    """The running turn cannot go on: a fact could not be recorded, or the
    session's actor failed. ``reason`` is recorded as the turn's end.
    """

    reason: str


class Resumed(msgspec.Struct, frozen=True):
    """A new SessionActor took over a turn a restart or passivation left.

    ``ask_approvals`` is False when the broker still holds the turn's
    pending requests (the session passivated): asking again would ask the
    provider, a person maybe, twice.
    """

    ask_approvals: bool = True


class SteerArrived(msgspec.Struct, frozen=True):
    """A steer was submitted (and accepted by the hooks, if they review it).

    It is queued; the running turn takes it in at its next model step,
    skipping its tool calls that have not started (domain.tool_dispatch).
    """

    submission_id: str
    text: str
    attachments: list[dict[str, Any]]
    input_id: str = ""
    """The caller's id for the steer and its digest ("" for none)."""
    input_digest: str = ""
    rewrite: InputRewrite | None = None
    """What the user_prompt hooks rewrote it to (its ``text`` is the user's)."""


Fact = (
    TurnInput
    | InputReviewed
    | CompactionBegan
    | StepPrepared
    | StepSucceeded
    | StepFailed
    | ToolFinished
    | Decide
    | ApprovalProviderFailed
    | Interrupt
    | TurnActorFailed
    | TurnFailed
    | Resumed
    | SteerArrived
)
"""Everything the turn machine takes in (``Interrupt`` is the protocol's op)."""

ReportedFact = (
    StepSucceeded
    | StepFailed
    | ToolFinished
    | StepPrepared
    | CompactionBegan
    | InputReviewed
    | TurnActorFailed
)
"""What the TurnActor and the ToolExecutor tell a session of its running turn."""

TEXT_OF: dict[type, str] = {
    StepSucceeded: "the model's output",
    StepFailed: "the model's error",
    StepPrepared: "what the middleware hooks returned",
    InputReviewed: "what the middleware hooks returned",
    CompactionBegan: "the compaction's reason",
    ToolFinished: "what the post_tool hooks returned",
    TurnActorFailed: "the turn actor's error",
    ApprovalProviderFailed: "the approval provider's error",
}
"""What each reported fact's text is, for the warning recorded when some of
it could not be stored as it was (actors.encodable_facts)."""


# --- what the machine is given ------------------------------------------------


class TurnRules(msgspec.Struct, frozen=True):
    """What the machine needs of the agent and the session's settings."""

    session_id: str
    max_steps: int
    prepares_steps: bool
    """Whether hooks prepare each model step (the agent has middleware)."""
    reviews_input: bool
    """Whether user_prompt hooks review input before it is recorded."""
    tool_names: Collection[str]
    needs_approval: Callable[[str, str], bool]
    """Whether a call of tool ``name`` with ``arguments`` waits for a
    decision (the approval policy and the tool's own rule; the session's
    allowances are the machine's to check)."""
    new_request_id: Callable[[], str]
    model_identity: Callable[[str], tuple[str, str]] = lambda _route: ("", "")
    """(model asked for, provider name) of a route, "" where unknown: what
    a step records so traces can name them."""
    tool_identity: Callable[[str], tuple[str, str]] = lambda _name: ("", "")
    """(tool type, MCP server) of a tool, "" where unknown: what a started
    call records so traces can name them."""
    agent_name: str = ""
    """The agent these rules are of ("" where no handoff can change it)."""
    handoffs: Mapping[str, HandoffTool] = msgspec.field(default_factory=dict)
    """The agent's handoffs, by tool name (domain.handoff)."""
    output_retries: int = 1
    """How many rejected final answers go back to the model before the turn
    fails with an OutputValidationError."""
    child_agent: Callable[[str], str] = lambda _name: ""
    """The agent a tool runs as a child session ("" for any other tool):
    a started call of it records ``ChildSessionStarted``."""
    parallel_tool_calls: bool = True
    """Whether a step's calls start together (True) or one after another,
    in the model's order, each once the one before it has its output."""


class TurnState(Protocol):
    """What the machine reads and changes (the SessionActor's SessionState)."""

    session: Session
    turn: Turn | None
    context: list[Item]
    """The model context as recorded so far (for a call's arguments)."""
    reviewed: dict[str, Reviewed]
    """What user_prompt hooks answered for queued input, by submission id."""


def phase_of(state: TurnState, reviewing: int | None) -> Phase:
    """The state of ``state``'s running turn; ``reviewing`` is the number of
    the turn whose input the hooks review, if any."""
    turn = state.turn
    if turn is None or not state.session.running:
        return Phase.IDLE
    if reviewing == turn.number:
        return Phase.REVIEWING
    if turn.step_open:
        return Phase.MODEL_CALL
    if turn.pending_approvals:
        return Phase.APPROVAL
    if turn.unanswered_calls():
        return Phase.TOOLS
    return Phase.PREPARING


# --- effects ----------------------------------------------------------------------


class BeginTurn(msgspec.Struct, frozen=True, tag="begin_turn"):
    """A turn started: start its TurnActor and count it in the run."""

    turn: Turn


class ReviewPrompt(msgspec.Struct, frozen=True, tag="review_prompt"):
    """Have the user_prompt hooks review input not recorded yet."""

    info: UserPromptInfo


class PrepareModelStep(msgspec.Struct, frozen=True, tag="prepare_model_step"):
    """Have the hooks (and compaction) prepare model step ``step``."""

    turn_id: str
    step: int
    route: str


class RunModelStep(msgspec.Struct, frozen=True, tag="run_model_step"):
    """Model step ``step`` is recorded as started: call the model on ``route``."""

    turn_id: str
    step: int
    route: str
    instructions: str | None = None
    """The step's instructions, where a function gave them (recorded)."""


class RunToolCalls(msgspec.Struct, frozen=True, tag="run_tool_calls"):
    """These tool calls are recorded as started: run them."""

    calls: tuple[dict[str, Any], ...]


class AskApprovals(msgspec.Struct, frozen=True, tag="ask_approvals"):
    """These requests are recorded: have the broker get their decisions."""

    requests: tuple[ApprovalRequest, ...]


class SettleApprovals(msgspec.Struct, frozen=True, tag="settle_approvals"):
    """These requests were decided: the broker can forget them."""

    request_ids: tuple[str, ...]


class SwitchAgent(msgspec.Struct, frozen=True, tag="switch_agent"):
    """A handoff put ``agent_name`` in charge: its instructions, tools,
    route and hooks make the turn's steps from now on."""

    agent_name: str


class EndTurn(msgspec.Struct, frozen=True, tag="end_turn"):
    """The turn ended: stop its work, and end the run or start the next turn.

    ``settled`` says every fact of the turn came back (it ended on its
    own), so nothing in flight needs cancelling.
    """

    status: RunStatus
    final_output: str | None
    error: str | None
    settled: bool = False
    output: Any = msgspec.UNSET
    """The validated answer as JSON data, for an agent with an output type."""


Effect = (
    BeginTurn
    | ReviewPrompt
    | PrepareModelStep
    | RunModelStep
    | RunToolCalls
    | AskApprovals
    | SettleApprovals
    | SwitchAgent
    | EndTurn
)


class Transition(msgspec.Struct, frozen=True):
    """What one fact did: the aggregates to save, then the effects to run.

    ``record`` holds the aggregates whose pending events are this fact's
    events, saved in one transaction; the effects run only once they are.
    """

    record: tuple[Session | Turn, ...] = ()
    effects: tuple[Effect, ...] = ()


IGNORED = Transition()
"""A stale fact (about a turn that already ended): nothing to record or do."""
