"""Forking: the child gets the parent's messages up to the turn; memory clones at the right message."""

from __future__ import annotations

import pytest

from services.knowledge.outbox import ForkError, MemoryOutbox

from .conftest import contents, turn


async def _parent(outbox: MemoryOutbox, turns: int) -> None:
    for i in range(1, turns + 1):
        await outbox.capture_turn("run_p", "user:o1", turn(f"q{i}", f"a{i}"))


async def test_fork_of_delivered_turns_clones_at_the_anchor(outbox: MemoryOutbox, fake, children, seen) -> None:
    await _parent(outbox, 3)
    await outbox.sweep()
    child = await outbox.fork("run_p", 2)
    parent_id, messages = children.started[child]
    assert parent_id == "run_p"
    assert [(m["role"], m["text"]) for m in messages] == [("user", "q1"), ("assistant", "a1"),
                                                        ("user", "q2"), ("assistant", "a2")]
    fork = outbox.stores.read_pending_fork(child)
    assert fork["parentId"] == "run_p" and fork["atTurn"] == 2 and fork["resolvedAt"]
    ledger = outbox.stores.read_ledger(child)
    assert ledger["forkedFrom"]["parentId"] == "run_p" and ledger["turnCount"] == 2
    assert contents(fake, ledger["sessionId"]) == ["q1", "a1", "q2", "a2"]
    kinds = [c.kind for c in seen if c.id == child]
    assert kinds == ["fork.created", "session.established", "fork.resolved"]
    # the child's own turns continue in the cloned session, numbered after the fork turn
    await outbox.capture_turn(child, "user:o1", turn("c3", "ca3"))
    await outbox.sweep()
    assert contents(fake, ledger["sessionId"]) == ["q1", "a1", "q2", "a2", "c3", "ca3"]
    assert outbox.stores.read_ledger(child)["turnCount"] == 3


async def test_a_late_duplicate_establish_never_clones_again(outbox: MemoryOutbox, fake) -> None:
    await _parent(outbox, 1)
    await outbox.sweep()
    child = await outbox.fork("run_p", 1)
    clones = sum(1 for _, p in fake.calls if p.endswith("/clone"))
    await outbox.engine.establish(child, "user:o1")
    await outbox.sweep()
    assert sum(1 for _, p in fake.calls if p.endswith("/clone")) == clones == 1


async def test_fork_at_a_pending_turn_waits_for_the_parent_then_resolves(outbox: MemoryOutbox, fake,
                                                                       children) -> None:
    await _parent(outbox, 2)  # nothing delivered yet
    child = await outbox.fork("run_p", 1)
    assert [m["text"] for m in children.started[child][1]] == ["q1", "a1"]
    assert outbox.stores.read_pending_fork(child).get("resolvedAt") is None
    await outbox.capture_turn(child, "user:o1", turn("c2", "ca2"))
    result = await outbox.sweep()
    assert result.delivered_records == 3
    ledger = outbox.stores.read_ledger(child)
    assert contents(fake, ledger["sessionId"]) == ["q1", "a1", "c2", "ca2"]
    assert outbox.stores.read_pending_fork(child)["resolvedAt"]


async def test_fork_of_a_fork_below_its_fork_turn_clones_from_the_ancestor(outbox: MemoryOutbox, fake) -> None:
    await _parent(outbox, 3)
    await outbox.sweep()
    child = await outbox.fork("run_p", 3)
    await outbox.capture_turn(child, "user:o1", turn("c4", "ca4"))
    await outbox.sweep()
    grandchild = await outbox.fork(child, 2)
    ledger = outbox.stores.read_ledger(grandchild)
    assert contents(fake, ledger["sessionId"]) == ["q1", "a1", "q2", "a2"]
    great = await outbox.fork(child, 4)
    assert contents(fake, outbox.stores.read_ledger(great)["sessionId"]) == [
        "q1", "a1", "q2", "a2", "q3", "a3", "c4", "ca4"]


async def test_long_delivered_texts_come_back_whole_to_the_child(outbox: MemoryOutbox, children) -> None:
    long = "x" * 30_000 + "y"
    await outbox.capture_turn("run_p", "u", [{"role": "assistant", "text": long}])
    await outbox.sweep()
    child = await outbox.fork("run_p", 1)
    assert children.started[child][1] == [{"role": "assistant", "peer": "assistant", "text": long}]


@pytest.mark.parametrize(("at_turn", "fragment"), [(0, "whole number"), (5, "has 2 captured turns"),
                                                   ("1", "whole number")])
async def test_bad_fork_turns_are_refused(outbox: MemoryOutbox, children, at_turn, fragment) -> None:
    await _parent(outbox, 2)
    with pytest.raises(ForkError, match=fragment):
        await outbox.fork("run_p", at_turn)
    assert children.started == {} and outbox.stores.read_pending_forks() == []


async def test_fork_without_start_child_is_refused(root, feed, fake, clock) -> None:
    box = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock)
    try:
        await box.capture_turn("run_p", "u", turn("q", "a"))
        with pytest.raises(ForkError, match="start_child"):
            await box.fork("run_p", 1)
    finally:
        await box.aclose()


async def test_a_child_id_already_in_memory_is_refused(outbox: MemoryOutbox) -> None:
    await _parent(outbox, 1)
    await outbox.engine.establish("run_taken", "u")

    async def reuse(parent_id: str, messages: list) -> str:
        return "run_taken"

    with pytest.raises(ForkError, match="run_taken already exists"):
        await outbox.fork("run_p", 1, start_child=reuse)
    assert outbox.stores.read_pending_fork("run_taken") is None
