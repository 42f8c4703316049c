"""Read models of the log: pure folds, the tables they write, the runner that
keeps them current (live or as ``turnlog project``), rebuilds, and readers.
"""

from turnlog.projections.checkpoint_reader import Checkpoint, Checkpoints
from turnlog.projections.checkpoints import CheckpointProjection
from turnlog.projections.executions import ExecutionProjection
from turnlog.projections.readers import (
    Executions,
    Summaries,
    Transcripts,
    replay_session,
)
from turnlog.projections.rebuild import default_projections, rebuild
from turnlog.projections.rows import Projection
from turnlog.projections.runner import ProjectionRunner
from turnlog.projections.sessions import (
    SessionIndexProjection,
    SessionState,
    SessionSummary,
)
from turnlog.projections.tables import ViewTables
from turnlog.projections.transcript import TranscriptProjection

__all__ = [
    "Checkpoint",
    "CheckpointProjection",
    "Checkpoints",
    "ExecutionProjection",
    "Executions",
    "Projection",
    "ProjectionRunner",
    "SessionIndexProjection",
    "SessionState",
    "SessionSummary",
    "Summaries",
    "TranscriptProjection",
    "Transcripts",
    "ViewTables",
    "default_projections",
    "rebuild",
    "replay_session",
]
