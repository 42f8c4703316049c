"""The HTTP service under load: stream delay, memory per stream, and the
cost of the HTTP layer.

1. ``--clients`` SSE clients (default 500) hold streams open on one server
   process, spread over ``--sessions`` sessions, while prompts run in
   those sessions. For every durable event a client receives, the delay
   from the event's commit (the store's save listener, in the server) to
   its arrival at the client. Printed: p50/p99 of that delay, and the
   server's RSS growth per open stream.
2. ``--prompts`` prompts a pass run one after another through HTTP
   (``POST .../prompts?wait=true``, a ``turnlog serve`` process) and through
   the Python API (``session.prompt``, in this process), each side on a
   fresh SQLite file of its own, one session each, the same demo agent and
   the same text. The two sides take turns every ``CHUNK`` prompts, so a
   change in the machine's load falls on both; ``--passes`` passes, and
   the ratio of their rates is the HTTP layer's cost (budget: at most
   1.5x). The HTTP side's figure includes its client's own work (httpx),
   which is printed apart, with the server's CPU per prompt beside the
   Python API's.

The server runs on a thread of this process; the clients run in a child
process (asyncio, httpx), so that they do not share the server's GIL; both
share the machine's 2 cores, so the delays include the clients' own work.
Commit and arrival times are wall-clock times of the same machine.

Run: python bench/service.py [--clients 500] [--sessions 10] [--prompts 200]
     [--passes 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import uvicorn

from turnlog import Runtime
from turnlog.service import ServiceTokens, create_app, demo_agent

TOKEN = "bench-token-0123456789abcdef0123456789"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def start_server(app: object) -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", backlog=2048)
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True
    )
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, thread, f"http://127.0.0.1:{port}"


async def stream_load(
    url: str, clients: int, sessions: int, turns: int, on_open: object
) -> list[tuple[int, float]]:
    limits = httpx.Limits(max_connections=clients + 20)
    async with httpx.AsyncClient(
        base_url=url, headers=HEADERS, timeout=120, limits=limits
    ) as http:
        ids = [
            (await http.post("/sessions", json={"agent": "demo"})).json()["session_id"]
            for _ in range(sessions)
        ]
        arrivals: list[tuple[int, float]] = []
        opened = 0
        all_open = asyncio.Event()
        done = asyncio.Event()

        async def client(session_id: str) -> None:
            nonlocal opened
            async with http.stream("GET", f"/sessions/{session_id}/events") as response:
                opened += 1
                if opened == clients:
                    all_open.set()
                async for line in response.aiter_lines():
                    if line.startswith("id: "):
                        arrivals.append((int(line[4:].split(":")[0]), time.time()))
                    if done.is_set():
                        return

        tasks = [asyncio.create_task(client(ids[i % sessions])) for i in range(clients)]
        await asyncio.wait_for(all_open.wait(), 120)
        on_open()  # type: ignore[operator]
        for _ in range(turns):
            await asyncio.gather(
                *(
                    http.post(
                        f"/sessions/{sid}/prompts",
                        params={"wait": "true"},
                        json={"text": "one two three"},
                    )
                    for sid in ids
                )
            )
        # Let the last events reach every client, then end the streams.
        await asyncio.sleep(1.0)
        done.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return arrivals


CHUNK = 20
"""Prompts one side runs before the other side's turn."""

WARM_UP = 10
"""Untimed prompts each side runs first (a new session's first runs)."""


class Side:
    """One side of the comparison: its prompt, and what its chunks took.

    ``cpu`` tells the seconds of CPU the side's own work has used so far:
    the server process's for HTTP, this process's but the calling thread's
    for the Python API (the caller's share is not the service's, as the
    HTTP client's is not; the client's is printed apart).
    """

    def __init__(self, prompt: Callable[[], None], cpu: Callable[[], float]) -> None:
        self.prompt = prompt
        self.cpu = cpu
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.caller_seconds = 0.0

    def run(self, count: int) -> None:
        cpu, caller = self.cpu(), time.thread_time()
        started = time.perf_counter()
        for _ in range(count):
            self.prompt()
        self.seconds += time.perf_counter() - started
        self.caller_seconds += time.thread_time() - caller
        self.cpu_seconds += self.cpu() - cpu


def process_cpu(pid: int) -> float:
    """Seconds of CPU used by every thread of process ``pid`` so far."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that just ended
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def http_side(http: httpx.Client, pid: int) -> Side:
    session_id = http.post("/sessions", json={"agent": "demo"}).json()["session_id"]

    def prompt() -> None:
        run = http.post(
            f"/sessions/{session_id}/prompts",
            params={"wait": "true"},
            json={"text": "one two three"},
        ).json()
        assert run["status"] == "completed", run

    return Side(prompt, lambda: process_cpu(pid))


def python_side(runtime: Runtime) -> Side:
    session = runtime.create_session(demo_agent())

    def prompt() -> None:
        assert session.prompt("one two three", timeout=60).status == "completed"

    return Side(prompt, lambda: process_cpu(os.getpid()) - time.thread_time())


def compare(sides: list[Side], prompts: int) -> None:
    """Runs ``prompts`` on each side, taking turns every CHUNK prompts."""
    for side in sides:
        for _ in range(WARM_UP):
            side.prompt()
    for done in range(0, prompts, CHUNK):
        order = sides if done // CHUNK % 2 == 0 else sides[::-1]
        for side in order:
            side.run(min(CHUNK, prompts - done))


def clients_main(args: argparse.Namespace) -> None:
    """The child: open the streams, run the turns, print what arrived."""

    def opened() -> None:
        print("OPEN", flush=True)
        sys.stdin.readline()  # the parent has measured its memory

    arrivals = asyncio.run(
        stream_load(args.url, args.clients, args.sessions, args.turns, opened)
    )
    print(json.dumps(arrivals), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.url:
        clients_main(args)
        return
    with tempfile.TemporaryDirectory() as folder:
        runtime = Runtime.open(f"sqlite:///{folder}/bench.sqlite3")
        committed: dict[int, float] = {}

        def saved(recordings: object) -> None:
            now = time.time()
            for recording in recordings:  # type: ignore[attr-defined]
                committed[recording.notification.id] = now

        runtime.store.add_listener(saved)
        app = create_app(runtime, {"demo": demo_agent}, ServiceTokens([("b", TOKEN)]))
        try:
            measure_streams(app, committed, args)
        finally:
            runtime.close()
        measure_prompts(folder, args)


def measure_streams(
    app: object, committed: dict[int, float], args: argparse.Namespace
) -> None:
    """Part 1: streams open in a child process while prompts run."""
    server, thread, url = start_server(app)
    try:
        child = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--url",
                url,
                "--clients",
                str(args.clients),
                "--sessions",
                str(args.sessions),
                "--turns",
                str(args.turns),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None
        assert child.stdout is not None
        before = rss_kib()
        baseline = max(committed, default=0)
        assert child.stdout.readline().strip() == "OPEN"
        growth = rss_kib() - before
        child.stdin.write("go\n")
        child.stdin.flush()
        arrivals = json.loads(child.stdout.readline())
        child.wait()
        delays = sorted(
            at - committed[position]
            for position, at in arrivals
            if position > baseline and position in committed
        )
        print(
            f"{args.clients} streams on {args.sessions} sessions, "
            f"{args.turns} turns each: {len(delays)} durable events delivered"
        )
        p50 = statistics.median(delays) * 1000
        p99 = delays[int(len(delays) * 0.99)] * 1000
        print(f"  commit-to-client delay p50 {p50:.1f} ms, p99 {p99:.1f} ms")
        print(f"  server RSS growth per open stream {growth / args.clients:.1f} KiB")
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def measure_prompts(folder: str, args: argparse.Namespace) -> None:
    """Part 2: prompts/s over HTTP (a server process) and the Python API."""
    env = {**os.environ, "TURNLOG_SERVICE_TOKENS": f"b={TOKEN}"}
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    served = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("turnlog")),
            "--store",
            f"sqlite:///{folder}/http.sqlite3",
            "serve",
            "--demo",
            "--port",
            str(port),
        ],
        env=env,
        stderr=subprocess.DEVNULL,
        cwd=folder,
    )
    runtime = Runtime.open(f"sqlite:///{folder}/python.sqlite3")
    try:
        http_url = f"http://127.0.0.1:{port}"
        while True:
            try:
                httpx.get(f"{http_url}/healthz")
                break
            except httpx.TransportError:
                time.sleep(0.05)
        costs = []
        per = 1000 / args.prompts  # seconds in all -> ms a prompt
        with httpx.Client(base_url=http_url, headers=HEADERS, timeout=60) as http:
            for attempt in range(args.passes):
                over_http = http_side(http, served.pid)
                python = python_side(runtime)
                compare([over_http, python], args.prompts)
                http_rate = args.prompts / over_http.seconds
                python_rate = args.prompts / python.seconds
                costs.append(python_rate / http_rate)
                print(
                    f"prompts/s, pass {attempt + 1}: HTTP {http_rate:.1f}, "
                    f"Python API {python_rate:.1f}, cost {costs[-1]:.2f}x "
                    f"(CPU a prompt: server {over_http.cpu_seconds * per:.2f} ms, "
                    f"Python API {python.cpu_seconds * per:.2f} ms, "
                    f"HTTP client {over_http.caller_seconds * per:.2f} ms)"
                )
        median = statistics.median(costs)
        print(f"HTTP cost, median of {args.passes} passes: {median:.2f}x")
    finally:
        runtime.close()
        served.terminate()
        served.wait()


if __name__ == "__main__":
    main()
