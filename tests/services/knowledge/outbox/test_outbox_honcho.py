"""The Honcho client against the fake (status codes, shapes) and against a real server's URL."""

from __future__ import annotations

import json

import httpx
import pytest

from services.honcho import FakeHonchoService
from services.knowledge.outbox import HonchoClient, HonchoRequestError


async def _raw(fake: FakeHonchoService, method: str, path: str, body=None, params=None) -> httpx.Response:
    async with httpx.AsyncClient(transport=fake.transport, base_url="https://honcho.fake") as http:
        return await http.request(method, path, json=body, params=params)


async def test_get_or_create_answers_201_then_200(fake: FakeHonchoService) -> None:
    first = await _raw(fake, "POST", "/v3/workspaces", {"id": "w"})
    second = await _raw(fake, "POST", "/v3/workspaces", {"id": "w"})
    assert (first.status_code, second.status_code) == (201, 200)
    peer = await _raw(fake, "POST", "/v3/workspaces/w/peers", {"id": "alice"})
    assert peer.status_code == 201 and set(peer.json()) >= {"id", "workspace_id", "created_at", "metadata"}
    session = await _raw(fake, "POST", "/v3/workspaces/w/sessions", {"id": "s1", "peers": {"alice": {}}})
    assert session.status_code == 201 and session.json()["is_active"] is True


async def test_honcho_shapes_and_limits(fake: FakeHonchoService) -> None:
    await _raw(fake, "POST", "/v3/workspaces", {"id": "w"})
    await _raw(fake, "POST", "/v3/workspaces/w/sessions", {"id": "s1"})
    too_many = {"messages": [{"content": "x", "peer_id": "p"}] * 101}
    answer = await _raw(fake, "POST", "/v3/workspaces/w/sessions/s1/messages", too_many)
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", "messages"]
    too_long = {"messages": [{"content": "x" * 25_001, "peer_id": "p"}]}
    assert (await _raw(fake, "POST", "/v3/workspaces/w/sessions/s1/messages", too_long)).status_code == 422
    bad_id = await _raw(fake, "POST", "/v3/workspaces/w/peers", {"id": "user:o1"})
    assert bad_id.status_code == 422
    deleted = await _raw(fake, "POST", "/v3/workspaces/w/sessions", {"id": "gone"})
    assert (await _raw(fake, "DELETE", "/v3/workspaces/w/sessions/gone")).status_code == 202
    missing = await _raw(fake, "POST", "/v3/workspaces/w/sessions/gone/messages",
                         {"messages": [{"content": "x", "peer_id": "p"}]})
    assert deleted.status_code == 201 and missing.status_code == 404 and "gone" in missing.json()["detail"]
    ok = await _raw(fake, "POST", "/v3/workspaces/w/sessions/s1/messages",
                    {"messages": [{"content": "hi", "peer_id": "p", "metadata": {"k": 1}}]})
    assert ok.status_code == 201
    message = ok.json()[0]
    assert set(message) == {"id", "content", "peer_id", "session_id", "metadata", "created_at", "workspace_id",
                            "token_count"}
    clone = await _raw(fake, "POST", "/v3/workspaces/w/sessions/s1/clone", params={"message_id": "msg_nope"})
    assert clone.status_code == 404


async def test_client_maps_errors(fake: FakeHonchoService) -> None:
    client = HonchoClient("w", transport=fake.transport)
    try:
        with pytest.raises(HonchoRequestError, match="422"):
            await client.add_messages("s", [{"content": "x", "peer_id": "user:p"}])
        with pytest.raises(HonchoRequestError, match="1..100"):
            await client.add_messages("s", [])
    finally:
        await client.aclose()


async def test_client_speaks_to_a_real_server_url_unchanged() -> None:
    """The same client against a real Honcho base URL: its paths, auth header and bodies."""
    seen: list[httpx.Request] = []

    def server(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/messages"):
            items = json.loads(request.content)["messages"]
            return httpx.Response(201, json=[{"id": f"m{i}", **m} for i, m in enumerate(items)])
        return httpx.Response(201, json={"id": "x"})

    client = HonchoClient("prod-ws", base_url="https://api.honcho.dev", api_key="sk-test",
                          transport=httpx.MockTransport(server))
    try:
        await client.get_or_create_session("conv-1", {"alice": {"observe_me": True}})
        created = await client.add_messages("conv-1", [{"content": "hi", "peer_id": "alice"}])
    finally:
        await client.aclose()
    assert created[0]["id"] == "m0"
    assert [str(r.url) for r in seen] == [
        "https://api.honcho.dev/v3/workspaces",
        "https://api.honcho.dev/v3/workspaces/prod-ws/sessions",
        "https://api.honcho.dev/v3/workspaces/prod-ws/sessions/conv-1/messages",
    ]
    assert all(r.headers["authorization"] == "Bearer sk-test" for r in seen)
    assert json.loads(seen[1].content) == {"id": "conv-1", "peers": {"alice": {"observe_me": True}}}
