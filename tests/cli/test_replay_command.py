"""``turnlog replay SESSION``: the durable EventMsg stream, from the log."""

from __future__ import annotations

from pathlib import Path

from turnlog import (
    Agent,
    RunEvent,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.domain.protocol import decode_event, encode_json


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return key.upper()


def test_replay_prints_the_live_stream_without_its_transient_events(
    turnlog, sqlite_url: str
) -> None:
    model = ScriptedModel([calls(tool_call("lookup", {"key": "k"})), "done"])
    with Runtime.open(sqlite_url) as runtime:
        session = runtime.create_session(
            Agent("a", model=model, tools=[lookup]), session_id="s1"
        )
        subscription = session.subscribe()
        assert session.prompt("go", timeout=10).completed
        live = [i.event for i in subscription.drain() if isinstance(i, RunEvent)]

    result = turnlog("--store", sqlite_url, "replay", "s1")

    assert (result.code, result.err) == (0, "")
    replayed = [decode_event(line) for line in result.out.splitlines()]
    durable = [event for event in live if not event.transient]
    # the replay also holds SessionCreatedMsg, from before the subscription
    assert replayed[-len(durable) :] == durable
    assert isinstance(replayed[0].msg, p.SessionCreatedMsg)
    assert len(replayed) > len(durable)
    assert result.out == "".join(encode_json(e).decode() + "\n" for e in replayed)


def test_replay_of_an_unknown_session_is_one_line_and_exit_2(
    turnlog, tmp_path: Path, filled
) -> None:
    log = tmp_path / "log.sqlite3"
    result = turnlog("--store", f"sqlite:///{log}", "replay", "nope")
    assert (result.code, result.out) == (2, "")
    assert result.error_line() == (
        f"turnlog: error: no session 'nope': there is no log at {log}"
    )
    assert not log.exists()

    filled(f"sqlite:///{log}", sessions=("s1",), turns=1)
    result = turnlog("--store", f"sqlite:///{log}", "replay", "nope")
    assert (result.code, result.out) == (2, "")
    assert result.error_line() == (
        f"turnlog: error: no session 'nope' in the log at {log}"
    )
