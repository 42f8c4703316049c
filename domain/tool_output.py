"""The limit on what one tool call shows the model.

A tool (function or MCP) may return any amount of text; the model would
get all of it in this request and every later one, and the log would
keep it for ever. Each call's text output is cut to a limit before it is
recorded: what the log holds is exactly what the model saw, with a
marker saying how much was cut. The part cut is not kept anywhere.

The limit counts characters (Python ``str`` length), not bytes: a model's
context is spent per token, which follows characters far more closely
than UTF-8 bytes, and a cut by characters never splits a character.
"""

from __future__ import annotations

from collections.abc import Mapping

from turnlog.domain.errors import InvalidInputError

DEFAULT_MAX_TOOL_OUTPUT = 30_000
"""Characters of one call's output the model sees, unless told otherwise.

About 7,500 tokens of English or code: a few such outputs fit in even a
32k-token context beside the conversation, and most real outputs (a file,
a page of search results, a command's output) fit whole.
"""


def checked_limit(value: object, what: str) -> int | None:
    """``value`` as a limit (None: not set here); InvalidInputError if not one."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{what} must be a positive number of characters, not {value!r}"
        raise InvalidInputError(msg)
    return value


def checked_limits(value: object, what: str) -> int | Mapping[str, int] | None:
    """A limit, or a limit per tool name (for an MCP server)."""
    if not isinstance(value, Mapping):
        return checked_limit(value, what)
    limits: dict[str, int] = {}
    for name, limit in value.items():
        checked = checked_limit(limit, f"{what}[{name!r}]")
        if not isinstance(name, str) or checked is None:
            msg = f"{what} must map tool names to positive numbers of characters"
            raise InvalidInputError(msg)
        limits[name] = checked
    return limits


def limit_output(output: str, limit: int) -> str:
    """``output`` cut to ``limit`` characters, with a marker if it was cut.

    The marker says how many characters were cut and that the rest is not
    kept, so the model (and a reader of the log) knows the output is
    partial. The result may exceed ``limit`` by the marker's length.
    """
    if len(output) <= limit:
        return output
    cut = len(output) - limit
    return (
        f"{output[:limit]}\n[turnlog: tool output truncated: {cut:,} of "
        f"{len(output):,} characters cut (limit {limit:,}); the rest is not kept]"
    )
