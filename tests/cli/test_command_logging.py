"""The ``turnlog`` command's logging: quiet by default, one line a record
with ``--verbose``, and a thread's uncaught exception logged, not printed."""

from __future__ import annotations

import io
import logging
import threading

import pytest

from turnlog.cli.logging_setup import CommandLogging


def _fail_in_a_thread() -> None:
    def boom() -> None:
        msg = "the disk\nis gone"
        raise OSError(msg)

    thread = threading.Thread(target=boom, name="turnlog-test-worker")
    thread.start()
    thread.join(timeout=10)


def test_verbose_shows_records_and_thread_errors_on_one_line_each() -> None:
    stream = io.StringIO()
    logs = CommandLogging(verbose=True, stream=stream)
    logs.install()
    try:
        logger = logging.getLogger("turnlog.projections.leader")
        try:
            raise ValueError("bad entry")  # noqa: TRY301
        except ValueError:
            logger.warning("could not catch up", exc_info=True)
        logger.debug("not shown: below INFO")
        _fail_in_a_thread()
    finally:
        logs.uninstall()

    assert stream.getvalue().splitlines() == [
        "turnlog: WARNING: could not catch up - ValueError: bad entry",
        "turnlog: ERROR: turnlog-test-worker stopped on an error - "
        "OSError: the disk is gone",
    ]


def test_quiet_by_default_even_for_thread_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs = CommandLogging(verbose=False)
    logs.install()
    try:
        _fail_in_a_thread()
    finally:
        logs.uninstall()

    assert capsys.readouterr() == ("", "")


def test_warnings_alone_show_warnings_but_not_info() -> None:
    stream = io.StringIO()
    logs = CommandLogging(verbose=False, warnings=True, stream=stream)
    logs.install()
    try:
        logger = logging.getLogger("turnlog.service.problems")
        logger.info("not shown")
        logger.error("request failed", exc_info=KeyError("k"))
    finally:
        logs.uninstall()

    assert stream.getvalue().splitlines() == [
        "turnlog: ERROR: request failed - KeyError: 'k'"
    ]
