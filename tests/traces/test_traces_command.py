"""``turnlog traces SESSION``: OTLP/JSON on stdout, in a file, or POSTed."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from traces_support import attributes_of, check_otlp, otlp_server

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.cli.main import main
from turnlog.traces import session_spans


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return key.upper()


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A log holding session s1: one turn with one tool call."""
    monkeypatch.delenv("TURNLOG_STORE", raising=False)
    url = f"sqlite:///{tmp_path / 'log.sqlite3'}"
    model = ScriptedModel([calls(tool_call("lookup", {"key": "k"})), "done"])
    with Runtime.open(url) as rt:
        session = rt.create_session(
            Agent("cli", model=model, tools=[lookup]), session_id="s1"
        )
        session.prompt("go", timeout=30)
    return url


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_it_prints_the_trace_as_otlp_json(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--store", url, "traces", "s1")
    assert (code, err) == (0, "")
    spans = check_otlp(msgspec.json.decode(out))
    with Runtime.open(url) as rt:
        rebuilt = session_spans(rt, "s1")
    assert [s["spanId"] for s in spans] == [s.span_id for s in rebuilt]
    tool = next(s for s in spans if s["name"] == "execute_tool lookup")
    assert attributes_of(tool)["gen_ai.tool.name"] == "lookup"
    assert attributes_of(tool)["gen_ai.conversation.id"] == "s1"


def test_it_writes_a_file_and_posts_to_an_otlp_endpoint(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "trace.json"
    with otlp_server() as (endpoint, received):
        code, out, err = run(
            capsys,
            "--store",
            url,
            "traces",
            "s1",
            "--out",
            str(out_file),
            "--endpoint",
            endpoint,
        )
    assert (code, err) == (0, "")
    assert f"to {out_file}" in out
    assert f"to {endpoint}/v1/traces" in out
    [request] = received
    assert request.path == "/v1/traces"
    assert request.content_type == "application/json"
    written = msgspec.json.decode(out_file.read_bytes())
    assert msgspec.json.decode(request.body) == written
    assert len(check_otlp(written)) == 5  # session, turn, two model calls, a tool


def test_a_refusing_endpoint_is_one_error_line(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with otlp_server(status=503) as (endpoint, received):
        code, _out, err = run(
            capsys, "--store", url, "traces", "s1", "--endpoint", f"{endpoint}/x"
        )
    assert code == 1
    assert len(received) == 1
    assert received[0].path == "/x"  # a URL with a path is taken as it is
    assert err.startswith("turnlog: error: ")
    assert "HTTP 503" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["traces", "nope"], "no session 'nope'"),
        (["traces", "s1", "--endpoint", "ftp://host"], "http:// or https://"),
    ],
)
def test_a_mistake_is_refused_with_exit_2(
    url: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "--store", url, *argv)
    assert code == 2
    assert out == ""
    assert message in err
