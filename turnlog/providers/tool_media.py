"""Image and audio parts of tool outputs, as each API can take them.

A tool output may carry media parts (``domain.model.MediaPart``). What
each dialect does with them:

- Responses: images go in the ``function_call_output`` itself, as
  ``input_image`` content beside the text.
- Chat Completions: a ``tool`` message holds text only, so the images
  follow in a user message after the step's tool messages.
- Anthropic Messages: images go in the ``tool_result`` content, as
  base64 ``image`` blocks beside the text.

Everywhere, audio, and images of a type the APIs do not read (anything
but PNG, JPEG, GIF and WebP), are left out, and the text says what was
left out and why, so the model knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types all three APIs accept as input."""


def media_parts(item: Mapping[str, Any]) -> tuple[list[dict[str, str]], list[str]]:
    """The images of a tool output that can be sent, and what cannot.

    Returns:
        The image parts to send, and a description (``audio/wav audio``)
        of each part left out.
    """
    images: list[dict[str, str]] = []
    dropped: list[str] = []
    media = item.get("media")
    for part in media if isinstance(media, list) else []:
        if not isinstance(part, Mapping):
            continue
        kind, mime_type = str(part.get("type")), str(part.get("mime_type"))
        if kind == "image" and mime_type in IMAGE_TYPES:
            images.append(
                {"type": kind, "mime_type": mime_type, "data": str(part.get("data"))}
            )
        else:
            dropped.append(f"{mime_type} {kind}")
    return images, dropped


def data_url(part: Mapping[str, str]) -> str:
    """A media part as a ``data:`` URL."""
    return f"data:{part['mime_type']};base64,{part['data']}"


def with_dropped_note(text: str, dropped: list[str], api: str) -> str:
    """``text``, with a line naming what of the output was left out (if any)."""
    if not dropped:
        return text
    note = (
        f"[turnlog: left out of this tool output: {', '.join(dropped)}; "
        f"{api} takes only PNG, JPEG, GIF and WebP images here]"
    )
    return f"{text}\n{note}" if text else note
