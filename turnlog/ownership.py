"""Which process owns a session: one live writer per session, across processes.

The log already refuses a second writer's events (a version clash), but
a second process opening a session would first take the running turn for
one a crash cut off and close it. So a runtime leases each session it
opens: a row in the log's own database naming the owner (host, pid and a
random tag) and the time it last renewed the lease. Another runtime may
take the session over only when the lease has expired (its owner stopped
renewing), or when the owner is a process on this host that no longer
exists (it was killed: SIGKILL leaves no time to release anything).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from turnlog.domain.errors import SessionBusyError
from turnlog.store import Store

logger = logging.getLogger(__name__)

LEASE_TABLE = "turnlog_session_owners"
LEASE_SECONDS = 30.0
"""A lease not renewed for this long may be taken over."""
RENEW_EVERY = LEASE_SECONDS / 3


def _process_is_gone(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class SessionOwnership:
    """Leases on sessions, held by one runtime and renewed in the background."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        prefix = f"{store.datastore.schema}." if store.is_postgres else ""
        self.table = prefix + LEASE_TABLE
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        with store.transaction() as cursor:
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (session_id TEXT PRIMARY KEY,"
                " owner TEXT NOT NULL, renewed DOUBLE PRECISION NOT NULL)"
            )
        self._thread = threading.Thread(
            target=self._renew_forever, name="turnlog-leases", daemon=True
        )
        self._thread.start()

    def acquire(self, session_id: str) -> None:
        """Leases ``session_id`` to this runtime, or raises SessionBusyError."""
        now = time.time()
        sql = self.store.sql
        with self.store.transaction() as cursor:
            cursor.execute(
                sql(
                    f"INSERT INTO {self.table} VALUES (?, ?, ?) "
                    "ON CONFLICT (session_id) DO UPDATE SET "
                    "owner = excluded.owner, renewed = excluded.renewed "
                    f"WHERE {self.table}.owner = excluded.owner "
                    f"OR {self.table}.renewed < ?"
                ),
                (session_id, self.owner, now, now - LEASE_SECONDS),
            )
            cursor.execute(
                sql(f"SELECT owner FROM {self.table} WHERE session_id = ?"),
                (session_id,),
            )
            row = cursor.fetchone()
            holder = str(row["owner"] if isinstance(row, dict) else row[0])
            if holder != self.owner and _process_is_gone(holder):
                cursor.execute(
                    sql(
                        f"UPDATE {self.table} SET owner = ?, renewed = ? "
                        "WHERE session_id = ? AND owner = ?"
                    ),
                    (self.owner, now, session_id, holder),
                )
                holder = self.owner
        if holder != self.owner:
            msg = (
                f"session {session_id!r} is open in another process ({holder}); "
                "close it there, or wait for its lease to expire"
            )
            raise SessionBusyError(msg)
        with self._lock:
            self._held.add(session_id)

    def release_all(self) -> None:
        """Gives up every lease of this runtime and stops renewing."""
        self._stopping.set()
        with self._lock:
            held, self._held = list(self._held), set()
        if held:
            with self.store.transaction() as cursor:
                cursor.execute(
                    self.store.sql(f"DELETE FROM {self.table} WHERE owner = ?"),
                    (self.owner,),
                )
        self._thread.join(timeout=5)

    def _renew_forever(self) -> None:
        while not self._stopping.wait(RENEW_EVERY):
            try:
                with self.store.transaction() as cursor:
                    cursor.execute(
                        self.store.sql(
                            f"UPDATE {self.table} SET renewed = ? WHERE owner = ?"
                        ),
                        (time.time(), self.owner),
                    )
            except Exception:
                logger.warning("could not renew session leases", exc_info=True)
