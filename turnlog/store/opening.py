"""Finding and opening a log: its URL, and what is checked before it opens.

The URL forms are listed in :mod:`turnlog.store.log`. Everything here runs
before the eventsourcing application is built, so that a log that cannot
be used is refused with one clear StoreError naming it, before anything
is written: an SQLite file that is damaged, that is another database, or
that this process may not write (it can be opened read-only instead, from
a copy in memory); a PostgreSQL server that is down or refuses the user
or database (its own reason, at once); a schema name that is no plain
identifier (refused while parsing, before any SQL).
"""

from __future__ import annotations

import os
import re
import sqlite3
import uuid
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from turnlog.domain.errors import (
    NotATurnlogStoreError,
    StoreError,
    StoreURLError,
    UsageError,
)
from turnlog.store.log_tables import META_TABLE

DEFAULT_SQLITE_PATH = Path(".turnlog") / "turnlog.sqlite3"

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
"""A PostgreSQL schema name turnlog accepts: a plain identifier that needs
no quoting and fits PostgreSQL's 63-byte limit."""

_SQLITE_HEADER = b"SQLite format 3\x00"

_DAMAGE_CODES = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})
"""SQLite result codes that mean the file itself is damaged."""


def parse_store_url(url: str | None, *, cwd: Path | None = None) -> dict[str, str]:
    """The eventsourcing environment that ``url`` names; raises StoreURLError."""
    if url is None or url == "":
        path = (cwd or Path.cwd()) / DEFAULT_SQLITE_PATH
        return _sqlite_env(path)
    if not isinstance(url, str):
        msg = f"store URL must be a str, not {type(url).__name__}"
        raise StoreURLError(msg)
    scheme, sep, rest = url.partition("://")
    if not sep:
        msg = f"store URL {url!r} has no scheme; use sqlite:///PATH, memory:// or postgresql://..."
        raise StoreURLError(msg)
    if scheme == "memory":
        if rest:
            msg = f"memory:// takes nothing after the scheme, got {url!r}"
            raise StoreURLError(msg)
        name = f"file:turnlog-{uuid.uuid4().hex}?mode=memory&cache=shared"
        return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": name}
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            msg = f"SQLite URL {url!r} must look like sqlite:///relative/path or sqlite:////absolute/path"
            raise StoreURLError(msg)
        path = Path(unquote(rest[1:]))
        if not path.is_absolute():
            path = (cwd or Path.cwd()) / path
        return _sqlite_env(path)
    if scheme in ("postgresql", "postgres"):
        return _postgres_env(url)
    msg = (
        f"unsupported store URL scheme {scheme!r} in {url!r}; "
        "use sqlite, memory or postgresql"
    )
    raise StoreURLError(msg)


def _sqlite_env(path: Path) -> dict[str, str]:
    if path.is_dir():
        msg = f"SQLite store path {path} is a directory"
        raise StoreURLError(msg)
    return {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": str(path),
        "SQLITE_LOCK_TIMEOUT": "30",
    }


def _postgres_env(url: str) -> dict[str, str]:
    parts = urlsplit(url)
    dbname = parts.path.lstrip("/")
    if not parts.hostname or not dbname:
        msg = f"PostgreSQL URL {url!r} must name a host and a database"
        raise StoreURLError(msg)
    try:
        port = parts.port or 5432
    except ValueError as error:
        msg = f"PostgreSQL URL {url!r} has a bad port"
        raise StoreURLError(msg) from error
    query = parse_qs(parts.query)
    unknown = set(query) - {"schema", "create_tables"}
    if unknown:
        msg = f"unknown PostgreSQL URL parameters: {', '.join(sorted(unknown))}"
        raise StoreURLError(msg)
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": unquote(dbname),
        "POSTGRES_HOST": parts.hostname,
        "POSTGRES_PORT": str(port),
        "POSTGRES_USER": unquote(parts.username or os.environ.get("USER", "postgres")),
        "POSTGRES_PASSWORD": unquote(parts.password or ""),
        "POSTGRES_CONNECT_TIMEOUT": "10",
        "POSTGRES_POOL_SIZE": "5",
        "POSTGRES_MAX_OVERFLOW": "10",
    }
    if "schema" in query:
        env["POSTGRES_SCHEMA"] = _schema_name(url, query["schema"])
    if query.get("create_tables", ["yes"])[0] in ("no", "false", "0"):
        env["CREATE_TABLE"] = "no"
    return env


def _schema_name(url: str, given: list[str]) -> str:
    """The one schema a URL names, checked before any SQL sees it."""
    if len(given) != 1:
        msg = f"PostgreSQL URL {url!r} names more than one schema"
        raise StoreURLError(msg)
    schema = given[0]
    if not _SCHEMA_NAME.fullmatch(schema):
        msg = (
            f"PostgreSQL schema name {schema!r} is not a plain identifier "
            "(a letter or _, then letters, digits or _; at most 63)"
        )
        raise StoreURLError(msg)
    return schema


def location_of(url: str | None) -> str:
    """Where the log ``url`` names is (a path, ``memory`` or a server)."""
    return describe_url(url, parse_store_url(url))


def describe_url(url: str | None, env: dict[str, str]) -> str:
    """A human-readable location of the store (never shows passwords)."""
    if env["PERSISTENCE_MODULE"].endswith("sqlite"):
        name = env["SQLITE_DBNAME"]
        return "memory" if name.startswith("file:") else name
    # The schema is part of where the log is: without it, the location
    # names another log (the database's default schema).
    schema = env.get("POSTGRES_SCHEMA")
    return (
        f"postgresql://{env['POSTGRES_HOST']}:{env['POSTGRES_PORT']}/"
        f"{env['POSTGRES_DBNAME']}" + (f"?schema={schema}" if schema else "")
    )


def postgres_log_exists(env: dict[str, str]) -> bool | None:
    """Whether the PostgreSQL schema ``env`` names holds any table yet.

    None if the server cannot be asked (opening the log says why). Reads
    only the catalog: nothing is created.
    """
    import psycopg  # noqa: PLC0415 - only PostgreSQL users load it

    try:
        with psycopg.connect(
            dbname=env["POSTGRES_DBNAME"],
            host=env["POSTGRES_HOST"],
            port=env["POSTGRES_PORT"],
            user=env["POSTGRES_USER"],
            password=env["POSTGRES_PASSWORD"] or None,
            connect_timeout=int(env["POSTGRES_CONNECT_TIMEOUT"]),
            autocommit=True,
        ) as connection:
            row = connection.execute(
                "SELECT count(*) FROM information_schema.tables "
                "WHERE table_schema = %s",
                (env.get("POSTGRES_SCHEMA") or "public",),
            ).fetchone()
    except psycopg.Error:
        return None
    return row is not None and row[0] > 0


def is_sqlite_file(env: dict[str, str]) -> bool:
    name = env.get("SQLITE_DBNAME")
    return name is not None and not name.startswith("file:")


def sqlite_log_is_writable(url: str | None) -> bool:
    """Whether this process may write the log ``url`` names.

    False only for an SQLite log file that exists and that this process
    may not write, or whose folder it may not write (SQLite keeps its
    journal beside the file): the kernel's answer (``access(2)``), which
    also knows read-only mounts and immutable files. Writes nothing.
    """
    env = parse_store_url(url)
    return not is_sqlite_file(env) or _may_write(Path(env["SQLITE_DBNAME"]))


def _may_write(path: Path) -> bool:
    if not path.exists():
        return True
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def prepare_sqlite_file(name: str, *, read_only: bool = False) -> None:
    """Creates the parent folder; refuses a file that is another database.

    Refuses, too, a log this process may not write unless ``read_only``,
    and a missing log if ``read_only``: saying so is clearer than the
    "attempt to write a readonly database" of the first write.
    """
    if name.startswith("file:"):
        return
    path = Path(name)
    if read_only:
        if not path.exists():
            msg = f"there is no log at {path}"
            raise StoreError(msg)
    elif not _may_write(path):
        msg = (
            f"the log at {path} is read-only here (no write access to the file "
            "or its folder); commands that only read it still work"
        )
        raise StoreError(msg)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb") as file:
        header = file.read(16)
    if header != _SQLITE_HEADER:
        msg = f"{path} is not a turnlog log (not an SQLite database)"
        raise NotATurnlogStoreError(msg)
    connection = _connect_read_only(path)
    try:
        tables = {
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            )
        }
    finally:
        connection.close()
    if tables and META_TABLE not in tables:
        msg = f"{path} is not a turnlog log (it is another application's database)"
        raise NotATurnlogStoreError(msg)


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write ``path``, and creates nothing beside it
    unless SQLite's WAL rules need it to and the folder allows it.

    A WAL-mode log opened read-only needs its ``-shm`` file, which SQLite
    creates if it can. In a folder this process may not write, with no
    ``-wal`` file (the last writer closed cleanly, so every commit is in
    the file itself), the file is opened ``immutable``: SQLite then reads
    it without any locking or shared memory. A ``-wal`` file that cannot
    be read that way is refused rather than ignored: it holds commits.
    """
    uri = f"file:{quote(str(path))}"
    connection = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False)
    try:
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as error:
        connection.close()
        if getattr(error, "sqlite_errorname", "") not in (
            "SQLITE_READONLY_DIRECTORY",
            "SQLITE_CANTOPEN",
        ):
            raise
        wal = path.with_name(path.name + "-wal")
        if wal.exists():
            msg = (
                f"the log at {path} has commits in {wal} that cannot be read "
                "without write access to its folder"
            )
            raise StoreError(msg) from error
        connection = sqlite3.connect(
            f"{uri}?immutable=1", uri=True, check_same_thread=False
        )
    except BaseException:
        # Any other failure of the probe, such as the DatabaseError ("file is
        # not a database") of a damaged file, must close the connection too:
        # left to the garbage collector it holds the file open until then.
        connection.close()
        raise
    return connection


def memory_copy(path: Path) -> tuple[sqlite3.Connection, str]:
    """A private in-memory copy of the log file at ``path``, and its name.

    The returned connection keeps the copy alive (a shared-cache memory
    database lives while a connection to it is open): close it last.
    """
    name = f"file:turnlog-{uuid.uuid4().hex}?mode=memory&cache=shared"
    source = _connect_read_only(path)
    try:
        copy = sqlite3.connect(name, uri=True, check_same_thread=False)
        try:
            source.backup(copy)
        except BaseException:
            copy.close()
            raise
    finally:
        source.close()
    return copy, name


def integrity_problem(url: str | None) -> str | None:
    """What SQLite's ``PRAGMA quick_check`` finds wrong with the log file,
    or None if it finds nothing.

    Reads only; a file too damaged to be read at all is reported too. Not
    for PostgreSQL, memory, or a file that is no SQLite database at all
    (None: opening it says what it is not).
    """
    env = parse_store_url(url)
    if not is_sqlite_file(env):
        return None
    path = Path(env["SQLITE_DBNAME"])
    if not path.exists():
        msg = f"there is no log at {path}"
        raise UsageError(msg)
    with path.open("rb") as file:
        if file.read(16) != _SQLITE_HEADER:
            return None
    try:
        connection = _connect_read_only(path)
        try:
            rows = connection.execute("PRAGMA quick_check(5)").fetchall()
        finally:
            connection.close()
    except sqlite3.DatabaseError as error:
        return str(error)
    found = [str(row[0]) for row in rows]
    return None if found == ["ok"] else "; ".join(found)


def as_store_error(error: BaseException, location: str) -> StoreError:
    """``error``, raised reading or writing the log at ``location``, as one
    StoreError that names the log, and says so when the file is damaged."""
    if isinstance(error, StoreError):
        return error
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, sqlite3.Error):
        cause = cause.__cause__
    if isinstance(cause, sqlite3.DatabaseError) and (
        getattr(cause, "sqlite_errorname", "") in _DAMAGE_CODES
        or "malformed" in str(cause)
    ):
        return StoreError(f"the log at {location} is damaged: {cause}")
    return StoreError(f"the log at {location} failed: {error}")
