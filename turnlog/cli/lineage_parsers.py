"""The arguments of `turnlog history`, `fork` and `rewind` (see turnlog.cli.lineage)."""

from __future__ import annotations

import argparse
from typing import Any


def add_lineage_parsers(commands: Any) -> None:
    """Adds ``history``, ``fork`` and ``rewind`` to the subcommands."""
    history = commands.add_parser(
        "history",
        help="list the points of a session a fork or a rewind may name",
        description=(
            "One line per quiet point of the session, oldest first: AFTER "
            "TURN (0: before the first input), the INPUT that follows it "
            "(for --before-input), its log POS and a preview of that input; "
            "points whose turn a rewind set aside are marked rewound."
        ),
    )
    history.add_argument("session", metavar="SESSION", help="the session id")
    fork = commands.add_parser(
        "fork",
        help="fork a session at a quiet point into a new session",
        description=(
            "Writes one event: a new session whose history up to the point is "
            "SESSION's (read from it, not copied). Without a point, the latest "
            "quiet one. The fork runs SESSION's agent when opened."
        ),
    )
    fork.add_argument("session", metavar="SESSION", help="the session to fork")
    _point_arguments(fork)
    fork.add_argument("--as", dest="fork_id", metavar="ID", help="the fork's id")
    fork.add_argument(
        "--keep-allowances",
        action="store_true",
        help="carry the tools allowed for the session over (default: not)",
    )
    rewind_ = commands.add_parser(
        "rewind",
        help="set a session's turns after a quiet point aside, in place",
        description=(
            "Records one event: the turns after the point stay in the log "
            "(audit and replay show them) and leave the model's context and "
            "the checkpoint. Refused while the session is open in a runtime."
        ),
    )
    rewind_.add_argument("session", metavar="SESSION", help="the session id")
    _point_arguments(rewind_)


def _point_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--before-input", type=int, metavar="N", help="before user input N (from 1)"
    )
    parser.add_argument(
        "--after-turn", type=int, metavar="N", help="after turn N (0: the start)"
    )
