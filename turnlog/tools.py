"""Function tools: Python callables the model can call.

``function_tool`` turns a function (sync or async) into a tool. Its JSON
schema comes from the type hints through pydantic, or is given explicitly;
the model's arguments are validated before the call, and invalid JSON or
arguments become an error output naming the problem (the handler is not
called). A handler that raises also becomes an error output: a tool never
crashes the turn.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, get_type_hints, overload

import msgspec
import pydantic

from turnlog.domain.errors import InvalidInputError, UsageError
from turnlog.domain.model import ToolSpec
from turnlog.domain.run_context import Deps, RunContext
from turnlog.domain.tool_output import checked_limit

ApprovalRule = bool | Callable[[dict[str, Any]], bool]
_NO_STATE: Mapping[str, Any] = MappingProxyType({})
_NO_JOBS: Mapping[str, Callable[..., Any]] = MappingProxyType({})


class ToolResult(msgspec.Struct, frozen=True):
    """What a tool call produced, as the model will see it.

    Attributes:
        output: the text of the output.
        is_error: whether the call failed.
        media: image and audio parts, each ``{"type": "image" | "audio",
            "mime_type": ..., "data": <base64>}``; each provider sends the
            ones its API accepts (see the README's MCP section).
    """

    output: str
    is_error: bool = False
    media: tuple[dict[str, str], ...] = ()


class SharedStateUpdater(Protocol):
    """How a ToolContext reaches its session (the session gives one)."""

    def update(self, changes: dict[str, Any]) -> dict[str, Any]: ...

    async def update_async(self, changes: dict[str, Any]) -> dict[str, Any]: ...


class JobStarter(Protocol):
    """How a ToolContext starts background jobs (the session gives one)."""

    def start(
        self,
        name: str,
        work: Callable[..., Any],
        arguments: tuple[Any, ...],
        idempotent: bool,
    ) -> str: ...

    async def start_async(
        self,
        name: str,
        work: Callable[..., Any],
        arguments: tuple[Any, ...],
        idempotent: bool,
    ) -> str: ...


@dataclass(frozen=True, kw_only=True)
class ToolContext(RunContext[Deps]):
    """Where a call runs; a handler gets it if it has a ``context`` parameter.

    A :class:`RunContext` (session and turn ids, the agent's name, the
    shared state as the call started, the run's ``deps``) and the call's
    id. Annotate it ``ToolContext[MyDeps]`` to type ``context.deps``.
    """

    turn_id: str
    """The id of the turn that made the call."""
    call_id: str
    """The id of the call, as the model gave it."""
    updater: SharedStateUpdater | None = field(default=None, repr=False, compare=False)
    """The session's side of ``update_shared_state`` (None outside a session)."""
    jobs: JobStarter | None = field(default=None, repr=False, compare=False)
    """The session's side of ``start_job`` (None outside a session)."""

    def update_shared_state(self, **changes: Any) -> dict[str, Any]:
        """Sets keys of the session's shared state; returns the new state.

        Recorded (``SharedStateUpdated``) before this returns, so before
        the call's output. Waits for the session: in an ``async`` tool use
        :meth:`update_shared_state_async` (this raises UsageError there).

        Raises:
            SessionClosedError: the session is closed.
            UsageError: the call is no longer running (it timed out, or its
                turn ended), or this was called on the event loop.
            InvalidInputError: a value is not JSON data.
        """
        return self._updater().update(changes)

    async def update_shared_state_async(self, **changes: Any) -> dict[str, Any]:
        """:meth:`update_shared_state` for async tools (never blocks the loop)."""
        return await self._updater().update_async(changes)

    def start_job(
        self,
        name: str,
        work: Callable[..., Any],
        *args: object,
        idempotent: bool = False,
    ) -> str:
        """Starts a background job: ``work(*args)`` runs on after this call.

        ``work`` is a plain function (it runs on a thread of its own) or a
        coroutine function (on the runtime's I/O loop). ``JobStarted`` is
        recorded before it begins; this returns the job's id at once, for
        the tool's output ("build started as job J"). What ``work`` returns
        (text, a ToolResult, or JSON data) or raises is recorded as
        ``JobFinished`` and reaches the model at its next step, as a steer
        does; a session that is idle by then gets a ``JobFinishedMsg``
        notification, and no turn starts for it. Waits for the session: in
        an ``async`` tool use :meth:`start_job_async`.

        Args:
            name: what the job is ("build"); the model sees it with the result.
            work: the function to run.
            *args: its arguments.
            idempotent: whether running it again is harmless: if its
                process stops first, a reopened session runs it again
                (otherwise it is recorded as interrupted). Such a job must
                be declared on its tool, ``function_tool(jobs={name:
                work})``, and its ``args`` must be JSON data (recorded).

        Raises:
            SessionClosedError: the session is closed.
            UsageError: the call is no longer running, an idempotent job is
                not declared, or this was called on the event loop.
            InvalidInputError: an idempotent job's ``args`` are not JSON data.
        """
        return self._job_starter().start(name, work, args, idempotent)

    async def start_job_async(
        self,
        name: str,
        work: Callable[..., Any],
        *args: object,
        idempotent: bool = False,
    ) -> str:
        """:meth:`start_job` for async tools (never blocks the loop)."""
        return await self._job_starter().start_async(name, work, args, idempotent)

    def _job_starter(self) -> JobStarter:
        if self.jobs is None:
            msg = "this ToolContext belongs to no running session"
            raise UsageError(msg)
        return self.jobs

    def _updater(self) -> SharedStateUpdater:
        if self.updater is None:
            msg = "this ToolContext belongs to no running session"
            raise UsageError(msg)
        return self.updater


def _result(value: Any) -> ToolResult:
    return value if isinstance(value, ToolResult) else ToolResult(_render(value))


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, ToolResult):
        return value.output
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return str(value)


class FunctionTool:
    """A tool backed by a Python function. Build with :func:`function_tool`."""

    def __init__(
        self,
        handler: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: dict[str, Any] | None = None,
        needs_approval: ApprovalRule = False,
        timeout: float | None = None,
        idempotent: bool = False,
        max_output: int | None = None,
        jobs: Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        if not callable(handler):
            msg = f"a tool handler must be callable, not {type(handler).__name__}"
            raise InvalidInputError(msg)
        if timeout is not None and (
            not isinstance(timeout, int | float) or timeout <= 0
        ):
            msg = f"tool timeout must be a positive number of seconds, not {timeout!r}"
            raise InvalidInputError(msg)
        if not (isinstance(needs_approval, bool) or callable(needs_approval)):
            msg = "needs_approval must be a bool or a predicate on the arguments"
            raise InvalidInputError(msg)
        self._handler = handler
        self._name = name or handler.__name__
        if not self._name.replace("_", "").replace("-", "").isalnum():
            msg = f"tool name {self._name!r} may hold only letters, digits, _ and -"
            raise InvalidInputError(msg)
        self._description = description or inspect.getdoc(handler) or ""
        self._needs_approval = needs_approval
        self._timeout = float(timeout) if timeout is not None else None
        self._idempotent = idempotent
        self._max_output = checked_limit(max_output, "max_output")
        self._jobs = _checked_jobs(jobs)
        self._is_async = inspect.iscoroutinefunction(handler)
        signature = inspect.signature(handler)
        self._wants_context = "context" in signature.parameters
        self._model: type[pydantic.BaseModel] | None = None
        if parameters is None:
            self._model = _arguments_model(self._name, handler)
            schema = self._model.model_json_schema()
            schema.pop("title", None)
        else:
            if not isinstance(parameters, dict) or parameters.get("type") != "object":
                msg = "an explicit tool schema must be a JSON schema of type 'object'"
                raise InvalidInputError(msg)
            schema = parameters
        self._spec = ToolSpec(self._name, self._description, schema)

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self._name

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return self._spec

    @property
    def timeout(self) -> float | None:
        """Seconds a call may take before it becomes an error output."""
        return self._timeout

    @property
    def idempotent(self) -> bool:
        """Whether running a call twice is harmless (it may re-run after a crash)."""
        return self._idempotent

    @property
    def max_output(self) -> int | None:
        """Characters of a call's output the model sees (None: the agent's limit)."""
        return self._max_output

    @property
    def jobs(self) -> Mapping[str, Callable[..., Any]]:
        """The background jobs its calls may start as idempotent, by name."""
        return self._jobs

    @property
    def is_async(self) -> bool:
        """Whether the handler is a coroutine function."""
        return self._is_async

    @property
    def tool_type(self) -> str:
        """``function``: turnlog calls it (OpenTelemetry's ``gen_ai.tool.type``)."""
        return "function"

    @property
    def mcp_server(self) -> str:
        """ "": no MCP server runs it."""
        return ""

    def requires_approval(self, arguments: str) -> bool:
        """Whether a call with ``arguments`` needs a decision first."""
        rule = self._needs_approval
        if isinstance(rule, bool):
            return rule
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return True  # cannot judge: ask rather than run unchecked
        try:
            return bool(rule(parsed if isinstance(parsed, dict) else {}))
        except Exception:  # noqa: BLE001 - a broken predicate must not skip approval
            return True

    def _prepare(
        self, arguments: str, context: Mapping[str, Any]
    ) -> dict[str, Any] | ToolResult:
        try:
            if self._model is not None:
                values = self._model.model_validate_json(arguments or "{}")
                kwargs = {
                    key: getattr(values, key) for key in type(values).model_fields
                }
            else:
                parsed = json.loads(arguments or "{}")
                if not isinstance(parsed, dict):
                    return ToolResult("arguments must be a JSON object", is_error=True)
                kwargs = parsed
        except pydantic.ValidationError as error:
            invalid_json = [e for e in error.errors() if e["type"] == "json_invalid"]
            if invalid_json:
                detail = invalid_json[0]["msg"]
                return ToolResult(f"arguments are not valid JSON: {detail}", True)
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in error.errors()
            )
            return ToolResult(f"invalid arguments for {self._name}: {problems}", True)
        except json.JSONDecodeError as error:
            return ToolResult(f"arguments are not valid JSON: {error}", is_error=True)
        if self._wants_context:
            kwargs["context"] = ToolContext(
                session_id=str(context.get("session_id", "")),
                turn_id=str(context.get("turn_id", "")),
                call_id=str(context.get("call_id", "")),
                agent_name=str(context.get("agent_name", "")),
                shared_state=context.get("shared_state", _NO_STATE),
                deps=context.get("deps"),
                updater=context.get("shared_state_writer"),
                jobs=context.get("job_starter"),
            )
        return kwargs

    def run_sync(self, arguments: str, context: Mapping[str, Any]) -> ToolResult:
        """Validates the arguments and runs a sync handler; never raises."""
        prepared = self._prepare(arguments, context)
        if isinstance(prepared, ToolResult):
            return prepared
        try:
            value = self._handler(**prepared)
        except Exception as error:  # noqa: BLE001 - reported to the model
            return self._failure(error)
        return _result(value)

    async def run_async(self, arguments: str, context: Mapping[str, Any]) -> ToolResult:
        """Validates the arguments and awaits an async handler; never raises."""
        prepared = self._prepare(arguments, context)
        if isinstance(prepared, ToolResult):
            return prepared
        try:
            value = await self._handler(**prepared)
        except Exception as error:  # noqa: BLE001 - reported to the model
            return self._failure(error)
        return _result(value)

    def _failure(self, error: Exception) -> ToolResult:
        return ToolResult(f"{self._name} failed: {type(error).__name__}: {error}", True)

    def __repr__(self) -> str:
        return f"FunctionTool({self._name!r})"


def _checked_jobs(
    jobs: Mapping[str, Callable[..., Any]] | None,
) -> Mapping[str, Callable[..., Any]]:
    if jobs is None:
        return _NO_JOBS
    if not isinstance(jobs, Mapping) or not all(
        isinstance(name, str) and name and callable(work) for name, work in jobs.items()
    ):
        msg = "jobs must map job names to the functions that run them"
        raise InvalidInputError(msg)
    return MappingProxyType(dict(jobs))


def _arguments_model(
    name: str, handler: Callable[..., Any]
) -> type[pydantic.BaseModel]:
    signature = inspect.signature(handler)
    try:
        hints = get_type_hints(handler)
    except (NameError, TypeError) as error:
        msg = f"cannot read the type hints of tool {name!r}: {error}"
        raise InvalidInputError(msg) from error
    fields: dict[str, Any] = {}
    for parameter in signature.parameters.values():
        if parameter.name == "context":
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            msg = f"tool {name!r} cannot take *args or **kwargs"
            raise InvalidInputError(msg)
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    model: type[pydantic.BaseModel] = pydantic.create_model(
        f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields
    )
    return model


@overload
def function_tool(handler: Callable[..., Any], /) -> FunctionTool: ...


@overload
def function_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    needs_approval: ApprovalRule = False,
    timeout: float | None = None,
    idempotent: bool = False,
    max_output: int | None = None,
    jobs: Mapping[str, Callable[..., Any]] | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def function_tool(
    handler: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    needs_approval: ApprovalRule = False,
    timeout: float | None = None,
    idempotent: bool = False,
    max_output: int | None = None,
    jobs: Mapping[str, Callable[..., Any]] | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Makes a tool of a function: ``@function_tool`` or ``@function_tool(...)``.

    Args:
        handler: the function (sync or async).
        name: the tool's name (default: the function's name).
        description: what the tool does (default: the docstring).
        parameters: an explicit JSON schema instead of one from type hints.
        needs_approval: True, or a predicate on the parsed arguments.
        timeout: seconds before a call becomes a timeout error output.
        idempotent: whether a call may safely run again after a crash.
        max_output: characters of a call's output the model sees; the rest
            is cut, with a marker (default: the agent's ``max_tool_output``).
        jobs: the background jobs its calls may start as idempotent
            (``ToolContext.start_job``), by name: a reopened session finds
            here what to run again.
    """

    def build(function: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            function,
            name=name,
            description=description,
            parameters=parameters,
            needs_approval=needs_approval,
            timeout=timeout,
            idempotent=idempotent,
            max_output=max_output,
            jobs=jobs,
        )

    if handler is not None:
        return build(handler)
    return build
