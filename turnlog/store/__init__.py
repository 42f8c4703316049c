"""The log: one Store over SQLite or PostgreSQL, chosen by a URL.

Leases on sessions (ownership), export and import (transfer) and hash-chain
verification (verify) live beside it.
"""

from turnlog.store.log import Store
from turnlog.store.opening import describe_url, parse_store_url

__all__ = ["Store", "describe_url", "parse_store_url"]
