"""A real OTLP/HTTP receiver for the trace tests: Arize Phoenix, from PyPI.

Phoenix (``arize-phoenix``, pinned below) is an open-source LLM tracing
server: its ``POST /v1/traces`` takes OTLP/HTTP protobuf only (any other
Content-Type is a 415), decodes it with the OpenTelemetry protobuf types,
stores the spans, and gives them back through its REST API. It is installed
once into a virtualenv of its own (its dependencies are not turnlog's),
kept under ``$TURNLOG_TEST_TOOLS`` (default ``~/.cache/turnlog-tests``),
and started per test session on free ports of 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

PHOENIX = "arize-phoenix==20.26.1"
"""The receiver, pinned to the exact version the tests were written against."""

START_TIMEOUT = 180.0
"""Seconds Phoenix may take to answer its health check (it migrates a database)."""

INSTALL_TIMEOUT = 900.0
"""Seconds installing Phoenix from PyPI may take."""


def tools_folder() -> Path:
    """Where third-party tools for the tests are installed."""
    configured = os.environ.get("TURNLOG_TEST_TOOLS")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "turnlog-tests"


def installed_phoenix() -> Path:
    """The ``phoenix`` command of a virtualenv holding :data:`PHOENIX`.

    Installs it on first use (under a lock, so two test runs do not install
    into the same folder at once); a failed install fails the test.
    """
    folder = tools_folder()
    folder.mkdir(parents=True, exist_ok=True)
    venv = folder / PHOENIX.replace("==", "-")
    complete = venv / ".turnlog-installed"  # written last: a cut-off install redoes
    with (folder / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not complete.exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run(
                [sys.executable, "-m", "venv", str(venv)], check=True, timeout=600
            )
            done = subprocess.run(
                [str(venv / "bin" / "pip"), "install", "--quiet", PHOENIX],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
                check=False,
            )
            if done.returncode != 0:
                msg = f"could not install {PHOENIX}:\n{done.stderr[-3000:]}"
                raise RuntimeError(msg)
            complete.write_text(PHOENIX)
    return venv / "bin" / "phoenix"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Phoenix:
    """A running Phoenix server: its OTLP endpoint and its span search."""

    def __init__(self, base_url: str, log: Path) -> None:
        self.base_url = base_url
        self.log = log

    @property
    def otlp_endpoint(self) -> str:
        """The base URL an OTLP/HTTP exporter is given (``/v1/traces`` below)."""
        return self.base_url

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        """The spans Phoenix stored for ``trace_id``, as its REST API gives them."""
        response = httpx.get(
            f"{self.base_url}/v1/projects/default/spans/otlpv1",
            params={"trace_id": trace_id, "limit": 1000},
            timeout=30,
        )
        response.raise_for_status()
        data: list[dict[str, Any]] = response.json()["data"]
        return data

    def wait_for_spans(
        self, trace_id: str, count: int, timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """The trace's spans once Phoenix has stored ``count`` of them.

        Phoenix answers the POST at once and writes the spans to its
        database afterwards, so the search is asked until they are there.
        """
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans(trace_id)
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.1)


@contextlib.contextmanager
def running_phoenix(working_dir: Path) -> Iterator[Phoenix]:
    """Starts Phoenix on free ports of 127.0.0.1; stops it afterwards."""
    command = installed_phoenix()
    port, grpc_port = _free_port(), _free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(working_dir),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = working_dir / "phoenix.log"
    base_url = f"http://127.0.0.1:{port}"
    with log.open("w") as output:
        process = subprocess.Popen(
            [str(command), "serve"],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_until_healthy(process, base_url, log)
        yield Phoenix(base_url, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def _wait_until_healthy(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            msg = (
                f"phoenix exited with {process.returncode}:\n{log.read_text()[-3000:]}"
            )
            raise RuntimeError(msg)
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    msg = f"phoenix did not answer in {START_TIMEOUT:.0f} s:\n{log.read_text()[-3000:]}"
    raise RuntimeError(msg)


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    """A Phoenix span's attributes, each as its one set value."""
    found: dict[str, Any] = {}
    for attribute in span.get("attributes") or []:
        values = [v for v in attribute["value"].values() if v is not None]
        found[attribute["key"]] = values[0] if values else None
    return found
