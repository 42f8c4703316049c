"""Fenced writes: a save commits only while its process owns the session.

A lease (turnlog.store.ownership) says which runtime owns a session, but a
process can lose its lease without noticing: frozen (SIGSTOP, a long GC
pause, a suspended VM) past the lease's expiry, it wakes up and saves as
if nothing had happened while another process took the session over. So
every save of a leased session carries a :class:`Fence`, the owner and
the epoch of the lease it was given, and the recorder checks it in the
same transaction as the insert: a lease row that no longer matches
(another owner, or a later takeover) refuses the whole save with
:class:`~turnlog.domain.errors.LeaseLostError`.

Each backend's recorder checks the fence with its own SQL: the SQLite one
in ``turnlog.store.sqlite`` (the write transaction serialises the check
against a takeover), the PostgreSQL one in ``turnlog.store.postgres`` (the
check runs under the events table's lock, which a takeover takes too).
Both also create the lease table.

A brand-new session need not take its lease in a transaction of its own:
its first save may carry a :class:`Claim`, and the recorder inserts the
lease row (epoch 1) in the save's own transaction, unless the table
already holds one for the session, in which case the fence check refuses
the save. One commit then makes the session and its lease durable
together (turnlog.store.ownership, ``SessionOwnership.claim_new``).
"""

from __future__ import annotations

from typing import NamedTuple

from turnlog.domain.errors import LeaseLostError

LEASE_TABLE = "turnlog_session_owners"
"""The table of leases: session id, owner, last renewal, epoch."""


class Fence(NamedTuple):
    """The lease a save of one session must still hold to commit."""

    session_id: str
    owner: str
    epoch: int
    """Raised on every acquisition, so an older holder never matches again."""


FIRST_EPOCH = 1
"""The epoch of a lease taken where the lease table held none."""


class Claim(NamedTuple):
    """A lease a save takes in its own transaction: a new session's first."""

    session_id: str
    owner: str
    renewed: float
    """When the lease was taken (its first renewal), in ``time.time()``."""

    @property
    def fence(self) -> Fence:
        """The fence the save is checked against: this lease, epoch 1."""
        return Fence(self.session_id, self.owner, FIRST_EPOCH)


def lease_lost(fence: Fence) -> LeaseLostError:
    """The error of a save refused because ``fence`` no longer holds."""
    return LeaseLostError(
        f"session {fence.session_id!r} was taken over by another process: this "
        f"one ({fence.owner}, lease epoch {fence.epoch}) no longer owns it, so "
        "nothing of this save was recorded and the session stopped here"
    )
