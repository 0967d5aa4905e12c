"""What the canvas must take as given, on both engines: a node's kind changed live, a rule's ``if``
refused with its field named when it could never match (and reported by lint when already stored),
and a renamed owner's old name freed for reuse and no longer answering."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import event, text

from services.canvas import Canvas, CanvasError, DocumentInvalidError, NameTakenError, ObjectNotFoundError, ReaderView
from services.canvas.engine import write_session

from .conftest import PREVIEW

pytestmark = pytest.mark.asyncio


# -- a node's kind, and any field named like a parameter --------------------------------------------

async def test_a_kind_changed_live_decides_which_if_rules_load(canvas: Canvas) -> None:
    await canvas.write("kinds/review/00-base", owner="user:ada", preview=PREVIEW, body="review well",
                       rules=[{"on": "boot", "deliver": "content", "if": {"kind": "review"}}])
    await canvas.spawn_node(node_id="n1", owner="user:ada", kind="developer")
    assert (await canvas.why_not("n1", "ada/kinds/review/00-base")).reason == "if_mismatch"
    heard: list = []
    canvas.changes.subscribe(heard.append)

    view = await canvas.configure_node("n1", kind="review/security")

    assert view.kind == "review/security"
    assert (await canvas.get("n1")).kind == "review/security"
    assert (await canvas.why_not("n1", "ada/kinds/review/00-base")).reason == "loaded"
    loaded = [item.document.full_name for item in (await canvas.boot_context("n1")).items]
    assert "ada/kinds/review/00-base" in loaded
    change = next(c for c in heard if c.kind == "node.updated")
    assert change.data["kind"] == "review/security"


@pytest.mark.parametrize("field", ["ref", "node", "tx", "actor_id", "id"])
async def test_a_field_named_like_a_parameter_is_refused_as_unknown_not_a_clash(canvas: Canvas, field: str) -> None:
    await canvas.spawn_node(node_id="n1")
    with pytest.raises(DocumentInvalidError, match=field):
        await canvas.configure_node("n1", **{field: "x"})


# -- a rule's ``if`` -------------------------------------------------------------------------------

BAD_IFS = [
    ({"colour": "blue"}, "colour"),
    ({"kind": 3}, "kind"),
    ({"kind": {"is": "review"}}, "kind"),
    ({"mode": []}, "mode"),
    ({"mode": "captain"}, "captain"),
    ({"lifecycle": ["terminal", "forever"]}, "forever"),
    ({"kind": "Not A Kind"}, "kind"),
    ("review", "'if'"),
    (["kind", "review"], "'if'"),
]


@pytest.mark.parametrize(("cond", "named"), BAD_IFS)
async def test_a_malformed_if_is_refused_with_its_field_named(canvas: Canvas, cond: object, named: str) -> None:
    rules = [{"on": "boot", "deliver": "content", "if": cond}]
    with pytest.raises(DocumentInvalidError, match=named):
        await canvas.write("guide", owner="user:ada", preview=PREVIEW, body="b", rules=rules)
    with pytest.raises(DocumentInvalidError, match=named):
        await canvas.write_many([{"name": "guide", "owner": "user:ada", "preview": PREVIEW, "rules": rules}])
    assert await canvas.count_objects(type="document") == 0
    doc = await canvas.write("guide", owner="user:ada", preview=PREVIEW, body="b")
    with pytest.raises(DocumentInvalidError, match=named):
        await canvas.edit(doc.object.id, base_revision=1, rules=rules)
    assert (await canvas.read(doc.object.id)).document.rules == ()


@pytest.mark.parametrize("cond", [{"kind": "review"}, {"kind": ["review", "developer/ui"]},
                                  {"mode": "orchestrator", "lifecycle": ["terminal", "resident"]}, {}])
async def test_a_well_formed_if_is_taken(canvas: Canvas, cond: dict[str, object]) -> None:
    doc = await canvas.write("guide", owner="user:ada", preview=PREVIEW, body="b",
                             rules=[{"on": "boot", "if": cond}])
    assert doc.rules[0]["if"] == cond
    assert [f.rule for f in await canvas.lint(doc.object.id)] == []


async def test_lint_reports_a_malformed_if_already_stored(canvas: Canvas) -> None:
    doc = await canvas.write("guide", owner="user:ada", preview=PREVIEW, body="b",
                             rules=[{"on": "boot", "if": {"kind": "review"}}])
    stored = json.dumps([{"on": "boot", "if": {"colour": "blue"}}])
    with write_session(canvas.engine) as session:  # as an older workbench stored it
        session.execute(text("UPDATE documents SET rules = :r WHERE object_id = :id"),
                        {"r": stored, "id": doc.object.id})
    findings = [f for f in await canvas.lint(doc.object.id) if f.rule == "rule-invalid"]
    assert len(findings) == 1 and "colour" in findings[0].message
    assert findings[0].name == "ada/guide"


# -- a rename frees the old name ---------------------------------------------------------------------

async def test_a_renamed_profiles_old_name_is_free_and_no_longer_finds_it(canvas: Canvas) -> None:
    work = await canvas.create_profile("work", purview=[("garden", "content")])
    await canvas.write("meetings", owner="profile:work", preview=PREVIEW, body="m",
                       rules=[{"on": "boot", "deliver": "content"}])
    await canvas.spawn_node(node_id="n1", owner="user:ada", profile="work")
    await canvas.rename_profile("work", "office")

    with pytest.raises(ObjectNotFoundError):
        await canvas.profile("work")
    assert (await canvas.profile("office")).object.id == work.object.id
    assert (await canvas.profile(work.object.id)).handle == "office"  # its id stays

    again = await canvas.create_profile("work", purview=[("docs-site", "name")])
    assert again.object.id != work.object.id and again.handle == "work"
    assert (await canvas.profile("work")).object.id == again.object.id
    assert (await canvas.profile("profile:work")).object.id == again.object.id
    with pytest.raises(NameTakenError):
        await canvas.create_profile("work")
    with pytest.raises(NameTakenError):
        await canvas.rename_profile("office", "work")

    # documents written for the name go to its holder; the renamed profile's node keeps its profile
    doc = await canvas.write("agenda", owner="profile:work", preview=PREVIEW, body="a")
    assert doc.object.owner_id == again.object.id
    assert (await canvas.reader_view("n1")).profile == work.object.id
    loaded = [item.document.full_name for item in (await canvas.boot_context("n1")).items]
    assert "office/meetings" in loaded
    node = await canvas.spawn_node(node_id="n2", profile="work")
    assert node.profile == again.object.id

    # a reader's view naming the profile by handle reads as the profile holding it now
    private = await canvas.write("diary", owner="profile:office", privacy="private", preview=PREVIEW, body="d")
    assert (await canvas.get(private.object.id, view=ReaderView(profile="office"))).id == private.object.id
    with pytest.raises(ObjectNotFoundError):
        await canvas.get(private.object.id, view=ReaderView(profile="work"))
    assert (await canvas.get("meetings", view=ReaderView(profile="office"))).full_name == "office/meetings"
    with pytest.raises(ObjectNotFoundError):
        await canvas.get("meetings", view=ReaderView(profile="work"))


# -- a bulk load costs what its rows cost ------------------------------------------------------------

def _linked(first: int, count: int, total: int) -> list[dict[str, object]]:
    """Documents ``k/<i>``, each linking the next one and one further on (most to later batches)."""
    return [{"name": f"k/{i}", "owner": "user:o1", "preview": PREVIEW,
             "body": f"doc {i} links [[k/{(i + 1) % total}]] and [[k/{(i * 7 + 3) % total}]] and [[nobody/{i}]]"}
            for i in range(first, first + count)]


async def _links(canvas: Canvas, total: int) -> dict[str, list[tuple[str, str | None]]]:
    out = {}
    for i in range(total):
        doc = (await canvas.read(f"o1/k/{i}")).document
        assert doc is not None
        out[f"k/{i}"] = [(target, (await canvas.get(found)).full_name if found else None) for target, found in doc.links]
    return out


async def test_a_bulk_load_links_as_one_by_one_writes_do_in_statements_per_table_not_per_row(
        canvas: Canvas, tmp_path) -> None:
    total, batch = 120, 40
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
        statements.append(statement)

    event.listen(canvas.engine, "before_cursor_execute", count)
    try:
        for first in range(0, total, batch):
            statements.clear()
            views = await canvas.write_many(_linked(first, batch, total))
            assert len(statements) < 60, f"{len(statements)} statements for {batch} documents"
            assert [v.object.full_name for v in views] == [f"o1/k/{i}" for i in range(first, first + batch)]
    finally:
        event.remove(canvas.engine, "before_cursor_execute", count)
    bulk = await _links(canvas, total)

    one = await Canvas.open(tmp_path / "one-by-one.db")
    try:
        for item in _linked(0, total, total):
            await one.write(str(item["name"]), owner="user:o1", preview=PREVIEW, body=str(item["body"]))
        assert bulk == await _links(one, total)
    finally:
        await one.close()
    assert bulk["k/0"] == [("k/1", "o1/k/1"), ("k/3", "o1/k/3"), ("nobody/0", None)]
    edges = await canvas.edges("o1/k/0", kind="links-to")
    assert {e.other.full_name for e in edges.outgoing["links-to"]} == {"o1/k/1", "o1/k/3"}
    hits = await canvas.search("links", limit=100)
    assert len(hits) == 100
    assert (await canvas.events("o1/k/5"))[0].type == "created"


async def test_a_refused_bulk_item_is_named_and_nothing_is_kept(canvas: Canvas) -> None:
    await canvas.write("k/2", owner="user:o1", preview=PREVIEW, body="taken")
    items = _linked(0, 5, 5)
    with pytest.raises(NameTakenError, match="item 2"):
        await canvas.write_many(items)
    items[1]["preview"] = "two\nlines"
    with pytest.raises(DocumentInvalidError, match="item 1"):
        await canvas.write_many(items)
    with pytest.raises(NameTakenError, match="item 3"):
        await canvas.write_many([items[0], items[3], items[4], items[0]])
    assert await canvas.count_objects(type="document") == 1


# -- plugins installed for a person or a project -------------------------------------------------------

async def test_a_plugin_installed_for_a_person_or_a_project_loads_in_the_seeds_order(canvas: Canvas) -> None:
    await canvas.create_profile("work", purview=[("garden", "content")])
    boot = [{"on": "boot", "deliver": "preview"}]
    for owner, name in [("app:crtr", "guide"), ("app:crtr", "internal"), ("app:tasks", "guide"),
                        ("app:tasks", "tasks/how"), ("app:lint-kit", "lint/how"), ("user:ada", "notes"),
                        ("app:unused", "unused/how")]:
        await canvas.write(name, owner=owner, preview=f"When {name}, read this because.", body="b", rules=boot)
    await canvas.spawn_node(node_id="n1", owner="user:ada", profile="work")
    assert (await canvas.why_not("n1", "tasks/tasks/how")).reason == "not_eligible"

    assert await canvas.install_plugin("tasks", scope="user:ada") == ["tasks"]
    assert await canvas.install_plugin("lint-kit", scope="repo:garden") == ["lint-kit"]
    assert await canvas.install_plugin("tasks", scope="user:ada") == ["tasks"]  # once
    assert await canvas.plugins("user:ada") == ["tasks"]

    view = await canvas.reader_view("n1")
    assert view.plugins == ("lint-kit", "tasks")  # the project's, then the person's
    context = await canvas.boot_context("n1")
    order = [item.document.full_name for item in context.items]
    assert order.index("crtr/internal") < order.index("tasks/tasks/how") < order.index("ada/notes")
    assert "lint-kit/lint/how" in order and "unused/unused/how" not in order
    assert (await canvas.why_not("n1", "tasks/guide")).reason == "loaded"   # a plugin's guide shadows crtr's
    assert (await canvas.why_not("n1", "crtr/guide")).reason == "shadowed"
    edges = await canvas.edges("user:ada", kind="installed")
    assert [e.other.id for e in edges.outgoing["installed"]] == ["app:tasks"]

    assert await canvas.uninstall_plugin("tasks", scope="user:ada") is True
    assert await canvas.uninstall_plugin("tasks", scope="user:ada") is False
    assert (await canvas.reader_view("n1")).plugins == ("lint-kit",)
    assert (await canvas.why_not("n1", "tasks/tasks/how")).reason == "not_eligible"


@pytest.mark.parametrize(("plugin", "scope", "error"), [
    ("crtr", "user:ada", "built in"),
    ("tasks", "profile:work", "person"),
    ("../x", "user:ada", "plugin name"),
])
async def test_a_plugin_install_that_cannot_be_is_refused(canvas: Canvas, plugin: str, scope: str, error: str) -> None:
    await canvas.create_profile("work")
    with pytest.raises(CanvasError, match=error):
        await canvas.install_plugin(plugin, scope=scope)
    assert await canvas.count_objects(type="app") == 1  # crtr alone
