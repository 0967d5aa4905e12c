"""Fixtures for the SDK tests: keys, the scripted wire, a store holding an expired connection."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from services.clock import FakeClock
from services.sdk import Connection, MemoryConnectionStore, OAuth2Client

from .wirefake import ISSUER, RUNTIME, MiniWire


def _pem(key: object) -> bytes:
    return key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture(scope="session")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="session")
def rsa_pem(rsa_key: rsa.RSAPrivateKey) -> bytes:
    return _pem(rsa_key)


@pytest.fixture(scope="session")
def ec_pem() -> bytes:
    return _pem(ec.generate_private_key(ec.SECP256R1()))


class SleepRecorder:
    """An injectable ``sleep`` that records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def mini() -> MiniWire:
    return MiniWire()


def expired_connection(user_id: str = "user:o1", refresh_token: str = "rt_0") -> Connection:
    return Connection(
        user_id=user_id,
        access_token="at_expired",
        refresh_token=refresh_token,
        expires_at=0.0,
        scope=["crtr:llm"],
        runtime_url=RUNTIME,
        runtime_id="runtime:test",
    )


@pytest.fixture
async def store() -> MemoryConnectionStore:
    store = MemoryConnectionStore()
    await store.save(expired_connection())
    return store


@pytest.fixture
async def oauth(
    mini: MiniWire, store: MemoryConnectionStore, rsa_pem: bytes, sleeps: SleepRecorder, clock: FakeClock
) -> AsyncIterator[OAuth2Client]:
    client = OAuth2Client(
        client_id="doppel",
        issuer=ISSUER,
        transport=mini.transport,
        private_key=rsa_pem,
        redirect_uri="https://app.test/callback",
        store=store,
        sleep=sleeps,
        clock=clock,
    )
    yield client
    await client.aclose()
