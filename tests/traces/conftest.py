"""Fixtures of the trace tests. This folder goes on ``sys.path`` for
``traces_support``, the helpers the tests import."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
