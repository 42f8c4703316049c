"""A long soak of ``turnlog serve --demo``: does a service that runs for
weeks hold memory for its live work only?

``--clients`` clients (default 20) each loop, for ``--minutes`` (default
30): create a session, run three prompts with ``?wait=true``, read the
session's audit, then open the session's event stream and drop it after
its first line. The server is a ``turnlog serve --demo`` process on a
fresh SQLite file; the clients run in this process (asyncio, httpx), so
the server's figures are its own.

Every ``--interval`` seconds (default 30) one line: the server's RSS,
threads and open files (from /proc), the sessions finished so far, and
the p50/p99 latency of the prompts and of the whole loop in that
interval. At the end: RSS growth over the later part of the run (after
``--warm-up``, default a third of it), p50 drift between the first and
last intervals after warm-up, the highest thread count, and, with
``--verify``, ``turnlog audit --verify --all`` of the log.

Run: python bench/soak.py [--minutes 30] [--clients 20] [--interval 30]
     [--warm-up MINUTES] [--verify] [--store-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TOKEN = "soak-token-0123456789abcdef0123456789ab"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
TEXTS = ("one two three", "the quick brown fox", "jumps over the lazy dog")


def proc_figures(pid: int) -> tuple[float, int, int]:
    """The process's RSS (MiB), threads and open file descriptors."""
    rss = threads = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    files = len(os.listdir(f"/proc/{pid}/fd"))
    return rss / 1024, threads, files


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Tally:
    """What the clients did since the last report."""

    def __init__(self) -> None:
        self.sessions = 0
        self.errors = 0
        self.prompts: list[float] = []
        self.loops: list[float] = []

    def take(self) -> tuple[list[float], list[float]]:
        prompts, loops = self.prompts, self.loops
        self.prompts, self.loops = [], []
        return prompts, loops


async def one_session(http: httpx.AsyncClient, tally: Tally) -> None:
    began = time.perf_counter()
    created = await http.post("/sessions", json={"agent": "demo"})
    created.raise_for_status()
    session_id = created.json()["session_id"]
    for text in TEXTS:
        sent = time.perf_counter()
        answer = await http.post(
            f"/sessions/{session_id}/prompts",
            params={"wait": "true"},
            json={"text": text},
        )
        answer.raise_for_status()
        tally.prompts.append(time.perf_counter() - sent)
    (await http.get(f"/sessions/{session_id}/audit")).raise_for_status()
    async with http.stream("GET", f"/sessions/{session_id}/events") as stream:
        stream.raise_for_status()
        async for _ in stream.aiter_lines():
            break  # opened and dropped, as a client that goes away
    tally.loops.append(time.perf_counter() - began)
    tally.sessions += 1


async def client(http: httpx.AsyncClient, tally: Tally, until: float) -> None:
    while time.monotonic() < until:
        try:
            await one_session(http, tally)
        except (httpx.HTTPError, KeyError, ValueError) as error:
            tally.errors += 1
            print(f"  error: {type(error).__name__}: {error}", flush=True)
            await asyncio.sleep(1.0)


async def soak(url: str, pid: int, args: argparse.Namespace) -> list[tuple]:
    tally = Tally()
    rows: list[tuple] = []
    start = time.monotonic()
    until = start + args.minutes * 60
    limits = httpx.Limits(max_connections=args.clients + 10)
    async with httpx.AsyncClient(
        base_url=url, headers=HEADERS, timeout=120, limits=limits
    ) as http:
        tasks = [
            asyncio.create_task(client(http, tally, until)) for _ in range(args.clients)
        ]
        print(
            "   min  sessions  RSS MiB  threads  files  prompt p50/p99 ms"
            "  loop p50/p99 ms  errors",
            flush=True,
        )
        while not all(task.done() for task in tasks):
            await asyncio.wait(tasks, timeout=args.interval)
            rss, threads, files = proc_figures(pid)
            prompts, loops = tally.take()
            row = (
                (time.monotonic() - start) / 60,
                tally.sessions,
                rss,
                threads,
                files,
                percentile(prompts, 0.5) * 1000,
                percentile(prompts, 0.99) * 1000,
                percentile(loops, 0.5) * 1000,
                percentile(loops, 0.99) * 1000,
                tally.errors,
            )
            rows.append(row)
            print(
                f"{row[0]:6.1f}  {row[1]:8d}  {row[2]:7.1f}  {row[3]:7d}  {row[4]:5d}"
                f"  {row[5]:7.1f} / {row[6]:7.1f}  {row[7]:7.1f} / {row[8]:7.1f}"
                f"  {row[9]:6d}",
                flush=True,
            )
    return rows


def summarize(rows: list[tuple], warm_up: float) -> None:
    later = [row for row in rows if row[0] >= warm_up and row[5] == row[5]]
    if len(later) < 2:
        print("too short to say anything after warm-up")
        return
    first, last = later[0], later[-1]
    growth = (last[2] - first[2]) / first[2] * 100
    peak = max(row[2] for row in later)
    print(
        f"RSS after warm-up ({first[0]:.1f} min): {first[2]:.1f} MiB -> "
        f"{last[2]:.1f} MiB at {last[0]:.1f} min ({growth:+.1f}%), peak {peak:.1f}"
    )
    print(
        f"prompt p50 first/last interval after warm-up: {first[5]:.1f} / "
        f"{last[5]:.1f} ms; loop p50 {first[7]:.1f} / {last[7]:.1f} ms"
    )
    print(
        f"threads: max {max(row[3] for row in rows)}, "
        f"after warm-up {min(row[3] for row in later)}-{max(row[3] for row in later)};"
        f" open files max {max(row[4] for row in rows)}"
    )
    print(f"sessions {rows[-1][1]}, errors {rows[-1][9]}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--warm-up", type=float, default=None, help="minutes")
    parser.add_argument("--verify", action="store_true")
    parser.add_argument("--store-dir", default=None)
    args = parser.parse_args()
    warm_up = args.minutes / 3 if args.warm_up is None else args.warm_up
    folder = args.store_dir or tempfile.mkdtemp(prefix="turnlog-soak-")
    store = f"sqlite:///{folder}/soak.sqlite3"
    turnlog = str(Path(sys.executable).with_name("turnlog"))
    port = free_port()
    env = {**os.environ, "TURNLOG_SERVICE_TOKENS": f"soak={TOKEN}"}
    served = subprocess.Popen(
        [turnlog, "--store", store, "serve", "--demo", "--port", str(port)],
        env=env,
        stderr=subprocess.DEVNULL,
        cwd=folder,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/healthz")
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or served.poll() is not None:
                    raise
                time.sleep(0.1)
        print(
            f"soak: {args.clients} clients, {args.minutes:g} min, store {store}",
            flush=True,
        )
        rows = asyncio.run(soak(url, served.pid, args))
        summarize(rows, warm_up)
    finally:
        served.terminate()
        served.wait()
    if args.verify:
        subprocess.run(
            [turnlog, "--store", store, "audit", "--verify", "--all"], check=False
        )


if __name__ == "__main__":
    main()
