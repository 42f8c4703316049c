"""Which tenant owns which session: a small table of the service.

A session belongs to the tenant that created it through the service. That
fact lives in ``turnlog_service_sessions``, in the log's own database
(so it survives restarts and every process on one PostgreSQL sees it),
and not in the session's shared state, which the agent and its tools can
change: a tenant must not be able to move a session to another tenant.
The row is written before the session's first event, so a crash between
the two leaves a row naming no session (harmless: it is never listed, and
reading it is a 404), never a session that no tenant owns.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, NamedTuple

from turnlog.store.log import Store

TABLE = "turnlog_service_sessions"


KNOWN_LIMIT = 100_000
"""Owners remembered at most (about 100 bytes each)."""


class OwnedSession(NamedTuple):
    """A session of a tenant, and the agent (by its service name) it runs."""

    session_id: str
    tenant: str
    agent: str
    created: float


class SessionOwners:
    """The tenant and agent of each session created through the service."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._table = store.backend.qualify(TABLE)
        # A session's owner never changes and its row is never removed, so
        # what was found once is kept (bounded): most requests then cost no
        # query. Misses are not kept: another process may create the id.
        self._known: OrderedDict[str, OwnedSession] = OrderedDict()
        self._known_lock = threading.Lock()
        with store.transaction() as cursor:
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} ("
                "session_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, "
                "agent TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)"
            )

    def claim(self, session_id: str, tenant: str, agent: str) -> OwnedSession:
        """Records a new session of ``tenant``; raises if the id is taken."""
        owned = OwnedSession(session_id, tenant, agent, time.time())
        with self._store.transaction() as cursor:
            cursor.execute(
                self._store.sql(
                    f"INSERT INTO {self._table} (session_id, tenant, agent, created) "
                    "VALUES (?, ?, ?, ?)"
                ),
                tuple(owned),
            )
        self._remember(owned)
        return owned

    def claim_unless_taken(
        self, session_id: str, tenant: str, agent: str
    ) -> OwnedSession:
        """Records a new session of ``tenant``, unless the id is taken.

        Returns the session's owner either way: this claim, or the one
        that came first (another tenant's, or a concurrent request's of
        the same tenant). Requests racing to claim one id in any number of
        processes get the same answer, and never an error.
        """
        owned = OwnedSession(session_id, tenant, agent, time.time())
        with self._store.transaction() as cursor:
            # ON CONFLICT waits for a concurrent claim of the id to commit,
            # then does nothing; the SELECT after it sees the winner's row.
            cursor.execute(
                self._store.sql(
                    f"INSERT INTO {self._table} (session_id, tenant, agent, created) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING"
                ),
                tuple(owned),
            )
            cursor.execute(
                self._store.sql(
                    "SELECT session_id, tenant, agent, created FROM "
                    f"{self._table} WHERE session_id = ?"
                ),
                (session_id,),
            )
            row = cursor.fetchone()
        winner = _owned(row)
        self._remember(winner)
        return winner

    def known(self, tenant: str, session_id: str) -> OwnedSession | None:
        """The session if it is known here to be ``tenant``'s (no query)."""
        with self._known_lock:
            owned = self._known.get(session_id)
        return owned if owned is not None and owned.tenant == tenant else None

    def _remember(self, owned: OwnedSession) -> None:
        with self._known_lock:
            self._known[owned.session_id] = owned
            self._known.move_to_end(owned.session_id)
            while len(self._known) > KNOWN_LIMIT:
                self._known.popitem(last=False)

    def get(self, tenant: str, session_id: str) -> OwnedSession | None:
        """The session if ``tenant`` owns it; None for any other session."""
        known = self.known(tenant, session_id)
        if known is not None:
            return known
        with self._store.reading() as cursor:
            cursor.execute(
                self._store.sql(
                    "SELECT session_id, tenant, agent, created FROM "
                    f"{self._table} WHERE session_id = ? AND tenant = ?"
                ),
                (session_id, tenant),
            )
            row = cursor.fetchone()
        if row is None:
            return None
        owned = _owned(row)
        self._remember(owned)
        return owned

    def list(self, tenant: str) -> list[OwnedSession]:
        """The tenant's sessions, oldest first."""
        with self._store.reading() as cursor:
            cursor.execute(
                self._store.sql(
                    "SELECT session_id, tenant, agent, created FROM "
                    f"{self._table} WHERE tenant = ? ORDER BY created, session_id"
                ),
                (tenant,),
            )
            rows = cursor.fetchall()
        return [_owned(row) for row in rows]


def _owned(row: Any) -> OwnedSession:
    values = tuple(row.values()) if isinstance(row, dict) else tuple(row)
    session_id, tenant, agent, created = values
    return OwnedSession(str(session_id), str(tenant), str(agent), float(created))


__all__ = ["TABLE", "OwnedSession", "SessionOwners"]
