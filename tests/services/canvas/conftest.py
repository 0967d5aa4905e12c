"""Fixtures: a real canvas file in tmp_path, a fake clock and the change feed it publishes on."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.canvas import Canvas
from services.changes import ChangeFeed
from services.clock import FakeClock


@pytest.fixture
async def canvas(tmp_path, feed: ChangeFeed, clock: FakeClock) -> AsyncIterator[Canvas]:
    opened = await Canvas.open(tmp_path / "canvas.db", changes=feed, clock=clock)
    yield opened
    await opened.close()


PREVIEW = "When testing the canvas, read this because it shows the shape."
