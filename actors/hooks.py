"""Running middleware hooks, and the preparation of a model step.

Everything here is a coroutine on the I/O loop, started and owned by the
TurnActor: plain (sync) hooks run on a worker thread so they cannot stall
the loop, and cancelling the coroutine (an interrupt) stops between hooks.
Facts go to the SessionActor by ``tell``; nothing here writes the log.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Sequence
from typing import Any

import msgspec

from turnlog.domain.compacted_history import (
    DEFAULT_KEEP_USER_TOKENS,
    compacted_history,
)
from turnlog.domain.errors import InvalidInputError, ProviderError, TurnlogError
from turnlog.domain.hooks import (
    CompactionInfo,
    HookResult,
    SessionStartInfo,
    StepInfo,
    UserPromptInfo,
)
from turnlog.domain.inputs import check_input
from turnlog.domain.model import Item, ModelRequest, ModelResponse, user_message
from turnlog.domain.rewrites import InputRewrite, rewritten

SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation so far for your own later use: the user's "
    "goals, what was decided and done (with tool results that matter), and "
    "what is still open. Be complete but brief."
)


class HookFailedError(TurnlogError):
    """A middleware hook raised, or answered something that is not a HookResult."""


def implements(layer: Any, hook: str) -> bool:
    """Whether ``layer`` overrides ``hook`` (base-class hooks do nothing)."""
    method = getattr(layer, hook, None)
    return callable(method) and not getattr(method, "__turnlog_noop__", False)


def any_implements(layers: Sequence[Any], hook: str) -> bool:
    """Whether any of ``layers`` overrides ``hook``."""
    return any(implements(layer, hook) for layer in layers)


async def run_hook(layer: Any, hook: str, info: Any) -> HookResult | None:
    """Runs one hook of one middleware; raises HookFailedError on failure."""
    if not implements(layer, hook):
        return None
    method = getattr(layer, hook)
    name = getattr(layer, "name", type(layer).__name__)
    try:
        if inspect.iscoroutinefunction(method):
            result = await method(info)
        else:
            result = await asyncio.to_thread(method, info)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        msg = f"{hook} hook of {name} failed: {type(error).__name__}: {error}"
        raise HookFailedError(msg) from error
    if result is not None and not isinstance(result, HookResult):
        msg = f"{hook} hook of {name} returned {result!r}, not a HookResult or None"
        raise HookFailedError(msg)
    return result


class Prepared(msgspec.Struct):
    """What preparing a step produced (told to the session as StepPrepared)."""

    contexts: list[tuple[str, str]] = msgspec.field(default_factory=list)
    compaction: tuple[str, list[Item], dict[str, int] | None] | None = None
    stop: str | None = None


def estimate_tokens(items: Sequence[Item]) -> int:
    """A rough token count of ``items`` (four bytes of JSON a token)."""
    return len(msgspec.json.encode(list(items))) // 4 + 1


def _compaction_due(layer: Any, items: Sequence[Item]) -> bool:
    threshold = getattr(layer, "compaction_threshold", None)
    if not isinstance(threshold, int):
        return False
    if items and items[-1].get("turnlog_kind") == "compaction_marker":
        return False  # nothing new since the last compaction
    return estimate_tokens(items) > threshold


class PromptReview(msgspec.Struct, frozen=True):
    """What the user_prompt hooks answered for one input."""

    rejection: str | None = None
    contexts: tuple[tuple[str, str], ...] = ()
    stop: str | None = None
    rewrite: InputRewrite | None = None


async def review_prompt(layers: Sequence[Any], info: UserPromptInfo) -> PromptReview:
    """Runs user_prompt hooks in order; a rewrite is what the later ones see."""
    contexts: list[tuple[str, str]] = []
    rewrite: InputRewrite | None = None
    for layer in layers:
        result = await run_hook(layer, "user_prompt", info)
        if result is None:
            continue
        if result.reject is not None:
            return PromptReview(rejection=result.reject)
        if result.rewrite is not None:
            name = _checked_rewrite(layer, result, info.kind)
            rewrite = rewritten(
                rewrite, info.text, name, result.rewrite, result.keep_original
            )
            info = msgspec.structs.replace(info, text=result.rewrite)
        if result.context:
            contexts.append(("user_prompt_hook", result.context))
        if result.stop is not None:
            return PromptReview(None, tuple(contexts), result.stop, rewrite)
    return PromptReview(None, tuple(contexts), None, rewrite)


def _checked_rewrite(layer: Any, result: HookResult, kind: str) -> str:
    """The name of the middleware whose rewrite this is; HookFailedError if
    the rewrite is not usable input."""
    name = str(getattr(layer, "name", type(layer).__name__))
    try:
        check_input(kind, result.rewrite)
    except InvalidInputError as error:
        msg = f"user_prompt hook of {name} rewrote the input badly: {error}"
        raise HookFailedError(msg) from error
    if not isinstance(result.keep_original, bool):
        msg = f"user_prompt hook of {name} gave keep_original that is not a bool"
        raise HookFailedError(msg)
    return name


async def prepare_step(
    *,
    layers: Sequence[Any],
    provider: Any,
    instructions: str,
    info: StepInfo,
    startup: bool,
    compaction_began: Any,
) -> Prepared:
    """Runs the hooks before a model step, compacting where a layer says so.

    ``compaction_began(compaction_id, reason)`` is called as compaction
    starts (the session records it, so the notice shows at once); the
    compaction itself stays provisional in the result until every later
    hook has settled.
    """
    prepared = Prepared()
    items = list(info.items)
    if startup:
        for layer in layers:
            result = await run_hook(
                layer,
                "session_start",
                SessionStartInfo(info.session_id, "startup", info.context),
            )
            if result is not None and result.context:
                prepared.contexts.append(("session_start_hook", result.context))
    for layer in layers:
        if _compaction_due(layer, items):
            stop = await _compact(
                compactor=layer,
                layers=layers,
                provider=provider,
                instructions=instructions,
                info=info,
                items=items,
                prepared=prepared,
                compaction_began=compaction_began,
            )
            if stop is not None:
                prepared.stop = stop
                return prepared
            continue
        if await _hook_stops(layer, "pre_model", info, "pre_model_hook", prepared):
            return prepared
    for layer in layers:
        if await _hook_stops(
            layer, "model_request", info, "model_request_hook", prepared
        ):
            return prepared
    return prepared


async def _hook_stops(
    layer: Any, hook: str, info: Any, kind: str, prepared: Prepared
) -> bool:
    result = await run_hook(layer, hook, info)
    if result is None:
        return False
    if result.context:
        prepared.contexts.append((kind, result.context))
    if result.stop is not None:
        prepared.stop = result.stop
        return True
    return False


async def _compact(
    *,
    compactor: Any,
    layers: Sequence[Any],
    provider: Any,
    instructions: str,
    info: StepInfo,
    items: list[Item],
    prepared: Prepared,
    compaction_began: Any,
) -> str | None:
    """Compacts; returns a stop reason if a hook stopped the turn."""
    compaction_id = uuid.uuid4().hex
    about = CompactionInfo(
        info.session_id,
        info.turn_id,
        compaction_id,
        estimate_tokens(items),
        info.context,
    )
    for layer in layers:
        result = await run_hook(layer, "pre_compact", about)
        if result is not None and result.stop is not None:
            return result.stop
    compaction_began(
        compaction_id, f"context over threshold ({about.estimated_tokens} tokens)"
    )
    keep = getattr(compactor, "compaction_keep_user_tokens", DEFAULT_KEEP_USER_TOKENS)
    replacement, usage = await compact_items(
        provider, instructions, info, items, keep_user_tokens=keep
    )
    prepared.compaction = (compaction_id, replacement, usage)
    items[:] = replacement
    for layer in layers:
        result = await run_hook(layer, "post_compact", about)
        if result is not None and result.stop is not None:
            return result.stop
    for layer in layers:
        result = await run_hook(
            layer,
            "session_start",
            SessionStartInfo(info.session_id, "compact", info.context),
        )
        if result is not None and result.context:
            prepared.contexts.append(("session_start_hook", result.context))
        if result is not None and result.stop is not None:
            return result.stop
    return None


async def compact_items(
    provider: Any,
    instructions: str,
    info: StepInfo,
    items: list[Item],
    *,
    keep_user_tokens: int = DEFAULT_KEEP_USER_TOKENS,
) -> tuple[list[Item], dict[str, int] | None]:
    """The compacted replacement for ``items``, and the usage it cost.

    A provider with ``async compact(request)`` compacts natively; any other
    is asked for a summary. The summary (an item of its own kind, never a
    user message) then replaces the conversation, after the user's own most
    recent messages, kept verbatim up to ``keep_user_tokens``
    (domain.compacted_history).
    """
    request = ModelRequest(
        instructions=instructions,
        items=tuple(items),
        tools=(),
        route=info.route,
        session_id=info.session_id,
        turn_id=info.turn_id,
        step=info.step,
    )
    native = getattr(provider, "compact", None)
    if callable(native):
        response = await native(request)
        return _check_compaction(response), _usage_of(response)
    summary_request = msgspec.structs.replace(
        request,
        instructions=SUMMARY_INSTRUCTIONS,
        items=(*items, user_message("Summarise the conversation so far.")),
    )
    response = await provider.respond(summary_request)
    texts = [
        item.get("content")
        for item in getattr(response, "output", ())
        if isinstance(item, dict) and item.get("type") == "message"
    ]
    if not texts or not isinstance(texts[-1], str) or not texts[-1].strip():
        msg = "the summarising call returned no summary text"
        raise ProviderError(msg)
    replacement = compacted_history(items, texts[-1], keep_user_tokens)
    return replacement, _usage_of(response)


def _usage_of(response: Any) -> dict[str, int] | None:
    usage = getattr(response, "usage", None)
    return dict(usage) if isinstance(usage, dict) else None


def _check_compaction(response: Any) -> list[Item]:
    if not isinstance(response, ModelResponse):
        msg = f"compaction returned {type(response).__name__}, not a ModelResponse"
        raise ProviderError(msg)
    output = list(response.output)
    if not output:
        msg = "compaction returned no items"
        raise ProviderError(msg)
    for index, item in enumerate(output):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            msg = f"compaction item {index} is not an item with a type: {item!r}"
            raise ProviderError(msg)
    try:
        msgspec.json.encode(output)
    except (TypeError, msgspec.EncodeError) as error:
        msg = f"compaction output is not plain JSON data: {error}"
        raise ProviderError(msg) from error
    return [dict(item) for item in output]
