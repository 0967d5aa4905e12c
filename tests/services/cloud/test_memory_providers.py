"""Seed section "Memory and providers"."""

from __future__ import annotations

import pytest

from services.cloud import FakeCloud
from services.sdk import CrouterError, NotFoundError, PermissionDeniedError, OAuth2Client, MemoryConnectionStore

from .conftest import USER


async def test_memory_privacy_without_manage_scope(cloud: FakeCloud, client) -> None:
    memory = cloud.user(USER).memory
    memory.put("notes/public", "Everyone may read this.")
    memory.put("notes/secret", "Only with manage.", privacy="private")
    memory.put("notes/friends", "Friends only.", privacy="friends", kind="preference")
    items = await client.memory.list()
    assert [i["name"] for i in items] == ["notes/public"]
    assert set(items[0]) >= {"name", "owner", "kind", "privacy", "preview", "summary", "rules", "revision", "updated_at", "bytes"}
    assert (await client.memory.get("notes/public"))["body"] == "Everyone may read this."
    with pytest.raises(NotFoundError):
        await client.memory.get("notes/secret")
    memory.remove("notes/public")
    assert await client.memory.list() == []


async def test_memory_with_manage_scope(cloud: FakeCloud, private_key_pem) -> None:
    store = MemoryConnectionStore()
    await cloud.connect(store, "user:m", scopes=["crtr:llm", "crtr:memory:manage:user"])
    cloud.user("user:m").memory.put("a", "pub")
    cloud.user("user:m").memory.put("b", "priv", privacy="private")
    oauth = OAuth2Client(client_id="doppel", issuer=cloud.issuer, transport=cloud.transport,
                         private_key=private_key_pem, redirect_uri="https://app.test/callback", store=store)
    client = await oauth.client("user:m")
    assert sorted(i["name"] for i in await client.memory.list()) == ["a", "b"]
    assert (await client.memory.get("b"))["body"] == "priv"
    assert [i["name"] for i in await client.memory.list(kind="preference")] == []
    await oauth.aclose()


async def test_provider_call_and_scope_check(cloud: FakeCloud, client) -> None:
    seen = []

    def send(call):
        seen.append((call.user_id, call.arguments))
        return {"sent": True}

    cloud.providers.define("sms", tools={"send": {"group": "send", "handler": send}, "read": {"group": "read"}})
    tools = await client.providers.tools()
    assert tools["providers"][0]["tools"][0] == {"name": "send", "group": "send", "scope": "sms:send"}
    assert await client.providers.call("sms", "send", {"to": "+1"}) == {"sent": True}
    assert seen == [(USER, {"to": "+1"})]
    with pytest.raises(PermissionDeniedError) as info:
        await client.providers.call("sms", "read", {})
    assert info.value.code == "scope_missing"
    assert len([c for c in cloud.calls if c.op == "provider.call"]) == 2  # never retried


async def test_provider_errors(cloud: FakeCloud, client) -> None:
    def envelope(call):
        raise FakeCloud.error(429, "sms_rate_limited", "slow down", retryable=True, details={"wait": 3})

    def crash(call):
        raise RuntimeError("handler bug")

    cloud.providers.define("sms", tools={"send": {"group": "send", "handler": envelope}})
    with pytest.raises(CrouterError) as info:
        await client.providers.call("sms", "send", {})
    assert (info.value.status, info.value.code, info.value.details) == (429, "sms_rate_limited", {"wait": 3})
    cloud.providers.define("sms", tools={"send": {"group": "send", "handler": crash}})
    with pytest.raises(CrouterError) as info:
        await client.providers.call("sms", "send", {})
    assert (info.value.status, info.value.code) == (502, "provider_error")
    cloud.providers.define("sms", tools={"send": {"group": "send"}}, status="install_failed", error="bad creds")
    listed = (await client.providers.tools())["providers"][0]
    assert (listed["status"], listed["error"]) == ("install_failed", "bad creds")
    with pytest.raises(CrouterError) as info:
        await client.providers.call("sms", "send", {})
    assert (info.value.status, info.value.code) == (503, "provider_unavailable")


async def test_profiles_trace_rename_interrupt_shapes(cloud: FakeCloud, client) -> None:
    profiles = await client.profiles.list()
    assert profiles and "name" in profiles[0]
    run = await client.runs.start(prompt="p")
    cloud.runs.all[0].reply("hi")
    trace = await client.runs.trace(run.id)
    assert trace["run_id"] == run.id and trace["spans"][0]["stop_reason"] == "end_turn"
    renamed = await client.runs.rename(run.id, "better name")
    assert renamed.name == "better name" if hasattr(renamed, "name") else renamed["name"] == "better name"
    await client.runs.interrupt(run.id)
    cancelled = await client.runs.cancel(run.id)
    assert cloud.runs.all[0].outcome["outcome"] == "canceled"
    assert cancelled is not None
