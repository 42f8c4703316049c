"""turnlog's context as Chat Completions messages.

The instructions become the system message; assistant text and the
function calls of the same step one assistant message with
``tool_calls``; each output a ``tool`` message right after its call (its
images in a user message after the step's tool messages, since a tool
message holds text only);
developer items (hook context, peer and system input, a compaction's
summary) messages of the
configured role that start with a bracketed label saying where they came
from. Items of another API's own (a Responses compaction, reasoning) are
left out: a chat server cannot read them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from turnlog.domain.compacted_history import SUMMARY_KIND
from turnlog.domain.errors import ProviderError
from turnlog.providers.tool_media import data_url, media_parts, with_dropped_note
from turnlog.providers.wire import attachment_note, text_of_parts

DeveloperRole = Literal["user", "system", "developer"]

MISSING_OUTPUT = "no output was recorded for this call"
"""Sent for a tool call whose output is missing (the turn was interrupted),
since chat servers refuse an assistant tool call with no tool answer."""

DEVELOPER_LABELS = {
    "peer": "message from another agent",
    "system": "message from the host system",
}
KIND_LABELS = {SUMMARY_KIND: "summary of the earlier conversation"}


def developer_label(item: Mapping[str, Any]) -> str:
    """What a developer item is, for a server that has no developer role."""
    label = DEVELOPER_LABELS.get(str(item.get("input_kind")))
    return label or KIND_LABELS.get(str(item.get("turnlog_kind")), "developer message")


def chat_messages(
    instructions: str, items: Iterable[Mapping[str, Any]], developer_role: DeveloperRole
) -> list[dict[str, Any]]:
    """turnlog's context as chat messages (see the module docstring)."""
    transcript = _Transcript(developer_role)
    if instructions:
        transcript.messages.append({"role": "system", "content": instructions})
    for item in items:
        transcript.add(item)
    transcript.close_calls()
    return transcript.messages


class _Transcript:
    """Chat messages built item by item, keeping tool answers next to their calls.

    Chat servers want an assistant message's tool calls answered by the
    very next messages. A message that arrives while calls are still
    unanswered (a steer during a tool call, hook context) is held back
    until the answers are in; a call never answered gets a stand-in answer.
    """

    def __init__(self, developer_role: DeveloperRole) -> None:
        self.developer_role = developer_role
        self.messages: list[dict[str, Any]] = []
        self.unanswered: list[str] = []
        self.held: list[dict[str, Any]] = []
        self.open_assistant: dict[str, Any] | None = None

    def add(self, item: Mapping[str, Any]) -> None:
        kind = item.get("type")
        if kind == "function_call":
            self._call(item)
        elif kind == "function_call_output":
            self._output(item)
        elif kind == "message":
            self._message(item)
        # Other items (a Responses compaction, reasoning) are opaque state of
        # another API; a chat server cannot read them.

    def close_calls(self) -> None:
        """Answers what is unanswered and releases the held messages."""
        for call_id in self.unanswered:
            self.messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": MISSING_OUTPUT}
            )
        self.unanswered = []
        self.messages.extend(self.held)
        self.held = []

    def _call(self, item: Mapping[str, Any]) -> None:
        call = {
            "id": item["call_id"],
            "type": "function",
            "function": {"name": item["name"], "arguments": item["arguments"]},
        }
        assistant = self.open_assistant
        if assistant is None:
            self.close_calls()
            assistant = {"role": "assistant", "content": None}
            self.messages.append(assistant)
            self.open_assistant = assistant
        assistant.setdefault("tool_calls", []).append(call)
        self.unanswered.append(item["call_id"])

    def _output(self, item: Mapping[str, Any]) -> None:
        call_id = item["call_id"]
        images, dropped = media_parts(item)
        output = with_dropped_note(item["output"], dropped, "Chat Completions")
        self.open_assistant = None
        if images:
            output += (
                f"\n[turnlog: its {len(images)} image(s) follow in a user message]"
            )
        if call_id not in self.unanswered:
            # Its call is gone (compacted away): a tool message would be refused.
            self._put(
                {
                    "role": "user",
                    "content": f"[output of tool call {call_id}]\n{output}",
                }
            )
        else:
            self.unanswered.remove(call_id)
            self.messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": output}
            )
        if images:
            # Held until the step's tool messages are all in: a user message
            # between them would be refused.
            self._put({"role": "user", "content": _image_message(call_id, images)})
        if not self.unanswered:
            self.close_calls()

    def _message(self, item: Mapping[str, Any]) -> None:
        role = item.get("role")
        if role == "assistant":
            self.close_calls()
            message = {"role": "assistant", "content": _plain_text(item)}
            self.messages.append(message)
            self.open_assistant = message
            return
        self.open_assistant = None
        if role == "user":
            self._put({"role": "user", "content": _user_content(item)})
            return
        text = f"[{developer_label(item)}]\n{_plain_text(item)}"
        self._put({"role": self.developer_role, "content": text})

    def _put(self, message: dict[str, Any]) -> None:
        (self.held if self.unanswered else self.messages).append(message)


def _image_message(call_id: str, images: list[dict[str, str]]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": f"[images from the output of tool call {call_id}]"}
    ]
    parts += [{"type": "image_url", "image_url": {"url": data_url(i)}} for i in images]
    return parts


def _plain_text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    text = content if isinstance(content, str) else text_of_parts(content)
    if text is None:
        role = item.get("role")
        msg = f"a {role} message with non-text content cannot go to a chat server"
        raise ProviderError(msg)
    note = attachment_note(item)
    return f"{text}\n\n{note}" if note else text


def _user_content(item: Mapping[str, Any]) -> str | list[dict[str, Any]]:
    content = item.get("content")
    if isinstance(content, str) or text_of_parts(content) is not None:
        return _plain_text(item)
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        else:
            msg = f"a content part of type {kind!r} cannot be sent to a chat server"
            raise ProviderError(msg)
    note = attachment_note(item)
    if note:
        parts.append({"type": "text", "text": note})
    return parts
