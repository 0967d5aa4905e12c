"""Seed section "Setup" and the doc's own examples, through the real SDK."""

from __future__ import annotations

import asyncio

from services.cloud import FakeCloud
from services.sdk import MemoryConnectionStore

from .conftest import USER, ops


async def test_connect_saves_an_expired_connection_and_first_call_refreshes(
    cloud: FakeCloud, store: MemoryConnectionStore, oauth, client
) -> None:
    conn = await store.get(USER)
    assert conn is not None and conn.refresh_token
    assert [r.answer for r in cloud.refreshes] == ["ok"]  # oauth.client refreshed once
    grant = await client.grant.get()
    assert grant["state"] == "active"
    assert grant["resolved_scopes"] == ["crtr:llm", "crtr:act", "sms:send"]
    assert len(cloud.refreshes) == 1
    assert ops(cloud, "grant.get")[0].user_id == USER


async def test_connect_default_scopes(cloud: FakeCloud) -> None:
    store = MemoryConnectionStore()
    conn = await cloud.connect(store, "user:o2")
    assert conn.scope == ["crtr:llm", "crtr:act"]
    assert cloud.user("user:o2").grant.state["resolved_scopes"] == ["crtr:llm", "crtr:act"]
    assert conn.expires_at < cloud.clock.time()


async def test_the_setup_block_and_the_responder_example(cloud: FakeCloud, client) -> None:
    cloud.runs.respond(lambda ctx: ctx.run.reply("echo: " + ctx.run.params["prompt"]))
    run = await client.runs.start(prompt="hello")
    assert run.id and run.status == "running"
    await cloud.settle_tasks()
    fake = cloud.runs.all[0]
    assert fake.status == "idle"
    assert fake.events[-1]["type"] == "node.turn.completed"
    reply = await client.runs.reply(run.id, "again").collect()
    assert reply.status == "completed"
    assert reply.text == "echo: hello"


async def test_responder_with_pending_messages(cloud: FakeCloud, client) -> None:
    def respond(ctx):
        pending = ctx.run.pending
        ctx.run.reply("echo: " + (pending[-1]["text"] if pending else ctx.run.params["prompt"]))

    cloud.runs.respond(respond)
    run = await client.runs.start(prompt="first")
    reply = await client.runs.reply(run.id, "second").collect()
    assert reply.text == "echo: second"


async def test_crouter_has_a_fresh_token_and_never_refreshes(cloud: FakeCloud, client) -> None:
    direct = cloud.crouter(USER)
    try:
        before = len(cloud.refreshes)
        runs = await direct.runs.list()
        assert runs == []
        assert len(cloud.refreshes) == before
    finally:
        await direct.aclose()


async def test_the_pinned_surface_revoke_and_fail_next(cloud: FakeCloud, client) -> None:
    cloud.fail_next("run.start", 503, user=USER, times=3)
    assert len(cloud.state.failures.intercepts) == 1
    cloud.user(USER).grant.revoke("grant_removed")
    assert cloud.user(USER).grant.state["state"] == "revoked"
    await asyncio.sleep(0)
