"""Evaluating an agent's instructions function before a model step.

It runs as the step is prepared, on the I/O loop (a plain function on a
worker thread, so it cannot stall the loop); what it gives is recorded
with the step (``InstructionsEvaluated``). A function that raises, or
gives something that is not text, fails the turn with the reason.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from turnlog.domain.errors import TurnlogError
from turnlog.domain.run_context import RunContext
from turnlog.domain.text import encodable_text


class InstructionsFailedError(TurnlogError):
    """An agent's instructions function raised, or gave something not text."""


def function_name(function: Callable[..., Any]) -> str:
    """How the log and errors name an instructions function: module.qualname."""
    module = getattr(function, "__module__", None) or ""
    qualname = getattr(function, "__qualname__", None) or type(function).__qualname__
    return f"{module}.{qualname}" if module else qualname


async def evaluate_instructions(
    function: Callable[[RunContext[Any]], Any], context: RunContext[Any] | None
) -> str:
    """The text ``function`` gives for ``context``; raises InstructionsFailedError."""
    assert context is not None  # the session gives every prepared step one
    name = function_name(function)
    try:
        if inspect.iscoroutinefunction(function):
            text = await function(context)
        else:
            text = await asyncio.to_thread(function, context)
            if inspect.isawaitable(text):  # a callable object with async __call__
                text = await text
    except asyncio.CancelledError:
        raise
    except Exception as error:
        msg = f"instructions function {name} failed: {type(error).__name__}: {error}"
        raise InstructionsFailedError(msg) from error
    if not isinstance(text, str):
        msg = f"instructions function {name} gave {type(text).__name__}, not a str"
        raise InstructionsFailedError(msg)
    return encodable_text(text)[0]
