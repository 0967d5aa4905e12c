"""The workbench in a browser tab beside the same workbench in a terminal, in one run.

Run: ``python benchmarks/web.py [--runs N] [--keys N] [--tabs N]`` (needs Debian's ``chromium``
and the ``playwright`` package; no browser is downloaded).

One ``workbench web --port 0`` on a fresh workspace (it serves the folder's cloud), then:

1. URL opened -> panes filled in the tab (the window attached and its runs listed), beside the
   terminal's time to panes filled: ``workbench --workspace DIR`` started in a pty of the tab's
   size (``pyte`` reads its screen), attaching to the same served cloud. Alternated ``--runs``
   times; medians and their ratio (aim: 1.5x or under).
2. Key pressed -> drawn: down and up in turn in the runs pane, ``--keys`` times, until the screen
   shows the next run selected; in the tab "drawn" is the frame that shows it reaching the page (xterm.js paints
   it on the next animation frame), in the terminal the frame read from the pty. Medians and worst
   (aim: under 100 ms median in the tab).
3. ``--tabs`` tabs at once, each pressing those keys in turn: how many answered every key, the
   median and worst key -> drawn over all of them, beside as many terminal windows at once
   (aim: 5 on this 2-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import pty
import signal
import statistics
import struct
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.web.browser import CHROMIUM_ARGS, Screen  # noqa: E402

CHROMIUM = os.environ.get("WORKBENCH_CHROMIUM", "/usr/bin/chromium")


def panes_filled(text: str) -> bool:
    return "attached to" in text and "mail digest" in text and "judgments" in text


def pane_shown(number: str) -> Callable[[str], bool]:
    heading = {"1": "canvas ·", "3": "runs ·"}[number]

    def shown(text: str) -> bool:
        lines = text.splitlines()
        return len(lines) > 2 and heading in lines[2]
    return shown


class PtyWindow:
    """``workbench --workspace DIR`` in a pseudo-terminal, its screen read with ``pyte``."""

    def __init__(self, folder: Path, cols: int, rows: int) -> None:
        import pyte

        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self._changed = asyncio.Event()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the window
            os.environ.update(TERM="xterm-256color", COLORTERM="truecolor", PYTHONPATH=str(ROOT))
            os.execv(sys.executable, [sys.executable, "-m", "workbench", "--workspace", str(folder)])
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        asyncio.get_running_loop().add_reader(self.fd, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.fd)
        else:
            self.stream.feed(data)
        self._changed.set()

    @property
    def text(self) -> str:
        return "\n".join(self.screen.display)

    async def until(self, condition: Callable[[str], bool], timeout: float = 120.0) -> None:
        async def wait() -> None:
            while not condition(self.text):
                self._changed.clear()
                await self._changed.wait()
        await asyncio.wait_for(wait(), timeout)

    async def press(self, key: str) -> None:
        os.write(self.fd, key.encode())

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.fd)
        try:
            os.kill(self.pid, signal.SIGTERM)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)


async def start_web(folder: Path) -> tuple[asyncio.subprocess.Process, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "workbench", "web", "--workspace", str(folder), "--port", "0", "--tabs", "16",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    assert process.stdout is not None
    while line := await process.stdout.readline():
        text = line.decode().strip()
        if text.startswith("open "):
            asyncio.get_running_loop().create_task(process.stdout.read())  # drained from here on
            return process, text.removeprefix("open ")
    raise SystemExit("workbench web did not start")


async def open_tab(context: Any, url: str) -> tuple[Any, Screen, float]:
    """A tab on ``url``; the seconds from opening it to its panes filled."""
    page = await context.new_page()
    await page.add_init_script(IN_PAGE)
    screen = Screen()
    page.on("websocket", screen.attach)
    started = time.perf_counter()
    await page.goto(url)
    await screen.until(panes_filled, timeout=120)
    filled = time.perf_counter() - started
    await page.focus(".xterm-helper-textarea")
    return page, screen, filled


def selected(text: str) -> str:
    """The runs pane's detail line (the selected run)."""
    return next((line for line in text.splitlines() if "events" in line and "pending" in line), "")


ARROWS = {"down": ("ArrowDown", "\x1b[B"), "up": ("ArrowUp", "\x1b[A")}


IN_PAGE = """
window.__keys = []; window.__painted = [];
document.addEventListener("keydown", () => window.__keys.push(performance.now()), true);
const Native = window.WebSocket;
window.WebSocket = function (url, protocols) {
  const socket = protocols === undefined ? new Native(url) : new Native(url, protocols);
  socket.addEventListener("message", (event) => {
    if (typeof event.data === "string") return;
    const index = window.__painted.length;
    window.__painted.push(null);
    requestAnimationFrame(() => { window.__painted[index] = performance.now(); });
  });
  return socket;
};
window.WebSocket.prototype = Native.prototype;
"""
"""Timed in the page itself: each keydown, and the animation frame after each binary frame arrives
(xterm.js paints what it was written in that frame), so key -> drawn has no driver in it."""


class TabWindow:
    """A tab, with the same ``press`` / ``until`` / ``text`` as ``PtyWindow``."""

    def __init__(self, page: Any, screen: Screen) -> None:
        self.page, self.screen = page, screen
        self.in_page: list[float] = []
        """Key -> painted as the page timed it (seconds), one per ``measured`` call."""

    async def press(self, key: str) -> None:
        await self.page.keyboard.press(key)

    async def until(self, condition: Callable[[str], bool], timeout: float = 30.0) -> None:
        await self.screen.until(condition, timeout=timeout)

    async def measured(self) -> None:
        """After ``until``: the page's own time from the last key to the frame that showed it painted."""
        frame = self.screen.frames
        seconds = await self.page.evaluate(
            """(frame) => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() =>
                done((window.__painted[frame - 1] - window.__keys[window.__keys.length - 1]) / 1000))))""", frame)
        self.in_page.append(seconds)

    @property
    def text(self) -> str:
        return self.screen.text


async def key_times(window: TabWindow | PtyWindow, keys: int) -> list[float]:
    """Seconds from each key to its effect drawn: down and up in turn in the runs pane (the selected
    run's detail line changes); one unreported warm-up. For a tab this is the round trip seen from
    here (the browser driver's hops included); ``TabWindow.in_page`` gets the page's own figure."""
    tab = isinstance(window, TabWindow)
    await window.press("3")
    await window.until(pane_shown("3"))
    times: list[float] = []
    for index in range(keys + 1):
        key = ARROWS["down" if index % 2 == 0 else "up"][0 if tab else 1]
        before = selected(window.text)

        def moved(text: str, before: str = before) -> bool:
            return selected(text) not in ("", before)
        started = time.perf_counter()
        await window.press(key)
        await window.until(moved)
        if index:
            times.append(time.perf_counter() - started)
            if isinstance(window, TabWindow):
                await window.measured()
    return times


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="tab / terminal start pairs (default 3)")
    parser.add_argument("--keys", type=int, default=20, help="pane keys measured per window (default 20)")
    parser.add_argument("--tabs", type=int, default=5, help="tabs (and terminals) at once (default 5)")
    args = parser.parse_args()
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory(prefix="workbench-web-bench-") as tmp:
        folder = Path(tmp) / "ws"
        web, url = await start_web(folder)
        try:
            async with async_playwright() as playwright:
                context = await playwright.chromium.launch_persistent_context(
                    str(Path(tmp) / "profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
                    viewport={"width": 1600, "height": 1000})
                # 1. start: tab and terminal in turn, the terminal in a pty of the tab's size
                tab_starts: list[float] = []
                term_starts: list[float] = []
                cols = rows = 0
                for _ in range(args.runs):
                    page, screen, filled = await open_tab(context, url)
                    tab_starts.append(filled)
                    rows, cols = screen.screen.lines, screen.screen.columns
                    await page.close()
                    started = time.perf_counter()
                    window = PtyWindow(folder, cols, rows)
                    await window.until(panes_filled)
                    term_starts.append(time.perf_counter() - started)
                    window.close()
                tab, term = statistics.median(tab_starts), statistics.median(term_starts)
                print(f"window of {cols}x{rows} cells on a served workspace, {args.runs} runs each, alternated")
                print(f"1. opened -> panes filled      tab {ms(tab)}   terminal {ms(term)}   "
                      f"ratio {tab / term:.2f}x (aim <= 1.5x)")

                # 2. key -> drawn, one window each
                page, screen, _ = await open_tab(context, url)
                one = TabWindow(page, screen)
                tab_keys = await key_times(one, args.keys)
                await page.close()
                window = PtyWindow(folder, cols, rows)
                await window.until(panes_filled)
                term_keys = await key_times(window, args.keys)
                window.close()
                print(f"2. key -> drawn (median/worst) tab {ms(statistics.median(one.in_page))} / {ms(max(one.in_page))}"
                      f" in the page ({ms(statistics.median(tab_keys))} / {ms(max(tab_keys))} seen through the driver)"
                      f"   terminal {ms(statistics.median(term_keys))} / {ms(max(term_keys))}   (aim: tab < 100 ms median)")

                # 3. N at once, each pressing keys
                tabs = [await open_tab(context, url) for _ in range(args.tabs)]
                tab_windows = [TabWindow(p, s) for p, s, _ in tabs]
                results = await asyncio.gather(*(key_times(w, args.keys) for w in tab_windows), return_exceptions=True)
                tab_all = [t for w, r in zip(tab_windows, results) if isinstance(r, list) for t in w.in_page]
                tab_ok = sum(isinstance(r, list) for r in results)
                for page, _, _ in tabs:
                    await page.close()
                windows = [PtyWindow(folder, cols, rows) for _ in range(args.tabs)]
                await asyncio.gather(*(w.until(panes_filled) for w in windows))
                results = await asyncio.gather(*(
                    key_times(w, args.keys) for w in windows),
                    return_exceptions=True)
                term_all = [t for r in results if isinstance(r, list) for t in r]
                term_ok = sum(isinstance(r, list) for r in results)
                for window in windows:
                    window.close()

                def summary(ok: int, times: list[float]) -> str:
                    if not times:
                        return f"{ok}/{args.tabs} answered every key"
                    return (f"{ok}/{args.tabs} answered every key, median {ms(statistics.median(times))} "
                            f"worst {ms(max(times))}")
                print(f"3. {args.tabs} at once, keys         tabs: {summary(tab_ok, tab_all)} (in the page)")
                print(f"                                terminals: {summary(term_ok, term_all)}   (aim: 5 tabs)")
                await context.close()
        finally:
            web.send_signal(signal.SIGTERM)
            await web.wait()


if __name__ == "__main__":
    asyncio.run(main())
