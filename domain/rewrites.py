"""Input a ``user_prompt`` hook rewrote, as recorded.

A hook may replace the text of input under review (``HookResult.rewrite``).
What is recorded is the text the hooks settled on, which hooks rewrote it,
and the user's original text unless a hook said it must not be kept (a
redaction): then the original is stored nowhere, in no event.
"""

from __future__ import annotations

import msgspec


class InputRewrite(msgspec.Struct, frozen=True):
    """What the user_prompt hooks made of input's text."""

    text: str
    """The text the model is given (the last hook's rewrite)."""
    hooks: tuple[str, ...]
    """The middleware that rewrote it, in the order they did."""
    original: str | None
    """The user's text, or None if a hook said it must not be kept."""


def rewritten(
    earlier: InputRewrite | None, original: str, hook: str, text: str, keep: bool
) -> InputRewrite:
    """``earlier`` (or the untouched ``original``) rewritten by ``hook`` to ``text``.

    The original is the user's text from the first rewrite on; one hook
    that will not keep it keeps it out for good.
    """
    if earlier is None:
        return InputRewrite(text, (hook,), original if keep else None)
    return InputRewrite(
        text, (*earlier.hooks, hook), earlier.original if keep else None
    )


def rewritten_again(
    recorded: tuple[tuple[str, ...], str | None], rewrite: InputRewrite | None
) -> InputRewrite | None:
    """A queued input's recorded rewrite (``hooks``, ``original``) followed by
    ``rewrite``, a review of it again at its turn (after a restart)."""
    hooks, original = recorded
    if rewrite is None or not hooks:
        return rewrite
    kept = original if rewrite.original is not None else None
    return InputRewrite(rewrite.text, (*hooks, *rewrite.hooks), kept)
