"""Seed section "Driving runs": each row of the FakeRun table, the turn input rules, messages."""

from __future__ import annotations

import asyncio

import pytest

from services.cloud import FakeCloud
from services.sdk import ConflictError, NotFoundError

from .conftest import USER


async def _started(cloud: FakeCloud, client, prompt: str = "hello"):
    run = await client.runs.start(prompt=prompt)
    return run, cloud.runs.all[-1]


async def test_reply_emits_one_full_turn(cloud: FakeCloud, client) -> None:
    _, fake = await _started(cloud, client)
    fake.reply("abcdef", chunks=3)
    types = [e["type"] for e in fake.events]
    assert types == [
        "node.turn.started",
        "node.output_text.delta",
        "node.output_text.delta",
        "node.output_text.delta",
        "node.output_text.done",
        "node.turn.completed",
    ]
    assert [e["delta"] for e in fake.events if e["type"] == "node.output_text.delta"] == ["ab", "cd", "ef"]
    assert fake.status == "idle"
    assert (await client.runs.get(fake.id)).status == "idle"


async def test_reply_with_open_question_waits_on_user(cloud: FakeCloud, client) -> None:
    _, fake = await _started(cloud, client)
    fake.ask(title="Which one?")
    fake.reply("thinking out loud")
    assert fake.status == "waiting_on_user"


async def test_reply_delivers_message_ids(cloud: FakeCloud, client) -> None:
    run, fake = await _started(cloud, client)
    fake.reply("first")
    one = await client.runs.message(run.id, "one", start_turn=False)
    two = await client.runs.message(run.id, "two", start_turn=False)
    assert [m["text"] for m in fake.pending] == ["one", "two"]
    fake.reply("only two", message_ids=[two["message"]["id"]])
    started = [e for e in fake.events if e["type"] == "node.turn.started"][-1]
    assert started["input"] == {"text": "two", "message_ids": [two["message"]["id"]]}
    assert [m["id"] for m in fake.pending] == [one["message"]["id"]]


async def test_turn_input_rules(cloud: FakeCloud, client) -> None:
    _, fake = await _started(cloud, client, prompt="the prompt")
    fake.reply("a", message_ids=[])
    fake.reply("b")  # nothing pending: empty input after the first turn
    starts = [e["input"]["text"] for e in fake.events if e["type"] == "node.turn.started"]
    assert starts == ["the prompt", ""]
    completed = [e for e in fake.events if e["type"] == "node.turn.completed"]
    assert len(completed) == 2  # reply('', message_ids=[]) is still a full turn


async def test_fail_turn(cloud: FakeCloud, client) -> None:
    run, fake = await _started(cloud, client)
    cloud.runs.respond(lambda ctx: ctx.run.fail_turn(code="content_refused", message="no"))
    result = await client.runs.reply(run.id, "try").collect()
    assert result.status == "error"
    assert result.error["code"] == "content_refused"
    got = await client.runs.get(run.id)
    assert got.last_turn_error == {"code": "content_refused", "message": "no"}
    assert fake.events[-1]["stop_reason"] == "error"
    with pytest.raises(ValueError):
        fake.fail_turn(code="bogus", message="x")


async def test_set_activity(cloud: FakeCloud, client) -> None:
    run, fake = await _started(cloud, client)
    fake.reply("done")
    fake.set_activity("writing")
    got = await client.runs.get(run.id)
    assert (got.status, got.activity) == ("running", "writing")
    fake.emit("node.output_text.delta", {"delta": "x"})
    assert fake.activity == "thinking"


@pytest.mark.parametrize(
    ("ending", "outcome"),
    [
        ({"result": "42"}, {"outcome": "result", "result": "42"}),
        (
            {"declined": {"reason": "no budget", "code": "spend_cap", "retryable": True}},
            {"outcome": "declined", "declined": {"reason": "no budget", "code": "spend_cap", "retryable": True}},
        ),
        ({"failure": "canceled"}, {"outcome": "canceled", "failure": "canceled"}),
        ({"failure": "deadline_exceeded"}, {"outcome": "deadline_exceeded", "failure": "deadline_exceeded"}),
        ({"runtime_error": "oom"}, {"outcome": "runtime_error", "runtime_error": "oom"}),
    ],
)
async def test_settle_outcomes(cloud: FakeCloud, client, ending, outcome) -> None:
    run, fake = await _started(cloud, client)
    fake.settle(ending)
    assert fake.events[-1]["type"] == "node.settled"
    got = await client.runs.get(run.id)
    assert got.status == "settled"
    assert got.outcome == outcome
    if "result" in ending:
        assert got.result == "42"


async def test_idle(cloud: FakeCloud, client) -> None:
    run, fake = await _started(cloud, client)
    fake.idle()
    assert (await client.runs.get(run.id)).status == "idle"
    assert fake.turns == 0


async def test_ask_and_answer(cloud: FakeCloud, client) -> None:
    run, fake = await _started(cloud, client)
    question_id = fake.ask(title="Pick", slots=[{"name": "color"}])
    assert (await client.runs.get(run.id)).status == "waiting_on_user"
    question = await client.questions.get(question_id)
    assert question["title"] == "Pick" and question["status"] == "open"
    await client.questions.answer(question_id, {"color": "blue"})
    assert (await client.questions.get(question_id))["answers"] == {"color": "blue"}
    answered = [e for e in fake.events if e["type"] == "node.question.answered"]
    assert answered[0]["answers"] == {"color": "blue"}
    with pytest.raises(ConflictError):
        await client.questions.answer(question_id, {"color": "red"})
    record = [c for c in cloud.calls if c.op == "question.answer"][0]
    assert (record.run_id, record.question_id) == (run.id, question_id)


async def test_delete(cloud: FakeCloud, client) -> None:
    run, fake = await _started(cloud, client)
    fake.delete()
    assert fake.deleted
    with pytest.raises(NotFoundError):
        await client.runs.get(run.id)
    with pytest.raises(NotFoundError):
        await client.runs.message(run.id, "hello?")
    assert cloud.user(USER).runs.all == [fake]  # a deleted run stays in `all`


async def test_emit_child_node_events_never_complete_reply(cloud: FakeCloud, client) -> None:
    run, fake = await _started(cloud, client)
    fake.reply("first")

    async def respond(ctx):
        ctx.run.emit("node.turn.started", {"input": {"text": "x", "message_ids": []}, "entry_id": "c1"}, node_id="child-1")
        ctx.run.emit("node.turn.completed", {"stop_reason": "end_turn", "entry_id": "c1"}, node_id="child-1")
        await asyncio.sleep(0.01)
        ctx.run.reply("root answer")

    cloud.runs.respond(respond)
    result = await client.runs.reply(run.id, "go").collect()
    assert result.text == "root answer"
    assert any(e.node_id == "child-1" for e in result.events)


async def test_close_idle_and_expire_events(cloud: FakeCloud, client) -> None:
    run, fake = await _started(cloud, client)
    for i in range(5):
        fake.emit("node.output_text.delta", {"delta": str(i)})
    fake.expire_events(3)
    seen = []
    stream = client.runs.events(run.id, after=1)
    async for event in stream:
        seen.append(event)
        if event.seq == 5:
            fake.close_idle()
    assert seen[0].type == "stream_gap"
    assert [e.seq for e in seen[1:]] == [4, 5]


async def test_read_only_members(cloud: FakeCloud, client) -> None:
    run = await client.runs.start(prompt="p", idempotency_key="key-1", name="n")
    fake = cloud.runs.all[0]
    assert fake.id == run.id and fake.user_id == USER
    assert fake.params["prompt"] == "p" and fake.idempotency_key == "key-1"
    assert fake.messages == [] and fake.pending == []
    assert fake.outcome is None and fake.result is None and fake.last_turn_error is None
    assert fake.events == []


async def test_messages_start_turn_and_settled_runs(cloud: FakeCloud, client) -> None:
    run, fake = await _started(cloud, client)
    fake.reply("hi")
    await client.runs.message(run.id, "later", start_turn=False)
    assert fake.status == "idle" and len(fake.pending) == 1
    await client.runs.message(run.id, "now")
    assert fake.status == "running"
    fake.settle(result="done")
    await client.runs.message(run.id, "reopen please")
    assert fake.status == "running" and fake.outcome is None
    fake.settle(failure="canceled")
    with pytest.raises(ConflictError) as info:
        await client.runs.message(run.id, "too late")
    assert info.value.code == "run_settled"


async def test_idempotency(cloud: FakeCloud, client) -> None:
    calls = []
    cloud.runs.respond(lambda ctx: calls.append(ctx.kind))
    first = await client.runs.start(prompt="a", idempotency_key="k")
    again = await client.runs.start(prompt="a", idempotency_key="k")
    await cloud.settle_tasks()
    assert again.id == first.id and len(cloud.runs.all) == 1 and calls == ["start"]
    with pytest.raises(ConflictError) as info:
        await client.runs.start(prompt="b", idempotency_key="k")
    assert info.value.code == "idempotency_conflict"
    with pytest.raises(ConflictError):
        await client.runs.message(first.id, "x", idempotency_key="k")
    cloud.runs.all[0].delete()
    third = await client.runs.start(prompt="a", idempotency_key="k")
    assert third.id != first.id and len(cloud.runs.all) == 2


async def test_message_idempotency_replays(cloud: FakeCloud, client) -> None:
    run, fake = await _started(cloud, client)
    one = await client.runs.message(run.id, "x", idempotency_key="m1")
    two = await client.runs.message(run.id, "x", idempotency_key="m1")
    assert one["message"]["id"] == two["message"]["id"] and len(fake.messages) == 1


async def test_concurrent_starts_with_one_key_make_one_run(cloud: FakeCloud, client) -> None:
    runs = await asyncio.gather(*(client.runs.start(prompt="same", idempotency_key="burst") for _ in range(10)))
    assert len({r.id for r in runs}) == 1 and len(cloud.runs.all) == 1


async def test_a_refused_start_does_not_store_its_key(cloud: FakeCloud, client) -> None:
    from services.sdk import BadRequestError

    with pytest.raises(BadRequestError):
        await client.runs.start(prompt="x", worktree="main", idempotency_key="fixme")
    run = await client.runs.start(prompt="x", idempotency_key="fixme")
    assert cloud.runs.all == [cloud.runs.get(run.id)]
