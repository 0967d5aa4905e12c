"""Base URLs with a path: the SDK keeps the base's path and appends each route to it (``wire.join_url``)."""

from __future__ import annotations

import httpx
import pytest

from services import wire
from services.sdk import Crouter, MemoryConnectionStore, OAuth2Client

from .wirefake import run_dto


def recording() -> tuple[list[str], httpx.MockTransport]:
    urls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        urls.append(str(request.url))
        route = wire.route_under("https://rt.test/tenant", str(request.url))
        if route is not None and route.startswith("/v1/memory/"):
            return httpx.Response(200, json={"name": "a/b", "body": "x"})
        if route is not None:
            return httpx.Response(200, json=run_dto())
        return httpx.Response(200, json={"token_endpoint": "https://dir.test/realm/oauth/token",
                                         "jwks_uri": "https://dir.test/realm/.well-known/jwks.json"})
    return urls, httpx.MockTransport(handler)


@pytest.mark.parametrize("base", ["https://rt.test/tenant", "https://rt.test/tenant/"])
async def test_runtime_url_with_a_path_keeps_the_path_for_every_route(base) -> None:
    urls, transport = recording()
    async with Crouter(runtime_url=base, token="t", transport=transport) as client:
        await client.runs.get("run_1")
        await client.runs.start(prompt="hi")
        await client.memory.get("a/b")
    assert urls == [
        "https://rt.test/tenant/v1/runs/run_1",
        "https://rt.test/tenant/v1/runs",
        "https://rt.test/tenant/v1/memory/a/b",
    ]
    assert all(wire.route_under(base, url) is not None for url in urls)


@pytest.mark.parametrize("issuer", ["https://dir.test/realm", "https://dir.test/realm/"])
async def test_issuer_with_a_path_keeps_the_path_for_discovery(issuer, rsa_pem) -> None:
    urls, transport = recording()
    oauth = OAuth2Client(client_id="doppel", issuer=issuer, transport=transport, private_key=rsa_pem,
                         redirect_uri="https://app.test/callback", store=MemoryConnectionStore())
    try:
        await oauth.discovery()
    finally:
        await oauth.aclose()
    assert urls == ["https://dir.test/realm/.well-known/openid-configuration"]
