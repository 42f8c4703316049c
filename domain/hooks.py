"""What middleware hooks are given and what they may answer, as plain data."""

from __future__ import annotations

from typing import Any

import msgspec

from turnlog.domain.model import Item
from turnlog.domain.run_context import RunContext


class HookResult(msgspec.Struct, frozen=True):
    """A hook's answer: add context, stop the turn, reject, or rewrite.

    ``reject`` refuses a prompt (user_prompt) or sends a final answer back
    to the model with that feedback (final_answer).

    ``context`` is recorded and shown to the model (pre_tool context goes
    before the call, post_tool context after its output). ``stop`` ends the
    turn with that reason as a warning (no further model call). ``reject``
    refuses a prompt: the turn aborts and the prompt is stored nowhere.

    ``rewrite`` (user_prompt hooks only) replaces the input's text: the
    model, the context and ``messages()`` have the rewritten text, and the
    log records which hook rewrote it, with the original text unless
    ``keep_original`` is False (then the original is stored nowhere, as
    for a redacted secret). Hooks after it see the rewritten text.
    """

    context: str | None = None
    stop: str | None = None
    reject: str | None = None
    rewrite: str | None = None
    keep_original: bool = True

    @classmethod
    def add_context(cls, text: str) -> HookResult:
        """Context for the model."""
        return cls(context=text)

    @classmethod
    def stop_turn(cls, reason: str) -> HookResult:
        """Stop the turn; ``reason`` is recorded as a warning."""
        return cls(stop=reason)

    @classmethod
    def reject_prompt(cls, reason: str) -> HookResult:
        """Refuse the prompt (user_prompt hooks only)."""
        return cls(reject=reason)

    @classmethod
    def rewrite_prompt(cls, text: str, *, keep_original: bool = True) -> HookResult:
        """Replace the input's text with ``text`` (user_prompt hooks only).

        ``keep_original=False`` keeps the original text out of the log
        (redaction); otherwise the log holds both.
        """
        return cls(rewrite=text, keep_original=keep_original)

    @classmethod
    def reject_answer(cls, feedback: str) -> HookResult:
        """Send the final answer back to the model with ``feedback``
        (final_answer hooks only; counted against ``output_retries``)."""
        return cls(reject=feedback)


class SessionStartInfo(msgspec.Struct, frozen=True):
    """``source`` is ``startup`` (first turn in this process) or ``compact``."""

    session_id: str
    source: str
    context: RunContext[object] | None = None
    """The run: agent name, shared state, the user's deps (None in an info
    built outside a session, as in a test)."""


class UserPromptInfo(msgspec.Struct, frozen=True):
    """Input before it is recorded; rejecting it keeps it out of the log.

    ``kind`` is ``prompt``, ``follow_up``, ``steer``, ``peer`` or
    ``system``. Input that is queued (a follow-up, a steer, input sent
    while a turn runs) is reviewed when it is submitted, before it is
    queued, so ``turn_id`` is None for it: the turn it will run in has not
    started yet.
    """

    session_id: str
    turn_id: str | None
    text: str
    attachments: tuple[dict[str, Any], ...]
    kind: str = "prompt"
    context: RunContext[object] | None = None
    """The run: agent name, shared state, the user's deps (None in an info
    built outside a session, as in a test)."""


class StepInfo(msgspec.Struct, frozen=True):
    """A model step about to be requested."""

    session_id: str
    turn_id: str
    step: int
    route: str
    items: tuple[Item, ...]
    context: RunContext[object] | None = None
    """The run: agent name, shared state, the user's deps (None in an info
    built outside a session, as in a test)."""


class ToolCallInfo(msgspec.Struct, frozen=True):
    """A tool call; ``output`` and ``is_error`` are set for post_tool."""

    session_id: str
    turn_id: str
    call_id: str
    name: str
    arguments: str
    output: str | None = None
    is_error: bool = False
    context: RunContext[object] | None = None
    """The run: agent name, shared state, the user's deps (None in an info
    built outside a session, as in a test)."""


class AnswerInfo(msgspec.Struct, frozen=True):
    """A final answer before the turn completes with it (final_answer hooks).

    ``output`` is the validated object of the agent's ``output_type`` (None
    for an agent without one); ``text`` is what the model wrote.
    """

    session_id: str
    turn_id: str
    step: int
    text: str
    output: object = None


class CompactionInfo(msgspec.Struct, frozen=True):
    """A compaction about to run (pre_compact) or just done (post_compact)."""

    session_id: str
    turn_id: str
    compaction_id: str
    estimated_tokens: int
    context: RunContext[object] | None = None
    """The run: agent name, shared state, the user's deps (None in an info
    built outside a session, as in a test)."""
