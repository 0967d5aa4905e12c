"""The Honcho-compatible fake served over real HTTP (uvicorn on a free loopback port)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.honcho import FakeHonchoService
from services.served.honcho import HonchoServer


@pytest.fixture
def service() -> FakeHonchoService:
    return FakeHonchoService()


@pytest.fixture
async def served(service: FakeHonchoService) -> AsyncIterator[HonchoServer]:
    server = HonchoServer(service, "127.0.0.1", 0, prefix="/honcho")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
