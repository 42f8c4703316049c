"""The domain's tests. This folder goes on ``sys.path`` for
``turn_machine_support``, the turn machine tests' harness."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
