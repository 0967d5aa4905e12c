"""Responders: every user, per-user override, async responders, errors that fail nothing else."""

from __future__ import annotations

import asyncio

from services.cloud import FakeCloud

from .conftest import USER


async def test_responder_context_kinds_and_messages(cloud: FakeCloud, client) -> None:
    seen = []
    cloud.runs.respond(lambda ctx: seen.append((ctx.kind, [m["text"] for m in ctx.messages])))
    run = await client.runs.start(prompt="p")
    await client.runs.message(run.id, "m1")
    await client.runs.message(run.id, "quiet", start_turn=False)
    await cloud.settle_tasks()
    assert seen == [("start", []), ("message", ["m1"])]


async def test_per_user_override_with_none(cloud: FakeCloud, client) -> None:
    cloud.runs.respond(lambda ctx: ctx.run.reply("global"))
    cloud.user(USER).runs.respond(None)
    await client.runs.start(prompt="p")
    await cloud.settle_tasks()
    assert cloud.runs.all[0].events == []
    cloud.user(USER).runs.respond(lambda ctx: ctx.run.reply("mine"))
    run = await client.runs.start(prompt="p")
    await cloud.settle_tasks()
    assert cloud.user(USER).runs.get(run.id).events[-2]["text"] == "mine"


async def test_async_responder_awaits_mid_reply(cloud: FakeCloud, client) -> None:
    gate = asyncio.Event()

    async def respond(ctx):
        ctx.run.set_activity("tool")
        await gate.wait()
        ctx.run.reply("after the app acted")

    cloud.runs.respond(respond)
    run = await client.runs.start(prompt="p")
    await asyncio.sleep(0.01)
    assert (await client.runs.get(run.id)).activity == "tool"
    gate.set()
    await cloud.settle_tasks()
    assert (await client.runs.get(run.id)).status == "idle"


async def test_throwing_responder_is_recorded_and_fails_nothing(cloud: FakeCloud, client) -> None:
    def boom(ctx):
        raise RuntimeError("responder bug")

    cloud.runs.respond(boom)
    run = await client.runs.start(prompt="p")
    await cloud.settle_tasks()
    assert [(e.run_id, e.kind, str(e.error)) for e in cloud.responder_errors] == [(run.id, "start", "responder bug")]
    assert (await client.runs.get(run.id)).status == "running"
    second = await client.runs.start(prompt="q")
    assert second.id != run.id


async def test_runs_all_lists_in_start_order(cloud: FakeCloud, client) -> None:
    assert cloud.user(USER).runs.all == []
    a = await client.runs.start(prompt="a")
    b = await client.runs.start(prompt="b")
    assert [r.id for r in cloud.runs.all] == [a.id, b.id]
    assert [r.id for r in cloud.user(USER).runs.all] == [a.id, b.id]
    assert cloud.user("user:other").runs.all == []
