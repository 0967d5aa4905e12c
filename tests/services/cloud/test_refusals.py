"""Seed section "Refusals" and "Two app processes"."""

from __future__ import annotations

import asyncio

import pytest

from services.cloud import FakeCloud
from services.sdk import CrouterError, MemoryConnectionStore, OAuth2Client, refusal_of

from .conftest import USER


def _oauth(cloud: FakeCloud, store, key: str, refusals: list | None = None, waits=None) -> OAuth2Client:
    return OAuth2Client(
        client_id="doppel", issuer=cloud.issuer, transport=cloud.transport, private_key=key,
        redirect_uri="https://app.test/callback", store=store,
        on_refusal=(refusals.append if refusals is not None else None), sleep=waits,
    )


@pytest.mark.parametrize(
    "code", ["grant_removed", "grant_suspended", "refresh_token_expired", "refresh_token_reused", "grant_revoked"]
)
async def test_refuse_code(cloud: FakeCloud, store, client, refusals, code) -> None:
    await client.grant.get()
    cloud.user(USER).refuse(code)
    with pytest.raises(CrouterError) as info:
        await client.grant.get()
    refusal = refusal_of(info.value)
    assert refusal is not None and refusal.code == code
    assert [r.code for r in refusals] == [code]  # on_refusal ran once
    assert await store.get(USER) is None  # the stored connection is removed
    assert cloud.refreshes[-1].answer == code
    assert cloud.user(USER).grant.active  # refuse leaves the grant alone


async def test_refuse_ok_clears(cloud: FakeCloud, store, private_key_pem) -> None:
    await cloud.connect(store, "user:c")
    cloud.user("user:c").refuse("grant_suspended")
    cloud.user("user:c").refuse("ok")
    oauth = _oauth(cloud, store, private_key_pem)
    client = await oauth.client("user:c")
    assert (await client.grant.get())["state"] == "active"
    await oauth.aclose()


async def test_expire_tokens_forces_a_refresh(cloud: FakeCloud, client, refusals) -> None:
    await client.grant.get()
    before = len(cloud.refreshes)
    cloud.user(USER).expire_tokens()
    await client.grant.get()
    assert len(cloud.refreshes) == before + 1
    assert cloud.refreshes[-1].answer == "ok"
    assert refusals == []
    assert [c.status for c in cloud.calls if c.op == "grant.get"][-2:] == [401, 200]


async def test_refusal_error_is_the_sdk_error(cloud: FakeCloud) -> None:
    error = await cloud.refusal_error("grant_suspended")
    assert isinstance(error, CrouterError)
    assert refusal_of(error).code == "grant_suspended"


async def test_two_processes_with_separate_stores_reuse_is_refused(cloud: FakeCloud, private_key_pem) -> None:
    first_store = MemoryConnectionStore()
    conn = await cloud.connect(first_store, "user:two")
    second_store = MemoryConnectionStore()
    await second_store.save(conn)
    refusals: list = []
    app_a = _oauth(cloud, first_store, private_key_pem)
    app_b = _oauth(cloud, second_store, private_key_pem, refusals)
    client_a = await app_a.client("user:two")
    await client_a.runs.list()
    with pytest.raises(CrouterError) as info:
        await app_b.client("user:two")
    assert refusal_of(info.value).code == "refresh_token_reused"
    assert [r.code for r in refusals] == ["refresh_token_reused"]
    assert await second_store.get("user:two") is None  # the refused app's stored connection is removed
    await app_a.aclose()
    await app_b.aclose()


async def test_two_processes_share_a_store_with_lock(cloud: FakeCloud, private_key_pem) -> None:
    store = MemoryConnectionStore()
    await cloud.connect(store, "user:shared")
    app_a = _oauth(cloud, store, private_key_pem)
    app_b = _oauth(cloud, store, private_key_pem)
    client_a, client_b = await asyncio.gather(app_a.client("user:shared"), app_b.client("user:shared"))
    run = await client_a.runs.start(prompt="seen by both")
    assert [r.id for r in await client_b.runs.list()] == [run.id]
    assert [r.answer for r in cloud.refreshes] == ["ok"]
    await app_a.aclose()
    await app_b.aclose()


async def test_concurrent_401s_refresh_once(cloud: FakeCloud, client) -> None:
    await client.grant.get()
    before = len(cloud.refreshes)
    cloud.user(USER).expire_tokens()
    await asyncio.gather(*(client.runs.list() for _ in range(20)))
    assert len(cloud.refreshes) == before + 1
    assert all(r.answer == "ok" for r in cloud.refreshes)
