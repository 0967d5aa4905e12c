"""The run bridge, fed run DTOs and run events of exactly the wire shapes (services/wire.py)."""

from __future__ import annotations

from typing import Any

import pytest

from services.canvas import BridgeInputError, Canvas, RunBridge

RUN = "run_7f3a"


def run_dto(**over: Any) -> dict[str, Any]:
    dto = {
        "id": RUN, "user_id": "user:o1", "name": None, "status": "running", "activity": "thinking",
        "params": {"prompt": "hello", "isolated": False, "cwd": None}, "outcome": None, "result": None,
        "last_turn_error": None, "question": None, "pending": [], "messages": [],
        "created_at": "2026-11-30T03:33:19.000Z", "updated_at": "2026-11-30T03:33:19.000Z", "last_event_id": 0,
    }
    dto.update(over)
    return dto


class Events:
    """Builds events the way the runtime numbers them: ``seq`` from 1 per run, ``id`` its string."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, type_: str, node_id: str = RUN, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        return {"id": str(self.seq), "seq": self.seq, "run_id": RUN, "node_id": node_id, "type": type_,
                "at": "2026-11-30T03:33:20.000Z", **fields}


@pytest.fixture
def bridge(canvas: Canvas) -> RunBridge:
    return RunBridge(canvas)


async def test_a_run_becomes_one_node_owned_by_its_person(bridge: RunBridge, canvas: Canvas, seen) -> None:
    node = await bridge.apply_run(run_dto())
    assert node.object.id == RUN and node.status == "active" and node.object.owner_id == "user:o1"
    assert (await canvas.get("user:o1")).type == "user"
    again = await bridge.apply_run(run_dto(status="idle", activity=None, name="greeting"))
    assert again.status == "idle" and again.object.name == "greeting"
    assert await canvas.count_objects(type="node") == 1
    assert any(c.source == "canvas" and c.kind == "node.updated" and c.id == RUN for c in seen)


async def test_pending_messages_become_inbox_entries_once(bridge: RunBridge, canvas: Canvas) -> None:
    pending = [{"id": "m1", "text": "first", "at": "2026-11-30T03:33:21.000Z", "delivered": False},
               {"id": "m2", "text": "second", "at": "2026-11-30T03:33:22.000Z", "delivered": False}]
    await bridge.apply_run(run_dto(status="idle", pending=pending, messages=pending))
    await bridge.apply_run(run_dto(status="idle", pending=pending, messages=pending))
    page = await canvas.inbox(RUN)
    assert [e.body for e in page.items] == ["second", "first"] and page.unread == 2


async def test_a_whole_turn_and_a_settle(bridge: RunBridge, canvas: Canvas) -> None:
    ev = Events()
    await bridge.apply_run(run_dto())
    await canvas.spawn_node(node_id="operator")
    await canvas.watch(RUN, watcher="operator", min_level=3)
    node = await bridge.apply_event(ev("node.turn.started", input={"text": "hello", "message_ids": []}, entry_id="e1"))
    assert node.turn_active and node.status == "active"
    await bridge.apply_event(ev("node.output_text.delta", delta="hel", entry_id="e1"))
    await bridge.apply_event(ev("node.output_text.delta", delta="lo", entry_id="e1"))
    await bridge.apply_event(ev("node.output_text.done", text="hello", entry_id="e1"))
    node = await bridge.apply_event(ev("node.turn.completed", stop_reason="end_turn", error=None, entry_id="e1"))
    assert not node.turn_active
    node = await bridge.apply_event(ev("node.settled", outcome="result", result="hello"))
    assert node.status == "done" and node.outcome == "result"
    types = [e.type for e in await canvas.events(RUN)]
    assert "node.output_text.delta" not in types
    assert types[:4] == ["node.settled", "node.turn.completed", "node.output_text.done", "node.turn.started"]
    inbox = await canvas.inbox("operator")
    assert [(e.event_type, e.level) for e in inbox.items] == [("node.settled", 6), ("node.turn.completed", 3)]
    dto = run_dto(status="settled", activity=None, outcome={"outcome": "result", "result": "hello"}, result="hello")
    assert (await bridge.apply_run(dto)).status == "done"


@pytest.mark.parametrize(("outcome", "fields", "status", "level"), [
    ("declined", {"declined": {"reason": "no", "code": "declined", "retryable": False}}, "done", 7),
    ("canceled", {"failure": "canceled"}, "canceled", 8),
    ("deadline_exceeded", {"failure": "deadline_exceeded"}, "dead", 8),
    ("runtime_error", {"runtime_error": "boom"}, "dead", 8),
])
async def test_settle_outcomes_map_to_statuses(bridge: RunBridge, canvas: Canvas, outcome: str,
                                               fields: dict[str, Any], status: str, level: int) -> None:
    ev = Events()
    node = await bridge.apply_event(ev("node.settled", outcome=outcome, **fields))
    assert node.status == status and node.outcome == outcome
    assert (await canvas.events(RUN))[0].level == level
    node = await bridge.apply_event(ev("node.reopened"))
    assert node.status == "active" and node.outcome is None


async def test_a_failed_turn_a_question_and_a_message(bridge: RunBridge, canvas: Canvas) -> None:
    ev = Events()
    await bridge.apply_run(run_dto())
    await bridge.apply_event(ev("node.turn.started", input={"text": "x", "message_ids": []}, entry_id="e1"))
    node = await bridge.apply_event(ev("node.message.received", start_turn=True,
                                       message={"id": "m9", "text": "are you there?", "at": "t", "delivered": False}))
    assert node.wake_pending  # arrived mid-turn: coalesces
    await bridge.apply_event(ev("node.turn.completed", stop_reason="error",
                                error={"code": "model_error", "message": "the model failed"}, entry_id="e1"))
    assert (await canvas.events(RUN))[0].level == 8
    question = {"id": "q1", "run_id": RUN, "title": "Which repo?", "slots": [], "status": "open", "answers": None,
                "created_at": "t"}
    node = await bridge.apply_event(ev("node.question.opened", question=question))
    assert node.status == "waiting_on_user"
    node = await bridge.apply_event(ev("node.question.answered", question_id="q1", answers={"repo": "a"}))
    assert node.status == "active"
    await bridge.apply_event(ev("run.renamed", name="named run"))
    assert (await canvas.get(RUN)).name == "named run"
    node = await bridge.apply_event(ev("run.interrupted"))
    assert node.status == "idle" and not node.turn_active
    page = await canvas.inbox(RUN)
    assert [e.body for e in page.items] == ["are you there?"]
    await bridge.apply_run(run_dto(pending=[{"id": "m9", "text": "are you there?", "at": "t", "delivered": False}]))
    assert (await canvas.inbox(RUN)).total == 1  # the same message is never filed twice


async def test_child_nodes_hang_off_the_root_with_a_spawned_edge(bridge: RunBridge, canvas: Canvas) -> None:
    ev = Events()
    await bridge.apply_run(run_dto())
    child = await bridge.apply_event(ev("node.turn.started", node_id="child_1",
                                        input={"text": "sub task", "message_ids": []}, entry_id="e2"))
    assert child.parent_id == RUN and child.object.owner_id == "user:o1" and child.turn_active
    await bridge.apply_event(ev("node.turn.completed", node_id="child_1", stop_reason="end_turn", error=None,
                                entry_id="e2"))
    around = await canvas.edges(RUN)
    assert [e.other.id for e in around.outgoing["spawned"]] == ["child_1"]
    root = (await canvas.read(RUN)).node
    assert root is not None and root.turn_active is False  # child events never touch the root's turn
    assert (await canvas.inbox(RUN)).items[0].event_type == "node.turn.completed"  # the root watches its child


async def test_replayed_events_are_skipped(bridge: RunBridge, canvas: Canvas) -> None:
    ev = Events()
    first = ev("node.turn.started", input={"text": "x", "message_ids": []}, entry_id="e1")
    await bridge.apply_event(first)
    await bridge.apply_event(first)
    assert [e.type for e in await canvas.events(RUN)].count("node.turn.started") == 1


@pytest.mark.parametrize("bad", [
    {"seq": 1, "node_id": RUN, "type": "node.idle"},                       # no run_id
    {"run_id": RUN, "seq": 1, "type": "node.idle"},                        # no node_id
    {"run_id": RUN, "node_id": RUN, "seq": "1", "type": "node.idle"},      # seq not an int
    {"run_id": RUN, "node_id": RUN, "seq": 1},                             # no type
    {"run_id": RUN, "node_id": RUN, "seq": 1, "type": "node.message.received", "message": "hi"},
    ["not", "a", "dict"],
])
async def test_a_malformed_event_is_refused_and_nothing_is_written(bridge: RunBridge, canvas: Canvas, bad: Any) -> None:
    await bridge.apply_run(run_dto())
    before = await canvas.events(RUN)
    with pytest.raises(BridgeInputError):
        await bridge.apply_event(bad)
    assert await canvas.events(RUN) == before
    assert (await canvas.read(RUN)).node.status == "active"  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [{"user_id": "user:o1"}, {"id": RUN}, {"id": RUN, "user_id": "user:o1", "pending": "x"},
                                 {"id": 5, "user_id": "user:o1"}])
async def test_a_malformed_run_is_refused(bridge: RunBridge, canvas: Canvas, bad: dict[str, Any]) -> None:
    with pytest.raises(BridgeInputError):
        await bridge.apply_run(bad)
    assert await canvas.count_objects(type="node") == 0


async def test_a_forks_node_links_to_its_parents_once_the_parent_is_there(bridge: RunBridge, canvas: Canvas) -> None:
    fork = run_dto(id="run_fork", params={"prompt": "again", "forked_from": RUN, "forked_at_turn": 2,
                                          "history": [{"role": "user", "text": "again"}]})
    await bridge.apply_run(fork)  # the parent's node is not in the canvas yet: nothing to link
    assert "forked-from" not in (await canvas.edges("run_fork")).outgoing
    await bridge.apply_run(run_dto())
    await bridge.apply_run(fork)
    await bridge.apply_run(fork)  # applied again (a replay): still one edge, one event
    assert [e.other.id for e in (await canvas.edges("run_fork")).outgoing["forked-from"]] == [RUN]
    assert [e.other.id for e in (await canvas.edges(RUN)).incoming["forked-from"]] == ["run_fork"]
    forked = [e for e in await canvas.events("run_fork") if e.type == "run.forked"]
    assert [e.data for e in forked] == [{"parent": RUN, "turn": 2}]
    await bridge.apply_run(run_dto(id="run_self", params={"prompt": "x", "forked_from": "run_self"}))
    assert "forked-from" not in (await canvas.edges("run_self")).outgoing  # a run is never its own fork
