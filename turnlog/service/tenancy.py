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

from turnlog.store.log import Store
from turnlog.store.log_tables import OWNERS_TABLE, OwnedSession

TABLE = OWNERS_TABLE
"""The table of session owners, in the log's database."""


KNOWN_LIMIT = 10_000
"""Owners remembered at most (a few hundred bytes each); one forgotten costs
a query when its session is next used."""


class SessionOwners:
    """The tenant and agent of each session created through the service."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._tables = store.backend.tables
        # A session's owner never changes and its row is never removed, so
        # what was found once is kept (bounded): most requests then cost no
        # query. Misses are not kept: another process may create the id.
        self._known: OrderedDict[str, OwnedSession] = OrderedDict()
        self._known_lock = threading.Lock()
        with store.transaction() as cursor:
            self._tables.create_owner_table(cursor)

    def claim(self, session_id: str, tenant: str, agent: str) -> OwnedSession:
        """Records a new session of ``tenant``; raises if the id is taken."""
        owned = OwnedSession(session_id, tenant, agent, time.time())
        with self._store.transaction() as cursor:
            self._tables.insert_owner(cursor, owned)
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
            winner = self._tables.insert_owner_unless_taken(cursor, owned)
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
            owned = self._tables.owner(cursor, session_id, tenant)
        if owned is not None:
            self._remember(owned)
        return owned

    def list(self, tenant: str) -> list[OwnedSession]:
        """The tenant's sessions, oldest first."""
        with self._store.reading() as cursor:
            return self._tables.owned_by(cursor, tenant)


__all__ = ["TABLE", "OwnedSession", "SessionOwners"]
