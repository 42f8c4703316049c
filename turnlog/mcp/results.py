"""An MCP tool result as a turnlog tool output: text for every model,
images and audio as media parts for the models whose API takes them.

Text blocks are joined by newlines. By the MCP spec a structured result
comes with its JSON as text too, for clients that read only text; a
result with structured content and no blocks is recorded as its JSON.
An image or audio block becomes a media part (recorded once, in the
``ToolCallFinished`` event) and a short line in the text saying where it
was, so the text reads right in an audit and for a model that gets no
media. A block whose data is not base64, or that is larger than
:data:`MAX_MEDIA_BYTES`, is left out with a line saying why.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from mcp.types import CallToolResult

from turnlog.tools import ToolResult

MAX_MEDIA_BYTES = 5 * 1024 * 1024
"""The largest image or audio block passed on (Anthropic's limit per image;
OpenAI's is larger). A larger one would fail every later model call."""


def tool_result(result: CallToolResult) -> ToolResult:
    """The turnlog output of an MCP ``tools/call`` result."""
    if not result.content and result.structured_content is not None:
        output = json.dumps(result.structured_content, ensure_ascii=False)
        return ToolResult(output, bool(result.is_error))
    lines: list[str] = []
    media: list[dict[str, str]] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind in ("image", "audio"):
            lines.append(_media_line(kind, block, media))
        else:
            lines.append(_text_of(kind, block))
    return ToolResult("\n".join(lines), bool(result.is_error), tuple(media))


def _media_line(kind: str, block: Any, media: list[dict[str, str]]) -> str:
    mime_type = str(getattr(block, "mime_type", "") or "application/octet-stream")
    data = str(getattr(block, "data", ""))
    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return f"[{kind} {mime_type} left out: its data is not base64]"
    if size > MAX_MEDIA_BYTES:
        limit = MAX_MEDIA_BYTES // (1024 * 1024)
        return f"[{kind} {mime_type} left out: {size} bytes, over the {limit} MB limit]"
    media.append({"type": kind, "mime_type": mime_type, "data": data})
    return f"[{kind} {len(media)}: {mime_type}, {size} bytes]"


def _text_of(kind: str, block: Any) -> str:
    if kind == "text":
        return str(block.text)
    if kind == "resource_link":
        return f"[resource: {block.uri}]"
    if kind == "resource":
        text = getattr(block.resource, "text", None)
        return str(text) if text is not None else f"[resource: {block.resource.uri}]"
    return f"[{kind or 'unknown'} content]"
