"""How ``turnlog run`` shows a turn: streamed text, tool calls, approvals.

Pure formatting: :class:`TurnView` turns subscription items into text for
a terminal and keeps only the state a streamed line needs (whether one is
open). Text from the model, a tool or the log is made safe for the
terminal first: control characters other than newline and tab are escaped,
so an answer cannot move the cursor, recolour the screen or retitle the
window.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from turnlog.cli.timeline import one_line
from turnlog.domain.approval import ApprovalDecision
from turnlog.domain.protocol import (
    AgentMessageDeltaMsg,
    AgentMessageMsg,
    ApprovalDecidedMsg,
    ApprovalFailedMsg,
    ApprovalRequestedMsg,
    FrontendMsg,
    InputRejectedMsg,
    ModelStepFailedMsg,
    ModelStepStartedMsg,
    ToolAllowedForSessionMsg,
    ToolCallFinishedMsg,
    ToolCallStartedMsg,
    TurnAbortedMsg,
    WarningRaisedMsg,
)
from turnlog.domain.run import EventsMissed, RunEvent, RunFinished

ASSISTANT = "assistant> "
"""The start of each answer the model streams."""

ARGUMENTS_LIMIT = 200
"""Characters of a tool call's arguments shown as it starts."""

OUTPUT_LIMIT = 200
"""Characters of a tool's output shown; the model sees all of it."""

APPROVAL_ARGUMENTS_LIMIT = 2000
"""Characters of arguments shown to approve: what is approved must be seen."""

APPROVAL_CHOICES: dict[str, Callable[[], ApprovalDecision]] = {
    "y": ApprovalDecision.allow,
    "yes": ApprovalDecision.allow,
    "a": ApprovalDecision.allow_session,
    "all": ApprovalDecision.allow_session,
    "n": ApprovalDecision.deny,
    "no": ApprovalDecision.deny,
    "q": ApprovalDecision.abort,
    "quit": ApprovalDecision.abort,
}

CANCELLED = "Cancelled"
"""The error type of a model step cut short by an interrupt."""

_KEPT_CONTROLS = frozenset("\n\t")


def terminal_safe(text: str) -> str:
    """``text`` with every control character but newline and tab escaped."""
    return "".join(
        char
        if char.isprintable() or char in _KEPT_CONTROLS
        else char.encode("unicode_escape").decode()
        for char in text
    )


def readable_json(arguments: str, limit: int) -> str:
    """Tool-call arguments on one line: JSON re-spaced, anything else as given."""
    try:
        text = json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        text = arguments
    return one_line(text, limit)


def approval_question(request: ApprovalRequestedMsg) -> str:
    """The question asked before a tool that needs approval runs."""
    name = one_line(request.name, 80)
    arguments = readable_json(request.arguments, APPROVAL_ARGUMENTS_LIMIT)
    return (
        f"approve {name}({arguments})? "
        "[y]es once / [a]ll for the session / [n]o / [q]uit turn: "
    )


def parse_approval(answer: str) -> ApprovalDecision | None:
    """The decision an answer means, or None if it means none."""
    choice = APPROVAL_CHOICES.get(answer.strip().lower())
    return choice() if choice is not None else None


class TurnView:
    """Renders one session's subscription items as terminal text.

    Args:
        write: where the text goes (it must not add newlines of its own).
    """

    def __init__(self, write: Callable[[str], None]) -> None:
        self._write = write
        self._open_line = False
        self._streamed = False
        self._model_error: str | None = None
        """The last model error shown: a turn that failed of it says so
        without repeating it."""

    def close_line(self) -> None:
        """Ends a streamed line, so the next output starts on its own."""
        if self._open_line:
            self._write("\n")
            self._open_line = False

    def line(self, text: str) -> None:
        """Writes ``text`` as a line of its own."""
        self.close_line()
        self._write(text + "\n")

    def show(self, item: Any) -> None:
        """Shows one subscription item (RunStarted, RunEvent, ...)."""
        if isinstance(item, EventsMissed):
            self.line(f"  ({item.count} events were missed: the terminal fell behind)")
        elif isinstance(item, RunFinished):
            self.close_line()
        elif isinstance(item, RunEvent):
            self._show_event(item.event.msg)

    def _show_event(self, msg: Any) -> None:
        match msg:
            case ModelStepStartedMsg():
                self._streamed = False
            case AgentMessageDeltaMsg(delta=delta):
                if not self._streamed:
                    self.close_line()
                    self._write(ASSISTANT)
                    self._streamed = True
                self._write(terminal_safe(delta))
                self._open_line = not delta.endswith("\n")
            case AgentMessageMsg(text=text):
                if self._streamed:
                    self.close_line()  # the text came as deltas already
                else:
                    self.line(ASSISTANT + terminal_safe(text))
            case ToolCallStartedMsg(name=name, arguments=arguments):
                shown = readable_json(arguments, ARGUMENTS_LIMIT)
                self.line(f"  tool    {one_line(name, 80)} {shown}")
            case ToolCallFinishedMsg(name=name, output=output, is_error=is_error):
                label = "error " if is_error else "result"
                self.line(f"  {label}  {one_line(name, 80)}: {_short(output)}")
            case ApprovalDecidedMsg(decision=decision, decided_by=decided_by):
                if decided_by != "user":  # the user's own answer needs no echo
                    self.line(f"  approval {decision} ({one_line(decided_by, 80)})")
            case ApprovalFailedMsg(error=error):
                self.line(f"  approval failed: {one_line(error, 80)}")
            case ToolAllowedForSessionMsg(tool_name=tool_name):
                name = one_line(tool_name, 80)
                self.line(f"  {name} is allowed for the rest of the session")
            case ModelStepFailedMsg(error_type=error_type, message=message):
                if error_type == CANCELLED:
                    return  # an interrupted step: the turn's end says why
                self._model_error = f"{error_type}: {message}"
                self.line(f"  model error: {error_type}: {one_line(message, 500)}")
            case InputRejectedMsg(reason=reason):
                self.line(f"  input rejected: {one_line(reason, 500)}")
            case WarningRaisedMsg(message=message):
                self.line(f"  warning: {one_line(message, 500)}")
            case FrontendMsg(block=block):
                self.line(f"  [{one_line(block.title, 80)}]")
            case TurnAbortedMsg(reason=reason, failed=failed):
                label = "turn failed" if failed else "turn stopped"
                self.line(f"  {label}: {one_line(self._unrepeated(reason), 500)}")
            case _:
                pass  # bookkeeping (turn markers, usage, steps): see `turnlog audit`

    def _unrepeated(self, reason: str) -> str:
        """``reason`` without the model error shown just before it."""
        error = self._model_error
        if not error or error not in reason:
            return reason
        return reason.replace(error, "").strip().rstrip(":").strip() or "model error"


def _short(output: str) -> str:
    if not output.strip():
        return "(no output)"
    return one_line(output, OUTPUT_LIMIT)
