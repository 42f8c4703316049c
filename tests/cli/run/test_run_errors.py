"""A model call that fails after its retries is reported once, in a pty.

The retries are logged (shown with ``--verbose``), the step's error is one
line, and the turn's end says it failed without repeating that error.
"""

from __future__ import annotations

import pytest
from fake_openai import Fail, FakeOpenAI, Reply
from pty_support import PROMPT, Spawn, quits, started

pytestmark = pytest.mark.subprocess

OVERLOADED = "the upstream is overloaded right now"
QUICK = (("retry-after-ms", "10"),)
"""Retry soon: the test waits for four attempts, not the default backoff."""


def test_a_failed_model_call_prints_its_error_once(
    spawn: Spawn, fake: FakeOpenAI
) -> None:
    fake.script(
        *[Fail(503, OVERLOADED, headers=QUICK, type="server_error")] * 4,
        Reply(text="Back."),
    )
    child = spawn()
    started(child)
    child.sendline("hello")
    child.expect(r"  turn failed: model step failed\r\n")
    child.expect(PROMPT)
    child.sendline("again")
    child.expect(r"assistant> Back\.")
    child.expect(PROMPT)
    output = quits(child)

    assert len(fake.requests) == 5  # four attempts, then the second turn
    assert output.count(OVERLOADED) == 1, output
    assert "gave up after 4 attempts" in output


def test_verbose_shows_the_retries_one_line_each(
    spawn: Spawn, fake: FakeOpenAI
) -> None:
    fake.script(
        *[Fail(503, OVERLOADED, headers=QUICK, type="server_error")] * 2,
        Reply(text="Made it."),
    )
    child = spawn(verbose=True)
    started(child)
    child.sendline("hello")
    child.expect(r"turnlog: WARNING: model call to \S+ failed \(ServerError: ")
    child.expect(r"retry 1 of 3")
    child.expect(r"assistant> Made it\.")
    child.expect(PROMPT)
    output = quits(child)
    assert output.count("turnlog: WARNING: model call") == 2
