"""Long offline work on the log, shown: progress as it runs, what it did after.

While it runs, a progress line: events done of the total, rate, ETA. On a
terminal the line is redrawn in place (``\\r``), one line per view. Into
a file or a pipe (a CI log, ``2> rebuild.log``) a carriage return would pile
every update onto one unreadable line, so a plain line is written instead,
at most every few seconds, plus the last one of each view: the log shows
the work moving without thousands of lines.

When a rebuild ends, a table of what it did per view and one line per
document that differs from its rebuild.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from turnlog.cli.timeline import one_line
from turnlog.projections.rebuild import Progress, ViewDifference, ViewReport
from turnlog.projections.runner import BATCH_SIZE, ProjectionRunner

PLAIN_INTERVAL = 5.0
"""Seconds between plain (not redrawn) progress lines."""

BAR_WIDTH = 24
"""Characters of the bar drawn on a terminal."""


def format_eta(seconds: float | None) -> str:
    """Time left as ``m:ss`` or ``h:mm:ss``; ``--:--`` when not known yet."""
    if seconds is None:
        return "--:--"
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def render(progress: Progress, *, bar: bool) -> str:
    """One progress line: view, (bar,) done/total, percent, rate, ETA."""
    total = max(progress.total, 1)
    fraction = min(progress.done / total, 1.0)
    parts = [progress.view]
    if bar:
        filled = int(fraction * BAR_WIDTH)
        parts.append("[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]")
    parts += [
        f"{progress.done:,}/{progress.total:,} events",
        f"{fraction:4.0%}",
        f"{progress.rate:,.0f} events/s",
        f"ETA {format_eta(progress.eta_seconds)}",
    ]
    return "  ".join(parts)


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        return False


class ProgressLine:
    """Shows :class:`~turnlog.projections.rebuild.Progress` updates on stderr.

    Pass :meth:`show` as the ``progress`` callback of a long operation, and
    call :meth:`end` when it stops, normally or not, so that what is printed
    next starts on a line of its own.

    Args:
        stream: where to write (default: ``sys.stderr``).
        terminal: redraw in place; by default, when ``stream`` is a TTY.
        interval: seconds between plain lines when not on a terminal.
        clock: monotonic seconds (replaceable in tests).
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        terminal: bool | None = None,
        interval: float = PLAIN_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.terminal = _is_terminal(self.stream) if terminal is None else terminal
        self.interval = interval
        self._clock = clock
        self._view: str | None = None
        self._last_plain: float | None = None
        self._drawn = 0  # characters of the line now on the terminal

    def show(self, progress: Progress) -> None:
        """Draws (or, off a terminal, maybe prints) ``progress``."""
        if progress.view != self._view:
            self.end()
            self._view = progress.view
            self._last_plain = None
        if self.terminal:
            text = render(progress, bar=True)
            # Pad over the end of a longer earlier line.
            self.stream.write("\r" + text.ljust(self._drawn))
            self._drawn = len(text)
        else:
            now = self._clock()
            due = self._last_plain is None or now - self._last_plain >= self.interval
            if not due and progress.done < progress.total:
                return
            self.stream.write(render(progress, bar=False) + "\n")
            self._last_plain = now
        self.stream.flush()

    def end(self) -> None:
        """Finishes a line being redrawn; idempotent."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = 0


def views_position(runner: ProjectionRunner) -> int:
    """The log position every view of ``runner`` has folded in."""
    return min(runner.position(p.name) for p in runner.projections)


def catch_up(
    runner: ProjectionRunner, show: Callable[[Progress], None] | None = None
) -> int:
    """Brings every view to the log's end a batch at a time; returns where.

    Like :func:`turnlog.projections.rebuild.rebuild`, it reports after each batch, so a
    follower starting far behind the log shows how far it has come; views
    less than a batch behind are caught up in silence.
    """
    started = time.perf_counter()
    total = runner.store.max_position()
    first = done = views_position(runner)
    if total - first <= BATCH_SIZE:
        show = None
    while done < total:
        done = runner.catch_up(until=min(done + BATCH_SIZE, total))
        if show is not None:
            elapsed = time.perf_counter() - started
            rate = (done - first) / elapsed if elapsed > 0 else 0.0
            eta = (total - done) / rate if rate > 0 else None
            show(Progress("views", done, total, rate, eta))
    return done


def _brief(doc: dict[str, Any], key: str) -> str:
    if key not in doc:
        return "absent"
    return one_line(repr(doc[key]), 40)


def describe_difference(view: str, difference: ViewDifference) -> str:
    """One line naming a document that differs, and how (its first fields)."""
    where = f"{view} {one_line(difference.part, 60)} @{difference.position}"
    live, rebuilt = difference.live, difference.rebuilt
    if live is None:
        return f"{where}: missing from the live view"
    if rebuilt is None:
        return f"{where}: in the live view only"
    keys = sorted(set(live) | set(rebuilt))
    changed = [key for key in keys if live.get(key, ...) != rebuilt.get(key, ...)]
    # A value both sides hold but disagree on says most: it comes first.
    changed.sort(key=lambda key: not (key in live and key in rebuilt))
    shown = "; ".join(
        f"{one_line(key, 40)}: live {_brief(live, key)}, rebuilt {_brief(rebuilt, key)}"
        for key in changed[:3]
    )
    more = f"; and {len(changed) - 3} more fields" if len(changed) > 3 else ""
    return f"{where}: {shown}{more}"


def rebuild_summary(reports: list[ViewReport], *, verified: bool) -> list[str]:
    """A table of what a rebuild did per view, then every difference found."""
    width = max(len("VIEW"), *(len(report.view) for report in reports))
    lines = [f"{'VIEW':<{width}}  {'EVENTS':>9}  {'SECONDS':>8}  RESULT"]
    for report in reports:
        if report.swapped:
            result = "swapped in"
        elif verified:
            count = len(report.differences)
            result = f"verified, {count} difference{'s' if count != 1 else ''}"
        else:
            result = "not swapped"
        lines.append(
            f"{report.view:<{width}}  {report.events:>9,}  "
            f"{report.seconds:>8.2f}  {result}"
        )
    differences = [
        describe_difference(report.view, difference)
        for report in reports
        for difference in report.differences
    ]
    lines += differences
    if verified and not differences:
        lines.append("no differences: every view equals its rebuild from the log")
    return lines
