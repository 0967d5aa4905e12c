"""Fixtures for the served runtime's safety tests: a real server on a loopback port, with the Honcho
fake under ``/honcho``, a person connected, and the control token; ``workbench serve`` processes
come from ``tests/served/conftest.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from services.cloud import FakeCloud
from services.cloud.limits import Limits
from services.honcho import FakeHonchoService
from services.sdk import MemoryConnectionStore
from services.served.server import CloudServer, bind_socket, origin_url
from tests.served.conftest import Proc, Served, procs, serve, workbench  # noqa: F401  (fixtures)

USER = "user:a"


@dataclass
class Guarded:
    """A served cloud as an app and an operator reach it."""

    cloud: FakeCloud
    server: CloudServer
    url: str
    access: str
    """``USER``'s access token."""
    control: str
    """The control API's token."""
    http: httpx.AsyncClient

    def as_app(self, **headers: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.access}", "content-type": "application/json", **headers}

    def as_operator(self, **headers: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.control}", "content-type": "application/json", **headers}


async def start_guarded(tmp_path: Path, limits: Limits | None = None) -> Guarded:
    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    cloud = FakeCloud("app", issuer=url, runtime_url=url)
    await cloud.connect(MemoryConnectionStore(), USER, scopes=["crtr:llm", "crtr:act"])
    access = cloud.state.mint_access(cloud.user(USER))[0]  # a connection's own token is stored expired
    honcho = FakeHonchoService(tmp_path / "served-honcho.json", clock=cloud.clock)
    server = CloudServer(cloud, sock, honcho=honcho, limits=limits)
    await server.start()
    return Guarded(cloud, server, url, access, server.token,
                   httpx.AsyncClient(base_url=url, timeout=30))


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[Guarded]:
    """A served cloud with the default limits."""
    served = await start_guarded(tmp_path)
    yield served
    await served.http.aclose()
    await served.server.stop()


@pytest.fixture
async def tight(tmp_path: Path) -> AsyncIterator[Guarded]:
    """A served cloud with small limits (so a test reaches each one cheaply)."""
    served = await start_guarded(tmp_path, Limits(body_bytes=64 * 1024, json_depth=8, prompt_chars=1000,
                                                  message_chars=500, event_bytes=2000, calls=50, wait_s=0.2,
                                                  streams_per_token=2))
    yield served
    await served.http.aclose()
    await served.server.stop()


def envelope_of(response: httpx.Response) -> dict[str, object]:
    """The wire's error envelope of a refused answer (asserting it is one)."""
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"]), body
    return body["error"]  # type: ignore[no-any-return]
