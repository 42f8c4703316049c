"""Helpers of the ``turnlog run`` tests: a scripted terminal, the key."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

API_KEY = "sk-run-test-0123456789SECRET"
"""The key the tests configure; it must never be printed."""

PROMPT = "you> "

Line = str | BaseException
"""What the user types next: a line, or EOFError / KeyboardInterrupt."""


class ScriptedTerminal:
    """A terminal whose user types ``lines`` in order, then EOF.

    Args:
        lines: each a line, or an exception ``read_line`` raises instead.
        on_write: called with everything shown so far, after each write.
    """

    def __init__(
        self,
        lines: Iterable[Line] = (),
        on_write: Callable[[str], None] | None = None,
    ) -> None:
        self.lines: deque[Line] = deque(lines)
        self.prompts: list[str] = []
        self._out: list[str] = []
        self._on_write = on_write

    def write(self, text: str) -> None:
        self._out.append(text)
        if self._on_write is not None:
            self._on_write(self.text)

    def read_line(self, prompt: str) -> str:
        self.prompts.append(prompt)
        self.write(prompt)
        line = self.lines.popleft() if self.lines else EOFError()
        if isinstance(line, BaseException):
            raise line
        self.write(line + "\n")
        return line

    @property
    def text(self) -> str:
        """Everything shown so far, prompts and typed lines included."""
        return "".join(self._out)
