"""The store's tests. This folder goes on ``sys.path`` for ``pg_waits``,
the helper that sees a save wait on a PostgreSQL lock."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
