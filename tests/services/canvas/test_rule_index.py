"""The delivery rules filed by owner and event (``rule_index``) agree with ``documents`` after every
kind of write, on both engines: writes, rule and preview edits, deletes, owner changes, a write
rolled back or killed mid-transaction, writes by code that knows nothing of the table, and the
filling of a canvas opened without it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap

import pytest
from sqlalchemy import text

from services.canvas import Canvas, NameTakenError
from services.canvas.rule_index import MARK, TABLE

from .conftest import PREVIEW

pytestmark = pytest.mark.asyncio

Row = tuple[str, str, str, int, str, str]


def filed(canvas: Canvas) -> set[Row]:
    """What the table holds: ``(owner, event, document, position, rule as sorted JSON, preview)``."""
    with canvas.engine.connect() as conn:
        rows = conn.execute(text(f"SELECT owner_id, event, document_id, position, rule, preview FROM {TABLE}")).all()
    return {(o, e, d, p, json.dumps(json.loads(r), sort_keys=True), v) for o, e, d, p, r, v in rows}


def derived(canvas: Canvas) -> set[Row]:
    """What it should hold, worked out from ``documents`` and ``objects`` in Python."""
    with canvas.engine.connect() as conn:
        rows = conn.execute(text("SELECT d.object_id, o.owner_id, d.rules, d.preview FROM documents AS d "
                                 "JOIN objects AS o ON o.id = d.object_id")).all()
    out: set[Row] = set()
    for doc, owner, rules, preview in rows:
        for i, rule in enumerate(json.loads(rules or "[]")):
            if owner and isinstance(rule, dict) and isinstance(rule.get("on"), str):
                out.add((owner, rule["on"], doc, i, json.dumps(rule, sort_keys=True), preview))
    return out


def in_step(canvas: Canvas) -> set[Row]:
    held = filed(canvas)
    assert held == derived(canvas)
    return held


BOOT = {"on": "boot", "deliver": "preview"}
OPEN = {"on": "workspace-open", "deliver": "content", "if": {"mode": "orchestrator"}}


async def _doc_id(canvas: Canvas, ref: str) -> str:
    return (await canvas.get(ref)).id


async def test_writes_and_rule_edits_are_filed_by_owner_and_event(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "ada")
    await canvas.write("guide", owner="user:ada", preview=PREVIEW, rules=[BOOT, OPEN, BOOT | {"deliver": "name"}])
    await canvas.write("plain", owner="user:ada", preview=PREVIEW)
    guide = await _doc_id(canvas, "ada/guide")
    held = in_step(canvas)
    assert sorted((o, e, p) for o, e, d, p, _, _ in held if d == guide) == [
        ("user:ada", "boot", 0), ("user:ada", "boot", 2), ("user:ada", "workspace-open", 1)]
    doc = (await canvas.read("ada/guide")).document
    assert doc is not None
    await canvas.edit("ada/guide", base_revision=doc.revision, rules=[OPEN])  # a rule edit
    assert {(e, p) for _, e, _, p, _, _ in in_step(canvas)} == {("workspace-open", 0)}
    await canvas.edit("ada/guide", base_revision=doc.revision + 1, preview="When editing, read this because.")
    assert {v for *_, v in in_step(canvas)} == {"When editing, read this because."}  # a preview edit
    await canvas.edit("ada/guide", base_revision=doc.revision + 2, body="a new body")  # neither: rows stay
    assert len(in_step(canvas)) == 1
    await canvas.edit("ada/guide", base_revision=doc.revision + 3, rules=[])
    assert in_step(canvas) == set()


async def test_deletes_and_owner_changes_follow(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "ada")
    await canvas.ensure_owner("repo", "garden")
    await canvas.write("a", owner="user:ada", preview=PREVIEW, rules=[BOOT])
    await canvas.write("b", owner="user:ada", preview=PREVIEW, rules=[BOOT])
    await canvas.move("ada/a", owner="repo:garden")                 # owner changes
    await canvas.move("garden/a", to="renamed/a")                   # name only: the owner stays
    assert {o for o, *_ in in_step(canvas)} == {"repo:garden", "user:ada"}
    await canvas.delete("ada/b")
    assert {d for _, _, d, *_ in in_step(canvas)} == {await _doc_id(canvas, "garden/renamed/a")}
    # a node's documents: deleted with it, or (when another owner's document links to one) moved to its owner
    await canvas.spawn_node(node_id="n1", owner="user:ada")
    await canvas.write("kept", owner="n1", preview=PREVIEW, rules=[BOOT])
    await canvas.write("gone", owner="n1", preview=PREVIEW, rules=[BOOT])
    await canvas.write("pointer", owner="repo:garden", preview=PREVIEW, body="see [[n1/kept]]")
    kept = await _doc_id(canvas, "n1/kept")
    await canvas.delete("n1")
    assert ("user:ada", "boot", kept) in {(o, e, d) for o, e, d, *_ in in_step(canvas)}
    context = await canvas.boot_context(await _any_node(canvas, "user:ada"))
    assert "ada/kept" in [i.document.full_name for i in context.items]


async def _any_node(canvas: Canvas, owner: str) -> str:
    node = await canvas.spawn_node(node_id="n2", owner=owner)
    return node.object.id


async def test_a_refused_batch_files_nothing(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "ada")
    await canvas.write("taken", owner="user:ada", preview=PREVIEW, rules=[BOOT])
    before = in_step(canvas)
    with pytest.raises(NameTakenError):  # the first item is written, then the second is refused: all rolled back
        await canvas.write_many([{"name": "first", "owner": "user:ada", "preview": PREVIEW, "rules": [BOOT]},
                                 {"name": "taken", "owner": "user:ada", "preview": PREVIEW, "rules": [BOOT]}])
    assert in_step(canvas) == before


KILLED = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from sqlalchemy import text
    from services.canvas import Canvas
    from services.canvas.engine import write_session
    async def main():
        canvas = await Canvas.open(sys.argv[1])
        with write_session(canvas.engine) as s:
            s.execute(text("UPDATE documents SET rules = :r WHERE object_id = :d"),
                          {"r": '[{"on": "workspace-open"}]', "d": sys.argv[2]})
            s.execute(text("UPDATE objects SET owner_id = 'user:grace' WHERE id = :d"), {"d": sys.argv[2]})
            s.flush()
            print("written", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)   # before the commit
    asyncio.run(main())
    """
)


async def test_a_writer_killed_between_two_writes_leaves_the_table_as_before(canvas_url: str, clock) -> None:
    canvas = await Canvas.open(canvas_url, clock=clock)
    await canvas.ensure_owner("user", "ada")
    await canvas.ensure_owner("user", "grace")
    await canvas.write("a", owner="user:ada", preview=PREVIEW, rules=[BOOT])
    before = in_step(canvas)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", KILLED, str(canvas_url),
                                                await _doc_id(canvas, "ada/a"), stdout=asyncio.subprocess.PIPE,
                                                env={**os.environ, "PYTHONPATH": os.getcwd()})
    out, _ = await proc.communicate()
    assert out.strip() == b"written" and proc.returncode == -signal.SIGKILL
    assert in_step(canvas) == before
    await canvas.close()


async def test_writes_by_code_that_knows_nothing_of_it_are_filed(canvas: Canvas) -> None:
    """An older workbench, a bulk load or a tool writing ``documents`` directly: the triggers file them."""
    await canvas.ensure_owner("user", "ada")
    await canvas.write("a", owner="user:ada", preview=PREVIEW)
    doc = await _doc_id(canvas, "ada/a")
    with canvas.engine.begin() as conn:
        conn.execute(text("UPDATE documents SET rules = :r WHERE object_id = :d"),
                     {"r": json.dumps([BOOT, {"on": "spawn"}, {"no": "event"}]), "d": doc})
    assert {(e, p) for _, e, _, p, _, _ in in_step(canvas)} == {("boot", 0), ("spawn", 1)}
    with canvas.engine.begin() as conn:  # rules text that is no list files nothing, and refuses no write
        conn.execute(text("UPDATE documents SET rules = 'not json' WHERE object_id = :d"), {"d": doc})
    assert filed(canvas) == set()


async def test_a_canvas_opened_without_the_table_is_filled_once(canvas_url: str, clock) -> None:
    first = await Canvas.open(canvas_url, clock=clock)
    await first.create_profile("work", purview=[("garden", "preview")])
    await first.ensure_owner("repo", "garden")
    for i in range(30):
        await first.write(f"doc-{i}", owner="repo:garden", preview=PREVIEW,
                          rules=[BOOT] if i % 3 else [OPEN, BOOT | {"deliver": "content"}])
    await first.spawn_node(node_id="n1", profile="work", kind="developer")
    expected = await first.boot_context("n1")
    with first.engine.begin() as conn:  # as a canvas file from before the table
        for suffix, table in (("insert", "documents"), ("update", "documents"), ("delete", "documents"),
                              ("owner", "objects")):
            on = f" ON {table}" if first.engine.dialect.name == "postgresql" else ""
            conn.execute(text(f"DROP TRIGGER tr_delivery_rules_{suffix}{on}"))
        conn.execute(text(f"DROP TABLE {TABLE}"))
        conn.execute(text("DELETE FROM canvas_meta WHERE key = :k"), {"k": MARK})
    await first.close()
    again = await Canvas.open(canvas_url, clock=clock)
    held = in_step(again)
    assert len(held) == 40
    assert await again.boot_context("n1") == expected  # the same answer, item for item
    await again.write("late", owner="repo:garden", preview=PREVIEW, rules=[BOOT])  # and kept in step after
    assert len(in_step(again)) == 41
    await again.close()
    third = await Canvas.open(canvas_url, clock=clock)  # filled once: a later open leaves it be
    with third.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM canvas_meta WHERE key = :k"), {"k": MARK}).scalar() == 1
    assert len(in_step(third)) == 41
    await third.close()


async def test_driver_rows_see_what_the_session_has_not_yet_written(canvas: Canvas) -> None:
    """Rows read straight from the driver include the session's pending ORM writes, as the session's
    own statements do (it flushes first), and a session that holds its flushes back is respected."""
    from sqlmodel import Session

    from services.canvas.models import ObjectRow
    from services.canvas.rule_index import driver_rows

    with Session(canvas.engine) as session:
        session.add(ObjectRow(id="pending-1", type="repo", name="pending", created_at=0.0, updated_at=0.0))
        assert driver_rows(session, "SELECT id FROM objects WHERE id = ?", ["pending-1"]) == [("pending-1",)]
        with session.no_autoflush:
            session.add(ObjectRow(id="pending-2", type="repo", name="pending2", created_at=0.0, updated_at=0.0))
            assert driver_rows(session, "SELECT id FROM objects WHERE id = ?", ["pending-2"]) == []
        session.rollback()
    with Session(canvas.engine) as session:
        assert driver_rows(session, "SELECT id FROM objects WHERE id LIKE 'pending-%'", []) == []  # nothing kept


async def test_a_documents_rules_for_an_event_come_back_in_their_lists_order(canvas: Canvas) -> None:
    """Several rules of one document for one event are read in the order the document lists them,
    after edits that reorder them (the statement itself asks for no order)."""
    from sqlmodel import Session

    from services.canvas.rule_index import rules_by_document

    await canvas.ensure_owner("user", "ada")
    levels = ["name", "content", "preview"]
    await canvas.write("guide", owner="user:ada", preview=PREVIEW,
                       rules=[BOOT | {"deliver": level} for level in levels] + [OPEN])
    await canvas.write("plain", owner="user:ada", preview=PREVIEW, rules=[BOOT])
    guide = await _doc_id(canvas, "ada/guide")
    for order in (levels, levels[::-1], ["content", "name", "preview"]):
        doc = (await canvas.read("ada/guide")).document
        assert doc is not None
        await canvas.edit("ada/guide", base_revision=doc.revision, rules=[OPEN] + [BOOT | {"deliver": x} for x in order])
        with Session(canvas.engine) as session:
            found = rules_by_document(session, ["user:ada"], "boot")
        assert [json.loads(rule)["deliver"] for rule in found[guide][0]] == order
        assert len(found) == 2 and found[guide][1] == PREVIEW
