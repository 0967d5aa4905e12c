"""Fixtures every services test may use: a fake clock, a change feed and the changes it saw, and a
workspace with the sample world at a fixed time (``ws``; a test file may define its own)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.changes import Change, ChangeFeed
from services.clock import FakeClock
from services.desk import JUDGE_USER
from services.workspace import Settings, Workspace


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def feed() -> ChangeFeed:
    return ChangeFeed()


@pytest.fixture
def seen(feed: ChangeFeed) -> list[Change]:
    changes: list[Change] = []
    feed.subscribe(changes.append)
    return changes


@pytest.fixture
async def ws(tmp_path: Path) -> AsyncIterator[Workspace]:
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws", clock=FakeClock(1_800_000_000.0)))
    yield workspace
    await workspace.close()


def person_run(ws: Workspace) -> str:
    """The id of the first run a person started (not the knowledge judge's)."""
    return next(v.id for v in ws.desk.runs() if v.user_id != JUDGE_USER)
