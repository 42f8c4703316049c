"""Middleware: hooks around every step of a turn.

Subclass :class:`Middleware` and override the hooks you need; each may be
a plain or an ``async`` method and returns a :class:`HookResult` or None.
Hooks run off the session's thread (async ones on the I/O loop, plain ones
on a worker thread), in the order the middleware are listed. A hook that
raises fails the turn cleanly (recorded, with the hook's name).

=================  ==========================================================
hook               when, and what it may do
=================  ==========================================================
``session_start``  first turn of the session in this process (``startup``:
                   context only, a stop is ignored so the prompt still runs),
                   and after each compaction (``compact``: may stop)
``user_prompt``    before any input is recorded: context, stop, reject, or
                   rewrite (``HookResult.rewrite_prompt``)
``pre_model``      before each model step: context or stop
``model_request``  after every ``pre_model`` hook: context or stop
``pre_tool``       for each call of a known tool: context, recorded before
                   the call (also when it then waits for approval), or stop
``post_tool``      after a tool actually ran: context, recorded after its
                   output
``pre_compact``    before compaction: stop prevents it
``post_compact``   after compaction: stop ends the turn (compaction kept)
``final_answer``   the model's final answer, before the turn completes with
                   it (text, and the typed object when the agent has an
                   ``output_type``): accept (None), ``reject_answer``
                   (back to the model with feedback, counted against
                   ``output_retries``) or ``stop_turn`` (no result)
=================  ==========================================================

A final answer that is refused is recorded as ``AnswerRejected`` (with
who refused it and why) and never delivered. ``final_answer`` hooks run
only on an answer that validated against the output type, in order; the
first that rejects or stops decides. An agent without a ``final_answer``
hook (and without an ``output_type``) has no answer check at all.

``user_prompt`` sees every input (``info.kind``: ``prompt``, ``follow_up``,
``steer``, ``peer``, ``system``), and a rejected one is stored nowhere.
A rewritten one goes on as the hook's text (hooks after it see that); the
log names the hook and keeps the original too, unless the hook said not
to (``keep_original=False``: the original is then stored nowhere).
A prompt is reviewed as its turn starts. Input that is queued (a
follow-up, a steer, input sent while a turn runs) is reviewed when it is
submitted, before it is recorded, so that rejected text never reaches the
log while accepted text is recorded at once and survives a crash: the
caller waits for the hook (``follow_up`` and the like return once the
input is recorded, or raise ``InputRejectedError``), the hook sees
``info.turn_id`` None, and it judges the input as the session is when it
is submitted, not when it runs. Its context and stop apply when it runs.
Reviews of one session run one at a time, in the order submitted.

Every info carries ``context``, a :class:`~turnlog.RunContext`: the
agent's name, the shared state as the hook runs, and the run's ``deps``
(the user's live dependencies, never recorded; typed ``object`` here).
"""

from __future__ import annotations

from typing import Any

from turnlog.domain.compacted_history import DEFAULT_KEEP_USER_TOKENS
from turnlog.domain.errors import InvalidInputError
from turnlog.domain.hooks import (
    AnswerInfo,
    CompactionInfo,
    HookResult,
    SessionStartInfo,
    StepInfo,
    ToolCallInfo,
    UserPromptInfo,
)


def _noop(method: Any) -> Any:
    method.__turnlog_noop__ = True
    return method


class Middleware:
    """Base class: every hook does nothing until overridden."""

    name = "middleware"

    @_noop
    def session_start(self, info: SessionStartInfo) -> HookResult | None:
        """The session starts (``startup``) or restarts after compaction."""
        return None

    @_noop
    def user_prompt(self, info: UserPromptInfo) -> HookResult | None:
        """Input arrives (``info.kind`` says which); may reject it."""
        return None

    @_noop
    def pre_model(self, info: StepInfo) -> HookResult | None:
        """A model step is being prepared."""
        return None

    @_noop
    def model_request(self, info: StepInfo) -> HookResult | None:
        """The model request is about to be sent."""
        return None

    @_noop
    def pre_tool(self, info: ToolCallInfo) -> HookResult | None:
        """A tool call is about to be decided and run."""
        return None

    @_noop
    def post_tool(self, info: ToolCallInfo) -> HookResult | None:
        """A tool call ran; ``info.output`` holds what it returned."""
        return None

    @_noop
    def final_answer(self, info: AnswerInfo) -> HookResult | None:
        """The model's final answer, before the turn completes with it."""
        return None

    @_noop
    def pre_compact(self, info: CompactionInfo) -> HookResult | None:
        """Compaction is about to run."""
        return None

    @_noop
    def post_compact(self, info: CompactionInfo) -> HookResult | None:
        """Compaction ran (still provisional until the step is prepared)."""
        return None


class Compaction(Middleware):
    """Compacts the context before a step once it is estimated over a threshold.

    The model's native compaction endpoint is used when the provider has one
    (an ``async compact(request)`` method); otherwise a summarising model
    call replaces the earlier conversation with the user's own most recent
    messages, kept as they wrote them, and a summary of the rest. The
    summary is an item of its own kind (``turnlog_kind``
    ``compaction_summary``), never a user message; ``session.messages()``
    keeps the whole conversation, ``session.context()`` shows what the
    model is sent. Its place in the middleware list matters: hooks listed
    after it run after compaction, and the compaction stays provisional
    (not in the checkpoint) until they settle.

    Args:
        threshold_tokens: compact when the context is estimated above this.
        keep_user_tokens: how many tokens (about four bytes each) of the
            user's most recent messages a summary compaction keeps, newest
            first (the message that crosses the budget is cut short); 0
            keeps none. Default: 20,000 (as Codex), at most half of
            ``threshold_tokens`` so the compacted context fits under it.
    """

    name = "compaction"

    def __init__(
        self, threshold_tokens: int, *, keep_user_tokens: int | None = None
    ) -> None:
        self.compaction_threshold = _count(threshold_tokens, "threshold_tokens", 1)
        if keep_user_tokens is None:
            keep_user_tokens = min(DEFAULT_KEEP_USER_TOKENS, threshold_tokens // 2)
        self.compaction_keep_user_tokens = _count(
            keep_user_tokens, "keep_user_tokens", 0
        )


def _count(value: object, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be an int"
        raise InvalidInputError(msg)
    if value < least:
        msg = f"{name} must be at least {least}"
        raise InvalidInputError(msg)
    return value
