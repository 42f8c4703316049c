"""``turnlog run``: an interactive terminal session against a real model."""

from turnlog.cli.run.command import RunOptions, run_interactive

__all__ = ["RunOptions", "run_interactive"]
