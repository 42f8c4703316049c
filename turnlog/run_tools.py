"""The example tools of ``turnlog run --tools``, confined to one workspace.

``read_file`` and ``list_directory`` read under the workspace (the working
directory); ``write_file`` writes there and asks for approval first. A path
is resolved (symlinks followed, ``..`` collapsed) before it is checked, so
neither a ``..`` nor a symlink leads out; a path outside is refused as an
error output for the model, never as a crash.
"""

from __future__ import annotations

import os
from pathlib import Path

from turnlog.tools import FunctionTool, ToolResult, function_tool

MAX_READ_BYTES = 64 * 1024
"""A longer file is cut: the model's context is not the place for it."""

MAX_WRITE_CHARS = 256 * 1024
MAX_ENTRIES = 500
"""Directory entries listed at most."""


class OutsideWorkspaceError(ValueError):
    """A path leads out of the workspace."""


class Workspace:
    """The directory the tools may touch.

    Args:
        root: the workspace; resolved once, so a later ``chdir`` or a
            symlinked root does not move it.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve(strict=True)

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the root, or absolute) as a real path inside it.

        Raises OutsideWorkspaceError for anything that resolves outside.
        """
        if "\x00" in path:
            msg = f"{path!r} is not a valid path"
            raise OutsideWorkspaceError(msg)
        # resolve() follows every symlink on the way, the last one included,
        # so the check below sees where a read or write would really land.
        real = (self.root / path).resolve(strict=False)
        if not real.is_relative_to(self.root):
            msg = f"{path!r} is outside the workspace {self.root}; refused"
            raise OutsideWorkspaceError(msg)
        return real

    def shown(self, real: Path) -> str:
        """``real`` relative to the root, as the model should see it."""
        relative = real.relative_to(self.root).as_posix()
        return relative if relative != "." else "."


def workspace_tools(workspace: Workspace) -> list[FunctionTool]:
    """``read_file``, ``list_directory`` and ``write_file`` on ``workspace``."""

    @function_tool
    def read_file(path: str) -> ToolResult:
        """Reads a text file under the workspace (path relative to it)."""
        try:
            real = workspace.resolve(path)
            with real.open("rb") as file:
                data = file.read(MAX_READ_BYTES + 1)
        except OutsideWorkspaceError as error:
            return ToolResult(str(error), is_error=True)
        except IsADirectoryError:
            return ToolResult(f"{path!r} is a directory: use list_directory", True)
        except OSError as error:
            return ToolResult(f"cannot read {path!r}: {_reason(error)}", True)
        text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        if len(data) > MAX_READ_BYTES:
            text += f"\n[cut: only the first {MAX_READ_BYTES} bytes are shown]"
        return ToolResult(text)

    @function_tool
    def list_directory(path: str = ".") -> ToolResult:
        """Lists a directory under the workspace; subdirectories end with '/'."""
        try:
            real = workspace.resolve(path)
            entries = sorted(os.scandir(real), key=lambda entry: entry.name)
        except OutsideWorkspaceError as error:
            return ToolResult(str(error), is_error=True)
        except NotADirectoryError:
            return ToolResult(f"{path!r} is a file: use read_file", is_error=True)
        except OSError as error:
            return ToolResult(f"cannot list {path!r}: {_reason(error)}", True)
        names = [
            entry.name + ("/" if entry.is_dir() else "")
            for entry in entries[:MAX_ENTRIES]
        ]
        if len(entries) > MAX_ENTRIES:
            names.append(f"[{len(entries) - MAX_ENTRIES} more entries not shown]")
        where = workspace.shown(real)
        return ToolResult("\n".join(names) if names else f"{where} is empty")

    @function_tool(needs_approval=True)
    def write_file(path: str, content: str) -> ToolResult:
        """Writes a text file under the workspace, replacing it if it exists."""
        if len(content) > MAX_WRITE_CHARS:
            msg = (
                f"content too long: {len(content)} characters, "
                f"{MAX_WRITE_CHARS} at most"
            )
            return ToolResult(msg, is_error=True)
        try:
            real = workspace.resolve(path)
            real.parent.mkdir(parents=True, exist_ok=True)
            real.write_text(content, encoding="utf-8")
        except OutsideWorkspaceError as error:
            return ToolResult(str(error), is_error=True)
        except OSError as error:
            return ToolResult(f"cannot write {path!r}: {_reason(error)}", True)
        return ToolResult(f"wrote {len(content)} characters to {workspace.shown(real)}")

    return [read_file, list_directory, write_file]


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__
