"""The store's tests. This folder goes on ``sys.path`` for
``store_support``, the helpers they share."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
