"""The example tools of ``turnlog run --tools``, confined to one workspace.

``read_file`` and ``list_directory`` read under the workspace (the working
directory); ``write_file`` writes there and asks for approval first. A
refused path is an error output for the model, never a crash.

Paths are walked one component at a time from an open descriptor of the
workspace root (``openat`` with ``O_NOFOLLOW``), never opened by name
after a check: whatever is swapped in meanwhile, what gets opened is
inside. A symlink met on the way is read and its target walked the same
way, so one pointing inside works and one leading out (or a ``..`` above
the root) is refused. Only regular files are read or replaced; a FIFO is
opened without blocking and refused.

turnlog's own files are refused too, for reading, listing and writing:
any ``.turnlog`` directory and ``turnlog.toml`` file at any depth, and the
paths the caller protects (the log and the trusted config file), however
they are reached. A model must not rewrite the log, read other sessions
out of it, or redirect the next run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import TypeVar

from turnlog.tools import FunctionTool, ToolResult, function_tool

MAX_READ_BYTES = 64 * 1024
"""A longer file is cut: the model's context is not the place for it."""

MAX_WRITE_CHARS = 256 * 1024
MAX_ENTRIES = 500
"""Directory entries listed at most."""
MAX_SYMLINKS = 40
"""Symlinks followed in one path at most (Linux's own limit)."""

PROTECTED_NAMES = frozenset({".turnlog", "turnlog.toml"})
"""turnlog's own files, refused wherever they are (compared case-folded)."""

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

Identity = tuple[int, int]
"""A file's ``(st_dev, st_ino)``: the same file by whatever path."""

T = TypeVar("T")


class RefusedPathError(ValueError):
    """A path the workspace tools may not touch."""


class OutsideWorkspaceError(RefusedPathError):
    """A path leads out of the workspace."""


class ProtectedPathError(RefusedPathError):
    """A path names one of turnlog's own files (its log, its config)."""


class NotRegularFileError(RefusedPathError):
    """A path names a FIFO, socket or device rather than a file."""


class _Guard:
    """The protected paths as they are now: identities, and names per folder."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self.identities: set[Identity] = set()
        self.entries: set[tuple[Identity, str]] = set()
        for path in paths:
            # Followed: these are the user's own paths, not the model's.
            with contextlib.suppress(OSError):
                self.identities.add(_identity(path.stat()))
            with contextlib.suppress(OSError):
                parent = _identity(path.parent.stat())
                self.entries.add((parent, path.name.casefold()))

    def check_name(self, folder: Identity, name: str, shown: str) -> None:
        key = name.casefold()
        if key in PROTECTED_NAMES or (folder, key) in self.entries:
            raise ProtectedPathError(_protected(shown))

    def check_file(self, status: os.stat_result, shown: str) -> None:
        if _identity(status) in self.identities:
            raise ProtectedPathError(_protected(shown))


class _Walk:
    """Open directory descriptors from the root down, and their names."""

    def __init__(self, root_fd: int, guard: _Guard) -> None:
        self.fds = [root_fd]
        self.names: list[str] = []
        self.ids = [_identity(os.fstat(root_fd))]
        self.guard = guard

    @property
    def fd(self) -> int:
        return self.fds[-1]

    def shown(self, name: str = "") -> str:
        return "/".join([*self.names, name] if name else self.names) or "."

    def enter(self, name: str, *, create: bool = False) -> None:
        """Opens ``name`` below the current directory (ELOOP if a symlink)."""
        self.guard.check_name(self.ids[-1], name, self.shown(name))
        try:
            fd = os.open(name, _DIRECTORY, dir_fd=self.fd)
        except FileNotFoundError:
            if not create:
                raise
            os.mkdir(name, dir_fd=self.fd)
            fd = os.open(name, _DIRECTORY, dir_fd=self.fd)
        status = os.fstat(fd)
        self.fds.append(fd)
        self.names.append(name)
        self.ids.append(_identity(status))
        self.guard.check_file(status, self.shown())

    def leave(self, shown: str) -> None:
        """``..``: back to the directory walked through, never above the root."""
        if not self.names:
            raise OutsideWorkspaceError(_outside(shown))
        os.close(self.fds.pop())
        self.names.pop()
        self.ids.pop()

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)


class Workspace:
    """The directory the tools may touch.

    Args:
        root: the workspace; resolved once, so a later ``chdir`` or a
            symlinked root does not move it.
        protected: more paths refused however they are reached (a folder
            protects everything in it): the log, the trusted config file.
    """

    def __init__(self, root: Path, protected: Iterable[Path] = ()) -> None:
        self.root = root.resolve(strict=True)
        self.protected = tuple(Path(os.path.abspath(path)) for path in protected)

    def read(self, path: str, limit: int) -> bytes:
        """Up to ``limit`` bytes of the regular file at ``path``.

        Raises RefusedPathError (outside, protected, not a regular file)
        and OSError (IsADirectoryError for a directory).
        """

        def read_leaf(walk: _Walk, name: str) -> bytes:
            walk.guard.check_name(walk.ids[-1], name, walk.shown(name))
            fd = os.open(name, _READ, dir_fd=walk.fd)
            try:
                status = os.fstat(fd)
                walk.guard.check_file(status, walk.shown(name))
                if stat.S_ISDIR(status.st_mode):
                    raise _is_a_directory()
                if not stat.S_ISREG(status.st_mode):
                    raise NotRegularFileError(_irregular(walk.shown(name)))
                os.set_blocking(fd, True)
                with os.fdopen(fd, "rb", closefd=False) as file:
                    return file.read(limit)
            finally:
                os.close(fd)

        return self._at(path, read_leaf, directory=_no_directory)

    def listing(self, path: str) -> tuple[str, list[str]]:
        """The directory at ``path`` as shown, and its entries (``/`` after
        directories), sorted. NotADirectoryError for a file."""

        def list_here(walk: _Walk) -> tuple[str, list[str]]:
            with os.scandir(walk.fd) as entries:
                names = [
                    entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")
                    for entry in entries
                ]
            return walk.shown(), sorted(names)

        def list_leaf(walk: _Walk, name: str) -> tuple[str, list[str]]:
            walk.enter(name)
            return list_here(walk)

        return self._at(path, list_leaf, directory=list_here)

    def write(self, path: str, data: bytes) -> str:
        """Replaces (or creates) the file at ``path`` with ``data``, making
        missing folders; returns the path as shown.

        The data goes to a new file in the same folder, renamed over the
        old one: a reader never sees half of it, and a symlink swapped in
        meanwhile is replaced rather than followed.
        """

        def write_leaf(walk: _Walk, name: str) -> str:
            shown = walk.shown(name)
            walk.guard.check_name(walk.ids[-1], name, shown)
            mode: int | None = None  # a new file: as open() makes it, less the umask
            try:
                status = os.stat(name, dir_fd=walk.fd, follow_symlinks=False)
            except FileNotFoundError:
                pass
            else:
                if stat.S_ISLNK(status.st_mode):
                    raise _Symlink from None
                walk.guard.check_file(status, shown)
                if stat.S_ISDIR(status.st_mode):
                    raise _is_a_directory()
                if not stat.S_ISREG(status.st_mode):
                    raise NotRegularFileError(_irregular(shown))
                mode = stat.S_IMODE(status.st_mode)
            temporary = f".turnlog-write-{uuid.uuid4().hex}"
            fd = os.open(temporary, _CREATE, 0o666, dir_fd=walk.fd)
            try:
                with os.fdopen(fd, "wb", closefd=False) as file:
                    file.write(data)
                if mode is not None:  # the replaced file's, not the umask's
                    os.fchmod(fd, mode)
                os.replace(temporary, name, src_dir_fd=walk.fd, dst_dir_fd=walk.fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=walk.fd)
                raise
            finally:
                os.close(fd)
            return shown

        return self._at(path, write_leaf, directory=None, create=True)

    def _at(
        self,
        path: str,
        leaf: Callable[[_Walk, str], T],
        *,
        directory: Callable[[_Walk], T] | None,
        create: bool = False,
    ) -> T:
        """Walks ``path`` from the root and calls ``leaf`` on its last name
        (or ``directory`` if it names a directory by ``.``/``..``/none)."""
        pending = deque(self._parts(path))
        _check_names(pending, path)
        walk = _Walk(os.open(self.root, _DIRECTORY), _Guard(self.protected))
        links = 0
        try:
            while True:
                while pending and pending[0] in ("", "."):
                    pending.popleft()
                if not pending:
                    if directory is None:
                        raise _is_a_directory()
                    return directory(walk)
                name = pending.popleft()
                if name == "..":
                    walk.leave(path)
                    if not pending:
                        pending.append(".")
                    continue
                try:
                    if pending:
                        walk.enter(name, create=create)
                        continue
                    return leaf(walk, name)
                except (OSError, _Symlink) as error:
                    target = self._link(walk, name, error)
                links += 1
                if links > MAX_SYMLINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP)) from None
                if target.is_absolute():
                    walk.close()
                    walk = _Walk(os.open(self.root, _DIRECTORY), walk.guard)
                    target = self._inside(target, path)
                _check_names(target.parts, path)
                pending.extendleft(reversed(target.parts))
        finally:
            walk.close()

    def _parts(self, path: str) -> tuple[str, ...]:
        if "\x00" in path:
            msg = f"{path!r} is not a valid path"
            raise OutsideWorkspaceError(msg)
        given = PurePosixPath(path)
        if given.is_absolute():
            given = self._inside(given, path)
        return given.parts

    def _inside(self, absolute: PurePosixPath, path: str) -> PurePosixPath:
        """``absolute`` relative to the root (judged by its text alone)."""
        try:
            return absolute.relative_to(self.root.as_posix())
        except ValueError:
            raise OutsideWorkspaceError(_outside(path)) from None

    @staticmethod
    def _link(walk: _Walk, name: str, error: OSError | _Symlink) -> PurePosixPath:
        """The target of the symlink ``name`` that stopped the walk, or
        ``error`` again if ``name`` is no symlink."""
        try:
            return PurePosixPath(os.readlink(name, dir_fd=walk.fd))
        except OSError:
            if isinstance(error, _Symlink):
                return PurePosixPath(name)  # swapped back meanwhile: look again
            raise error from None


class _Symlink(Exception):  # a signal inside the walk, never raised out of it
    """The leaf to write is a symlink: walk its target instead."""


def _no_directory(walk: _Walk) -> bytes:
    """``read_file`` on ``.`` or a path ending in ``..``."""
    raise _is_a_directory()


def _is_a_directory() -> IsADirectoryError:
    return IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))


def _check_names(parts: Iterable[str], path: str) -> None:
    """Refuses a path naming turnlog's own files before any folder of it is
    made."""
    if any(part.casefold() in PROTECTED_NAMES for part in parts):
        raise ProtectedPathError(_protected(path))


def _identity(status: os.stat_result) -> Identity:
    return (status.st_dev, status.st_ino)


def _outside(path: str) -> str:
    return f"{path!r} is outside the workspace; refused"


def _protected(shown: str) -> str:
    return f"{shown!r} is turnlog's own (its log or config); refused"


def _irregular(shown: str) -> str:
    return f"{shown!r} is not a regular file; refused"


def workspace_tools(workspace: Workspace) -> list[FunctionTool]:
    """``read_file``, ``list_directory`` and ``write_file`` on ``workspace``."""

    @function_tool
    def read_file(path: str) -> ToolResult:
        """Reads a text file under the workspace (path relative to it)."""
        try:
            data = workspace.read(path, MAX_READ_BYTES + 1)
        except RefusedPathError as error:
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
            where, entries = workspace.listing(path)
        except RefusedPathError as error:
            return ToolResult(str(error), is_error=True)
        except NotADirectoryError:
            return ToolResult(f"{path!r} is a file: use read_file", is_error=True)
        except OSError as error:
            return ToolResult(f"cannot list {path!r}: {_reason(error)}", True)
        names = entries[:MAX_ENTRIES]
        if len(entries) > MAX_ENTRIES:
            names.append(f"[{len(entries) - MAX_ENTRIES} more entries not shown]")
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
            shown = workspace.write(path, content.encode("utf-8"))
        except RefusedPathError as error:
            return ToolResult(str(error), is_error=True)
        except IsADirectoryError:
            return ToolResult(f"{path!r} is a directory; not written", True)
        except OSError as error:
            return ToolResult(f"cannot write {path!r}: {_reason(error)}", True)
        return ToolResult(f"wrote {len(content)} characters to {shown}")

    return [read_file, list_directory, write_file]


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__
