"""The model context as a pure function of Turn events.

The SessionActor folds events into the context as it records them, the
checkpoint projection folds the same events from the log, and a revived
session folds them again: one function, so the three always agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from turnlog.domain.answers import AnswerRejected, answer_feedback
from turnlog.domain.compaction import ContextCompacted
from turnlog.domain.jobs import JobResultTaken, job_note
from turnlog.domain.model import Item, function_call_output, user_message
from turnlog.domain.turn_events import (
    HookContextAdded,
    InputAccepted,
    ModelStepCompleted,
    ToolCallFinished,
)

PROMPT_CACHE_BREAKPOINT_FIELD = "prompt_cache_breakpoint"
"""A content part carrying this field (True) ends the cacheable prefix."""

COMPACTION_MARKER_TEXT = "The conversation before this point was compacted."


def compaction_marker() -> Item:
    """The item that closes a compacted prefix; it holds the one breakpoint."""
    return {
        "type": "message",
        "role": "developer",
        "content": [
            {
                "type": "input_text",
                "text": COMPACTION_MARKER_TEXT,
                PROMPT_CACHE_BREAKPOINT_FIELD: True,
            }
        ],
        "turnlog_kind": "compaction_marker",
    }


MESSAGE_INPUT_KINDS = frozenset({"prompt", "follow_up", "steer"})

REWRITTEN_BY_FIELD = "turnlog_rewritten_by"
"""On the context item of input user_prompt hooks rewrote: their names."""


class Message(msgspec.Struct, frozen=True, omit_defaults=True):
    """A user or assistant message of the conversation.

    ``content`` is what the model was given. For input a user_prompt hook
    rewrote, ``original`` is what the user wrote, if the hook let it be
    kept (None otherwise, and for every other message).
    """

    role: str
    content: str
    original: str | None = None

    @classmethod
    def user(cls, content: str) -> Message:
        """A user message."""
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str) -> Message:
        """An assistant message."""
        return cls("assistant", content)


def context_items(event: object) -> list[Item]:
    """The context items one Turn event adds (most add none)."""
    cls = type(event)
    adds = _ADDS_ITEMS.get(cls)
    if adds is None:
        adds = _ADDS_ITEMS[cls] = issubclass(cls, _ITEM_CASES)
    if not adds:
        # Most events: none of the cases below can match them, and trying
        # each costs an isinstance, for every event, in every fold.
        return []
    match event:
        case InputAccepted(kind=kind, text=text, attachments=attachments):
            item = user_message(text)
            if kind not in MESSAGE_INPUT_KINDS:
                item["role"] = "developer"
                item["input_kind"] = kind
            if attachments:
                item["attachments"] = [dict(a) for a in attachments]
            if event.rewritten_by:  # who rewrote it; never the original
                item[REWRITTEN_BY_FIELD] = list(event.rewritten_by)
            return [item]
        case ModelStepCompleted(output=output):
            return [dict(item) for item in output]
        case ToolCallFinished(call_id=call_id, output=output, media=media):
            return [function_call_output(call_id, output, media)]
        case HookContextAdded(hook=hook, text=text):
            return [
                {
                    "type": "message",
                    "role": "developer",
                    "content": text,
                    "turnlog_kind": hook,
                }
            ]
        case JobResultTaken():
            return [
                {
                    "type": "message",
                    "role": "developer",
                    "content": job_note(event),
                    "turnlog_kind": "job_result",
                }
            ]
        case AnswerRejected(final=False):
            # The refused answer is in the context already (its step's
            # output); the model is told why, to answer again.
            return [
                {
                    "type": "message",
                    "role": "developer",
                    "content": answer_feedback(event),
                    "turnlog_kind": "answer_rejected",
                }
            ]
        case _:
            return []


_ITEM_CASES: tuple[type[Any], ...] = (
    InputAccepted,
    ModelStepCompleted,
    ToolCallFinished,
    HookContextAdded,
    JobResultTaken,
    AnswerRejected,
)
"""The classes of ``context_items``'s cases, in their order
(tests/domain/test_translation_cases.py holds the two together)."""

_ADDS_ITEMS: dict[type[Any], bool] = {}


def apply_to_context(items: list[Item], event: object) -> None:
    """Folds one event into the context ``items``, in place.

    Most events append items; ``ContextCompacted`` replaces them all with
    the compactor's output, closed by the compaction marker.
    """
    if isinstance(event, ContextCompacted):
        items[:] = [dict(item) for item in event.items]
        items.append(compaction_marker())
        return
    if _ADDS_ITEMS.get(type(event)) is False:
        return  # most events, known to add none: no call to ask again
    items.extend(context_items(event))


def fold_context(
    events: Iterable[object], into: list[Item] | None = None
) -> list[Item]:
    """Folds ``events`` into ``into`` (or a new list) and returns it."""
    items = [] if into is None else into
    for event in events:
        apply_to_context(items, event)
    return items


def messages_of(items: Sequence[Item]) -> list[Message]:
    """The user and assistant messages among context items, in order."""
    messages = []
    for item in items:
        if item.get("type") != "message":
            continue
        role = item.get("role")
        content: Any = item.get("content")
        if role in ("user", "assistant") and isinstance(content, str):
            messages.append(Message(role, content))
    return messages


def conversation_messages(event: object) -> list[Message]:
    """The messages one Turn event adds to the conversation as it happened.

    A compaction adds none and takes none away: it changes what the model
    is sent, not what was said.
    """
    messages = messages_of(context_items(event))
    if isinstance(event, InputAccepted) and event.original_text is not None:
        return [Message(m.role, m.content, event.original_text) for m in messages]
    return messages


def fold_conversation(events: Iterable[object]) -> list[Message]:
    """The conversation's user and assistant messages among ``events``."""
    return [message for event in events for message in conversation_messages(event)]


def holds_whole_conversation(items: Sequence[Item]) -> bool:
    """Whether ``messages_of(items)`` is the whole conversation: no compaction
    replaced its start, and no user's original text of a rewrite is missing."""
    return not any(
        item.get("turnlog_kind") == "compaction_marker" or REWRITTEN_BY_FIELD in item
        for item in items
    )


def arguments_of(items: Sequence[Item], call_id: str) -> str:
    """The arguments the model gave call ``call_id`` (from the context)."""
    for item in reversed(items):
        if item.get("type") == "function_call" and item.get("call_id") == call_id:
            return str(item.get("arguments", ""))
    return "{}"
