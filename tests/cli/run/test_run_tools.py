"""The workspace tools: they read and write under the workspace, and only there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnlog import FunctionTool, ToolResult
from turnlog.cli.run.workspace import (
    MAX_READ_BYTES,
    OutsideWorkspaceError,
    Workspace,
    workspace_tools,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    (path / "docs").mkdir(parents=True)
    (path / "docs" / "notes.txt").write_text("inside notes")
    (tmp_path / "secret.txt").write_text("outside secret")
    return path


@pytest.fixture
def tools(root: Path) -> dict[str, FunctionTool]:
    return {tool.name: tool for tool in workspace_tools(Workspace(root))}


def call(tool: FunctionTool, **arguments: str) -> ToolResult:
    return tool.run_sync(json.dumps(arguments), {})


def test_a_path_inside_is_read_and_one_outside_is_refused(root: Path) -> None:
    workspace = Workspace(root)
    for inside in (
        "docs/notes.txt",
        "docs/../docs/notes.txt",
        str(root / "docs/notes.txt"),
    ):
        assert workspace.read(inside, 100) == b"inside notes"
    for outside in ("../secret.txt", "docs/../../secret.txt", "/etc/passwd", ".."):
        with pytest.raises(OutsideWorkspaceError, match="outside the workspace"):
            workspace.read(outside, 100)


def test_a_symlink_out_of_the_workspace_is_refused(root: Path) -> None:
    (root / "link.txt").symlink_to(root.parent / "secret.txt")
    (root / "linked-dir").symlink_to(root.parent)
    (root / "up").symlink_to("docs/../..")
    (root / "inner.txt").symlink_to(root / "docs" / "notes.txt")
    (root / "docs" / "relative.txt").symlink_to("../inner.txt")
    workspace = Workspace(root)
    for outside in ("link.txt", "linked-dir/secret.txt", "up/secret.txt"):
        with pytest.raises(OutsideWorkspaceError):
            workspace.read(outside, 100)
    # A symlink that stays inside is followed, by its absolute or relative target.
    assert workspace.read("inner.txt", 100) == b"inside notes"
    assert workspace.read("docs/relative.txt", 100) == b"inside notes"


def test_a_symlink_loop_is_an_error_not_a_hang(root: Path) -> None:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        Workspace(root).read("a", 100)


def test_read_file_reads_inside_and_refuses_outside(
    tools: dict[str, FunctionTool], root: Path
) -> None:
    assert call(tools["read_file"], path="docs/notes.txt") == ToolResult("inside notes")
    (root / "link.txt").symlink_to(root.parent / "secret.txt")
    for outside in ("../secret.txt", "link.txt", str(root.parent / "secret.txt")):
        result = call(tools["read_file"], path=outside)
        assert result.is_error
        assert "outside the workspace" in result.output
        assert "outside secret" not in result.output


def test_read_file_reports_what_it_cannot_read(
    tools: dict[str, FunctionTool], root: Path
) -> None:
    missing = call(tools["read_file"], path="nope.txt")
    assert missing.is_error
    assert missing.output == "cannot read 'nope.txt': No such file or directory"
    directory = call(tools["read_file"], path="docs")
    assert directory == ToolResult("'docs' is a directory: use list_directory", True)


def test_read_file_cuts_a_long_file(tools: dict[str, FunctionTool], root: Path) -> None:
    (root / "big.txt").write_text("x" * (MAX_READ_BYTES + 10))
    result = call(tools["read_file"], path="big.txt")
    assert not result.is_error
    assert result.output.startswith("x" * MAX_READ_BYTES + "\n[cut: only the first")


def test_list_directory(tools: dict[str, FunctionTool], root: Path) -> None:
    (root / "b.txt").write_text("")
    (root / "empty").mkdir()
    assert call(tools["list_directory"]) == ToolResult("b.txt\ndocs/\nempty/")
    assert call(tools["list_directory"], path="empty") == ToolResult("empty is empty")
    outside = call(tools["list_directory"], path="..")
    assert outside.is_error
    assert "outside the workspace" in outside.output
    assert call(tools["list_directory"], path="b.txt").is_error


def test_write_file_needs_approval_and_stays_inside(
    tools: dict[str, FunctionTool], root: Path
) -> None:
    write = tools["write_file"]
    assert write.requires_approval('{"path": "a.txt", "content": "x"}')
    assert not tools["read_file"].requires_approval('{"path": "a.txt"}')
    done = call(write, path="new/dir/a.txt", content="hello")
    assert done == ToolResult("wrote 5 characters to new/dir/a.txt")
    assert (root / "new" / "dir" / "a.txt").read_text() == "hello"
    refused = call(write, path="../evil.txt", content="x")
    assert refused.is_error
    assert not (root.parent / "evil.txt").exists()
