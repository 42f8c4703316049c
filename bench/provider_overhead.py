"""Provider overhead: turnlog's HTTP providers next to a bare httpx client.

Both read the same streams from the same local fake server (its own
process, zero latency): N steps of one answer streamed in K deltas. The
bare client is what a hand-written loop does: ``aiter_lines``, ``json.loads``
of each ``data:`` line, collect the text. turnlog's provider also builds
the request from a ModelRequest, decodes SSE itself, emits every delta to a
sink (as the TurnActor does) and assembles the ModelResponse. Rounds
alternate between the two so drift hits both alike.

    .venv/bin/python bench/provider_overhead.py [--steps 1000] [--chunks 200]
        [--dialect responses|chat|anthropic|all]

Budget: turnlog takes at most 1.3x the bare client's time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from turnlog.domain.model import ModelRequest, ToolSpec, user_message
from turnlog.providers import (
    AnthropicMessagesProvider,
    OpenAIChatCompletionsProvider,
    OpenAIResponsesProvider,
)

SERVER = (
    Path(__file__).resolve().parent.parent / "tests" / "providers" / "fake_openai.py"
)
BUDGET = 1.3
ROUNDS = 10
WARM_UP = 20

REQUEST = ModelRequest(
    instructions="Be brief.",
    items=(user_message("Tell me a story."),),
    tools=(
        ToolSpec("lookup", "Looks a word up.", {"type": "object", "properties": {}}),
    ),
    route="default",
    session_id="bench",
    turn_id="t1",
    step=1,
)


def start_server(chunks: int) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "--chunks", str(chunks)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    port = int(server.stdout.readline())
    return server, f"http://127.0.0.1:{port}/v1"


async def turnlog_steps(provider: Any, steps: int, chunks: int) -> tuple[float, float]:
    deltas: list[str] = []
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        response = await provider.respond(REQUEST, deltas.append)
        assert response.output
    elapsed = time.perf_counter() - started, time.process_time() - cpu
    assert len(deltas) == steps * chunks, len(deltas)
    return elapsed


async def bare_steps(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], steps: int, chunks: int
) -> tuple[float, float]:
    chat = "messages" in body and "max_tokens" not in body
    count = 0
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        text: list[str] = []
        async with client.stream("POST", url, json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if chat:
                    choices = event.get("choices")
                    content = choices[0]["delta"].get("content") if choices else None
                    if content:
                        text.append(content)
                elif event["type"] == "response.output_text.delta":
                    text.append(event["delta"])
                elif event["type"] == "content_block_delta":  # Anthropic
                    delta = event["delta"]
                    if delta["type"] == "text_delta":
                        text.append(delta["text"])
        count += len(text)
        assert "".join(text)
    elapsed = time.perf_counter() - started, time.process_time() - cpu
    assert count == steps * chunks, count
    return elapsed


async def measure(
    dialect: str, base_url: str, steps: int, chunks: int
) -> dict[str, float]:
    provider: Any
    headers = {"Authorization": "Bearer sk-bench"}
    if dialect == "anthropic":
        root = base_url.removesuffix("/v1")
        provider = AnthropicMessagesProvider("bench", base_url=root, api_key="sk-bench")
        url = f"{root}/v1/messages"
        headers = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
    elif dialect == "responses":
        provider = OpenAIResponsesProvider(
            "bench", base_url=base_url, api_key="sk-bench"
        )
        url = f"{base_url}/responses"
    else:
        provider = OpenAIChatCompletionsProvider(
            "bench", base_url=base_url, api_key="sk-bench"
        )
        url = f"{base_url}/chat/completions"
    body = provider.request_body(REQUEST)
    client = httpx.AsyncClient(headers=headers)
    try:
        await turnlog_steps(provider, WARM_UP, chunks)
        await bare_steps(client, url, body, WARM_UP, chunks)
        per_round = max(1, steps // ROUNDS)
        ours, bare = [0.0, 0.0], [0.0, 0.0]
        for round_number in range(ROUNDS):
            for first in (round_number % 2, 1 - round_number % 2):
                if first:
                    taken = await bare_steps(client, url, body, per_round, chunks)
                    bare = [bare[0] + taken[0], bare[1] + taken[1]]
                else:
                    taken = await turnlog_steps(provider, per_round, chunks)
                    ours = [ours[0] + taken[0], ours[1] + taken[1]]
    finally:
        await provider.aclose()
        await client.aclose()
    return {
        "steps": per_round * ROUNDS,
        "turnlog": ours[0],
        "bare": bare[0],
        "turnlog_cpu": ours[1],
        "bare_cpu": bare[1],
    }


def report(dialect: str, figures: dict[str, float], chunks: int) -> bool:
    steps = figures["steps"]
    ours, bare = figures["turnlog"], figures["bare"]
    ratio = ours / bare
    overhead = (ours - bare) / steps
    ours_cpu, bare_cpu = figures["turnlog_cpu"], figures["bare_cpu"]
    print(f"{dialect}: {int(steps)} steps x {chunks} deltas (wall; client CPU)")
    print(
        f"  bare httpx client   {bare / steps * 1e3:8.3f} ms/step; "
        f"{bare_cpu / steps * 1e3:.3f} ms CPU/step"
    )
    print(
        f"  turnlog provider    {ours / steps * 1e3:8.3f} ms/step; "
        f"{ours_cpu / steps * 1e3:.3f} ms CPU/step"
    )
    print(
        f"  overhead            {overhead * 1e6:+8.1f} us/step, "
        f"{overhead / chunks * 1e6:+.2f} us/delta"
    )
    within = ratio <= BUDGET
    verdict = "within" if within else "OVER"
    print(f"  ratio               {ratio:8.3f}x  ({verdict} the {BUDGET}x budget)")
    print(f"  CPU ratio           {ours_cpu / bare_cpu:8.3f}x")
    return within


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument(
        "--dialect", choices=["responses", "chat", "anthropic", "all"], default="all"
    )
    arguments = parser.parse_args()
    dialects = (
        ["responses", "chat", "anthropic"]
        if arguments.dialect == "all"
        else [arguments.dialect]
    )
    server, base_url = start_server(arguments.chunks)
    try:
        results = [
            report(
                dialect,
                asyncio.run(
                    measure(dialect, base_url, arguments.steps, arguments.chunks)
                ),
                arguments.chunks,
            )
            for dialect in dialects
        ]
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
