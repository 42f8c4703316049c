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

import dataclasses
import operator
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar
from uuid import UUID

from eventsourcing import domain as es_domain
from eventsourcing.domain import AggregateCreated, AggregateEvent, DomainEvent
from eventsourcing.utils import get_topic, register_topic

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
    """The pending events of ``aggregates``, collected, in decision order.

    What eventsourcing's ``collect_events`` does for each (the pending
    list emptied into the returned one), without its Python call and its
    ``pop(0)`` an event: every save collects a Session and a Turn.
    """
    events: list[Any] = []
    for aggregate in aggregates:
        pending = aggregate._pending_events
        events += pending
        pending.clear()
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
    and copies were a third of triggering one. The aggregate's fields are
    read and set as eventsourcing's properties keep them (``_id``,
    ``_version``...), without a Python call for each.
    """
    if kwargs.get("timestamp") is None:
        create_timestamp = event_class.create_timestamp
        kwargs["timestamp"] = (
            _now() if create_timestamp is _TURNLOG_TIMESTAMP else create_timestamp()
        )
    version = aggregate._version + 1
    make = _CONSTRUCTORS.get(event_class)  # a dict's get: no Python call
    if make is None:
        make = _constructor(event_class)
    try:
        event = make(
            originator_id=aggregate._id,
            originator_version=version,
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
        aggregate._version = version
        aggregate._modified_on = event.timestamp
    else:
        event.mutate(aggregate)
    aggregate._pending_events.append(event)


def create_session_aggregate(
    aggregate_class: type[Any],
    event_class: type[Any],
    originator_id: UUID,
    kwargs: dict[str, Any],
) -> Any:
    """A new ``aggregate_class`` made by its created event ``event_class``.

    What eventsourcing's ``BaseAggregate._create`` and the created event's
    ``mutate`` do for an aggregate whose ``__init__`` takes no arguments
    (the event's ``apply`` sets its fields): the event made, the aggregate
    made from it, the event kept as pending. Without their generic steps
    (resolving the aggregate's topic back to its class, inspecting the
    ``__init__`` signatures for the arguments to pass), which were most of
    opening a turn.
    """
    timestamp = kwargs.pop("timestamp", None) or event_class.create_timestamp()
    version = aggregate_class.INITIAL_VERSION
    try:
        event = _constructor(event_class)(
            originator_topic=get_topic(aggregate_class),
            originator_id=originator_id,
            originator_version=version,
            timestamp=timestamp,
            **kwargs,
        )
    except TypeError as error:
        msg = f"Unable to construct '{event_class.__qualname__}' event: {error}"
        raise TypeError(msg) from None
    aggregate: Any = object.__new__(aggregate_class)
    aggregate.__base_init__(originator_id, version, timestamp)
    aggregate.__init__()
    event.apply(aggregate)
    aggregate._pending_events.append(event)
    return aggregate


_CONSTRUCTORS: dict[type[Any], Callable[..., Any]] = {}


def _constructor(event_class: type[Any]) -> Callable[..., Any]:
    """What makes an ``event_class`` from keyword arguments, as fast as it can.

    A frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, a call each: for a class that adds nothing to
    that (no ``__init__`` or ``__post_init__`` of its own, no field
    outside ``__init__``), a made function lays the fields out in one
    dict, in the order ``__init__`` sets them (the stored bytes keep
    that order, see turnlog.store.chaining), and runs the one check
    DomainEvent's ``__post_init__`` makes. Any other class is called.
    """
    made = _CONSTRUCTORS.get(event_class)
    if made is None:
        made = _CONSTRUCTORS[event_class] = _make_constructor(event_class)
    return made


def _make_constructor(event_class: type[Any]) -> Callable[..., Any]:
    fields = dataclasses.fields(event_class)
    if (
        event_class.__post_init__ is not DomainEvent.__post_init__
        or "__init__" not in event_class.__dict__  # not made by dataclass here
        or any(
            not f.init or f.default_factory is not dataclasses.MISSING for f in fields
        )
        or not all(name.isidentifier() for name in (f.name for f in fields))
    ):
        return event_class
    defaults = {
        f"_default_{f.name}": f.default
        for f in fields
        if f.default is not dataclasses.MISSING
    }
    parameters = ", ".join(
        f.name if f.default is dataclasses.MISSING else f"{f.name}=_default_{f.name}"
        for f in fields
    )
    state = ", ".join(f"{f.name!r}: {f.name}" for f in fields)
    source = (
        f"def make(*, {parameters}):\n"
        "    if not isinstance(originator_id, UUID):\n"
        "        raise TypeError(\n"
        "            f'{event_class} was initialized with a non-UUID'\n"
        "            f' originator_id: {originator_id!r}'\n"
        "        )\n"
        "    event = new(event_class)\n"
        f"    set_dict(event, '__dict__', {{{state}}})\n"
        "    return event\n"
    )
    namespace: dict[str, Any] = {
        "UUID": UUID,
        "new": object.__new__,
        "set_dict": object.__setattr__,
        "event_class": event_class,
        **defaults,
    }
    exec(source, namespace)  # noqa: S102 - source made above from field names
    made: Callable[..., Any] = namespace["make"]
    return made


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


def _now() -> datetime:
    """Now, nudged past the last timestamp this process handed out.

    Events of one decision may belong to two aggregates (a Session and a
    Turn); their timestamps give the order they were decided in, which is
    the order they are saved, replayed and audited in. Now is what
    eventsourcing's create_timestamp gives (datetime_now_with_tzinfo),
    without its calls on the way: this runs for every event triggered.
    """
    now = datetime.now(es_domain.TZINFO)
    with _clock_lock:
        if _last_timestamp:
            if now <= _last_timestamp[0]:
                now = _last_timestamp[0] + _TICK
            _last_timestamp[0] = now
        else:
            _last_timestamp.append(now)
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
        return _now()

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
        return _now()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register_stable_topic(cls)


_TURNLOG_TIMESTAMP = TurnlogEvent.create_timestamp
"""Every turnlog event's create_timestamp: ``_now``, called directly."""
