"""The notes watcher: watchdog observers on homes' ``notes/`` folders, debounced onto the loop.

watchdog calls back on its own thread; ``NotesWatcher`` hands every relevant event to the
asyncio loop with ``call_soon_threadsafe`` and a ``Debouncer`` coalesces a burst per home into
one callback after a quiet window (editors that save through a temp file and a rename produce
several events; swap, backup and temp names are ignored, and the rename's destination counts).
When an observer cannot start (``inotify`` watch or instance limit) the watcher degrades to
periodic rescans and says so in ``mode``/``problem``. No Textual anywhere.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from ...clock import Clock
from .home import is_note_name

__all__ = ["Debouncer", "NotesWatcher"]

Callback = Callable[[str], Awaitable[None]]


class Debouncer:
    """Coalesces ``touch(key)`` calls: ``fire(key)`` runs once per key after ``window`` quiet seconds."""

    def __init__(self, fire: Callback, *, window: float = 0.2, clock: Clock | None = None) -> None:
        self._fire = fire
        self.window = window
        """The quiet window in seconds."""
        self._clock = clock or Clock()
        self._deadlines: dict[str, float] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.fired = 0
        """How many callbacks ran (for diagnostics)."""

    def touch(self, key: str) -> None:
        """Note an event for ``key`` (must run on the loop)."""
        self._deadlines[key] = self._clock.time() + self.window
        if key not in self._tasks:
            self._tasks[key] = asyncio.get_running_loop().create_task(self._wait(key))

    async def _wait(self, key: str) -> None:
        try:
            while True:
                remaining = self._deadlines[key] - self._clock.time()
                if remaining <= 0:
                    break
                await self._clock.sleep(remaining)
            del self._deadlines[key]
        finally:
            self._tasks.pop(key, None)
        self.fired += 1
        await self._fire(key)

    def pending(self) -> bool:
        """True while a callback is waiting for its quiet window."""
        return bool(self._tasks)

    async def cancel(self) -> None:
        """Drop every pending callback."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._tasks.clear()
        self._deadlines.clear()


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: "NotesWatcher", key: str) -> None:
        self._watcher = watcher
        self._key = key

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory and event.event_type not in ("moved", "deleted", "created"):
            return
        names = [os.fsdecode(event.src_path)]
        dest = getattr(event, "dest_path", "")
        if dest:
            names.append(os.fsdecode(dest))
        if event.is_directory or any(is_note_name(n) for n in names):
            self._watcher._from_thread(self._key)


class NotesWatcher:
    """Watches many ``notes/`` folders; ``subscribe(callback)`` gets the key of a folder that changed."""

    def __init__(self, *, window: float = 0.2, clock: Clock | None = None, rescan_every: float = 2.0) -> None:
        self._folders: dict[str, Path] = {}
        self._callbacks: list[Callback] = []
        self._observer: Observer | None = None  # type: ignore[valid-type]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._debouncer = Debouncer(self._dispatch, window=window, clock=clock)
        self._clock = clock or Clock()
        self._rescan_every = rescan_every
        self._poller: asyncio.Task[None] | None = None
        self.mode = "stopped"
        """``stopped``, ``watching`` or ``polling`` (observer could not start)."""
        self.problem: str | None = None
        """Why the watcher is polling, when it is."""
        self.last_error: str | None = None
        """The last error a callback raised (the watcher keeps running)."""

    def add(self, key: str, folder: Path) -> None:
        """Watch ``folder`` under ``key`` (before or after ``start``)."""
        self._folders[key] = Path(folder)
        if self._observer is not None:
            self._schedule(key, Path(folder))

    def subscribe(self, callback: Callback) -> Callable[[], None]:
        """Call ``callback(key)`` (awaited on the loop) after each debounced burst; returns unsubscribe."""
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def _schedule(self, key: str, folder: Path) -> None:
        if not folder.is_dir():
            return  # a missing home is never recreated by watching it
        assert self._observer is not None
        self._observer.schedule(_Handler(self, key), str(folder), recursive=True)

    async def start(self) -> None:
        """Start the observer thread (or periodic rescans when the OS refuses more watches)."""
        if self.mode != "stopped":
            return
        self._loop = asyncio.get_running_loop()
        observer = Observer()
        try:
            self._observer = observer
            for key, folder in self._folders.items():
                self._schedule(key, folder)
            observer.start()
            self.mode = "watching"
        except OSError as exc:
            self._observer = None
            self.problem = f"file watching unavailable ({exc}); rescanning every {self._rescan_every:g}s"
            self.mode = "polling"
            self._poller = self._loop.create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            await self._clock.sleep(self._rescan_every)
            for key in list(self._folders):
                await self._dispatch(key)

    def _from_thread(self, key: str) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._debouncer.touch, key)

    async def _dispatch(self, key: str) -> None:
        for callback in list(self._callbacks):
            try:
                await callback(key)
            except Exception as exc:  # a failed capture must not kill the watcher
                self.last_error = f"{key}: {exc}"

    async def stop(self) -> None:
        """Stop the observer thread and drop pending callbacks."""
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            await asyncio.to_thread(observer.join, 5)
        if self._poller is not None:
            self._poller.cancel()
            try:
                await self._poller
            except asyncio.CancelledError:
                pass
            self._poller = None
        await self._debouncer.cancel()
        self.mode = "stopped"
