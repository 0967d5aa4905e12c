"""Fixtures for the memory outbox: a real outbox folder in tmp_path, the fake Honcho, a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.changes import ChangeFeed
from services.clock import FakeClock
from services.knowledge.outbox import FakeHonchoService, MemoryOutbox, OutboxSettings


class ChildRuns:
    """A small real start_child: hands out child ids and keeps the messages each child got."""

    def __init__(self) -> None:
        self.started: dict[str, tuple[str, list[dict[str, Any]]]] = {}

    async def __call__(self, parent_id: str, messages: list[dict[str, Any]]) -> str:
        child = f"{parent_id}-fork{len(self.started) + 1}"
        self.started[child] = (parent_id, messages)
        return child


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
async def outbox(root: Path, feed: ChangeFeed, fake: FakeHonchoService, clock: FakeClock, children: ChildRuns,
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
