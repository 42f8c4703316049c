"""Facts from other actors, made encodable before they become events.

Tools, models and middleware hand the session text it did not write: a
file name that is not UTF-8 (``os.listdir`` gives it lone surrogates), a
provider's output, a hook's context. The log holds UTF-8, so a lone
surrogate in a fact would fail its save and, told rather than asked, take
the session down with it. Instead each one becomes U+FFFD and the change
is noted where a reader of the log sees it: in a tool's output itself (the
model reads that), and as a warning for anything else.
"""

from __future__ import annotations

from typing import Any

import msgspec

from turnlog.domain.text import encodable_data, encodable_text, replacement_note
from turnlog.domain.turn_facts import TEXT_OF, ToolFinished


def encodable_fact(fact: Any) -> tuple[Any, str | None]:
    """``fact`` with every string made encodable, and a warning if one was.

    A tool's output carries its own note (appended to it) and needs no
    warning; for anything else the warning says what was changed.
    """
    if isinstance(fact, ToolFinished):
        output, count = encodable_text(fact.output)
        if count:
            note = replacement_note(count, "this output")
            fact = msgspec.structs.replace(fact, output=f"{output}\n{note}")
    fact, count = encodable_data(fact)
    if not count:
        return fact, None
    return fact, replacement_note(count, TEXT_OF.get(type(fact), "a fact"))
