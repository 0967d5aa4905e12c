"""Watches with patterns and levels, inboxes, messages that wake or coalesce, jobs, custom objects."""

from __future__ import annotations

import pytest

from services.canvas import (Canvas, CanvasError, DocumentInvalidError, NameRefusedError, ObjectNotFoundError,
                             OwnerInUseError,
                             UndeclaredEventError, WatchPatternError)

from .conftest import PREVIEW


async def test_watch_patterns_and_minimum_levels_filter_the_inbox(canvas: Canvas) -> None:
    await canvas.spawn_node(node_id="w")
    await canvas.spawn_node(node_id="x")
    await canvas.watch("x", watcher="w", pattern="configured,report.*", min_level=4)
    await canvas.record_event("x", "report.update", level=6)
    await canvas.record_event("x", "report.update", level=3)   # below the minimum
    await canvas.record_event("x", "exited", level=9)          # pattern does not match
    await canvas.configure_node("x", mode="orchestrator")      # configured, level 4
    page = await canvas.inbox("w")
    assert [(e.event_type, e.level) for e in page.items] == [("configured", 4), ("report.update", 6)]
    assert page.unread == 2 and page.total == 2
    assert await canvas.unwatch("x", watcher="w") is True
    await canvas.record_event("x", "report.update", level=9)
    assert (await canvas.inbox("w")).total == 2


@pytest.mark.parametrize("pattern", ["", "  ", "EDITED", "edit ed", "a,,b", "[x]", "edited;rm", "*,"])
async def test_a_watch_pattern_that_does_not_parse_is_refused(canvas: Canvas, pattern: str) -> None:
    await canvas.spawn_node(node_id="w")
    await canvas.spawn_node(node_id="x")
    await canvas.watch("x", watcher="w", pattern="edited")
    with pytest.raises(WatchPatternError, match="pattern"):
        await canvas.watch("x", watcher="w", pattern=pattern)
    detail = await canvas.read("x")
    assert [(w.watcher_id, w.pattern) for w in detail.watchers] == [("w", "edited")]  # the old watch is intact


@pytest.mark.parametrize("level", [0, 11, -1, "5", 2.5, True])
async def test_a_minimum_level_outside_1_to_10_is_refused(canvas: Canvas, level: object) -> None:
    await canvas.spawn_node(node_id="w")
    await canvas.spawn_node(node_id="x")
    with pytest.raises(WatchPatternError, match="level"):
        await canvas.watch("x", watcher="w", min_level=level)  # type: ignore[arg-type]
    assert (await canvas.read("x")).watchers == ()


async def test_mark_read_by_ids_up_to_and_all(canvas: Canvas, seen) -> None:
    await canvas.spawn_node(node_id="w")
    await canvas.spawn_node(node_id="x")
    await canvas.watch("x", watcher="w")
    for i in range(5):
        await canvas.record_event("x", f"tick{i}", level=3)
    page = await canvas.inbox("w", limit=2)
    assert len(page.items) == 2 and page.total == 5 and page.unread == 5
    ids = sorted(e.id for e in (await canvas.inbox("w")).items)
    assert await canvas.mark_read("w", [ids[0]]) == 1
    assert await canvas.mark_read("w", up_to=ids[2]) == 2
    assert (await canvas.inbox("w", unread_only=True)).unread == 2
    assert await canvas.mark_read("w") == 2
    assert await canvas.mark_read("w") == 0
    assert (await canvas.inbox("w")).unread == 0
    assert any(c.kind == "inbox.read" and c.id == "w" for c in seen)


async def test_spawning_makes_an_edge_and_a_watch(canvas: Canvas) -> None:
    await canvas.spawn_node(node_id="parent", kind="plan", mode="orchestrator")
    child = await canvas.spawn_node(node_id="child", kind="explore", parent="parent")
    assert child.parent_id == "parent"
    around = await canvas.edges("parent")
    assert [e.other.id for e in around.outgoing["spawned"]] == ["child"]
    assert [e.other.id for e in around.outgoing["watches"]] == ["child"]
    await canvas.push_report("child", label="update", preview=PREVIEW, body="halfway")
    assert (await canvas.inbox("parent")).items[0].event_type == "report.update"
    with pytest.raises(NameRefusedError):
        await canvas.spawn_node(kind="Not A Kind")
    with pytest.raises(DocumentInvalidError):
        await canvas.spawn_node(mode="boss")


async def test_messages_wake_a_resident_node_and_coalesce_mid_turn(canvas: Canvas, seen) -> None:
    await canvas.spawn_node(node_id="imessage", kind="imessage-assistant", lifecycle="resident", status="idle")
    await canvas.spawn_node(node_id="watcher")
    first = await canvas.message_send("iMessage activity — check chat.db since your cursor", to="imessage",
                                      sender="watcher")
    assert first.woke and not first.coalesced
    node = (await canvas.read("imessage")).node
    assert node is not None and node.status == "active" and node.turn_active and node.wakes == 1
    burst = [await canvas.message_send(f"burst {i}", to="imessage") for i in range(3)]
    assert all(r.coalesced and not r.woke for r in burst)
    assert (await canvas.read("imessage")).node.wakes == 1  # type: ignore[union-attr]
    assert await canvas.end_turn("imessage") is True  # one new turn for the whole burst
    node = (await canvas.read("imessage")).node
    assert node.wakes == 2 and node.turn_active and not node.wake_pending  # type: ignore[union-attr]
    assert await canvas.end_turn("imessage") is False
    assert (await canvas.read("imessage")).node.status == "idle"  # type: ignore[union-attr]
    inbox = await canvas.inbox("imessage")
    assert inbox.unread == 4 and [e.kind for e in inbox.items] == ["message"] * 4
    assert inbox.items[-1].body.startswith("iMessage activity")  # type: ignore[union-attr]
    # the sender became a watcher of the node
    assert any(e.other.id == "imessage" for e in (await canvas.edges("watcher")).outgoing["watches"])
    await canvas.configure_node("imessage", status="done")
    assert (await canvas.message_send("again", to="imessage")).woke  # a resident node revives
    with pytest.raises(DocumentInvalidError):
        await canvas.message_send("  ", to="imessage")


async def test_a_finished_terminal_node_is_not_revived(canvas: Canvas) -> None:
    await canvas.spawn_node(node_id="t", status="done")
    receipt = await canvas.message_send("late", to="t")
    assert not receipt.woke and not receipt.coalesced
    assert (await canvas.inbox("t")).unread == 1


async def test_jobs_exit_or_are_killed_and_watchers_hear(canvas: Canvas) -> None:
    await canvas.spawn_node(node_id="n")
    job = await canvas.start_job("make test", actor="n", log_path="/tmp/job.log")
    assert job.status == "running" and job.started_by == "n"
    done = await canvas.job_exited(job.object.id, 2)
    assert done.status == "exited" and done.exit_code == 2
    with pytest.raises(CanvasError, match="already exited"):
        await canvas.job_killed(job.object.id)
    other = await canvas.start_job("sleep 100", actor="n")
    await canvas.job_killed(other.object.id)
    inbox = await canvas.inbox("n")
    assert [(e.event_type, e.level) for e in inbox.items][:2] == [("killed", 7), ("exited", 7)]
    await canvas.ensure_owner("user", "o1")
    await canvas.write("kept", owner="user:o1", preview=PREVIEW, body="b")
    with pytest.raises(OwnerInUseError, match="still owns"):
        await canvas.delete("user:o1")
    assert await canvas.count_objects(type="document") == 1


async def test_custom_objects_publish_declared_events_only(canvas: Canvas) -> None:
    await canvas.spawn_node(node_id="n")
    deploy = await canvas.register_custom_object("acme.deploy", name="prod deploy",
                                                 events={"started": 3, "failed": 9})
    await canvas.watch(deploy.object.id, watcher="n", min_level=5)
    await canvas.publish(deploy.object.id, "started")
    await canvas.publish(deploy.object.id, "failed", data={"why": "disk"})
    with pytest.raises(UndeclaredEventError, match="'exploded'"):
        await canvas.publish(deploy.object.id, "exploded")
    events = await canvas.events(deploy.object.id)
    assert [(e.type, e.level) for e in events] == [("failed", 9), ("started", 3), ("watched", 2), ("created", 3)]
    assert [(e.event_type, e.level) for e in (await canvas.inbox("n")).items] == [("failed", 9)]
    with pytest.raises(NameRefusedError):
        await canvas.register_custom_object("nodots", name="x", events={"a": 1})
    with pytest.raises(WatchPatternError):
        await canvas.register_custom_object("acme.x", name="x", events={"a": 11})
    assert await canvas.count_objects(type="custom") == 1


async def test_a_queue_receiver_hands_out_until_acknowledged(canvas: Canvas) -> None:
    await canvas.spawn_node(node_id="n")
    await canvas.write("doc", owner="n", preview=PREVIEW, body="b")
    queue = await canvas.register_custom_object("acme.listener", name="listener", events={"ping": 2},
                                                receiver="queue")
    await canvas.watch("n/doc", watcher=queue.object.id, pattern="edited")
    await canvas.read("n/doc", reader="n")
    await canvas.edit("n/doc", actor="n", body="c")
    await canvas.edit("n/doc", actor="n", body="d")
    got = await canvas.receive(queue.object.id)
    assert [e.event_type for e in got] == ["edited", "edited"]
    assert [e.id for e in await canvas.receive(queue.object.id)] == [e.id for e in got]  # not acked: again
    assert await canvas.ack(queue.object.id, [got[0].id]) == 1
    assert [e.id for e in await canvas.receive(queue.object.id)] == [got[1].id]
    with pytest.raises(CanvasError, match="no queue"):
        other = await canvas.register_custom_object("acme.other", name="o", events={"x": 1})
        await canvas.receive(other.object.id)


async def test_list_count_and_filters_page_by_name(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    await canvas.ensure_owner("user", "o2")
    for i in range(7):
        await canvas.write(f"n{i:02d}", owner="user:o1", preview=PREVIEW, body="b")
    await canvas.write("n99", owner="user:o2", preview=PREVIEW, body="b")
    await canvas.register_custom_object("acme.thing", name="v0_1", events={"x": 1})
    first = await canvas.list_objects(type="document", owner="user:o1", limit=3)
    second = await canvas.list_objects(type="document", owner="user:o1", limit=3, offset=3)
    assert [o.name for o in first.items] == ["n00", "n01", "n02"] and first.has_more
    assert [o.name for o in second.items] == ["n03", "n04", "n05"]
    assert await canvas.count_objects(type="document") == 8
    assert await canvas.count_objects(type="document", owner="user:o1", name_filter="0") == 7
    assert [o.name for o in (await canvas.list_objects(name_filter="0_")).items] == ["v0_1"]  # LIKE escaped
    assert await canvas.count_objects(type="user") == 2


async def test_a_node_takes_its_documents_unless_a_kept_document_links_to_them(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    await canvas.spawn_node(node_id="n", owner="user:o1")
    await canvas.spawn_node(node_id="w")
    scratch = await canvas.write("scratch", preview=PREVIEW, body="tmp", actor="n")
    finding = await canvas.write("finding", preview=PREVIEW, body="keep me", actor="n")
    await canvas.write("index", owner="user:o1", preview=PREVIEW, body="[[n/finding]]")
    await canvas.start_job("make", actor="n")
    await canvas.watch("n", watcher="w")
    await canvas.delete("n")
    kept = await canvas.get(finding.object.id)
    assert kept.owner_id == "user:o1" and kept.full_name == "o1/finding"
    assert await canvas.lint("o1/index") == []  # the link still resolves to the same id
    assert await canvas.count_objects(type="job") == 0
    with pytest.raises(ObjectNotFoundError):
        await canvas.get(scratch.object.id)
    with pytest.raises(ObjectNotFoundError):
        await canvas.get("n")
    assert (await canvas.inbox("w")).items[0].event_type == "deleted"


async def test_implicit_watches_skip_level_one_chatter_explicit_ones_can_take_it(canvas: Canvas) -> None:
    await canvas.spawn_node(node_id="writer")
    await canvas.spawn_node(node_id="reader")
    await canvas.spawn_node(node_id="auditor")
    await canvas.write("doc", owner="writer", preview=PREVIEW, body="b", actor="writer")
    await canvas.watch("writer/doc", watcher="auditor", min_level=1)
    await canvas.read("writer/doc", reader="reader")
    assert [e.event_type for e in (await canvas.inbox("writer")).items] == ["watched", "watched"]  # no "read"
    assert [e.event_type for e in (await canvas.inbox("auditor")).items] == ["watched", "read"]
