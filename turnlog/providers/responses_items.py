"""turnlog's context as Responses input items, and Responses items back.

Context items are already Responses-shaped; what changes at this edge is
turnlog's bookkeeping: item keys the server must not see are left out,
attachments become a note the model can read, a tool output's images
become ``input_image`` content of its ``function_call_output``, and the
compaction marker's prompt cache breakpoint becomes an explicit one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from turnlog.domain.context import PROMPT_CACHE_BREAKPOINT_FIELD
from turnlog.domain.model import Item, function_call
from turnlog.providers.anthropic_messages import THINKING_ITEM
from turnlog.providers.errors import MalformedStreamError
from turnlog.providers.tool_media import data_url, media_parts, with_dropped_note
from turnlog.providers.wire import (
    attachment_note,
    text_of_parts,
    token_usage,
    without_turnlog_keys,
)


def responses_input(
    items: Iterable[Mapping[str, Any]], cache_breakpoints: bool
) -> list[Item]:
    """Context items as Responses ``input`` items, without turnlog's keys."""
    translated: list[Item] = []
    for item in items:
        kind = item.get("type")
        if kind == "message":
            translated.append(_input_message(item, cache_breakpoints))
        elif kind == "function_call":
            translated.append(
                function_call(item["call_id"], item["name"], item["arguments"])
            )
        elif kind == "function_call_output":
            translated.append(_function_call_output(item))
        elif kind == THINKING_ITEM:
            continue  # Anthropic's thinking: only an Anthropic server reads it
        else:  # compaction and other items the server made: sent back as they came
            translated.append(without_turnlog_keys(item))
    return translated


def _function_call_output(item: Mapping[str, Any]) -> Item:
    """A tool output; its images as ``input_image`` content beside the text."""
    images, dropped = media_parts(item)
    text = with_dropped_note(item["output"], dropped, "the Responses API")
    output: str | list[Item] = text
    if images:
        parts: list[Item] = [{"type": "input_text", "text": text}] if text else []
        parts += [{"type": "input_image", "image_url": data_url(i)} for i in images]
        output = parts
    return {
        "type": "function_call_output",
        "call_id": item["call_id"],
        "output": output,
    }


def _input_message(item: Mapping[str, Any], cache_breakpoints: bool) -> Item:
    content = item.get("content")
    note = attachment_note(item)
    if isinstance(content, str):
        if note:
            content = f"{content}\n\n{note}" if content else note
        return {"type": "message", "role": item.get("role"), "content": content}
    parts: list[Item] = []
    for part in content if isinstance(content, list) else []:
        cleaned = {
            key: value
            for key, value in part.items()
            if key != PROMPT_CACHE_BREAKPOINT_FIELD and not key.startswith("turnlog_")
        }
        breakpoint_ = part.get(PROMPT_CACHE_BREAKPOINT_FIELD)
        if cache_breakpoints and breakpoint_:
            explicit = (
                breakpoint_ if isinstance(breakpoint_, dict) else {"mode": "explicit"}
            )
            cleaned[PROMPT_CACHE_BREAKPOINT_FIELD] = explicit
        parts.append(cleaned)
    if note:
        parts.append({"type": "input_text", "text": note})
    return {"type": "message", "role": item.get("role"), "content": parts}


def responses_usage(usage: object) -> dict[str, int] | None:
    """Responses usage in turnlog's counters; None if the server sent none."""
    if not isinstance(usage, dict):
        return None
    return token_usage(usage, "input_tokens", "output_tokens")


def compacted_item(item: object, where: str) -> Item:
    """An item of a compaction's output, as turnlog keeps it in the context.

    Messages whose parts are all text become plain-text messages (as
    turnlog's own are); server bookkeeping (``id``, ``status``) is dropped
    from messages; the opaque compaction item is kept as it came.
    """
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        msg = f"the compaction from {where} holds an item without a type: {item!r:.80}"
        raise MalformedStreamError(msg)
    if item["type"] != "message":
        return dict(item)
    content = item.get("content")
    text = text_of_parts(content)
    return {
        "type": "message",
        "role": item.get("role", "user"),
        "content": text if text is not None else content,
    }
