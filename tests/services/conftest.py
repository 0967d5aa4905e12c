"""Fixtures every services test may use: a fake clock, a change feed and the changes it saw."""

from __future__ import annotations

import pytest

from services.changes import Change, ChangeFeed
from services.clock import FakeClock


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
