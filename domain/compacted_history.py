"""The context a summary compaction leaves behind.

As Codex's compaction does (``codex-rs/core/src/compact.rs``), the
compacted context keeps the user's own recent messages verbatim, newest
first back to a token budget (the one that crosses it cut short), in
their order, and then the summary. The summary is never a user message:
it is a developer item of its own kind (``turnlog_kind``
``compaction_summary``), its text opened by a line saying what it is, so
a provider that has to send it with the user role still frames it as a
summary, and turnlog's views never count it among the user's words.

Earlier compactions' summaries are not user messages either: a summary
item, or a user message opening with the summary line histories recorded
before (``Summary of the conversation so far:``), is never kept as one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnlog.domain.model import Item

SUMMARY_KIND = "compaction_summary"
"""The ``turnlog_kind`` of the summary item."""

SUMMARY_PREFIX = (
    "Summary of the conversation before this point, written when the context "
    "was compacted (it is not the user's words; the user's most recent "
    "messages are kept above it as they wrote them):"
)

LEGACY_SUMMARY_PREFIX = "Summary of the conversation so far:\n"
"""How summaries opened, as user messages, in histories recorded before."""

DEFAULT_KEEP_USER_TOKENS = 20_000
"""Codex's budget for the user messages a compaction keeps."""

CUT_NOTE = "\n[turnlog: the rest of this message was left out by compaction]"


def summary_item(text: str) -> Item:
    """The item that holds a compaction's summary ``text``."""
    return {
        "type": "message",
        "role": "developer",
        "content": f"{SUMMARY_PREFIX}\n{text}",
        "turnlog_kind": SUMMARY_KIND,
    }


def is_summary(item: Item) -> bool:
    """Whether ``item`` is a compaction's summary (of now or of before)."""
    if item.get("turnlog_kind") == SUMMARY_KIND:
        return True
    content = item.get("content")
    return (
        item.get("role") == "user"
        and isinstance(content, str)
        and content.startswith(LEGACY_SUMMARY_PREFIX)
    )


def is_users_own(item: Item) -> bool:
    """Whether ``item`` is a message the user wrote (not a summary, not a hook's)."""
    return (
        item.get("type") == "message"
        and item.get("role") == "user"
        and "turnlog_kind" not in item
        and not is_summary(item)
    )


def approx_tokens(text: str) -> int:
    """Codex's estimate: four bytes of UTF-8 a token, rounded up."""
    return (len(text.encode()) + 3) // 4


def recent_user_messages(items: Sequence[Item], budget: int) -> list[Item]:
    """The user's own messages among ``items``, newest back to ``budget`` tokens.

    In their order; the message that crosses the budget is cut short (with
    a note saying so), and older ones are left out.
    """
    kept: list[Item] = []
    remaining = budget
    for item in reversed([i for i in items if is_users_own(i)]):
        if remaining <= 0:
            break
        content: Any = item.get("content")
        if not isinstance(content, str):
            continue  # multi-part content is not turnlog's own: left to the summary
        tokens = approx_tokens(content)
        copy = dict(item)
        if tokens > remaining:
            copy["content"] = _cut(content, remaining) + CUT_NOTE
            kept.append(copy)
            break
        kept.append(copy)
        remaining -= tokens
    kept.reverse()
    return kept


def _cut(text: str, tokens: int) -> str:
    """The start of ``text`` within about ``tokens`` tokens, whole characters."""
    return text.encode()[: tokens * 4].decode(errors="ignore")


def compacted_history(items: Sequence[Item], summary: str, budget: int) -> list[Item]:
    """What replaces ``items``: the recent user messages, then the summary."""
    return [*recent_user_messages(items, budget), summary_item(summary)]
