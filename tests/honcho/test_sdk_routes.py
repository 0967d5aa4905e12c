"""The official Python SDK's whole v3 surface (``sdk_scenario``) against the standalone fake and the
``/honcho`` mount of ``workbench serve``, both requiring their key; every route the SDK's
resources call is reached (checked against the fake's own record of calls)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from services.cloud import FakeCloud
from services.knowledge.outbox import FakeHonchoService
from services.knowledge.outbox.honcho_fake import HONCHO_ROUTES
from services.knowledge.outbox.honcho_serve import HonchoServer
from services.serve import CloudServer, bind_socket, origin_url

from .sdk_scenario import run_python_scenario


def check(seen: dict[str, Any]) -> None:
    assert seen["workspace_metadata"] == {"team": "bees"} and "contract" in seen["workspaces"]
    assert seen["alice_metadata"] == {"role": "user", "level": 3}
    assert seen["bob_metadata"] == {"role": "bot", "level": 7}
    assert seen["users"] == ["alice"] and seen["levelled"] == ["alice", "bob"]
    assert seen["s1_metadata"] == {"topic": "bees"} and seen["s1_updated"] == {"topic": "bees", "v": 2}
    assert seen["sessions_bees"] == ["s1"]
    assert seen["alice_config"].observe_others is True
    assert seen["members_after_remove"] == ["alice"] and seen["members_after_set"] == ["alice", "bob"]
    assert seen["alice_sessions"] == ["s1"]
    assert seen["never_created_messages"] == [] and seen["late_messages"] == ["first words"]
    assert seen["filtered"] == ["Bees need water", "Honey comes in July"]
    assert seen["got_message"] == "I keep bees on the roof" and seen["updated_message"] == {"n": 1, "edited": True}
    assert seen["clone_count"] == 2
    assert set(seen["workspace_search"]) == {"I keep bees on the roof", "Bees need water"}
    assert seen["session_search"] == ["Honey comes in July"] and seen["peer_search"] == ["I keep bees on the roof"]
    assert seen["card"] == ["Keeps bees", "Lives in town"]
    assert seen["representation"].startswith("[fake Honcho representation] alice: 4 messages")
    assert "fake Honcho representation" in seen["session_representation"]
    assert seen["peer_context"].peer_card == ["Keeps bees", "Lives in town"]
    assert seen["chat"].startswith("[fake Honcho: a deterministic answer, no model]") and "bees" in seen["chat"]
    assert seen["chat_stream"].startswith("[fake Honcho")
    assert seen["context_messages"] == 3 and seen["context_summary"].startswith("[fake Honcho summary] 3 messages")
    assert seen["summaries"] is True
    assert seen["conclusions"] == ["likes bees"] and seen["queried"] == ["likes bees"]
    assert seen["conclusions_after_delete"] == []
    assert seen["queue"] == 0
    assert seen["s2_after_delete"] == 404 and seen["workspace_delete_with_sessions"] == 409
    assert seen["workspace_delete"] == 200 and "contract" not in seen["workspaces_after_delete"]


def reached(service: FakeHonchoService) -> set[tuple[str, str]]:
    patterns = [(m, p, re.compile("^" + re.sub(r"\{\w\}", "[^/]+", p) + "$")) for m, p in HONCHO_ROUTES]
    return {(m, p) for method, path in service.calls for m, p, rx in patterns
            if m == method and rx.match(path.removeprefix("/honcho"))}


async def test_the_python_sdk_reaches_every_route_on_the_standalone_fake() -> None:
    service = FakeHonchoService(api_key="standalone-key")
    server = HonchoServer(service, "127.0.0.1", 0)
    await server.start()
    try:
        check(await asyncio.to_thread(run_python_scenario, server.url, "standalone-key"))
    finally:
        await server.stop()
    missing = set(HONCHO_ROUTES) - reached(service)
    assert missing == set()


async def test_the_python_sdk_runs_the_same_scenario_on_the_served_mount(tmp_path) -> None:
    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    service = FakeHonchoService(tmp_path / "served-honcho.db")
    server = CloudServer(FakeCloud("app", issuer=url, runtime_url=url), sock, honcho=service)
    await server.start()
    try:
        assert server.honcho_key and server.honcho_url
        check(await asyncio.to_thread(run_python_scenario, server.honcho_url, server.honcho_key))
    finally:
        await server.stop()


@pytest.mark.parametrize("key", [None, "wrong"])
async def test_without_the_key_the_sdk_gets_honchos_401(key: str | None) -> None:
    import httpx

    service = FakeHonchoService(api_key="right")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(transport=service.transport, base_url="http://h") as http:
        answer = await http.post("/v3/workspaces", json={"id": "w"}, headers=headers)
    assert answer.status_code == 401
    assert answer.json() == {"detail": "No access token provided" if key is None else "Invalid JWT"}
    assert service.workspace_ids() == []
