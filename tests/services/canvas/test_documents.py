"""Documents: write, read, edit from a revision, move, history, delete, names, links, reports."""

from __future__ import annotations

import pytest

from services.canvas import (Canvas, DocumentInvalidError, NameRefusedError, NameTakenError, ObjectNotFoundError,
                             ReaderView, StaleRevisionError)

from .conftest import PREVIEW


@pytest.fixture
async def world(canvas: Canvas) -> Canvas:
    await canvas.ensure_owner("user", "o1")
    await canvas.ensure_owner("repo", "workbench")
    await canvas.spawn_node(node_id="n1", kind="developer")
    await canvas.spawn_node(node_id="n2")
    return canvas


async def test_write_read_and_history(world: Canvas, seen) -> None:
    doc = await world.write("notes/a", owner="user:o1", preview=PREVIEW, body="one", actor="n1",
                            rules=[{"on": "boot", "deliver": "preview"}])
    assert doc.object.full_name == "o1/notes/a" and doc.revision == 1 and doc.rules[0]["on"] == "boot"
    assert any(c.kind == "document.written" and c.source == "canvas" and c.id == doc.object.id for c in seen)
    detail = await world.read("o1/notes/a", reader="n2")
    assert detail.document is not None and detail.document.body == "one"
    assert {w.watcher_id for w in detail.watchers} == {"n1", "n2"}  # writing and reading make watchers
    assert detail.events[0].type in ("watched", "read")
    await world.edit("o1/notes/a", actor="n2", body="two")
    history = await world.history("o1/notes/a")
    assert [(r.revision, r.body, r.author) for r in history] == [(2, "two", "n2"), (1, "one", "n1")]


async def test_the_writer_is_told_of_a_later_edit_by_another(world: Canvas) -> None:
    await world.write("notes/a", owner="user:o1", preview=PREVIEW, body="one", actor="n1")
    await world.read("o1/notes/a", reader="n2")
    await world.edit("o1/notes/a", actor="n2", body="two")
    inbox = await world.inbox("n1")
    assert [e.event_type for e in inbox.items][:1] == ["edited"]
    assert all(e.event_type != "edited" for e in (await world.inbox("n2")).items)  # not told of own edit


async def test_write_defaults_to_the_writing_node_as_owner(world: Canvas) -> None:
    doc = await world.write("plan", preview=PREVIEW, body="x", actor="n1")
    assert doc.object.owner_id == "n1" and doc.object.full_name == "n1/plan"


async def test_a_document_without_a_preview_is_refused_and_nothing_is_written(world: Canvas, seen) -> None:
    await world.write("kept", owner="user:o1", preview=PREVIEW, body="kept")
    before = len(seen)
    for preview in ("", "   ", None):
        with pytest.raises(DocumentInvalidError, match="preview"):
            await world.write("notes/x", owner="user:o1", preview=preview, body="b")  # type: ignore[arg-type]
    with pytest.raises(DocumentInvalidError, match="one line"):
        await world.write("notes/x", owner="user:o1", preview="When a,\nread this", body="b")
    assert await world.count_objects(type="document") == 1
    assert (await world.search("kept"))[0].object.name == "kept"
    assert len(seen) == before


async def test_an_edit_from_a_stale_revision_is_refused_and_keeps_the_text(world: Canvas) -> None:
    await world.write("notes/a", owner="user:o1", preview=PREVIEW, body="base", actor="n1")
    await world.read("o1/notes/a", reader="n2")  # n2 read revision 1
    await world.edit("o1/notes/a", actor="n1", body="n1's change")  # now revision 2
    with pytest.raises(StaleRevisionError) as refused:
        await world.edit("o1/notes/a", actor="n2", body="n2's change")
    assert refused.value.base_revision == 1 and refused.value.current_revision == 2
    assert refused.value.body == "n2's change"
    assert "revision 1" in str(refused.value) and "o1/notes/a" in str(refused.value)
    doc = (await world.read("o1/notes/a")).document
    assert doc is not None and doc.body == "n1's change" and doc.revision == 2
    assert [r.revision for r in await world.history("o1/notes/a")] == [2, 1]
    with pytest.raises(StaleRevisionError):
        await world.edit("o1/notes/a", base_revision=1, body="explicit stale")
    with pytest.raises(StaleRevisionError, match="not read"):
        await world.edit("o1/notes/a", body="never read")


@pytest.mark.parametrize("name", ["../o2/x", "/etc/passwd", "a//b", "a/./b", "a/../../b", "a\\b", "", "a/b/", "x\x00y",
                                  "has space", "a/[[b]]"])
async def test_a_name_that_escapes_its_namespace_is_refused(world: Canvas, name: str) -> None:
    with pytest.raises(NameRefusedError):
        await world.write(name, owner="user:o1", preview=PREVIEW, body="b")
    assert await world.count_objects(type="document") == 0


async def test_names_taken_kinds_privacy_and_rules_are_checked(world: Canvas) -> None:
    await world.write("a", owner="user:o1", preview=PREVIEW, body="b")
    with pytest.raises(NameTakenError, match="o1/a"):
        await world.write("a", owner="user:o1", preview=PREVIEW, body="other")
    with pytest.raises(DocumentInvalidError, match="repo owns only public"):
        await world.write("secret", owner="repo:workbench", preview=PREVIEW, body="b", privacy="private")
    with pytest.raises(DocumentInvalidError, match="push"):
        await world.write("r", owner="user:o1", preview=PREVIEW, body="b", kind="report")
    with pytest.raises(DocumentInvalidError, match="kind"):
        await world.write("r", owner="user:o1", preview=PREVIEW, body="b", kind="memory")
    with pytest.raises(DocumentInvalidError, match="'on'"):
        await world.write("r", owner="user:o1", preview=PREVIEW, body="b", rules=[{"on": "sometimes"}])
    with pytest.raises(DocumentInvalidError, match="unknown keys"):
        await world.write("r", owner="user:o1", preview=PREVIEW, body="b", rules=[{"on": "boot", "when": 1}])
    assert [o.name for o in (await world.list_objects(type="document")).items] == ["a"]
    assert (await world.read("o1/a")).document.body == "b"  # type: ignore[union-attr]


async def test_links_make_edges_and_dangling_links_heal(world: Canvas) -> None:
    a = await world.write("a", owner="user:o1", preview=PREVIEW, body="see [[b]] and [[o1/c|the c]]")
    assert a.links == (("b", None), ("o1/c", None))
    b = await world.write("b", owner="user:o1", preview=PREVIEW, body="b")
    c = await world.write("c", owner="user:o1", preview=PREVIEW, body="c")
    a = (await world.read(a.object.id)).document  # type: ignore[assignment]
    assert a.links == (("b", b.object.id), ("o1/c", c.object.id))
    around = await world.edges(a.object.id)
    assert {e.other.id for e in around.outgoing["links-to"]} == {b.object.id, c.object.id}
    assert around.counts["out:links-to"] == 2
    assert (await world.edges(b.object.id)).incoming["links-to"][0].other.id == a.object.id


async def test_move_keeps_id_and_links(world: Canvas) -> None:
    b = await world.write("b", owner="user:o1", preview=PREVIEW, body="b")
    a = await world.write("a", owner="user:o1", preview=PREVIEW, body="[[b]]")
    moved = await world.move("o1/b", to="notes/b", owner="repo:workbench")
    assert moved.object.id == b.object.id and moved.object.full_name == "workbench/notes/b"
    assert (await world.read(a.object.id)).document.links == (("b", b.object.id),)  # type: ignore[union-attr]
    assert await world.lint(a.object.id) == []
    with pytest.raises(ObjectNotFoundError):
        await world.get("o1/b")
    await world.write("c", owner="user:o1", preview=PREVIEW, body="c")
    with pytest.raises(NameTakenError):
        await world.move("o1/c", to="notes/b", owner="repo:workbench")
    with pytest.raises(NameRefusedError):
        await world.move("o1/c", to="../c")
    assert (await world.get("o1/c")).name == "c"


async def test_delete_tells_watchers_and_leaves_links_dangling(world: Canvas) -> None:
    b = await world.write("b", owner="user:o1", preview=PREVIEW, body="b", actor="n1")
    a = await world.write("a", owner="user:o1", preview=PREVIEW, body="[[b]]")
    await world.delete("o1/b", actor="n2")
    assert (await world.inbox("n1")).items[0].event_type == "deleted"
    with pytest.raises(ObjectNotFoundError):
        await world.read(b.object.id)
    findings = await world.lint(a.object.id)
    assert [f.rule for f in findings] == ["dangling-link"]


async def test_bare_names_resolve_in_the_readers_view_in_order(world: Canvas) -> None:
    await world.ensure_owner("profile", "work")
    await world.ensure_owner("app", "doppel")
    await world.ensure_owner("app", "plug")
    await world.ensure_owner("repo", "near")
    for owner in ("app:crtr", "app:plug", "user:o1", "app:doppel", "profile:work", "repo:workbench", "repo:near", "n1"):
        await world.write("guide", owner=owner, preview=PREVIEW, body=owner)
    full = ReaderView(node="n1", repos=("near", "workbench"), profile="work", app="doppel", person="o1",
                      plugins=("plug",))
    order = ["n1", "repo:near", "repo:workbench", "profile:work", "app:doppel", "user:o1", "app:plug", "app:crtr"]
    for owner in order:
        got = await world.get("guide", view=full)
        assert got.owner_id == owner
        await world.delete(got.id)
    with pytest.raises(ObjectNotFoundError):
        await world.get("guide", view=full)


async def test_a_push_creates_a_report_under_the_node(world: Canvas) -> None:
    await world.read("n1", reader="n2")
    report = await world.push_report("n1", label="final", preview=PREVIEW, body="done")
    assert report.kind == "report" and report.object.full_name.startswith("n1/reports/")
    assert report.object.full_name.endswith("-final")
    inbox = await world.inbox("n2")
    assert any(e.event_type == "report.update" and e.level == 6 for e in inbox.items)


async def test_read_models_are_frozen_plain_data_safe_after_the_session(world: Canvas) -> None:
    import dataclasses

    from sqlmodel import SQLModel

    doc = await world.write("a", owner="user:o1", preview=PREVIEW, body="b", actor="n1")
    detail = await world.read("o1/a", reader="n2")
    for model in (doc, detail, detail.object, detail.document, detail.revisions[0], detail.events[0],
                  detail.watchers[0], await world.inbox("n1"), await world.edges("o1/a")):
        assert dataclasses.is_dataclass(model) and not isinstance(model, SQLModel)
    with pytest.raises(dataclasses.FrozenInstanceError):
        doc.body = "changed"  # type: ignore[misc]


async def test_a_batch_write_gives_each_document_what_a_single_write_gives(world: Canvas, seen) -> None:
    await world.write("target", owner="user:o1", preview=PREVIEW, body="x")
    before = len(seen)
    views = await world.write_many([
        {"name": "batch/a", "owner": "user:o1", "preview": PREVIEW, "body": "alpha links [[o1/target]]"},
        {"name": "batch/b", "owner": "repo:workbench", "preview": PREVIEW, "body": "beta", "summary": "s"},
        {"name": "batch/c", "preview": PREVIEW, "body": "gamma links [[o1/batch/later]]"},
    ], actor="n1")
    assert [v.object.full_name for v in views] == ["o1/batch/a", "workbench/batch/b", "n1/batch/c"]
    assert all(v.revision == 1 for v in views) and views[1].summary == "s"
    assert views[0].links == (("o1/target", (await world.get("o1/target")).id),)
    written = [c for c in seen[before:] if c.kind == "document.written"]
    assert [c.id for c in written] == [v.object.id for v in views]  # published after the commit, in order
    for view in views:
        detail = await world.read(view.object.id)
        assert detail.events[-1].type == "created" and {w.watcher_id for w in detail.watchers} == {"n1"}
        assert [r.revision for r in await world.history(view.object.id)] == [1]
    assert [h.object.name for h in await world.search("beta")] == ["batch/b"]
    later = await world.write("batch/later", owner="user:o1", preview=PREVIEW, body="y")
    assert (await world.read("n1/batch/c")).document.links == (("o1/batch/later", later.object.id),)  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", ["taken", "twice", "preview", "owner"])
async def test_a_refused_item_in_a_batch_writes_nothing_of_the_batch(world: Canvas, seen, bad: str) -> None:
    await world.write("kept", owner="user:o1", preview=PREVIEW, body="kept")
    items = [{"name": "new/a", "owner": "user:o1", "preview": PREVIEW, "body": "fresh words"},
             {"name": "new/b", "owner": "user:o1", "preview": PREVIEW, "body": "fresh words"}]
    item = {"taken": {"name": "kept"}, "twice": {"name": "new/a"}, "preview": {"preview": "   "},
            "owner": {"owner": "ghost/node"}}[bad]
    items.append({"name": "new/c", "owner": "user:o1", "preview": PREVIEW, "body": "fresh words", **item})
    before, objects = len(seen), await world.count_objects()
    error = NameTakenError if bad in ("taken", "twice") else (ObjectNotFoundError if bad == "owner" else DocumentInvalidError)
    with pytest.raises(error, match="item 2" if bad != "owner" else "ghost"):
        await world.write_many(items)
    assert await world.count_objects() == objects and len(seen) == before
    assert await world.search("fresh") == [] and (await world.read("o1/kept")).document.body == "kept"  # type: ignore[union-attr]


async def test_a_batch_that_is_too_large_or_malformed_is_refused_before_any_work(world: Canvas) -> None:
    from services.canvas.service import WRITE_MANY_LIMIT

    too_many = [{"name": f"n/{i}", "owner": "user:o1", "preview": PREVIEW} for i in range(WRITE_MANY_LIMIT + 1)]
    with pytest.raises(DocumentInvalidError, match="at most"):
        await world.write_many(too_many)
    for odd in ([{"name": "x", "preview": PREVIEW, "colour": "red"}], [{"name": "x"}], ["x"]):
        with pytest.raises(DocumentInvalidError, match="item 0"):
            await world.write_many(odd)  # type: ignore[arg-type]
    assert await world.count_objects(type="document") == 0
    assert await world.write_many([]) == []
