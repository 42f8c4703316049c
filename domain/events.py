"""Base classes for turnlog's domain events.

Every event is a frozen dataclass (eventsourcing makes it so) registered
under a stable topic ``turnlog:<ClassName>``: the topic is what the log
stores, so moving a class between modules never breaks a stored history.
Payloads hold primitives only (str, int, float, bool, None, lists, dicts).

Schema evolution uses eventsourcing's mechanism: raise ``class_version`` on
the event class and add a static ``upcast_vN_vN+1(state)`` method that
rewrites the stored dict in place. A stored history never stops loading.
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from eventsourcing.domain import AggregateCreated, AggregateEvent
from eventsourcing.utils import register_topic

TOPIC_PREFIX = "turnlog:"
"""Prefix of every stored event and aggregate topic."""

_REGISTERED: dict[str, type[Any]] = {}


def register_stable_topic(cls: type[Any]) -> None:
    """Gives ``cls`` the topic ``turnlog:<name>`` and registers it."""
    topic = TOPIC_PREFIX + cls.__name__
    existing = _REGISTERED.get(topic)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        msg = f"two turnlog classes claim the topic {topic!r}"
        raise TypeError(msg)
    cls.TOPIC = topic
    _REGISTERED[topic] = cls
    register_topic(topic, cls)


def in_decision_order(aggregates: Any) -> list[Any]:
    """The pending events of ``aggregates``, collected, in decision order."""
    events = [event for aggregate in aggregates for event in aggregate.collect_events()]
    events.sort(key=_timestamp)
    return events


_timestamp = operator.attrgetter("timestamp")


def trigger_session_event(
    aggregate: Any, event_class: type[Any], kwargs: dict[str, Any]
) -> None:
    """Triggers ``event_class`` on ``aggregate``, stamped with its session's id.

    What eventsourcing's ``BaseAggregate.trigger_event`` does (the next
    version, a timestamp, the event applied, then kept as pending), less
    the checks it runs on every call that a turnlog event passed once,
    when its class was made: that its topic is explicit and registered
    (register_stable_topic). A turn triggers a dozen events; those checks
    and copies were a third of triggering one.
    """
    if kwargs.get("timestamp") is None:
        kwargs["timestamp"] = event_class.create_timestamp()
    try:
        event = event_class(
            originator_id=aggregate.id,
            originator_version=aggregate.version + 1,
            session_id=aggregate.session_id,
            **kwargs,
        )
    except TypeError as error:
        msg = f"Can't construct event {event_class}: {error}"
        raise TypeError(msg) from None
    if event_class.mutate is _CHECKED_MUTATE:
        # eventsourcing's mutate checks that the event's aggregate id and
        # version are the aggregate's id and next version, which they are
        # here by construction, then does just this.
        event.apply(aggregate)
        aggregate.version = event.originator_version
        aggregate.modified_on = event.timestamp
    else:
        event.mutate(aggregate)
    aggregate.pending_events.append(event)


_CHECKED_MUTATE = AggregateEvent.mutate


def event_class_for(name: str) -> type[Any] | None:
    """Returns the event class stored under ``turnlog:<name>``, if any."""
    return _REGISTERED.get(TOPIC_PREFIX + name)


def event_name(topic: str) -> str:
    """The short event name of a stored topic (``turnlog:X`` -> ``X``)."""
    return topic.removeprefix(TOPIC_PREFIX)


_clock_lock = threading.Lock()
_last_timestamp: list[datetime] = []
_TICK = timedelta(microseconds=1)


def strictly_increasing_timestamp(now: datetime) -> datetime:
    """``now``, nudged past the last timestamp this process handed out.

    Events of one decision may belong to two aggregates (a Session and a
    Turn); their timestamps give the order they were decided in, which is
    the order they are saved, replayed and audited in.
    """
    with _clock_lock:
        if _last_timestamp and now <= _last_timestamp[0]:
            now = _last_timestamp[0] + _TICK
        _last_timestamp[:] = [now]
        return now


@dataclass(frozen=True)
class LogEnvelope:
    """The fields the log gives every event of a session as it saves it.

    Declared here, on every event, rather than patched onto frozen events:
    the store sets them by building the event anew (``dataclasses.replace``)
    when it saves it (see turnlog.domain.chain). An event built in memory
    and never saved (a test, a fold's input) keeps the defaults.
    """

    session_seq: int = field(default=0, kw_only=True)
    """The event's place in its session: 1, 2, ... across the Session and
    its Turns in decision order (0 for an event never saved)."""
    chain: str = field(default="", kw_only=True)
    """SHA-256 of the previous event's ``chain`` and this event's canonical
    encoding ("" for an event never saved)."""


class TurnlogEvent(LogEnvelope, AggregateEvent):
    """An event that changes an existing turnlog aggregate.

    Every event names its session, so a follower can file it without
    knowing which aggregate belongs to which session.
    """

    TOPIC: ClassVar[str]
    class_version: ClassVar[int] = 1

    session_id: str
    """The caller's id of the session the event belongs to."""

    @staticmethod
    def create_timestamp() -> datetime:
        """A timestamp later than any this process gave an event before."""
        return strictly_increasing_timestamp(AggregateEvent.create_timestamp())

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register_stable_topic(cls)


class TurnlogCreated(LogEnvelope, AggregateCreated):
    """The event that creates a turnlog aggregate."""

    TOPIC: ClassVar[str]
    class_version: ClassVar[int] = 1

    @staticmethod
    def create_timestamp() -> datetime:
        """A timestamp later than any this process gave an event before."""
        return strictly_increasing_timestamp(AggregateCreated.create_timestamp())

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register_stable_topic(cls)
