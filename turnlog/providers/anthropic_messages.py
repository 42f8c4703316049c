"""turnlog's context as Anthropic Messages, and Anthropic usage as turnlog's.

The Messages API has two roles that alternate, and everything else is a
content block: the instructions become the ``system`` prompt; assistant
text, the step's thinking and its function calls one assistant message
(thinking first, then text, then ``tool_use`` blocks); the outputs of
those calls ``tool_result`` blocks at the start of the very next user
message (a tool output's images as base64 ``image`` blocks in its
``tool_result``); developer items (hook context, peer and system input) user text
that starts with a bracketed label saying where it came from. A message
arriving while calls are unanswered (a steer during a tool call) waits
until their results are in; a call never answered gets a stand-in result.

Thinking blocks are kept as output items of their own type
(``anthropic_thinking``, the block as the API sent it, signature
included) and sent back in their assistant message, as the API requires
across a tool loop; the other providers leave them out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from turnlog.domain.context import PROMPT_CACHE_BREAKPOINT_FIELD
from turnlog.domain.errors import ProviderError
from turnlog.domain.model import Item
from turnlog.providers.chat_messages import MISSING_OUTPUT, developer_label
from turnlog.providers.tool_media import media_parts, with_dropped_note
from turnlog.providers.wire import attachment_note, put_count

THINKING_ITEM = "anthropic_thinking"
"""The output item type that carries a thinking or redacted_thinking block."""

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
EPHEMERAL = {"type": "ephemeral"}


def thinking_item(block: Mapping[str, Any]) -> Item:
    """The output item that keeps a thinking block (with its signature)."""
    return {"type": THINKING_ITEM, "block": dict(block)}


def anthropic_messages(
    items: Iterable[Mapping[str, Any]], cache_control: bool
) -> list[dict[str, Any]]:
    """turnlog's context as Messages API ``messages`` (see the module docstring).

    With ``cache_control``, the block holding the context's prompt cache
    breakpoint and the last block of the conversation are marked
    ``cache_control: ephemeral``, so a session's growing prefix is read
    from the cache step after step.
    """
    transcript = _Transcript(cache_control)
    for item in items:
        transcript.add(item)
    transcript.close_calls()
    messages = transcript.messages
    if cache_control and messages:
        _mark_last(messages[-1]["content"])
    return messages


class _Transcript:
    """Messages built item by item, keeping tool results next to their calls."""

    def __init__(self, cache_control: bool) -> None:
        self.cache_control = cache_control
        self.messages: list[dict[str, Any]] = []
        self.unanswered: list[str] = []
        self.held: list[dict[str, Any]] = []
        self.open_step = False

    def add(self, item: Mapping[str, Any]) -> None:
        kind = item.get("type")
        if kind == "function_call":
            self._assistant_block(
                {
                    "type": "tool_use",
                    "id": item["call_id"],
                    "name": item["name"],
                    "input": _input_object(item["arguments"]),
                }
            )
            self.unanswered.append(item["call_id"])
        elif kind == "function_call_output":
            self._output(item)
        elif kind == THINKING_ITEM:
            block = item.get("block")
            if isinstance(block, Mapping) and block.get("type") in THINKING_BLOCKS:
                self._assistant_block(dict(block))
        elif kind == "message":
            self._message(item)
        # Other items (a Responses compaction, reasoning) are opaque state of
        # another API; the Messages API cannot read them.

    def close_calls(self) -> None:
        """Answers what is unanswered and releases the held blocks."""
        for call_id in self.unanswered:
            self._append(
                "user",
                {
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": MISSING_OUTPUT,
                    "is_error": True,
                },
            )
        self.unanswered = []
        held, self.held = self.held, []
        for block in held:
            self._append("user", block)

    def _assistant_block(self, block: dict[str, Any]) -> None:
        if not self.open_step:
            # A new step: earlier calls are answered (or never will be).
            self.close_calls()
            self.open_step = True
        self._append("assistant", block)

    def _output(self, item: Mapping[str, Any]) -> None:
        call_id = item["call_id"]
        images, dropped = media_parts(item)
        output = with_dropped_note(item["output"], dropped, "the Messages API")
        image_blocks = [_image_block(image) for image in images]
        self.open_step = False
        if call_id not in self.unanswered:
            # Its call is gone (compacted away): a tool_result would be refused.
            self._user_block(_text(f"[output of tool call {call_id}]\n{output}"))
            for block in image_blocks:
                self._user_block(block)
            return
        self.unanswered.remove(call_id)
        content: str | list[dict[str, Any]] = output
        if image_blocks:
            content = ([_text(output)] if output else []) + image_blocks
        self._append(
            "user", {"type": "tool_result", "tool_use_id": call_id, "content": content}
        )
        if not self.unanswered:
            self.close_calls()

    def _message(self, item: Mapping[str, Any]) -> None:
        role = item.get("role")
        blocks = _blocks(item, self.cache_control)
        if role == "assistant":
            for block in blocks:
                self._assistant_block(block)
            return
        if role != "user":
            blocks.insert(0, _text(f"[{developer_label(item)}]"))
        self.open_step = False
        for block in blocks:
            self._user_block(block)

    def _user_block(self, block: dict[str, Any]) -> None:
        self.open_step = False
        if self.unanswered:
            self.held.append(block)
        else:
            self._append("user", block)

    def _append(self, role: str, block: dict[str, Any]) -> None:
        # The roles alternate: a block of the same role joins the last message.
        if self.messages and self.messages[-1]["role"] == role:
            self.messages[-1]["content"].append(block)
        else:
            self.messages.append({"role": role, "content": [block]})


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image_block(image: Mapping[str, str]) -> dict[str, Any]:
    source = {"type": "base64", "media_type": image["mime_type"], "data": image["data"]}
    return {"type": "image", "source": source}


def _blocks(item: Mapping[str, Any], cache_control: bool) -> list[dict[str, Any]]:
    """A message's content as text (and image) blocks, its breakpoint marked."""
    content = item.get("content")
    blocks: list[dict[str, Any]] = []
    if isinstance(content, str):
        if content:
            blocks.append(_text(content))
    else:
        for part in content if isinstance(content, list) else []:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in ("input_text", "output_text", "text"):
                block = _text(part["text"])
            elif kind == "input_image" and isinstance(part.get("image_url"), str):
                block = {
                    "type": "image",
                    "source": {"type": "url", "url": part["image_url"]},
                }
            else:
                msg = f"a content part of type {kind!r} cannot be sent to Anthropic"
                raise ProviderError(msg)
            if cache_control and part.get(PROMPT_CACHE_BREAKPOINT_FIELD):
                block["cache_control"] = dict(EPHEMERAL)
            blocks.append(block)
    note = attachment_note(item)
    if note:
        blocks.append(_text(note))
    return [block for block in blocks if block.get("type") != "text" or block["text"]]


def _mark_last(blocks: list[dict[str, Any]]) -> None:
    """Marks the last block that may carry ``cache_control`` (not thinking)."""
    for block in reversed(blocks):
        if block.get("type") not in THINKING_BLOCKS:
            block["cache_control"] = dict(EPHEMERAL)
            return


def _input_object(arguments: str) -> dict[str, Any]:
    """A tool call's JSON arguments as the object ``tool_use.input`` must be."""
    try:
        value = msgspec.json.decode(arguments) if arguments else {}
    except msgspec.DecodeError:
        value = None
    if isinstance(value, dict):
        return value
    # The model's arguments were not an object; keep them, readable, as one.
    return {"arguments": arguments}


def anthropic_usage(usage: Mapping[str, Any]) -> dict[str, int] | None:
    """Anthropic usage in turnlog's counters; None if it holds none.

    Anthropic's ``input_tokens`` leaves out the tokens read from and
    written to the cache; turnlog's counts every input token (as OpenAI
    does), with the cache reads as ``cached_input_tokens`` and the cache
    writes as ``cache_write_input_tokens``.
    """
    parts: dict[str, int] = {}
    put_count(parts, "input", usage.get("input_tokens"))
    put_count(parts, "read", usage.get("cache_read_input_tokens"))
    put_count(parts, "write", usage.get("cache_creation_input_tokens"))
    put_count(parts, "output", usage.get("output_tokens"))
    counts: dict[str, int] = {}
    if "input" in parts:
        counts["input_tokens"] = (
            parts["input"] + parts.get("read", 0) + parts.get("write", 0)
        )
    if "read" in parts:
        counts["cached_input_tokens"] = parts["read"]
    if "write" in parts:
        counts["cache_write_input_tokens"] = parts["write"]
    if "output" in parts:
        counts["output_tokens"] = parts["output"]
    if "input_tokens" in counts and "output_tokens" in counts:
        counts["total_tokens"] = counts["input_tokens"] + counts["output_tokens"]
    return counts or None
