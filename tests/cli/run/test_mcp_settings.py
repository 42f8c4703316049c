"""MCP servers in the route file: parsing, the trust rule, and ``--no-mcp``.

The servers are real (tests/mcp/mcp_server.py) where a test starts one;
a server that must never start is a command that would leave a marker file.
"""

from __future__ import annotations

import http.server
import json
import re
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.types import Tool, ToolAnnotations
from mcp_support import SERVER, ServerFiles
from run_support import API_KEY, ScriptedTerminal

from turnlog import (
    InvalidInputError,
    McpServer,
    McpServerError,
    ScriptedModel,
    UsageError,
)
from turnlog.cli.main import main
from turnlog.cli.run.command import RunOptions, run_interactive
from turnlog.cli.run.mcp_settings import build_mcp_servers
from turnlog.cli.run.settings import load_settings


def toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


def stdio_table(name: str = "srv", extra: str = "") -> str:
    return (
        f"[mcp_servers.{name}]\ncommand = {toml_string(sys.executable)}\n"
        f'args = [{toml_string(str(SERVER))}, "stdio"]\n{extra}'
    )


def marker_table(marker: Path) -> str:
    """A server whose command, if it ever ran, would leave ``marker``."""
    script = f"open({str(marker)!r}, 'w').close()"
    return (
        f"[mcp_servers.evil]\ncommand = {toml_string(sys.executable)}\n"
        f'args = ["-c", {toml_string(script)}]\n'
    )


@pytest.fixture
def files(tmp_path: Path) -> ServerFiles:
    return ServerFiles(tmp_path)


@pytest.fixture
def servers() -> Iterator[list[McpServer]]:
    """Servers a test built; each is stopped at teardown."""
    built: list[McpServer] = []
    yield built
    for server in built:
        server.close()


def test_a_trusted_file_declares_a_stdio_server(
    workspace: Path,
    files: ServerFiles,
    servers: list[McpServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files.extra.touch()  # the server offers extra_add only if this exists
    monkeypatch.setenv("MARK_FILE", str(files.calls))
    config = workspace / "trusted.toml"
    config.write_text(
        stdio_table(
            extra=(
                "env = { MCP_TEST_EXTRA_TOOLS = "
                f"{toml_string(str(files.extra))} }}\n"
                'pass_env = ["MARK_FILE"]\n'
                'run_unasked = ["weather"]\n'
                "timeout = 5\n"
                'idempotent = ["weather"]\n'
                'tool_prefix = "t_"\n'
            )
        )
    )
    settings = load_settings(config=config)
    servers += build_mcp_servers(settings.file.mcp_servers, settings.config_path)
    [server] = servers
    assert server.name == "srv"
    assert server.describe() == {"name": "srv", "transport": "stdio"}
    tools = {tool.name: tool for tool in server.tools()}
    assert "t_extra_add" in tools  # the env value reached the server
    assert tools["t_echo"].requires_approval("{}")  # not listed: asks
    assert tools["t_pid"].requires_approval("{}")  # read-only hint not trusted
    assert not tools["t_weather"].requires_approval("{}")
    assert tools["t_weather"].idempotent
    assert not tools["t_echo"].idempotent
    assert tools["t_echo"].timeout == 5.0
    # Its stderr went to the default file under the working directory.
    assert server.stderr_log == workspace / ".turnlog" / "mcp" / "srv.log"
    assert "MCP server started on stdio" in server.stderr_log.read_text()


def test_read_only_hints_and_a_stderr_log_in_the_file(
    workspace: Path, tmp_path: Path, servers: list[McpServer]
) -> None:
    folder = tmp_path / "routes"
    folder.mkdir()
    config = folder / "trusted.toml"
    config.write_text(
        stdio_table(extra='trust_read_only_hints = true\nstderr_log = "srv.err"\n')
    )
    settings = load_settings(config=config)
    servers += build_mcp_servers(settings.file.mcp_servers, config)
    [server] = servers
    tools = {tool.remote_name: tool for tool in server.tools()}
    assert not tools["pid"].requires_approval("{}")  # annotated readOnlyHint
    assert tools["echo"].requires_approval("{}")
    assert server.stderr_log == folder / "srv.err"  # beside the route file
    assert "MCP server started on stdio" in (folder / "srv.err").read_text()
    assert not (workspace / ".turnlog").exists()


def test_needs_approval_in_the_file_is_refused_naming_run_unasked(
    workspace: Path,
) -> None:
    config = workspace / "trusted.toml"
    config.write_text(stdio_table(extra='needs_approval = ["write_file"]\n'))
    with pytest.raises(InvalidInputError) as caught:
        load_settings(config=config)
    message = str(caught.value)
    assert message.startswith(f"{config}: mcp_servers.srv")
    assert 'run_unasked = ["read_file"]' in message
    assert "\n" not in message


class _HeaderRecorder(http.server.BaseHTTPRequestHandler):
    seen: list[str | None] = []  # noqa: RUF012 - filled by the test's one server

    def do_POST(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        """Quiet."""


@pytest.fixture
def recorder() -> Iterator[str]:
    """An HTTP endpoint on 127.0.0.1 that records Authorization headers."""
    _HeaderRecorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HeaderRecorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_an_http_servers_header_comes_from_the_environment(
    workspace: Path,
    recorder: str,
    servers: list[McpServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SEARCH_AUTH", f"Bearer {API_KEY}")
    config = workspace / "trusted.toml"
    config.write_text(
        f"[mcp_servers.search]\nurl = {toml_string(recorder)}\n"
        'headers_env = { Authorization = "SEARCH_AUTH" }\nrun_unasked = true\n'
    )
    settings = load_settings(config=config)
    servers += build_mcp_servers(settings.file.mcp_servers, config)
    [server] = servers
    assert server.describe() == {"name": "search", "transport": "http"}
    with pytest.raises(McpServerError) as caught:
        server.tools()  # the recorder answers 500: no tools, but it saw the header
    assert API_KEY not in str(caught.value)
    assert _HeaderRecorder.seen
    assert set(_HeaderRecorder.seen) == {f"Bearer {API_KEY}"}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            stdio_table(extra='pass_env = ["GITHUB_TOKEN"]\n'),
            "mcp_servers.srv in {path} passes $GITHUB_TOKEN, which is not set",
        ),
        (
            '[mcp_servers.s]\nurl = "http://127.0.0.1:9/mcp"\n'
            'headers_env = { Authorization = "GITHUB_TOKEN" }\n',
            "mcp_servers.s in {path} reads its Authorization header from "
            "$GITHUB_TOKEN, which is not set",
        ),
    ],
)
def test_an_unset_variable_is_named(workspace: Path, table: str, message: str) -> None:
    config = workspace / "trusted.toml"
    config.write_text(table)
    settings = load_settings(config=config)
    with pytest.raises(UsageError) as caught:
        build_mcp_servers(settings.file.mcp_servers, config)
    assert str(caught.value) == message.format(path=config)


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('[mcp_servers.x]\nurl = "http://a/mcp"\ncommand = "x"\n', "mcp_servers.x: "),
        ("[mcp_servers.x]\nargs = []\n", "mcp_servers.x: "),
        ('[mcp_servers.x]\ncommand = "x"\nrun_unasked = "no"\n', "run_unasked"),
        (
            '[mcp_servers.x]\ncommand = "x"\ntrust_read_only_hints = 1\n',
            "trust_read_only_hints",
        ),
        ('[mcp_servers.x]\nurl = "http://a"\nstderr_log = "a.log"\n', "stderr_log"),
        ('[mcp_servers.x]\ncommand = "x"\ntimeout = 0\n', "mcp_servers.x.timeout"),
        ('[mcp_servers.x]\ncommand = "x"\napi_key = "sk"\n', "mcp_servers.x.api_key"),
        ('[mcp_servers.x]\nurl = "http://a"\npass_env = ["A"]\n', "pass_env cannot"),
        ('[mcp_servers."a b"]\ncommand = "x"\n', "mcp_servers.a b"),
        ('[mcp_servers.x]\ncommand = "x"\ntool_prefix = "a.b"\n', "tool_prefix"),
    ],
)
def test_a_malformed_table_is_one_line(workspace: Path, table: str, named: str) -> None:
    config = workspace / "trusted.toml"
    config.write_text(table)
    with pytest.raises(InvalidInputError) as caught:
        load_settings(config=config)
    message = str(caught.value)
    assert message.startswith(f"{config}: ")
    assert named in message
    assert "\n" not in message
    assert '"sk"' not in message


def test_a_url_that_is_not_http_is_named(workspace: Path) -> None:
    config = workspace / "trusted.toml"
    config.write_text('[mcp_servers.s]\nurl = "file:///etc/passwd"\n')
    settings = load_settings(config=config)
    with pytest.raises(InvalidInputError, match=r"^mcp_servers\.s in .*: an MCP HTTP"):
        build_mcp_servers(settings.file.mcp_servers, config)


# -- trust: who may make turnlog run a server ------------------------------


def test_a_turnlog_toml_found_here_may_not_declare_mcp_servers(
    workspace: Path, user_config: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "server-ran"
    path = workspace / "turnlog.toml"
    path.write_text('[routes.x]\nmodel = "m"\n' + marker_table(marker))
    with pytest.raises(InvalidInputError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith(f"{path}: mcp_servers.evil refused: ")
    assert "may not say where an API key is sent or declare MCP servers" in message
    assert "--config or TURNLOG_CONFIG" in message
    assert str(user_config) in message
    assert "\n" not in message
    # Named with --config, the same file is trusted.
    trusted = load_settings(config=path)
    assert list(trusted.file.mcp_servers) == ["evil"]
    assert not marker.exists()


def test_turnlog_run_refuses_the_file_before_starting_anything(
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TURNLOG_MODEL", "gpt-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    marker = tmp_path / "server-ran"
    (workspace / "turnlog.toml").write_text(marker_table(marker))
    log = tmp_path / "log.sqlite3"
    code = main(["--store", f"sqlite:///{log}", "run"])
    _, err = capsys.readouterr()
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith(f"turnlog: error: {workspace / 'turnlog.toml'}: ")
    assert "mcp_servers.evil refused" in line
    assert not marker.exists()  # the command never ran
    assert not log.exists()  # nor was the log opened


def test_the_users_servers_stay_when_a_found_file_picks_a_route(
    workspace: Path, user_config: Path
) -> None:
    user_config.write_text(
        '[routes.a]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n' + stdio_table()
    )
    (workspace / "turnlog.toml").write_text('[routes.a]\nmodel = "other"\n')
    settings = load_settings()
    assert settings.project_path == workspace / "turnlog.toml"
    assert list(settings.file.mcp_servers) == ["srv"]
    assert settings.routes()["a"].model == "other"


def test_without_mcp_no_server_is_started(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNLOG_MODEL", "gpt-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    marker = tmp_path / "server-ran"
    config = workspace / "trusted.toml"
    config.write_text(marker_table(marker) + 'pass_env = ["UNSET_TOKEN"]\n')
    settings = load_settings(config=config)
    terminal = ScriptedTerminal()  # EOF at the first prompt
    run_interactive(RunOptions(store="memory://", mcp=False), settings, terminal)
    assert "mcp:" not in terminal.text
    assert not marker.exists()
    # With them, the unset variable is named before anything starts.
    with pytest.raises(UsageError, match=r"passes \$UNSET_TOKEN, which is not set"):
        run_interactive(RunOptions(store="memory://"), settings, ScriptedTerminal())
    assert not marker.exists()


def test_the_readmes_example_is_a_valid_route_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    [block] = [
        textwrap.dedent(block)
        for block in re.findall(r"```toml\n(.*?)```", readme, flags=re.S)
        if "[mcp_servers." in block
    ]
    config = workspace / "trusted.toml"
    config.write_text(block)
    monkeypatch.setenv("GITHUB_TOKEN", API_KEY)
    monkeypatch.setenv("SEARCH_AUTH", f"Bearer {API_KEY}")
    settings = load_settings(config=config)
    built = build_mcp_servers(settings.file.mcp_servers, config)  # none started
    assert [server.name for server in built] == ["fs", "search"]
    assert_safe_as_written(built)


WRITING_TOOLS = ("write_file", "edit_file", "move_file", "create_directory")


def assert_safe_as_written(servers: list[McpServer]) -> None:
    """No tool that writes runs unasked, even one the server marks read-only."""
    for server in servers:
        for name in WRITING_TOOLS:
            for hint in (None, ToolAnnotations(read_only_hint=True)):
                offered = Tool(name=name, input_schema={}, annotations=hint)
                assert server._tool(offered).requires_approval("{}"), (server, name)


def test_the_readmes_python_example_is_safe_as_written() -> None:
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    [block] = [
        block
        for block in re.findall(r"```python\n(.*?)```", readme, flags=re.S)
        if "McpServer.stdio" in block
    ]
    namespace: dict[str, object] = {"model": ScriptedModel([])}
    exec(compile(block, "README.md", "exec"), namespace)  # builds, starts nothing
    files, search = namespace["files"], namespace["search"]
    assert isinstance(files, McpServer)
    assert isinstance(search, McpServer)
    assert_safe_as_written([files, search])
    read = files._tool(Tool(name="read_text_file", input_schema={}))
    assert not read.requires_approval("{}")  # the example lets reads run
