"""The log: one Store over SQLite or PostgreSQL, chosen by a URL.

Each backend's recorder owns its SQL (``sqlite``, ``postgres``, behind
``backend.LogBackend``); leases on sessions and fenced writes
(``ownership``, ``fencing``), the one reader of a session's history
(``history``), the one watch of its commits (``commits``), export and
import (``transfer``) and hash-chain verification (``verify``) live
beside it.
"""

from turnlog.store.backend import LogBackend
from turnlog.store.commits import Commit, CommitWatch
from turnlog.store.fencing import Claim, Fence
from turnlog.store.history import CanReadStoredRows, SessionHistory
from turnlog.store.log import Store
from turnlog.store.opening import describe_url, parse_store_url
from turnlog.store.ownership import SessionOwnership
from turnlog.store.transfer import (
    CheckedExport,
    check_export,
    export_session,
    import_events,
)
from turnlog.store.verify import VerifyReport, verify_all, verify_session

__all__ = [
    "CanReadStoredRows",
    "CheckedExport",
    "Claim",
    "Commit",
    "CommitWatch",
    "Fence",
    "LogBackend",
    "SessionHistory",
    "SessionOwnership",
    "Store",
    "VerifyReport",
    "check_export",
    "describe_url",
    "export_session",
    "import_events",
    "parse_store_url",
    "verify_all",
    "verify_session",
]
