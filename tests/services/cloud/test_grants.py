"""Seed section "Grants and setup state": the grant mutators and the long-poll."""

from __future__ import annotations

import asyncio

import pytest

from services.cloud import FakeCloud
from services.sdk import AuthenticationError, OAuth2Client, RefusalError, refusal_of

from .conftest import USER


async def test_grant_mutators_and_versions(cloud: FakeCloud, client) -> None:
    grant = cloud.user(USER).grant
    start = grant.state
    grant.set(resolved_scopes=["crtr:llm"], spend_cap={"amount": 10, "currency": "USD", "period": "month"})
    after_set = grant.state
    assert after_set["rev"] == start["rev"] + 1 and after_set["version"] == start["version"] + 1
    grant.setup("sms", "pending", message="verifying number")
    after_setup = grant.state
    assert after_setup["rev"] == after_set["rev"] and after_setup["version"] == after_set["version"] + 1
    assert after_setup["dependencies"] == [{"provider": "sms", "state": "pending", "message": "verifying number"}]
    grant.sync()
    assert grant.state == after_setup
    got = await client.grant.get()
    assert got == after_setup
    assert got["spend_cap"]["amount"] == 10


async def test_long_poll_is_held_until_the_version_changes(cloud: FakeCloud, client) -> None:
    user = cloud.user(USER)
    version = user.grant.state["version"]
    read = asyncio.create_task(client.grant.get(wait=30, since=version))
    await asyncio.sleep(0.02)
    assert user.holding == 1 and not read.done()
    user.grant.sync()  # no version change, no wake
    await asyncio.sleep(0.02)
    assert not read.done()
    user.grant.setup("sms", "ready")
    got = await asyncio.wait_for(read, 2)
    assert got["version"] == version + 1
    assert user.holding == 0
    assert len(user.reads) == 1


async def test_long_poll_times_out_with_the_same_version(cloud: FakeCloud, client) -> None:
    version = cloud.user(USER).grant.state["version"]
    got = await client.grant.get(wait=0.05, since=version)
    assert got["version"] == version


async def test_watch_grants_yields_each_new_version(cloud: FakeCloud, oauth: OAuth2Client, client) -> None:
    seen: list[dict] = []

    async def watch() -> None:
        async for state in oauth.watch_grants(USER):
            seen.append(state)
            if len(seen) == 3:
                return

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.05)
    cloud.user(USER).grant.set(resolved_scopes=["crtr:llm"])
    await asyncio.sleep(0.05)
    cloud.user(USER).grant.setup("sms", "ready")
    await asyncio.wait_for(task, 5)
    assert [s["version"] for s in seen] == sorted({s["version"] for s in seen})
    assert seen[-1]["dependencies"][0]["provider"] == "sms"


async def test_revoke_wakes_held_reads_and_calls_answer_401(cloud: FakeCloud, client, refusals) -> None:
    user = cloud.user(USER)
    read = asyncio.create_task(client.grant.get(wait=30, since=user.grant.state["version"]))
    await asyncio.sleep(0.02)
    user.grant.revoke("grant_removed")
    with pytest.raises(RefusalError) as info:
        await asyncio.wait_for(read, 2)
    assert refusal_of(info.value).code == "grant_removed"
    assert any(c.op == "grant.get" and c.status == 401 for c in cloud.calls)
    assert [r.answer for r in cloud.refreshes][-1] == "grant_removed"
    assert [r.code for r in refusals] == ["grant_removed"]


async def test_restore_reactivates(cloud: FakeCloud, store, private_key_pem) -> None:
    await cloud.connect(store, "user:r")
    grant = cloud.user("user:r").grant
    grant.revoke()
    assert grant.state["state"] == "revoked" and grant.state["revoked_code"] == "grant_revoked"
    grant.restore({"resolved_scopes": ["crtr:llm", "x:y"]})
    assert grant.state["state"] == "active" and grant.state["resolved_scopes"] == ["crtr:llm", "x:y"]
    oauth = OAuth2Client(
        client_id="doppel", issuer=cloud.issuer, transport=cloud.transport, private_key=private_key_pem,
        redirect_uri="https://app.test/callback", store=store,
    )
    client = await oauth.client("user:r")
    assert (await client.grant.get())["state"] == "active"
    await oauth.aclose()


async def test_revoke_sends_an_error_frame_to_open_streams(cloud: FakeCloud, client) -> None:
    run = await client.runs.start(prompt="p")
    stream = client.runs.events(run.id)
    got = []

    async def read() -> None:
        async for event in stream:
            got.append(event)

    task = asyncio.create_task(read())
    await asyncio.sleep(0.02)
    cloud.user(USER).grant.revoke()
    with pytest.raises(AuthenticationError) as info:
        await asyncio.wait_for(task, 2)
    assert info.value.code == "grant_revoked"
