"""The workspace tools under attack: racing symlink swaps, FIFOs, and a model
reaching for turnlog's own files (the log, the route file)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from turnlog import FunctionTool, ScriptedModel, ToolResult
from turnlog.cli.run.command import RunOptions, build_agent, protected_paths
from turnlog.cli.run.workspace import Workspace, workspace_tools
from turnlog.routing import ModelRouter

ROUNDS = 10_000
"""Reads made while the swapper runs; on the code before the fd-relative
walk, this many returned the outside file 5 to 20 times."""
WRITE_ROUNDS = 2_000
"""Writes made while the swapper runs (each makes a file: fewer)."""

TIMEOUT = 10.0
"""Seconds a call that must not block may take before the test fails."""


def call(tool: FunctionTool, **arguments: str) -> ToolResult:
    return tool.run_sync(json.dumps(arguments), {})


def tools_on(workspace: Workspace) -> dict[str, FunctionTool]:
    return {tool.name: tool for tool in workspace_tools(workspace)}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    (path / "sub").mkdir(parents=True)
    (path / "sub" / "notes.txt").write_text("inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "notes.txt").write_text("outside secret")
    return path


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Threads switch every microsecond, so the swapper's steps land between
    the reader's: the race is met often rather than by luck."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


Step = Callable[[Callable[[], None], Path], None]
"""Does the action, clearing the path first if something is in the way."""
Steps = Callable[[Step], None]


class Swapper:
    """A thread doing ``steps`` over and over until stopped.

    A step may meet a folder ``write_file`` just made where it swaps (the
    tool makes missing folders): it removes it and tries again.
    """

    def __init__(self, steps: Steps) -> None:
        self.rounds = 0
        self._stop = threading.Event()
        self._steps = steps
        self._thread = threading.Thread(target=self._loop, name="swapper")

    def __enter__(self) -> Swapper:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT)
        assert not self._thread.is_alive()
        assert self.rounds > 0

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._steps(self._retrying)
            self.rounds += 1

    @staticmethod
    def _retrying(step: Callable[[], None], where: Path) -> None:
        while True:
            try:
                step()
            except OSError:
                shutil.rmtree(where, ignore_errors=True)
            else:
                return


def swap_directory(root: Path) -> Steps:
    """``sub`` is by turns the real folder and a symlink to the outside one."""
    outside, sub, parked = root.parent / "outside", root / "sub", root / "parked"

    def steps(step: Step) -> None:
        os.rename(sub, parked)
        step(lambda: os.symlink(outside, sub), sub)
        os.unlink(sub)
        step(lambda: os.rename(parked, sub), sub)

    return steps


def swap_leaf(root: Path) -> Steps:
    """``sub/notes.txt`` is by turns the real file and a symlink out."""
    outside = root.parent / "outside" / "notes.txt"
    leaf, parked = root / "sub" / "notes.txt", root / "sub" / "parked"

    def steps(step: Step) -> None:
        os.rename(leaf, parked)
        step(lambda: os.symlink(outside, leaf), leaf)
        os.unlink(leaf)
        step(lambda: os.rename(parked, leaf), leaf)

    return steps


@pytest.mark.usefixtures("fast_switching")
@pytest.mark.parametrize("swap", [swap_directory, swap_leaf])
def test_a_racing_symlink_swap_never_reads_outside(
    root: Path, swap: Callable[[Path], Steps]
) -> None:
    read = tools_on(Workspace(root))["read_file"]
    assert call(read, path="sub/notes.txt") == ToolResult("inside")
    with Swapper(swap(root)):
        outputs = [call(read, path="sub/notes.txt").output for _ in range(ROUNDS)]
    escaped = sum("outside secret" in output for output in outputs)
    assert escaped == 0, f"{escaped} of {ROUNDS} reads returned the outside file"


@pytest.mark.usefixtures("fast_switching")
def test_a_racing_symlink_swap_never_writes_outside(root: Path) -> None:
    write = tools_on(Workspace(root))["write_file"]
    outside = root.parent / "outside"
    with Swapper(swap_directory(root)):
        for round_ in range(WRITE_ROUNDS):
            call(write, path=f"sub/w{round_}.txt", content="x")
    assert sorted(path.name for path in outside.iterdir()) == ["notes.txt"]


def in_time(action: Callable[[], ToolResult], fifo: Path) -> ToolResult:
    """``action()``, failing the test if it blocks; a blocked open of
    ``fifo`` is released at the end, so no thread is left hanging."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(action).result(timeout=TIMEOUT)
    finally:
        for flags in (os.O_WRONLY, os.O_RDONLY):  # meets a blocked reader or writer
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, flags | os.O_NONBLOCK))
        pool.shutdown(wait=True)


def test_a_fifo_is_refused_not_waited_on(root: Path) -> None:
    fifo = root / "pipe"
    os.mkfifo(fifo)
    tools = tools_on(Workspace(root))
    read = in_time(lambda: call(tools["read_file"], path="pipe"), fifo)
    assert read == ToolResult("'pipe' is not a regular file; refused", True)
    written = in_time(lambda: call(tools["write_file"], path="pipe", content="x"), fifo)
    assert written == ToolResult("'pipe' is not a regular file; refused", True)
    assert fifo.exists()


def test_turnlogs_own_files_are_refused(root: Path) -> None:
    log = root / ".turnlog" / "turnlog.sqlite3"
    log.parent.mkdir()
    log.write_bytes(b"SQLite format 3\x00 other sessions")
    (root / "turnlog.toml").write_text('[routes.a]\nmodel = "m"\n')
    (root / "sub" / "turnlog.toml").write_text("")
    (root / "alias").symlink_to(".turnlog")
    tools = tools_on(Workspace(root))
    for path in (
        ".turnlog/turnlog.sqlite3",
        ".turnlog/new.txt",
        "turnlog.toml",
        "sub/turnlog.toml",
        "sub/new/turnlog.toml",
        "TurnLog.TOML",
        "alias/turnlog.sqlite3",
    ):
        result = call(tools["write_file"], path=path, content='base_url = "evil"')
        assert result.is_error, path
        assert "is turnlog's own (its log or config); refused" in result.output
    for path in (".turnlog/turnlog.sqlite3", "turnlog.toml", "alias/turnlog.sqlite3"):
        result = call(tools["read_file"], path=path)
        assert result.is_error, path
        assert "other sessions" not in result.output
    assert call(tools["list_directory"], path=".turnlog").is_error
    assert call(tools["list_directory"], path="alias").is_error
    assert log.read_bytes() == b"SQLite format 3\x00 other sessions"
    assert (root / "turnlog.toml").read_text() == '[routes.a]\nmodel = "m"\n'
    assert not (root / ".turnlog" / "new.txt").exists()
    assert not (root / "sub" / "new").exists()


def test_the_log_and_config_the_run_uses_are_refused_by_any_name(
    root: Path, tmp_path: Path
) -> None:
    config = tmp_path / "routes.toml"
    config.write_text('[routes.a]\nmodel = "m"\n')
    (root / "cfg").symlink_to(config)
    data = root / "data"
    data.mkdir()
    log = data / "log.sqlite3"
    log.write_bytes(b"the log")
    os.link(log, root / "hardlink")
    options = RunOptions(store=f"sqlite:///{log}", tools=True, workspace=root)
    protected = protected_paths(options, config)
    assert protected[:3] == [config, log, data / "log.sqlite3-wal"]
    assert protected[-1] == data
    tools = tools_on(Workspace(root, protected))
    for path in ("data/log.sqlite3", "data/log.sqlite3-wal", "data/other.txt"):
        assert call(tools["write_file"], path=path, content="x").is_error
    for path in ("cfg", "hardlink", str(log), str(config)):
        assert call(tools["read_file"], path=path).is_error, path
    assert call(tools["write_file"], path="elsewhere.txt", content="x") == ToolResult(
        "wrote 1 characters to elsewhere.txt"
    )


def test_a_log_beside_the_workspace_protects_only_its_files(root: Path) -> None:
    log = root / "log.sqlite3"
    options = RunOptions(store="sqlite:///log.sqlite3", tools=True, workspace=root)
    os.chdir(root)  # the store URL is relative to the working directory
    try:
        protected = protected_paths(options, None)
    finally:
        os.chdir(root.parent)
    names = ["log.sqlite3", "log.sqlite3-wal", "log.sqlite3-shm", "log.sqlite3-journal"]
    assert protected == [log.parent / name for name in names]
    tools = tools_on(Workspace(root, protected))
    assert call(tools["write_file"], path="log.sqlite3-wal", content="x").is_error
    assert not call(tools["write_file"], path="notes.md", content="x").is_error
    assert not call(tools["read_file"], path="sub/notes.txt").is_error


def test_a_write_replaces_a_file_keeping_its_mode(root: Path) -> None:
    script = root / "run.sh"
    script.write_text("old")
    script.chmod(0o750)
    write = tools_on(Workspace(root))["write_file"]
    assert not call(write, path="run.sh", content="new").is_error
    assert script.read_text() == "new"
    assert script.stat().st_mode & 0o777 == 0o750
    assert [path.name for path in root.iterdir() if path.name.startswith(".")] == []


def test_the_run_gives_its_tools_the_log_and_config_to_refuse(
    root: Path, tmp_path: Path
) -> None:
    config = root / "routes.toml"  # trusted by --config, under any name
    config.write_text('[routes.a]\nmodel = "m"\n')
    options = RunOptions(
        store=f"sqlite:///{tmp_path}/logs/log.sqlite3", tools=True, workspace=root
    )
    agent = build_agent(ModelRouter("a", ScriptedModel()), options, config)
    write = agent.tools_by_name["write_file"]
    refused = call(write, path="routes.toml", content='base_url = "evil"')
    assert refused.is_error
    assert "turnlog's own" in refused.output
    assert config.read_text() == '[routes.a]\nmodel = "m"\n'
