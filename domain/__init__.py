"""The pure domain model: aggregates, events, protocol. No threads, no I/O.

The Session and Turn aggregates decide every change; ``Op`` and
``EventMsg`` (in ``Event`` envelopes) are the protocol; the errors are
turnlog's error tree.
"""

from turnlog.domain.chain import ChainHead
from turnlog.domain.errors import TurnlogError
from turnlog.domain.instructions import InstructionsEvaluated
from turnlog.domain.protocol import Event, EventMsg, Op
from turnlog.domain.session import Session
from turnlog.domain.translation import EventTranslator
from turnlog.domain.turn import Turn

__all__ = [
    "ChainHead",
    "Event",
    "EventMsg",
    "EventTranslator",
    "InstructionsEvaluated",
    "Op",
    "Session",
    "Turn",
    "TurnlogError",
]
