"""Which process owns a session: one live writer per session, across processes.

The log already refuses a second writer's events (a version clash), but
a second process opening a session would first take the running turn for
one a crash cut off and close it. So a runtime leases each session it
opens: a row in the log's own database naming the owner (host, pid and a
random tag), the time it last renewed the lease, and an epoch raised by
every acquisition. Another runtime may take the session over only when the
lease has expired (its owner stopped renewing), or when the owner is a
process on this host that no longer exists (it was killed: SIGKILL leaves
no time to release anything).

A process can lose its lease without noticing (frozen past the expiry),
so every save of a leased session is fenced with the owner and epoch it
was given (turnlog.store.fencing): the log refuses it once the lease has moved
on. A renewal that finds a lease gone stops the session at once.

A session new to the log takes its lease in the transaction of its first
save (``claim_new``): one commit, where ``acquire`` and that save take two.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from turnlog.domain.errors import (
    ConcurrencyConflictError,
    InvalidInputError,
    LeaseLostError,
    SessionBusyError,
)
from turnlog.store.fencing import LEASE_TABLE, Claim, Fence, lease_lost
from turnlog.store.log import Store

logger = logging.getLogger(__name__)

LEASE_SECONDS = 30.0
"""A lease not renewed for this long may be taken over."""
RENEWALS_PER_LEASE = 3
"""How many times a lease is renewed within its length."""


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
    """Leases on sessions, held by one runtime and renewed in the background.

    Args:
        store: The log whose database holds the leases.
        lease_seconds: How long a lease lasts unrenewed; it is renewed
            ``RENEWALS_PER_LEASE`` times within that.
        on_lost: Called (on the renewal thread) with the session id and
            the error, for each lease a renewal finds taken over.
    """

    def __init__(
        self,
        store: Store,
        *,
        lease_seconds: float = LEASE_SECONDS,
        on_lost: Callable[[str, LeaseLostError], None] | None = None,
    ) -> None:
        if (
            isinstance(lease_seconds, bool)
            or not isinstance(lease_seconds, int | float)
            or not math.isfinite(lease_seconds)
            or lease_seconds <= 0
        ):
            msg = f"lease_seconds must be a positive number, not {lease_seconds!r}"
            raise InvalidInputError(msg)
        self.store = store
        self.lease_seconds = float(lease_seconds)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.table = store.backend.qualify(LEASE_TABLE)
        self._on_lost = on_lost
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        store.prepare_leases()
        self._thread = threading.Thread(
            target=self._renew_forever, name="turnlog-leases", daemon=True
        )
        self._thread.start()

    def acquire(self, session_id: str) -> None:
        """Leases ``session_id`` to this runtime, or raises SessionBusyError.

        Every later save of the session is fenced with the lease's epoch.
        """
        now = time.time()
        tables = self.store.backend.tables
        with self.store.transaction() as cursor:
            self.store.lock_out_saves(cursor)
            holder, epoch, renewed = tables.take_lease(
                cursor, session_id, self.owner, now, now - self.lease_seconds
            )
            expires = renewed + self.lease_seconds
            if holder != self.owner and _process_is_gone(holder):
                taken = tables.take_over_lease(
                    cursor, session_id, self.owner, now, holder
                )
                if taken is not None:
                    holder, epoch = self.owner, taken
        if holder != self.owner:
            retry_after = max(0.0, expires - now)
            msg = (
                f"session {session_id!r} is open in another process ({holder}); "
                "close it there, or wait for its lease to expire (in "
                f"{retry_after:.1f} s unless renewed)"
            )
            raise SessionBusyError(msg, retry_after=retry_after)
        self.store.fence(Fence(session_id, self.owner, epoch))
        with self._lock:
            self._held[session_id] = epoch

    def claim_new(self, session_id: str, save: Callable[[Claim], object]) -> bool:
        """Leases ``session_id`` in the transaction of its first save.

        ``save`` is called with the claim and must save the session's first
        events with it (``Store.save(session, claim=claim)``): the lease row
        (epoch 1) and those events commit together or not at all, one
        commit where ``acquire`` and a save take two. Returns False, with
        nothing recorded, if the log holds any lease on the session (even
        an expired one, or one of a process that is gone: ``acquire``
        decides those) or any of its events; raises what else ``save``
        raises.

        The row it commits is one ``acquire`` could have written, so the
        takeover rules and every fence read it as they read those: another
        runtime's ``acquire`` sees it only once the session's first events
        are committed beside it. (On SQLite the write transaction excludes
        any other; on PostgreSQL the save takes the events table's lock
        before the lease row, in the order ``acquire`` takes them.)
        """
        claim = Claim(session_id, self.owner, time.time())
        try:
            save(claim)
        except ConcurrencyConflictError:  # LeaseLostError too: a lease was there
            return False
        with self._lock:
            # Only now: a renewal that finds no row for a lease held drops it.
            self._held[session_id] = claim.fence.epoch
        return True

    def renew(self) -> list[str]:
        """Renews every lease held; returns the sessions found taken over.

        Each of those is fenced off in the store at once (its saves are
        refused without asking the log) and reported to ``on_lost``.
        """
        with self._lock:
            # Taken before the UPDATE: each of these was committed before it.
            held = dict(self._held)
        if not held:
            return []
        with self.store.transaction() as cursor:
            kept = self.store.backend.tables.renew_leases(
                cursor, self.owner, time.time()
            )
        lost = []
        for session_id, epoch in held.items():
            if (session_id, epoch) in kept:
                continue
            with self._lock:
                if self._held.get(session_id) != epoch:
                    continue  # acquired again meanwhile
                del self._held[session_id]
            lost.append(session_id)
            self.store.lose_fence(session_id)
            error = lease_lost(Fence(session_id, self.owner, epoch))
            logger.error("%s", error)
            if self._on_lost is not None:
                self._on_lost(session_id, error)
        return lost

    def release(self, session_id: str) -> None:
        """Gives up the lease on ``session_id`` (the session passivated).

        Its row is deleted only if it still names this runtime and the epoch
        it was given; a later save of the session needs ``acquire`` again.
        """
        with self._lock:
            epoch = self._held.pop(session_id, None)
        if epoch is None:
            return
        with self.store.transaction() as cursor:
            self.store.backend.tables.release_lease(
                cursor, session_id, self.owner, epoch
            )
        self.store.let_go(session_id)

    def release_all(self) -> None:
        """Gives up every lease of this runtime and stops renewing."""
        self._stopping.set()
        with self._lock:
            held, self._held = list(self._held), {}
        if held:
            with self.store.transaction() as cursor:
                self.store.backend.tables.release_leases(cursor, self.owner)
        self._thread.join(timeout=5)

    def _renew_forever(self) -> None:
        while not self._stopping.wait(self.lease_seconds / RENEWALS_PER_LEASE):
            try:
                self.renew()
            except Exception:
                logger.warning("could not renew session leases", exc_info=True)
