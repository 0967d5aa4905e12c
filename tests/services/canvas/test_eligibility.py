"""Eligibility on every read path, table-driven, on both engines: who may read which document.

One table of (owner, privacy, reader) -> may read; each row is checked on ``read``, ``get``,
``list_objects``, ``count_objects``, ``search``, ``edges``, inboxes and ``watch``, and against the
Python form of the rule (``Access.allows``), so the SQL and the Python never disagree.
"""

from __future__ import annotations

import pytest

from services.canvas import OPERATOR, Canvas, ObjectNotFoundError, ReaderView

from .conftest import PREVIEW

pytestmark = pytest.mark.asyncio

ADA = ReaderView(node="n_ada", person="ada", profile="work", repos=("garden",))
"""A node run by Ada under the profile ``work``, working in the repo ``garden``."""
CHILD = ReaderView(node="n_child", person="ada")
"""A node ``n_ada`` spawned."""
GRACE = ReaderView(node="n_grace", person="grace")
"""A stranger: another person's node."""
PLUGIN = ReaderView(node="n_plug", person="grace", plugins=("lint",))

# (document owner, privacy, reader, may read)
TABLE = [
    ("user:ada", "public", GRACE, True),
    ("user:ada", "friends", ADA, True),      # the reader's own person
    ("user:ada", "friends", GRACE, False),
    ("user:ada", "private", ADA, True),      # it is Ada's node
    ("user:ada", "private", GRACE, False),
    ("profile:work", "friends", ADA, True),
    ("profile:work", "private", ADA, True),  # a node under the profile is the profile
    ("profile:work", "private", GRACE, False),
    ("n_ada", "private", ADA, True),         # its own node
    ("n_ada", "private", CHILD, False),      # private is the node alone
    ("n_ada", "friends", CHILD, True),       # friends: the node it was spawned by
    ("n_child", "friends", ADA, True),       # ... and the nodes it spawned
    ("n_ada", "friends", GRACE, False),
    ("app:lint", "friends", PLUGIN, True),   # an installed plugin is in the view
    ("app:lint", "private", PLUGIN, False),  # but the reader is not the plugin
    ("repo:garden", "public", GRACE, True),
]


async def _world(canvas: Canvas) -> dict[int, str]:
    await canvas.spawn_node(node_id="n_ada", owner="user:ada", profile=None)
    await canvas.spawn_node(node_id="n_child", parent="n_ada", owner="user:ada")
    await canvas.spawn_node(node_id="n_grace", owner="user:grace")
    await canvas.spawn_node(node_id="n_plug", owner="user:grace")
    await canvas.ensure_owner("profile", "work")
    await canvas.ensure_owner("app", "lint")
    ids = {}
    for i, (owner, privacy, _, _) in enumerate(TABLE):
        doc = await canvas.write(f"row{i}", owner=owner, privacy=privacy, preview=PREVIEW,
                                 body=f"zebraword row{i} secret")
        ids[i] = doc.object.id
    return ids


async def test_each_row_on_every_read_path(canvas: Canvas) -> None:
    ids = await _world(canvas)
    hub = await canvas.write("hub", owner="app:crtr", preview=PREVIEW,
                             body=" ".join(f"[[{i}]]" for i in ids.values()))
    await canvas.register_custom_object("acme.watch", name="watcher", events={"ping": 3}, receiver="queue")
    watcher = (await canvas.list_objects(type="custom")).items[0].id
    for doc_id in ids.values():
        await canvas.watch(doc_id, watcher=watcher)
        await canvas.record_event(doc_id, "configured")
    for i, (owner, privacy, reader, allowed) in enumerate(TABLE):
        doc_id = ids[i]
        case = f"row {i}: {privacy} of {owner} read by {reader.node}"
        if allowed:
            assert (await canvas.read(doc_id, view=reader)).object.id == doc_id, case
            assert (await canvas.get(doc_id, view=reader)).id == doc_id, case
        else:
            with pytest.raises(ObjectNotFoundError, match="no object is named") as refused:
                await canvas.read(doc_id, view=reader)
            assert privacy not in str(refused.value) and "may not" not in str(refused.value), case
            with pytest.raises(ObjectNotFoundError):
                await canvas.get(doc_id, view=reader)
            with pytest.raises(ObjectNotFoundError):
                await canvas.watch(doc_id, watcher=reader.node or "", view=reader)
            with pytest.raises(ObjectNotFoundError):
                await canvas.edges(doc_id, view=reader)
        listed = {o.id for o in (await canvas.list_objects(type="document", name_filter=f"row{i}", view=reader)).items}
        assert (doc_id in listed) is allowed, case
        found = {h.object.id for h in await canvas.search(f"row{i}", view=reader)}
        assert (doc_id in found) is allowed, case
        hub_edges = await canvas.edges(hub.object.id, kind="links-to", view=reader)
        linked = doc_id in {e.other.id for e in hub_edges.outgoing.get("links-to", ())}
        assert linked is (allowed and privacy == "public"), case  # crtr's links reach only what crtr may read
        watches = await canvas.edges(watcher, kind="watches", view=reader)
        assert (doc_id in {e.other.id for e in watches.outgoing.get("watches", ())}) is allowed, case
        inbox = await canvas.inbox(watcher, view=reader, limit=200)
        assert (doc_id in {e.object_id for e in inbox.items}) is allowed, case


async def test_the_sql_rule_and_the_python_rule_agree(canvas: Canvas) -> None:
    from services.canvas.eligibility import access_for
    from services.canvas.engine import read_session
    from services.canvas.models import ObjectRow
    from sqlalchemy import select

    ids = await _world(canvas)
    with read_session(canvas.engine) as s:
        for reader in (ADA, CHILD, GRACE, PLUGIN):
            access = access_for(s, reader)
            assert access is not None
            rows = s.execute(select(ObjectRow)).scalars().all()
            by_sql = set(s.execute(select(ObjectRow.id).where(access.clause())).scalars())
            assert by_sql == {r.id for r in rows if access.allows(r.id, r.owner_id, r.privacy)}
            assert all((ids[i] in by_sql) is ok for i, (_, _, who, ok) in enumerate(TABLE) if who is reader)


async def test_the_operator_sees_everything_and_says_so(canvas: Canvas) -> None:
    ids = await _world(canvas)
    page = await canvas.list_objects(type="document", limit=100)
    assert {o.id for o in page.items} >= set(ids.values())
    assert page.seen_as == OPERATOR
    assert (await canvas.read(ids[4])).seen_as == OPERATOR  # Ada's private document, to the operator
    seen = await canvas.list_objects(type="document", view=GRACE, limit=100)
    assert seen.seen_as.startswith("reader node n_grace")
    assert await canvas.count_objects(type="document", view=GRACE) == len(seen.items)
    assert len(await canvas.search("zebraword", limit=100)) == len(TABLE)
    public = {ids[i] for i, (_, privacy, _, _) in enumerate(TABLE) if privacy == "public"}
    assert {h.object.id for h in await canvas.search("zebraword", view=GRACE, limit=100)} == public


async def test_a_bare_name_resolves_only_to_what_the_reader_may_read(canvas: Canvas) -> None:
    await _world(canvas)
    await canvas.write("diary", owner="user:ada", privacy="private", preview=PREVIEW, body="mine")
    assert (await canvas.read("ada/diary", view=ADA)).document.body == "mine"  # type: ignore[union-attr]
    with pytest.raises(ObjectNotFoundError, match="no object is named 'ada/diary'"):
        await canvas.read("ada/diary", view=GRACE)
    with pytest.raises(ObjectNotFoundError, match="no object is named 'ada/nothing'"):
        await canvas.read("ada/nothing", view=GRACE)  # the same words as a name nobody holds


async def test_a_readers_search_page_is_full_even_when_the_best_hits_are_hidden(canvas: Canvas) -> None:
    await _world(canvas)
    hidden = [{"name": f"quux/{i}", "owner": "user:grace", "privacy": "private", "preview": PREVIEW,
               "body": "quux quux quux"} for i in range(30)]
    await canvas.write_many(hidden)
    shown = [await canvas.write(f"notes/{i}", owner="user:ada", preview=PREVIEW, body=f"a quux among words {i}")
             for i in range(3)]
    found = await canvas.search("quux", limit=2, view=ADA)  # the 8 best-ranked hits are all Grace's
    assert len(found) == 2 and {h.object.id for h in found} <= {d.object.id for d in shown}
    assert {h.object.id for h in await canvas.search("quux", limit=10, view=ADA)} == {d.object.id for d in shown}
    assert len(await canvas.search("quux", limit=40)) == 33  # the operator sees them all
