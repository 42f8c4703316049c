"""``turnlog traces SESSION``: OTLP on stdout, in a file, or POSTed (protobuf, JSON)."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest
from traces_support import (
    attributes_of,
    check_otlp,
    json_spans,
    otlp_server,
    protobuf_spans,
)

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


def test_it_posts_protobuf_by_default_and_writes_json_to_a_file(
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
    assert f"to {endpoint}/v1/traces as http/protobuf" in out
    [request] = received
    assert request.path == "/v1/traces"
    assert request.content_type == "application/x-protobuf"
    written = msgspec.json.decode(out_file.read_bytes())  # a file stays JSON
    assert len(check_otlp(written)) == 5  # session, turn, two model calls, a tool
    assert protobuf_spans(request.body) == json_spans(written)


def test_json_is_posted_on_request_as_the_otel_variables_name_it(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with otlp_server() as (endpoint, received):
        assert (
            run(capsys, "--store", url, "traces", "s1", "--endpoint", endpoint)[0] == 0
        )
        # The traces-only variable wins over the general one, the flag over both.
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
        assert (
            run(capsys, "--store", url, "traces", "s1", "--endpoint", endpoint)[0] == 0
        )
        code, out, _ = run(
            capsys,
            *("--store", url, "traces", "s1", "--endpoint", endpoint),
            *("--protocol", "http/json"),
        )
        assert code == 0
    assert [r.content_type for r in received] == [
        "application/json",
        "application/x-protobuf",
        "application/json",
    ]
    assert "as http/json" in out
    assert json_spans(msgspec.json.decode(received[0].body)) == protobuf_spans(
        received[1].body
    )


def test_protobuf_on_request_goes_to_a_file_too(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "trace.pb"
    code, _, err = run(
        capsys,
        *("--store", url, "traces", "s1"),
        *("--protocol", "http/protobuf", "--out", str(out_file)),
    )
    assert (code, err) == (0, "")
    _, stdout, _ = run(capsys, "--store", url, "traces", "s1")
    assert protobuf_spans(out_file.read_bytes()) == json_spans(
        msgspec.json.decode(stdout)
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/xml"),
    ],
)
def test_a_protocol_turnlog_does_not_send_is_refused_before_sending(
    url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
) -> None:
    monkeypatch.setenv(variable, value)
    with otlp_server() as (endpoint, received):
        code, out, err = run(
            capsys, "--store", url, "traces", "s1", "--endpoint", endpoint
        )
    assert (code, out, received) == (2, "", [])
    assert err.startswith(f"turnlog: error: ${variable}: ")
    assert "http/protobuf or http/json" in err
    assert len(err.splitlines()) == 1


def test_without_opentelemetry_proto_it_says_so_in_one_line(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if the package were not installed: importing it fails.
    monkeypatch.setitem(sys.modules, "opentelemetry.proto.collector.trace.v1", None)
    with otlp_server() as (endpoint, received):
        code, _, err = run(
            capsys, "--store", url, "traces", "s1", "--endpoint", endpoint
        )
        assert received == []
        json_code, _, _ = run(
            capsys,
            *("--store", url, "traces", "s1", "--endpoint", endpoint),
            *("--protocol", "http/json"),
        )
    assert code == 2
    assert "needs the opentelemetry-proto package" in err
    assert "--protocol http/json" in err
    assert len(err.splitlines()) == 1
    assert json_code == 0  # JSON needs nothing
    assert [r.content_type for r in received] == ["application/json"]


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
