"""Models for the seed scenarios that compact (this folder is on ``sys.path``)."""

from __future__ import annotations

import asyncio
import threading

from turnlog import ModelRequest, ModelResponse, ProviderError
from turnlog.domain.model import assistant_message
from turnlog.domain.streaming import DeltaSink, discard_deltas

SCRIPTED_USAGE = {"input_tokens": 1, "output_tokens": 0, "total_tokens": 1}


class Gate:
    """Something a coroutine on the I/O loop awaits until a test opens it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self._open = threading.Event()
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._lock = threading.Lock()

    async def wait(self) -> None:
        event = asyncio.Event()
        with self._lock:
            if self._open.is_set():
                return
            self._waiting.append((asyncio.get_running_loop(), event))
        self.entered.set()
        await event.wait()

    def open(self) -> None:
        with self._lock:
            self._open.set()
            waiting, self._waiting = self._waiting, []
        for loop, event in waiting:
            loop.call_soon_threadsafe(event.set)


class NativeCompactionModel:
    """Answers "done"; compacts natively; counts both."""

    def __init__(self, compact_gate: Gate | None = None, fail: bool = False) -> None:
        self.responses = 0
        self.compactions = 0
        self.gate = compact_gate
        self.fail = fail

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        self.responses += 1
        return ModelResponse((assistant_message("done"),), dict(SCRIPTED_USAGE))

    async def compact(self, request: ModelRequest) -> ModelResponse:
        self.compactions += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            msg = "compaction failed"
            raise ProviderError(msg)
        item = {"type": "compaction", "encrypted_content": "opaque"}
        return ModelResponse((item,), dict(SCRIPTED_USAGE))
