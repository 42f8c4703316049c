"""Small things the command line prints or accepts, each as a person reads it:
one spelling of the output-file option, and the served agents by name."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import uvicorn

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.service import serving

OUTPUT_HELP = (
    "-o, --output FILE" if sys.version_info >= (3, 13) else "-o FILE, --output FILE"
)
"""How --help lists the output-file option: both spellings, taking a FILE.
Python 3.13's argparse names the FILE once, after the last spelling."""


@pytest.fixture
def one_session(store: str) -> str:
    with Runtime.open(store) as runtime:
        session = runtime.create_session(
            Agent("a", model=ScriptedModel(["hi"])), session_id="s1"
        )
        session.prompt("hello", timeout=10)
    return store


@pytest.mark.parametrize("command", ["export", "traces"])
@pytest.mark.parametrize("spelling", ["-o", "--output"])
def test_export_and_traces_write_a_file_with_the_same_option(
    turnlog, one_session: str, tmp_path: Path, command: str, spelling: str
) -> None:
    target = tmp_path / f"{command}.json"

    done = turnlog("--store", one_session, command, "s1", spelling, str(target))

    assert (done.code, done.err) == (0, "")
    assert target.read_text().strip()
    assert str(target) in done.out


def test_traces_still_reads_its_old_out_option_without_showing_it(
    turnlog, one_session: str, tmp_path: Path
) -> None:
    target = tmp_path / "trace.json"

    done = turnlog("--store", one_session, "traces", "s1", "--out", str(target))
    traces_help = turnlog("traces", "--help").out
    export_help = turnlog("export", "--help").out

    assert (done.code, done.err) == (0, "")
    assert target.exists()
    assert OUTPUT_HELP in traces_help
    assert OUTPUT_HELP in export_help
    assert "--out " not in traces_help


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (["--demo"], "turnlog serve: agent demo on http://127.0.0.1:8123"),
        (
            ["--demo", "--agent", "served_agents:helper"],
            "turnlog serve: agents demo, helper on http://127.0.0.1:8123",
        ),
    ],
)
def test_serve_names_its_agents_as_words(
    turnlog,
    store: str,
    monkeypatch: pytest.MonkeyPatch,
    options: list[str],
    line: str,
) -> None:
    served = []
    # Only uvicorn.run is stubbed: the service imports the rest of uvicorn
    # (its config and protocol classes) to hold connections to limits.
    monkeypatch.setattr(uvicorn, "run", lambda app, **settings: served.append(settings))
    # Nor is this test process's collector to be frozen or widened for the
    # tests after it (tests/test_collector.py sees both in a process of its
    # own).
    monkeypatch.setattr(serving, "prepare_collector", lambda _young: 0)
    module = types.ModuleType("served_agents")
    module.helper = Agent("helper", model=ScriptedModel(["x"]))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "served_agents", module)
    monkeypatch.setenv("TURNLOG_SERVICE_TOKENS", "acme=secret-for-this-test")

    done = turnlog("--store", store, "serve", *options, "--port", "8123")

    assert done.code == 0, done.err
    [settings] = served
    assert (settings["host"], settings["port"]) == ("127.0.0.1", 8123)
    [shown] = [text for text in done.err.splitlines() if "on http://" in text]
    assert shown.startswith(line), shown
    assert "[" not in shown


def test_serve_refuses_a_negative_young_generation(
    turnlog, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **settings: served.append(app))
    monkeypatch.setattr(serving, "prepare_collector", lambda _young: 0)

    done = turnlog("--store", store, "serve", "--demo", "--young-generation", "-1")

    assert done.code == 2, done.err
    assert "--young-generation must be 0 or more, not -1" in done.err
    assert served == []
