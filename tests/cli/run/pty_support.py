"""Helpers of the ``turnlog run`` tests that talk to the installed command
in a pseudo-terminal (pexpect); the ``spawn`` fixture is in conftest."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect

TURNLOG = Path(sys.executable).with_name("turnlog")
"""The installed console script of this virtualenv."""

TIMEOUT = 20
"""Seconds any one expectation may take (a child starts in about one)."""

PROMPT = r"you> "
APPROVAL = r"\[q\]uit turn: "
HEADER = r"turnlog run: session (\S+) \((new|resumed: \d+ earlier messages?)\)"

Spawn = Callable[..., pexpect.spawn]


def clean_environment() -> dict[str, str]:
    """The environment without any turnlog or OpenAI setting of the developer."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("TURNLOG_", "OPENAI_", "ANTHROPIC_"))
    }


def output_of(child: pexpect.spawn) -> str:
    """Everything the child printed so far."""
    return str(child.logfile_read.getvalue())


def started(child: pexpect.spawn) -> str:
    """Waits for the header and the first prompt; returns the session id."""
    child.expect(HEADER)
    session_id = str(child.match.group(1))
    child.expect(PROMPT)
    return session_id


def quits(child: pexpect.spawn, how: str = "eof") -> str:
    """Quits at the prompt (Ctrl-D or Ctrl-C); checks exit 0; returns the output."""
    if how == "eof":
        child.sendeof()
    else:
        child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    output = output_of(child)
    assert child.exitstatus == 0, output
    assert "Traceback" not in output
    return output


def tool_outputs(body: dict[str, Any]) -> list[str]:
    """The function-call outputs a Responses request sent."""
    return [
        item["output"]
        for item in body["input"]
        if item.get("type") == "function_call_output"
    ]
