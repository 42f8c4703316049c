"""The public surface is exactly what ``__all__`` says (as httpx checks)."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import turnlog
import turnlog.domain.events
import turnlog.domain.session
import turnlog.domain.turn_events
import turnlog.events
import turnlog.providers


def defined_by_turnlog(value: object) -> bool:
    if isinstance(value, types.UnionType):  # Op, EventMsg, SessionEvent
        return all(defined_by_turnlog(member) for member in value.__args__)
    return getattr(value, "__module__", "").startswith("turnlog")


def test_all_exports_every_public_name_and_nothing_else() -> None:
    public = {
        name
        for name, value in vars(turnlog).items()
        if not name.startswith("_") and defined_by_turnlog(value)
    }
    assert public == set(turnlog.__all__)


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert turnlog.__all__ == sorted(turnlog.__all__)
    for name in turnlog.__all__:
        assert getattr(turnlog, name) is not None


def public_names_of(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and defined_by_turnlog(value)
        and not isinstance(value, types.ModuleType)
    }


def test_the_events_module_exports_every_event_class_and_nothing_else() -> None:
    assert public_names_of(turnlog.events) == set(turnlog.events.__all__)
    assert turnlog.events.__all__ == sorted(turnlog.events.__all__)
    for member in turnlog.events.EventMsg.__args__:
        assert getattr(turnlog.events, member.__name__) is member
    for member in turnlog.events.SessionEvent.__args__:
        assert getattr(turnlog.events, member.__name__) is member


def test_no_two_public_classes_share_a_name() -> None:
    seen: dict[str, object] = {}
    for module in (turnlog, turnlog.events, turnlog.providers):
        for name in module.__all__:
            value = getattr(module, name)
            if not isinstance(value, type):
                continue
            assert seen.setdefault(value.__name__, value) is value, (
                f"{module.__name__}.{name} and {seen[value.__name__]!r} "
                "are two classes with one name"
            )


def domain_event_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for module in (turnlog.domain.session, turnlog.domain.turn_events):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(
                value,
                (
                    turnlog.domain.events.TurnlogEvent,
                    turnlog.domain.events.TurnlogCreated,
                ),
            ):
                found[value.__name__] = value
    return found


def test_an_event_msg_is_named_apart_from_the_domain_event_it_reports() -> None:
    domain_names = set(domain_event_classes())
    assert {"ToolCallStarted", "ApprovalDecided", "TurnStarted"} <= domain_names
    for member in turnlog.events.EventMsg.__args__:
        assert member.__name__.endswith("Msg"), member
        assert member.__name__ not in domain_names, member
    # One fact, one name: the message for a domain event is that name + Msg.
    assert turnlog.events.ToolCallStartedMsg.__struct_config__.tag == (
        "tool_call_begin"
    )
    assert turnlog.events.ApprovalDecidedMsg.__struct_config__.tag == (
        "approval_resolved"
    )


PACKAGES = [
    "turnlog.actors",
    "turnlog.agent_parts",
    "turnlog.cli",
    "turnlog.cli.run",
    "turnlog.domain",
    "turnlog.handles",
    "turnlog.hosting",
    "turnlog.mcp",
    "turnlog.projections",
    "turnlog.providers",
    "turnlog.service",
    "turnlog.store",
    "turnlog.traces",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_each_package_states_its_public_names_in_a_sorted_all(name: str) -> None:
    package = importlib.import_module(name)
    assert package.__all__ == sorted(package.__all__)
    assert public_names_of(package) == set(package.__all__)
    for member in package.__all__:
        assert getattr(package, member) is not None


def test_every_package_of_the_distribution_is_checked() -> None:
    found = {
        module.name
        for module in pkgutil.walk_packages(turnlog.__path__, "turnlog.")
        if module.ispkg
    }
    assert found == set(PACKAGES)
