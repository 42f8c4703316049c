"""What the console's browser tests share: Chromium through Playwright, an
agent whose tool needs approval and whose model reports tokens, and checks
of what a screenshot shows (a PNG decoded with the standard library)."""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect, sync_playwright
from service_support import TOKEN_A

from turnlog import Agent, function_tool
from turnlog.domain.model import ModelRequest, ModelResponse
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.scripted import calls, reply, tool_call

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = os.environ.get("TURNLOG_CONSOLE_SCREENSHOTS")
"""A folder to keep the tests' screenshots in, to look at them."""
VIEWPORT = {"width": 1280, "height": 760}

# Assertions retry until this many milliseconds pass: a loaded CI machine
# (or six test runs on two cores) takes longer than Playwright's 5 s.
expect.set_options(timeout=15_000)

DEPLOY_ARGUMENTS = {
    "target": "staging",
    "options": {"replicas": 3, "regions": ["eu-west", "us-east"]},
}


@function_tool(needs_approval=True)
def deploy(target: str, options: dict[str, object]) -> str:
    """Deploys (needs approval)."""
    return f"deployed to {target}"


class DeployModel:
    """``deploy ...`` asks to run deploy (approval), then answers; any other
    prompt gets a streamed answer of several lines. Every step takes a
    moment and reports tokens, so the chart has something to draw."""

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        prompt, outputs = "", 0
        for item in reversed(request.items):
            if item.get("role") == "user":
                prompt = str(item.get("content", ""))
                break
            if item.get("type") == "function_call_output":
                outputs += 1
        await asyncio.sleep(0.02 * (1 + len(prompt) % 4))  # a model takes time
        used = 50 + 10 * len(prompt)
        usage = {"input_tokens": used, "output_tokens": 12, "total_tokens": used + 12}
        if prompt.startswith("deploy") and outputs == 0:
            return calls(tool_call("deploy", DEPLOY_ARGUMENTS), usage=usage)
        text = (
            "Deployed."
            if outputs
            else "\n".join(f"Line {n} of an answer." for n in range(1, 7))
        )
        on_delta(text)
        return reply(text, usage=usage)


def deploy_agent() -> Agent:
    """An agent whose ``deploy`` prompts wait for one approval."""
    return Agent("deployer", model=DeployModel(), tools=[deploy])


class FailingModel:
    """Every call fails: the turn ends as failed."""

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        raise RuntimeError("the model is down")


def failing_agent() -> Agent:
    """An agent whose every turn fails."""
    return Agent("failing", model=FailingModel())


class HeldModel:
    """Answers once ``release`` is set: its turns run until then."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        await asyncio.to_thread(self.release.wait, 30)
        return reply("at last")


@pytest.fixture
def page() -> Iterator[Page]:
    """A Chromium page (Debian's chromium, headless) of a fixed size."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
            context.set_default_timeout(15_000)
            yield context.new_page()
        finally:
            browser.close()


def sign_in(page: Page, url: str, token: str = TOKEN_A) -> None:
    """Opens the console and uses ``token``."""
    page.goto(url + "/")
    page.fill("#token", token)
    page.click("#save-token")


def new_session(page: Page, agent: str | None = None) -> str:
    """Starts a session (with ``agent``, chosen from the menu, when the
    service has several) and returns its id once it is open."""
    before = (
        page.locator("#sessions li.current").get_attribute("data-session-id", timeout=0)
        if page.locator("#sessions li.current").count()
        else None
    )
    page.click("#new-session")
    if agent is not None:
        page.locator(f'#agent-menu button[data-agent="{agent}"]').click()
    current = page.locator("#sessions li.current")
    expect(current).to_have_count(1)
    if before is not None:
        expect(current).not_to_have_attribute("data-session-id", before)
    session_id = current.get_attribute("data-session-id")
    assert session_id
    return session_id


def send(page: Page, text: str) -> None:
    page.fill("#prompt-text", text)
    page.click("#send")


@dataclass
class Shot:
    """A decoded screenshot: RGB rows, and where the page was when taken."""

    width: int
    height: int
    rows: list[bytes]

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        row = self.rows[y]
        return row[3 * x], row[3 * x + 1], row[3 * x + 2]

    def count(
        self, box: dict[str, float], color: tuple[int, int, int], tolerance: int = 40
    ) -> int:
        """Pixels inside ``box`` (page coordinates) close to ``color``."""
        total = 0
        left, top = max(0, int(box["x"])), max(0, int(box["y"]))
        right = min(self.width, int(box["x"] + box["width"]))
        bottom = min(self.height, int(box["y"] + box["height"]))
        for y in range(top, bottom):
            for x in range(left, right):
                pixel = self.pixel(x, y)
                if all(
                    abs(a - b) <= tolerance for a, b in zip(pixel, color, strict=True)
                ):
                    total += 1
        return total


def screenshot(page: Page, name: str) -> Shot:
    """What the viewport shows now (no scrolling), decoded; kept in
    ``TURNLOG_CONSOLE_SCREENSHOTS`` when that is set."""
    png = page.screenshot()
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        (Path(SHOTS) / f"{name}.png").write_bytes(png)
    return decode_png(png)


def decode_png(png: bytes) -> Shot:
    """An 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, data = 8, b""
    width = height = channels = 0
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, body = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        at += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(
                ">IIBBBBB", body
            )
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError("not an 8-bit RGB(A) non-interlaced PNG")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            data += body
    raw = zlib.decompress(data)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - corner)
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + best) & 0xFF
        previous = line
        rgb = (
            bytes(line)
            if channels == 3
            else bytes(value for index, value in enumerate(line) if index % 4 != 3)
        )
        rows.append(rgb)
    return Shot(width, height, rows)


def box_of(locator: Locator) -> dict[str, float]:
    box = locator.bounding_box()
    assert box is not None, "the element is not rendered"
    return dict(box)


def assert_inside(inner: dict[str, float], outer: dict[str, float]) -> None:
    """``inner`` lies wholly inside ``outer`` (boxes in page coordinates)."""
    assert inner["x"] >= outer["x"] - 0.5, (inner, outer)
    assert inner["y"] >= outer["y"] - 0.5, (inner, outer)
    assert inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5, (
        inner,
        outer,
    )
    assert inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 0.5, (
        inner,
        outer,
    )


def viewport_box() -> dict[str, float]:
    return {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": VIEWPORT["height"]}
