"""Which log a command reads, from its arguments, checked before it is opened.

Opening a log creates it, so the commands that only read check first that
it is there: looking at a log that is not there leaves nothing behind.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from turnlog.cli.parser import STORE_ENV
from turnlog.domain.errors import UnknownSessionError, UsageError
from turnlog.domain.ids import check_session_id
from turnlog.store.opening import (
    describe_url,
    parse_store_url,
    postgres_log_exists,
)


def store_url(args: argparse.Namespace) -> str | None:
    """``--store``, else ``TURNLOG_STORE``, else None (the default log)."""
    url: str | None = args.store
    if url is None:
        url = os.environ.get(STORE_ENV) or None
    return url


def missing_log(url: str | None) -> str | None:
    """Where the log ``url`` names is, if there is no log there yet.

    Opening a log creates it (an SQLite file; a PostgreSQL schema and its
    tables), so the commands that only read check first: looking at a log
    that is not there leaves nothing behind. A PostgreSQL server that
    cannot be asked is left to opening, which says why.
    """
    env = parse_store_url(url)  # raises StoreURLError, as opening would
    if env["PERSISTENCE_MODULE"].endswith("postgres"):
        if postgres_log_exists(env) is False:
            return describe_url(url, env)
        return None
    name = env.get("SQLITE_DBNAME")
    if name is None or name.startswith("file:"):  # memory://
        return None
    path = Path(name)
    return None if path.exists() else str(path)


def require_log(url: str | None) -> None:
    """Refuses an SQLite log that does not exist (opening would create it)."""
    missing = missing_log(url)
    if missing is not None:
        msg = f"there is no log at {missing}"
        raise UsageError(msg)


def session_and_log(args: argparse.Namespace) -> tuple[str, str | None]:
    """The SESSION asked for and the URL of its log.

    Both are checked before the log is opened (opening creates a missing
    SQLite log), so a bad id or a log that is not there changes nothing.
    """
    session_id = check_session_id(args.session)
    url = store_url(args)
    missing = missing_log(url)
    if missing is not None:
        msg = f"no session {session_id!r}: there is no log at {missing}"
        raise UnknownSessionError(msg)
    return session_id, url
