"""Fixtures for the memory outbox: a real outbox folder in tmp_path, the fake Honcho, a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from services.changes import ChangeFeed
from services.clock import FakeClock
from services.honcho import FakeHonchoService
from services.knowledge.outbox import MemoryOutbox, OutboxSettings


T = TypeVar("T")


class WaitsClock(FakeClock):
    """The fake clock, also keeping every wait asked of it (``waits``) and the ones still due."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []
        """Every ``sleep`` asked for, in order."""
        self.due: list[float] = []
        """When each sleeper still waiting wakes."""

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        due = self.time() + max(0.0, seconds)
        self.due.append(due)
        try:
            await super().sleep(seconds)
        finally:
            self.due.remove(due)


async def advancing(clock: WaitsClock, work: Awaitable[T]) -> T:
    """Await ``work``, moving the clock to each wait's end as soon as something waits on it."""
    task = asyncio.ensure_future(work)
    while not task.done():
        await asyncio.sleep(0.001)
        if clock.due:
            clock.advance(max(0.0, min(clock.due) - clock.time()))
    return task.result()


class ChildRuns:
    """A small real start_child: hands out child ids and keeps the messages each child got."""

    def __init__(self) -> None:
        self.started: dict[str, tuple[str, list[dict[str, Any]]]] = {}

    async def __call__(self, parent_id: str, messages: list[dict[str, Any]]) -> str:
        child = f"{parent_id}-fork{len(self.started) + 1}"
        self.started[child] = (parent_id, messages)
        return child


@pytest.fixture
def clock() -> WaitsClock:
    return WaitsClock()


@pytest.fixture
def fake() -> FakeHonchoService:
    return FakeHonchoService()


@pytest.fixture
def children() -> ChildRuns:
    return ChildRuns()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "memory"


@pytest.fixture
def settings() -> OutboxSettings:
    return OutboxSettings()


@pytest.fixture
async def outbox(root: Path, feed: ChangeFeed, fake: FakeHonchoService, clock: WaitsClock, children: ChildRuns,
                 settings: OutboxSettings) -> AsyncIterator[MemoryOutbox]:
    box = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock, start_child=children,
                                  settings=settings)
    yield box
    await box.aclose()


def turn(user: str, reply: str) -> list[dict[str, Any]]:
    """A two-message root turn."""
    return [{"role": "user", "text": user}, {"role": "assistant", "text": reply}]


def contents(fake: FakeHonchoService, session_id: str | None = None) -> list[str]:
    """Message contents stored by the fake, in one session or everywhere."""
    messages = fake.session_messages(session_id) if session_id else fake.all_messages()
    return [m["content"] for m in messages]
