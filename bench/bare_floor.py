"""The least a durable Python runtime could do on the peers' workload.

Issue 24 asks for sessions/s ten times the best peer's and a turn in a
millisecond of CPU. This adapter is the reference those budgets are read
against: the peers' harness (``../shared/peers/workload.py``: its prompts,
fake model, tool and checks) driven by no runtime at all, only what the
workload itself needs. A session is a list; a turn appends the user's
input, asks the fake model, runs the tool, asks again, and commits four
times as a turnlog turn does (the input, the tool's start, its output,
the answer: the same promises), every commit through one writer thread
that groups whatever is waiting into one SQLite transaction (WAL,
``synchronous=FULL``), rows encoded by msgspec. With ``--store memory``
it commits nothing: the interpreter, asyncio and the harness alone.

Whatever this costs a turn or a session on this machine, no Python
runtime with turnlog's promises can cost less; the distance from it to
turnlog is what turnlog adds.

Run: [PEERS_DIR=../shared/peers] python bench/bare_floor.py [--store file|memory]
         [harness arguments: --phases AB -T 100 -S 50 -K 4 ...]
"""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec

PEERS = Path(
    os.environ.get("PEERS_DIR")
    or Path(__file__).resolve().parents[2] / "shared" / "peers"
)
sys.path.insert(0, str(PEERS))
import workload  # type: ignore[import-not-found]  # noqa: E402

_encode = msgspec.json.Encoder().encode
Waiter = tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]


class GroupCommit:
    """One writer thread; each transaction carries every save waiting for it."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE events (id INTEGER PRIMARY KEY, session TEXT, body BLOB)"
        )
        self._waiting: queue.SimpleQueue[
            tuple[list[tuple[str, bytes]], Waiter] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write, daemon=True)
        self._thread.start()

    def save(self, rows: list[tuple[str, bytes]]) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._waiting.put((rows, (loop, done)))
        return done

    def close(self) -> None:
        self._waiting.put(None)
        self._thread.join()
        self._db.close()

    def _write(self) -> None:
        while True:
            first = self._waiting.get()
            if first is None:
                return
            batch = [first]
            while not self._waiting.empty():
                more = self._waiting.get()
                if more is None:
                    self._commit(batch)
                    return
                batch.append(more)
            self._commit(batch)

    def _commit(self, batch: list[tuple[list[tuple[str, bytes]], Waiter]]) -> None:
        self._db.execute("BEGIN")
        self._db.executemany(
            "INSERT INTO events (session, body) VALUES (?, ?)",
            [row for rows, _ in batch for row in rows],
        )
        self._db.execute("COMMIT")
        # One wake-up a loop for the whole batch, as turnlog's group commit.
        loop = batch[0][1][0]
        futures = [done for _, (_, done) in batch]
        loop.call_soon_threadsafe(_resolve, futures)


def _resolve(futures: list[asyncio.Future[None]]) -> None:
    for done in futures:
        if not done.done():
            done.set_result(None)


class BareAdapter(workload.Adapter):  # type: ignore[misc]
    name = "bare floor"
    persistence = (
        "four grouped SQLite commits a turn (WAL, synchronous=FULL), no runtime"
    )
    mode = "async"
    concurrency = "asyncio"

    def version(self) -> str:
        return "reference"

    async def open(self, store_dir: Path) -> None:
        durable = os.environ.get("BARE_STORE", "file") == "file"
        self._log = GroupCommit(store_dir / "bare.sqlite3") if durable else None
        self._histories: dict[str, list[dict[str, Any]]] = {}

    async def _commit(self, session_id: str, *items: dict[str, Any]) -> None:
        if self._log is not None:
            await self._log.save([(session_id, _encode(item)) for item in items])

    async def begin_session(self, session_id: str) -> None:
        self._histories[session_id] = []
        await self._commit(session_id, {"type": "created"})

    async def _model(self, items: list[dict[str, Any]]) -> Any:
        await workload.model_latency()
        last = items[-1]
        if last["type"] == "function_call_output":
            return workload.fake_model_decide(len(items), "tool_result", last["output"])
        return workload.fake_model_decide(len(items), "user", last["content"])

    async def run_turn(self, session_id: str, prompt: str) -> str:
        items = self._histories.get(session_id)
        if items is None:
            await self.begin_session(session_id)
            items = self._histories[session_id]
        said = {"type": "message", "role": "user", "content": prompt}
        items.append(said)
        await self._commit(session_id, said, {"type": "step", "n": len(items)})
        call = await self._model(items)
        asked = {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": _encode(call.arguments).decode(),
        }
        items.append(asked)
        await self._commit(session_id, asked, {"type": "tool_started"})
        output = {
            "type": "function_call_output",
            "call_id": call.call_id,
            "output": str(workload.add(**call.arguments)),
        }
        items.append(output)
        await self._commit(session_id, output, {"type": "step", "n": len(items)})
        answer = await self._model(items)
        said_back = {"type": "message", "role": "assistant", "content": answer.text}
        items.append(said_back)
        await self._commit(session_id, said_back)
        return str(answer.text)

    async def close(self) -> None:
        if self._log is not None:
            self._log.close()


if __name__ == "__main__":
    if "--store" in sys.argv:
        at = sys.argv.index("--store")
        os.environ["BARE_STORE"] = sys.argv[at + 1]
        del sys.argv[at : at + 2]
    workload.main(BareAdapter)
