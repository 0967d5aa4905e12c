"""Clocks: the system clock for production, a fake one for deterministic tests.

Every service that reads the time or waits takes a ``Clock`` (token expiry, cooldowns, debounce
windows, long-poll waits), so tests can move time forward instead of sleeping.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone

__all__ = ["Clock", "SystemClock", "FakeClock", "iso"]


def iso(ts: float) -> str:
    """A UNIX timestamp as an ISO-8601 UTC string with milliseconds (``2026-11-30T03:33:19.000Z``)."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Clock:
    """The system clock: wall time in seconds and real ``asyncio.sleep``."""

    def time(self) -> float:
        """Seconds since the epoch."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        await asyncio.sleep(max(0.0, seconds))


SystemClock = Clock


class FakeClock(Clock):
    """A clock that moves only when told: ``advance(s)`` wakes every sleeper whose time has come."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def time(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._now + seconds, future))
        await future

    def advance(self, seconds: float) -> None:
        """Move time forward and wake the sleepers that are due."""
        self._now += seconds
        due = [(t, f) for t, f in self._sleepers if t <= self._now]
        self._sleepers = [(t, f) for t, f in self._sleepers if t > self._now]
        for _, future in due:
            if not future.done():
                future.set_result(None)
