"""Delivery, evaluated, table-driven on both engines: what a node loads at boot, at which level, and
why each other document of its view is not loaded. Profiles (purview, limits, rename, defaults)."""

from __future__ import annotations

import pytest

from services.canvas import Canvas, CanvasError, DocumentInvalidError, NameRefusedError, NameTakenError


pytestmark = pytest.mark.asyncio

BOOT_PREVIEW = [{"on": "boot", "deliver": "preview"}]
BOOT_CONTENT = [{"on": "boot", "deliver": "content"}]

# (owner, name, privacy, rules)
DOCS = [
    ("app:crtr", "internal", "public", [{"on": "boot", "at": "preview"}]),
    ("app:crtr", "guide", "public", [{"on": "boot", "at": "name"}]),
    ("app:crtr", "secret", "private", BOOT_PREVIEW),
    ("user:ada", "preferences/replies", "public", BOOT_CONTENT),
    ("user:ada", "knowledge/garden-layout", "public", []),
    ("user:ada", "diary", "private", BOOT_PREVIEW),
    ("profile:work", "meetings", "public", BOOT_CONTENT),
    ("repo:garden", "architecture", "public", BOOT_CONTENT),
    ("repo:garden", "guide", "public", BOOT_PREVIEW),
    ("repo:garden", "kinds/review/00-base", "public", [{"on": "boot", "deliver": "content", "if": {"kind": "review"}}]),
    ("repo:garden", "orchestration-kernel", "public",
     [{"on": "boot", "deliver": "content", "if": {"mode": "orchestrator"}}]),
    ("repo:garden", "open-checklist", "public", [{"on": "workspace-open", "deliver": "preview"}]),
    ("repo:docs-site", "style", "public", BOOT_CONTENT),
    ("repo:archive", "old", "public", BOOT_PREVIEW),
    ("user:grace", "notes", "public", BOOT_PREVIEW),
    ("user:grace", "private-notes", "private", BOOT_PREVIEW),
]

# (full name, reason for node n1 at boot, level when loaded)
EXPECTED = [
    ("internal", "loaded", "preview"),
    ("crtr/guide", "shadowed", None),              # repo garden's guide is nearer
    ("crtr/secret", "privacy", None),
    ("ada/preferences/replies", "loaded", "content"),
    ("ada/knowledge/garden-layout", "no_rule", None),
    ("ada/diary", "loaded", "preview"),            # private, and the node is Ada's
    ("work/meetings", "loaded", "content"),        # the profile's own: never capped
    ("garden/architecture", "loaded", "content"),  # limit content
    ("garden/guide", "loaded", "preview"),
    ("garden/kinds/review/00-base", "if_mismatch", None),
    ("garden/orchestration-kernel", "if_mismatch", None),
    ("garden/open-checklist", "no_rule", None),    # its rule is for workspace-open
    ("docs-site/style", "loaded", "name"),         # capped from content to name
    ("archive/old", "capped", None),               # limit none
    ("grace/notes", "not_eligible", None),
    ("grace/private-notes", "privacy", None),
]


async def _world(canvas: Canvas) -> None:
    await canvas.create_profile("work", display_name="Work",
                                purview=[("garden", "content"), ("docs-site", "name"), ("archive", "none")])
    for owner, name, privacy, rules in DOCS:
        body = "Lead with the answer. See [[ada/knowledge/garden-layout]] and [[grace/private-notes]]." \
            if name == "preferences/replies" else f"body of {name}"
        await canvas.write(name, owner=owner, privacy=privacy, rules=rules, preview=f"When {name}, read this because.",
                           body=body)
    await canvas.spawn_node(node_id="n1", owner="user:ada", kind="developer", profile="work")


async def test_why_each_document_is_or_is_not_loaded(canvas: Canvas) -> None:
    await _world(canvas)
    context = await canvas.boot_context("n1")
    loaded = {item.document.full_name: item for item in context.items}
    skipped = {n.document.full_name: n for n in context.not_loaded}
    for name, reason, level in EXPECTED:
        verdict = await canvas.why_not("n1", name if "/" in name else f"crtr/{name}")
        assert (verdict.reason, verdict.level) == (reason, level), name
        if reason == "loaded":
            assert loaded[verdict_name(name)].level == level, name
        elif reason not in ("not_eligible",) and not name.startswith("grace/"):
            assert skipped[verdict_name(name)].reason == reason, name
    assert "grace/notes" not in skipped and "grace/notes" not in loaded  # outside the view entirely


def verdict_name(name: str) -> str:
    return name if "/" in name else f"crtr/{name}"


async def test_boot_context_order_level_rule_owner_and_cap(canvas: Canvas) -> None:
    await _world(canvas)
    context = await canvas.boot_context("n1")
    assert [i.document.full_name for i in context.items] == [
        "crtr/internal",                                   # the widest owner first
        "ada/diary", "ada/preferences/replies",           # the person
        "work/meetings",                                   # the profile
        "docs-site/style", "garden/architecture", "garden/guide",  # repos, farthest first
    ]
    style = next(i for i in context.items if i.document.name == "style")
    assert (style.requested, style.level, style.capped_by) == ("content", "name", "profile work: docs-site -> name")
    assert style.body is None and "docs-site" in style.owner
    replies = next(i for i in context.items if i.document.name == "preferences/replies")
    assert replies.rule == {"on": "boot", "deliver": "content"} and replies.owner == "ada"
    assert replies.body is not None and "Lead with the answer" in replies.body
    # a link in a delivered body attaches its target's preview, if the node may read the target
    assert replies.attached == (("ada/knowledge/garden-layout", "When knowledge/garden-layout, read this because."),)
    assert "rule {on: boot, deliver: content} of ada" in replies.why
    assert context.kind == "developer" and context.profile == "work"


async def test_if_matches_kind_mode_and_sub_kinds(canvas: Canvas) -> None:
    await _world(canvas)
    await canvas.spawn_node(node_id="rev", owner="user:ada", kind="review/security", profile="work")
    await canvas.spawn_node(node_id="orc", owner="user:ada", kind="plan", mode="orchestrator", profile="work")
    assert (await canvas.why_not("rev", "garden/kinds/review/00-base")).level == "content"
    assert (await canvas.why_not("rev", "garden/orchestration-kernel")).reason == "if_mismatch"
    assert (await canvas.why_not("orc", "garden/orchestration-kernel")).level == "content"
    verdict = await canvas.why_not("orc", "garden/kinds/review/00-base")
    assert verdict.reason == "if_mismatch" and "kind plan" in verdict.detail


async def test_workspace_open_is_its_own_event(canvas: Canvas) -> None:
    await _world(canvas)
    opened = await canvas.boot_context("n1", event="workspace-open")
    assert [i.document.full_name for i in opened.items] == ["garden/open-checklist"]
    with pytest.raises(CanvasError, match="not 'spawn'"):
        await canvas.boot_context("n1", event="spawn")


async def test_who_loads_a_document(canvas: Canvas) -> None:
    await _world(canvas)
    await canvas.spawn_node(node_id="g1", owner="user:grace", kind="developer")
    verdicts = await canvas.who_loads("ada/preferences/replies")
    assert [(v.node, v.loaded, v.reason) for v in verdicts] == [("n1", True, "loaded"), ("g1", False, "not_eligible")]


async def test_an_approved_listener_reaches_the_nodes_of_its_owner(canvas: Canvas) -> None:
    await _world(canvas)
    listener = await canvas.create_listener("writing", owner="user:ada", domain="how Ada wants replies written")
    await canvas.approve_insight(listener.object.full_name, "ada/preferences/replies")
    loads = [v for v in await canvas.who_loads(listener.object.full_name) if v.loaded]
    assert [(v.node, v.level) for v in loads] == [("n1", "preview")]


# -- profiles ------------------------------------------------------------------------------------

async def test_profile_rename_keeps_the_id_and_refuses_a_live_name(canvas: Canvas) -> None:
    await _world(canvas)
    await canvas.create_profile("home")
    renamed = await canvas.rename_profile("work", "office", display_name="Office")
    assert (renamed.object.id, renamed.handle, renamed.display_name) == ("profile:work", "office", "Office")
    assert (await canvas.read("office/meetings")).document is not None  # full names follow the new name
    assert [h.object.full_name for h in await canvas.search("meetings")] == ["office/meetings"]
    assert (await canvas.why_not("n1", "office/meetings")).level == "content"  # the node keeps its profile
    with pytest.raises(NameTakenError, match="another profile"):
        await canvas.rename_profile("office", "home")
    assert (await canvas.profile("profile:work")).handle == "office"  # nothing changed by the refusal
    with pytest.raises(NameTakenError):
        await canvas.create_profile("home")


@pytest.mark.parametrize(("project", "limit", "error"), [
    ("garden", "everything", DocumentInvalidError),
    ("../etc", "content", NameRefusedError),
    ("repo:", "content", NameRefusedError),
])
async def test_bad_purview_is_refused_and_nothing_changes(canvas: Canvas, project: str, limit: str,
                                                          error: type[Exception]) -> None:
    await canvas.create_profile("work", purview=[("garden", "content")])
    with pytest.raises(error):
        await canvas.set_profile_project("work", project, limit)
    assert (await canvas.profile("work")).purview == (("garden", "content"),)


async def test_purview_changes_and_directory_defaults(canvas: Canvas) -> None:
    await canvas.create_profile("work")
    await canvas.set_profile_project("work", "garden", "preview")
    await canvas.set_profile_project("work", "repo:docs", "name")
    await canvas.set_profile_project("work", "garden", "content")
    assert (await canvas.profile("work")).purview == (("garden", "content"), ("repo:docs", "name"))
    await canvas.set_profile_project("work", "repo:docs", None)
    assert (await canvas.profile("work")).purview == (("garden", "content"),)
    await canvas.set_default_profile("/home/ada/src", "work")
    assert (await canvas.default_profile("/home/ada/src/garden/app")).handle == "work"  # type: ignore[union-attr]
    assert await canvas.default_profile("/home/ada") is None
    with pytest.raises(DocumentInvalidError, match="absolute"):
        await canvas.set_default_profile("relative/dir", "work")
    await canvas.set_default_profile("/home/ada/src", None)
    assert await canvas.default_profile("/home/ada/src/garden") is None


async def test_nodes_carry_kind_mode_and_profile_and_children_inherit_it(canvas: Canvas) -> None:
    await canvas.create_profile("work")
    parent = await canvas.spawn_node(node_id="p", kind="plan", mode="orchestrator", profile="work")
    child = await canvas.spawn_node(node_id="c", parent="p")
    assert (parent.kind, parent.mode, parent.profile) == ("plan", "orchestrator", "profile:work")
    assert child.profile == "profile:work"
    view = await canvas.reader_view("c")
    assert view.profile == "profile:work" and view.node == "c"


async def test_boot_context_and_why_not_refuse_the_wrong_types(canvas: Canvas) -> None:
    await _world(canvas)
    with pytest.raises(CanvasError, match="is a document, not a node"):
        await canvas.boot_context("ada/diary")
    with pytest.raises(CanvasError, match="is a node, not a document"):
        await canvas.why_not("n1", "n1")


async def test_a_version_3_canvas_is_migrated_and_keeps_its_objects(canvas_url: str, clock) -> None:
    from sqlalchemy import inspect, text

    from services.canvas.schema import SCHEMA_VERSION, schema_version

    first = await Canvas.open(canvas_url, clock=clock)
    await first.register_custom_object("acme.q", name="q", events={"ping": 3}, receiver="queue")
    with first.engine.begin() as conn:  # as a canvas written before profiles and receivers delivered
        conn.execute(text("DROP TABLE profile_defaults"))
        conn.execute(text("DROP TABLE profiles"))
        conn.execute(text("DROP TABLE receiver_attempts"))
        conn.execute(text("ALTER TABLE custom_objects DROP COLUMN config"))
        conn.execute(text("UPDATE canvas_meta SET value = '3' WHERE key = 'schema_version'"))
    await first.close()
    again = await Canvas.open(canvas_url, clock=clock)
    with again.engine.connect() as conn:
        assert schema_version(conn) == SCHEMA_VERSION == 4
        assert {"profiles", "profile_defaults", "receiver_attempts"} <= set(inspect(conn).get_table_names())
    assert (await again.list_objects(type="custom")).items[0].name == "q"
    await again.create_profile("work", purview=[("garden", "content")])
    assert (await again.profile("work")).purview == (("garden", "content"),)
    await again.close()


async def test_read_models_built_by_position_are_the_same_frozen_objects() -> None:
    """``positional_builder`` gives the same value as the class itself, of the class itself, frozen."""
    import dataclasses

    from services.canvas.views import BootItem, NotLoaded, ObjectSummary, positional_builder

    summary_values = ("d1", "document", "note", "pricing", "ada/pricing", "user:ada", "friends", "active", 1.5, 2.5)
    summary = positional_builder(ObjectSummary)(*summary_values)
    cases = [(ObjectSummary, summary_values),
             (NotLoaded, (summary, "no_rule", "no rule delivers it on boot")),
             (BootItem, (summary, "content", {"on": "boot"}, "ada", "content", None, "p", "body", (("x", "y"),)))]
    for cls, values in cases:
        built = positional_builder(cls)(*values)
        assert type(built) is cls
        assert built == cls(*values)
        if cls is not BootItem:  # a BootItem holds its rule, a dict, so it has no hash
            assert hash(built) == hash(cls(*values))
        assert dataclasses.astuple(built) == dataclasses.astuple(cls(*values))
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(built, dataclasses.fields(cls)[0].name, "changed")
        with pytest.raises(TypeError):
            positional_builder(cls)(*values[:-1])  # every field, by position
