"""Text no store can hold (lone surrogates, NUL): refused at every canvas entry point, repaired and
flagged when it comes from a run."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import text

from services.canvas import (Canvas, NameRefusedError, NameTextRefusedError, ReaderView, RunBridge,
                             TextRefusedError)
from services.canvas.models import TABLES
from services.changes import Change, ChangeFeed
from services.cloud import FakeCloud, generate_private_key_pem
from services.desk.embedded import embedded_desk
from services.follower import RunFollower
from services.served.control import ControlApp
from services.sdk import MemoryConnectionStore, OAuth2Client

from .conftest import PREVIEW

Call = Callable[[Canvas, dict[str, str], str], Awaitable[Any]]

ENTRY_POINTS: dict[str, Call] = {
    "ensure_owner name": lambda c, w, bad: c.ensure_owner("user", "o2", name=bad),
    "list_objects filter": lambda c, w, bad: c.list_objects(name_filter=bad),
    "count_objects filter": lambda c, w, bad: c.count_objects(name_filter=bad),
    "count_by_type types": lambda c, w, bad: c.count_by_type(["document", bad]),
    "get ref": lambda c, w, bad: c.get(bad),
    "get view": lambda c, w, bad: c.get("a", view=ReaderView(person=bad)),
    "read reader": lambda c, w, bad: c.read("o1/a", reader=bad),
    "search query": lambda c, w, bad: c.search("ok " + bad),
    "watch pattern": lambda c, w, bad: c.watch("o1/a", watcher="n1", pattern=bad),
    "unwatch ref": lambda c, w, bad: c.unwatch(bad, watcher="n1"),
    "edges ref": lambda c, w, bad: c.edges(bad),
    "events ref": lambda c, w, bad: c.events(bad),
    "record_event data": lambda c, w, bad: c.record_event("o1/a", "noted", data={"k": [bad]}),
    "record_event summary": lambda c, w, bad: c.record_event("o1/a", "noted", summary=bad),
    "delete ref": lambda c, w, bad: c.delete(bad),
    "write name": lambda c, w, bad: c.write("b" + bad, owner="user:o1", preview=PREVIEW, body="b"),
    "write body": lambda c, w, bad: c.write("b", owner="user:o1", preview=PREVIEW, body="b" + bad),
    "write preview": lambda c, w, bad: c.write("b", owner="user:o1", preview=PREVIEW + bad, body="b"),
    "write summary": lambda c, w, bad: c.write("b", owner="user:o1", preview=PREVIEW, body="b", summary=bad),
    "write rule key": lambda c, w, bad: c.write("b", owner="user:o1", preview=PREVIEW, body="b",
                                                rules=[{"on": "boot", "if": {bad: "x"}}]),
    "write_many body": lambda c, w, bad: c.write_many([{"name": "b", "owner": "user:o1", "preview": PREVIEW},
                                                       {"name": "c", "owner": "user:o1", "preview": PREVIEW,
                                                        "body": "c" + bad}]),
    "edit body": lambda c, w, bad: c.edit("o1/a", base_revision=1, body=bad),
    "move to": lambda c, w, bad: c.move("o1/a", to="c" + bad),
    "history ref": lambda c, w, bad: c.history(bad),
    "push_report body": lambda c, w, bad: c.push_report("n1", label="final", preview=PREVIEW, body=bad),
    "lint owner": lambda c, w, bad: c.lint(owner=bad),
    "spawn_node name": lambda c, w, bad: c.spawn_node(name=bad),
    "configure_node activity": lambda c, w, bad: c.configure_node("n1", activity=bad),
    "begin_turn ref": lambda c, w, bad: c.begin_turn(bad),
    "end_turn status": lambda c, w, bad: c.end_turn("n1", status=bad),
    "install_plugin plugin": lambda c, w, bad: c.install_plugin("p" + bad, scope="user:o1"),
    "uninstall_plugin scope": lambda c, w, bad: c.uninstall_plugin("p", scope=bad),
    "plugins scope": lambda c, w, bad: c.plugins(bad),
    "message_send body": lambda c, w, bad: c.message_send("hello " + bad, to="n1"),
    "message_send sender": lambda c, w, bad: c.message_send("hello", to="n1", sender=bad),
    "inbox owner": lambda c, w, bad: c.inbox(bad),
    "mark_read owner": lambda c, w, bad: c.mark_read(bad),
    "unread_counts owners": lambda c, w, bad: c.unread_counts(["o1", bad]),
    "object_columns ids": lambda c, w, bad: c.object_columns(["o1", bad]),
    "edge_rows ids": lambda c, w, bad: c.edge_rows(["o1", bad]),
    "inbox_kept after_owner": lambda c, w, bad: c.inbox_kept(after_owner=bad),
    "start_job command": lambda c, w, bad: c.start_job("echo " + bad, actor="n1"),
    "start_job log path": lambda c, w, bad: c.start_job("ls", actor="n1", log_path="/tmp/" + bad),
    "job_exited ref": lambda c, w, bad: c.job_exited(bad, 0),
    "job_killed ref": lambda c, w, bad: c.job_killed(bad),
    "register_custom_object name": lambda c, w, bad: c.register_custom_object("acme.deploy", name=bad,
                                                                              events={"done": 5}),
    "register_custom_object event": lambda c, w, bad: c.register_custom_object("acme.deploy", name="d",
                                                                               events={"done" + bad: 5}),
    "publish data": lambda c, w, bad: c.publish(w["custom"], "done", data={"x": [bad]}),
    "receive ref": lambda c, w, bad: c.receive(bad),
    "ack ref": lambda c, w, bad: c.ack(bad, [1]),
    "create_listener topic": lambda c, w, bad: c.create_listener("pricing" + bad, owner="user:o1", domain="prices"),
    "create_listener exclusions": lambda c, w, bad: c.create_listener("pricing", owner="user:o1", domain="prices",
                                                                      exclusions=["taxes", bad]),
    "approve_insight principle": lambda c, w, bad: c.approve_insight("o1/insights/tax", "o1/" + bad),
    "register_custom_object url": lambda c, w, bad: c.register_custom_object("acme.deploy", name="d", events={"done": 5},
                                                                             receiver="url", url="https://x/" + bad),
    "receiver_attempts ref": lambda c, w, bad: c.receiver_attempts(bad),
    "reader_view node": lambda c, w, bad: c.reader_view(bad),
    "boot_context node": lambda c, w, bad: c.boot_context(bad),
    "why_not document": lambda c, w, bad: c.why_not("n1", bad),
    "who_loads document": lambda c, w, bad: c.who_loads(bad),
    "create_profile name": lambda c, w, bad: c.create_profile("p" + bad),
    "profile ref": lambda c, w, bad: c.profile(bad),
    "set_profile_project project": lambda c, w, bad: c.set_profile_project("p", "x" + bad, "content"),
    "rename_profile name": lambda c, w, bad: c.rename_profile("p", "q" + bad),
    "set_default_profile directory": lambda c, w, bad: c.set_default_profile("/x" + bad, None),
    "default_profile directory": lambda c, w, bad: c.default_profile("/x" + bad),
}
"""One call per way text enters the canvas, each carrying ``bad`` somewhere."""


@pytest.fixture
async def world(canvas: Canvas) -> dict[str, str]:
    await canvas.ensure_owner("user", "o1")
    await canvas.spawn_node(node_id="n1")
    await canvas.write("a", owner="user:o1", preview=PREVIEW, body="ok")
    custom = await canvas.register_custom_object("acme.deploy", name="deploy", events={"done": 5}, receiver="queue")
    await canvas.create_listener("tax", owner="user:o1", domain="taxes")
    return {"custom": custom.object.id}


def signature(canvas: Canvas) -> dict[str, int]:
    """Rows per canvas table (and in the search index): equal before and after means nothing was written."""
    with canvas.engine.connect() as conn:
        counts = {t.name: int(conn.execute(text(f"SELECT count(*) FROM {t.name}")).scalar_one()) for t in TABLES}
        index = "object_fts" if conn.dialect.name == "sqlite" else "object_search"
        counts[index] = int(conn.execute(text(f"SELECT count(*) FROM {index}")).scalar_one())
    return counts


BAD_TEXT = {"lone-low": chr(0xDC80), "lone-high": chr(0xD83D), "nul": chr(0)}
"""Text no store can hold: a lone low surrogate, a lone high surrogate, NUL."""


async def test_lone_surrogates_and_nul_are_refused_at_every_entry_point(canvas: Canvas, world: dict[str, str],
                                                                        seen: list[Change]) -> None:
    """Every entry point of the table, with each bad text: refused with ``text_refused``, and the
    canvas (each table, the search index) and the change feed exactly as they were. One canvas per
    engine serves the whole table: each case is judged against the state just before it, and every
    failing case is named."""
    failures = []
    for entry in sorted(ENTRY_POINTS):
        for label, bad in BAD_TEXT.items():
            case = f"{entry} [{label}]"
            before, published = signature(canvas), len(seen)
            try:
                await ENTRY_POINTS[entry](canvas, world, bad)
            except TextRefusedError as refused:
                if refused.code != "text_refused":
                    failures.append(f"{case}: code {refused.code!r}")
                if ("NUL" if bad == "\x00" else "lone surrogate") not in str(refused):
                    failures.append(f"{case}: the error does not name the text: {refused}")
            except Exception as other:  # noqa: BLE001 - any other answer is a failure of this case, named below
                failures.append(f"{case}: {type(other).__name__}: {other}")
            else:
                failures.append(f"{case}: accepted")
            if signature(canvas) != before or len(seen) != published:
                failures.append(f"{case}: something was written or announced")
            if (await canvas.read("o1/a")).document.body != "ok":
                failures.append(f"{case}: the document o1/a changed")
    assert not failures, "\n".join(failures)
    assert len(ENTRY_POINTS) * len(BAD_TEXT) >= 170  # the whole table ran


async def test_every_public_canvas_method_checks_its_text() -> None:
    public = {name for name, member in vars(Canvas).items()
              if not name.startswith("_") and inspect.iscoroutinefunction(member)}
    assert public and all(getattr(Canvas, name).__text_checked__ for name in public)
    covered = {label.split(" ")[0] for label in ENTRY_POINTS}
    takes_nothing = {name for name in public if len(inspect.signature(getattr(Canvas, name)).parameters) == 1}
    assert "close" in takes_nothing
    assert public - covered == takes_nothing  # the table above exercises every one that takes anything


async def test_a_bad_name_is_both_refused_text_and_a_refused_name(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    with pytest.raises(NameTextRefusedError) as caught:
        await canvas.write("x\x00y", owner="user:o1", preview=PREVIEW, body="b")
    assert isinstance(caught.value, NameRefusedError) and caught.value.field == "name"
    with pytest.raises(TextRefusedError) as body:
        await canvas.write("x", owner="user:o1", preview=PREVIEW, body="\udc80")
    assert not isinstance(body.value, NameRefusedError) and body.value.field == "body"


RUN = "run_bad_text"


async def test_bad_run_text_is_repaired_and_flagged_by_the_bridge(canvas: Canvas) -> None:
    bridge = RunBridge(canvas)
    dto = {"id": RUN, "user_id": "user:o1", "name": "half \ud83d emoji", "status": "idle", "activity": None,
           "params": {"prompt": "p\udc80"}, "outcome": None,
           "pending": [{"id": "m1", "text": "hi \ud83d\ude00 and \udc80\x00", "delivered": False}]}
    node = await bridge.apply_run(dto)
    assert node.object.name == "half \ufffd emoji"
    page = await canvas.inbox(RUN)
    assert [e.body for e in page.items] == ["hi \U0001f600 and \ufffd"]  # a split pair is joined back
    flags = [e for e in await canvas.events(RUN) if e.type == "text.repaired"]
    assert len(flags) == 1 and "name" in flags[0].data["in"] and "message m1" in flags[0].data["in"]
    await bridge.apply_run(dto)  # the same DTO again stores nothing new and flags nothing new
    assert len([e for e in await canvas.events(RUN) if e.type == "text.repaired"]) == 1
    done = {"id": "2", "seq": 2, "run_id": RUN, "node_id": RUN, "type": "node.output_text.done",
            "text": "answer \udc80", "entry_id": "e\x001"}
    await bridge.apply_event(done)
    recorded = next(e for e in await canvas.events(RUN) if e.type == "node.output_text.done")
    assert recorded.data["text"] == "answer \ufffd" and recorded.data["text_repaired"] is True
    flags = [e for e in await canvas.events(RUN) if e.type == "text.repaired"]
    assert flags[0].data == {"in": "node.output_text.done", "seq": 2}


@pytest.mark.parametrize("caught_up", [False, True], ids=["live", "caught-up"])
async def test_the_follower_carries_runs_with_bad_text_into_the_canvas(canvas: Canvas, caught_up: bool) -> None:
    """Live, one change after another; caught up, the bad text among clean events of one batch (whose
    text is checked at once, then each event's again when the batch's check finds some)."""
    feed = ChangeFeed()
    cloud = FakeCloud(client_id="doppel", changes=feed)
    store = MemoryConnectionStore()
    await cloud.connect(store, "user:o1", scopes=["crtr:llm", "crtr:act"])
    oauth = OAuth2Client(client_id="doppel", issuer=cloud.issuer, transport=cloud.transport,
                         private_key=generate_private_key_pem(), redirect_uri="https://app.test/callback",
                         store=store)
    client = await oauth.client("user:o1")
    desk = embedded_desk(cloud, ControlApp(cloud, "", change_log=False), feed, clock=cloud.clock)
    follower = RunFollower(desk, feed, bridge=RunBridge(canvas))
    if not caught_up:
        await follower.start()
    try:
        run = await client.runs.start(prompt="hello")
        fake = cloud.runs.get(run.id)
        fake.reply("a split emoji \ud83d from a JavaScript app")
        fake.emit("node.message.received", {"message": {"id": "m9", "text": "nul\x00 and \udc80"}, "start_turn": False})
        fake.emit("run.renamed", {"name": "renamed \udfff"})
        fake.reply("after the bad text, still followed")
        if caught_up:
            await follower.start()
        await follower.idle()
    finally:
        await follower.stop()
    assert list(follower.errors) == []
    node = await canvas.read(run.id)
    assert node.node is not None and node.object.name == "renamed \ufffd"
    events = await canvas.events(run.id, limit=200)
    texts = [e.data.get("text") for e in events if e.type == "node.output_text.done"]
    assert texts == ["after the bad text, still followed", "a split emoji \ufffd from a JavaScript app"]
    assert [e.body for e in (await canvas.inbox(run.id)).items if e.kind == "message"] == ["nul and \ufffd"]
    assert {e.data["in"] for e in events if e.type == "text.repaired"} >= {
        "node.output_text.done", "node.message.received", "run.renamed"}
