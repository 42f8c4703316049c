"""Fixtures of the service tests (in service_support, beside the helpers).

This folder goes on ``sys.path`` for ``service_support`` and
``service_agents``, which the tests (and server processes) import by name.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from service_support import serve

__all__ = ["serve"]
