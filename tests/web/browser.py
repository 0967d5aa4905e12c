"""A real browser on a ``workbench web`` tab: Debian's Chromium driven by Playwright, and the tab's
screen read back as text.

The tab draws on a canvas (xterm.js), so its text is not in the page's DOM. ``Screen`` reads what
the browser receives instead: every binary websocket frame the page gets is the window's terminal
output, fed here into a ``pyte`` screen of the size the page asked for (the websocket URL's
``width``/``height``, then each ``resize`` it sends). What the terminal in the tab shows and what
``Screen`` holds come from the same bytes; screenshots show the tab itself.

Chromium is the system's (``/usr/bin/chromium``, or ``$WORKBENCH_CHROMIUM``); no browser is ever
downloaded. Without it the browser tests skip, except under CI (``$CI`` set), where they fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str:
    """The system's Chromium; skips the test without it, or fails under CI."""
    for candidate in (os.environ.get("WORKBENCH_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).is_file():
            return candidate
    message = "the browser tests need Debian's chromium (apt-get install chromium)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: under CI they never skip")
    pytest.skip(message)


def playwright_module() -> Any:
    try:
        from playwright import async_api
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("the browser tests need the playwright package (the test extra): under CI they never skip")
        pytest.skip("the browser tests need the playwright package (pip install playwright)")
    return async_api


class Screen:
    """The tab's terminal as text, from the frames the page receives."""

    def __init__(self) -> None:
        import pyte

        self._pyte = pyte
        self.screen = pyte.Screen(80, 24)
        self.stream = pyte.ByteStream(self.screen)
        self.bytes_seen = 0
        self.frames = 0
        self._changed = asyncio.Event()
        self.closed = False
        self.on_frame: Callable[[], None] | None = None

    def attach(self, websocket: Any) -> None:
        query = parse_qs(urlsplit(websocket.url).query)
        width, height = int(query.get("width", ["80"])[0]), int(query.get("height", ["24"])[0])
        self.screen.resize(height, width)
        websocket.on("framereceived", self._received)
        websocket.on("framesent", self._sent)
        websocket.on("close", lambda _: self._closed())

    def _closed(self) -> None:
        self.closed = True
        self._changed.set()

    def _received(self, payload: str | bytes) -> None:
        if isinstance(payload, bytes):
            self.bytes_seen += len(payload)
            self.frames += 1
            self.stream.feed(payload)
            if self.on_frame is not None:
                self.on_frame()
            self._changed.set()

    def _sent(self, payload: str | bytes) -> None:
        if isinstance(payload, str) and payload.startswith('["resize"'):
            size = json.loads(payload)[1]
            self.screen.resize(int(size["height"]), int(size["width"]))

    @property
    def text(self) -> str:
        return "\n".join(self.screen.display)

    async def until(self, condition: Callable[[str], bool], *, timeout: float = 60.0) -> str:
        """The screen's text once ``condition`` holds for it (checked at every frame; ``timeout``
        bounds a window that never draws it, and the assertion then shows the screen)."""
        async def wait() -> None:
            while not condition(self.text):
                self._changed.clear()
                await self._changed.wait()
        try:
            await asyncio.wait_for(wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"the tab never showed what was awaited; it shows:\n{self.text}") from None
        return self.text


@asynccontextmanager
async def browser(user_data_dir: Path) -> AsyncIterator[Any]:
    """A Chromium context (a fresh profile in ``user_data_dir``) of 1600x1000 pixels."""
    executable = chromium_path()
    api = playwright_module()
    async with api.async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(user_data_dir), executable_path=executable, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1600, "height": 1000})
        try:
            yield context
        finally:
            await context.close()


async def open_tab(context: Any, url: str) -> tuple[Any, Screen]:
    """A new page on ``url`` and the screen of its terminal."""
    page = await context.new_page()
    screen = Screen()
    page.on("websocket", screen.attach)
    await page.goto(url)
    await page.focus(".xterm-helper-textarea")  # keys go to the terminal, as after a click into it
    return page, screen
