"""Fixtures for the conformance suite: a real FakeCloud, a real store and the real SDK client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from services.cloud import FakeCloud, generate_private_key_pem
from services.sdk import MemoryConnectionStore, OAuth2Client

USER = "user:o1"


@pytest.fixture(scope="session")
def private_key_pem() -> str:
    return generate_private_key_pem()


class Waits:
    """An injectable sleep that records every wait the SDK asks for and returns at once."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(round(seconds, 3))


@pytest.fixture
def waits() -> Waits:
    return Waits()


@pytest.fixture
def cloud() -> FakeCloud:
    return FakeCloud(client_id="doppel", stream_idle_ms=2000)


@pytest.fixture
def store() -> MemoryConnectionStore:
    return MemoryConnectionStore()


@pytest.fixture
def refusals() -> list[Any]:
    return []


@pytest.fixture
async def oauth(
    cloud: FakeCloud, store: MemoryConnectionStore, private_key_pem: str, waits: Waits, refusals: list[Any]
) -> AsyncIterator[OAuth2Client]:
    await cloud.connect(store, USER, scopes=["crtr:llm", "crtr:act", "sms:send"])
    client = OAuth2Client(
        client_id="doppel",
        issuer=cloud.issuer,
        transport=cloud.transport,
        private_key=private_key_pem,
        redirect_uri="https://app.test/callback",
        store=store,
        on_refusal=refusals.append,
        sleep=waits,
    )
    yield client
    await client.aclose()


@pytest.fixture
async def client(oauth: OAuth2Client) -> Any:
    return await oauth.client(USER)


def ops(cloud: FakeCloud, op: str) -> list[Any]:
    """The recorded calls of one operation."""
    return [c for c in cloud.calls if c.op == op]
