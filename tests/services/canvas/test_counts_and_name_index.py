"""The object counts and the name filter's trigram index, on both engines.

The counts (``counters``) must equal a count of ``objects`` after every kind of write (create,
delete, a move to another owner, a privacy or type change, bulk SQL, a transaction that fails and
rolls back) and after the backfill of a canvas made before they existed; a reader's count must be
what it may list. The trigram-served name filter must give exactly the rows (and order) of the
plain ``LIKE`` filter, short filters and odd characters included.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, text

from services.canvas import Canvas, NameTakenError
from services.canvas import objects as objects_module
from services.canvas.counters import COUNTS, recount
from services.canvas.eligibility import access_for
from services.canvas.engine import is_postgres, read_session, write_session
from services.canvas.models import ObjectRow
from services.canvas.objects import _filters

from .conftest import PREVIEW
from .test_eligibility import ADA, CHILD, GRACE, PLUGIN, _world

pytestmark = pytest.mark.asyncio


def stored(canvas: Canvas) -> dict[tuple[str, str, str], int]:
    with read_session(canvas.engine) as s:
        rows = s.connection().execute(select(COUNTS.c.type, COUNTS.c.owner_id, COUNTS.c.privacy, COUNTS.c.n)).all()
    return {(t, o, p): int(n) for t, o, p, n in rows if n}


def truth(canvas: Canvas) -> dict[tuple[str, str, str], int]:
    with read_session(canvas.engine) as s:
        return recount(s)


def assert_counts_right(canvas: Canvas) -> None:
    assert stored(canvas) == truth(canvas)


async def test_counts_follow_writes_deletes_moves_and_changes(canvas: Canvas) -> None:
    assert_counts_right(canvas)
    await canvas.write("a", owner="user:o1", preview=PREVIEW, body="x")
    doc = await canvas.write("b", owner="user:o1", preview=PREVIEW, body="x", privacy="private")
    await canvas.write_many([{"name": f"many/{i}", "owner": "repo:r1", "preview": PREVIEW} for i in range(30)])
    node = await canvas.spawn_node(node_id="n1", owner="user:o1")
    await canvas.spawn_node(node_id="n2", parent="n1")
    await canvas.start_job("make", actor="n1", name="build")
    assert_counts_right(canvas)
    assert await canvas.count_objects(type="document") == 32
    assert await canvas.count_objects(type="document", owner="repo:r1") == 30
    assert await canvas.count_objects(owner="user:o1") == 3  # two documents and the node
    await canvas.move(doc.object.id, owner="user:o2")  # owner changes
    assert await canvas.count_objects(type="document", owner="user:o1") == 1
    assert await canvas.count_objects(type="document", owner="user:o2") == 1
    assert_counts_right(canvas)
    await canvas.move("r1/many/0", to="renamed/0")  # a rename moves no count
    await canvas.configure_node(node.object.id, status="idle")  # an update that changes no counted column
    assert_counts_right(canvas)
    with write_session(canvas.engine) as s:  # privacy and type changed by plain SQL: the database still counts
        s.execute(text("UPDATE objects SET privacy = 'friends' WHERE name LIKE 'many/1%'"))
        s.execute(text("UPDATE objects SET type = 'custom' WHERE name = 'many/2'"))
    assert_counts_right(canvas)
    await canvas.delete(doc.object.id)
    await canvas.delete("n1")  # a node goes with its job
    assert_counts_right(canvas)
    assert await canvas.count_objects(type="job") == 0
    assert await canvas.count_objects() == sum(truth(canvas).values())


async def test_a_failed_transaction_leaves_the_counts_as_they_were(canvas: Canvas) -> None:
    await canvas.write("taken", owner="user:o1", preview=PREVIEW, body="x")
    before = stored(canvas)
    with pytest.raises(NameTakenError):  # the third item is refused after two were inserted: none is kept
        await canvas.write_many([{"name": "new/1", "owner": "user:o1", "preview": PREVIEW},
                                 {"name": "new/2", "owner": "repo:fresh", "preview": PREVIEW},
                                 {"name": "taken", "owner": "user:o1", "preview": PREVIEW}])
    with pytest.raises(RuntimeError), write_session(canvas.engine) as s:
        s.execute(text("DELETE FROM objects WHERE name = 'taken'"))
        raise RuntimeError("the unit of work fails after its delete")
    assert stored(canvas) == before
    assert_counts_right(canvas)
    assert await canvas.count_objects(type="document") == 1


def _make_old(canvas: Canvas) -> None:
    """Take away what this version adds, as a canvas written before it looks."""
    with write_session(canvas.engine) as s:
        for trigger in ("objects_counted_insert", "objects_counted_delete", "objects_counted_update",
                        "objects_named_insert", "objects_named_delete", "objects_named_update",
                        "inbox_counted_insert", "inbox_counted_delete", "inbox_counted_update"):
            on = " ON " + trigger.split("_")[0] if is_postgres(s) else ""
            s.execute(text(f"DROP TRIGGER IF EXISTS {trigger}{on}"))
        s.execute(text("DROP TABLE object_counts"))
        s.execute(text("DROP TABLE inbox_counts"))
        if is_postgres(s):
            s.execute(text("DROP INDEX IF EXISTS ix_objects_name_trgm"))
        else:
            s.execute(text("DROP TABLE IF EXISTS object_names"))


async def test_an_older_canvas_is_backfilled_once_at_open(canvas_url: str) -> None:
    canvas = await Canvas.open(canvas_url)
    await canvas.write_many([{"name": f"Pricing/{i}", "owner": f"repo:r{i % 3}", "preview": PREVIEW}
                             for i in range(40)])
    await canvas.spawn_node(node_id="n1", owner="user:o1")
    await canvas.message_send("before", to="n1")
    _make_old(canvas)
    await canvas.message_send("while old", to="n1")
    with write_session(canvas.engine) as s:  # written while the canvas had no counts: the backfill finds it
        s.execute(text("DELETE FROM objects WHERE name = 'Pricing/0'"))
    await canvas.close()
    reopened = await Canvas.open(canvas_url)
    try:
        assert_counts_right(reopened)
        assert_inbox_counts_right(reopened)
        assert (await reopened.inbox("n1")).total == 2
        assert await reopened.count_objects(type="document") == 39
        assert await reopened.count_objects(type="document", owner="repo:r1") == 13
        assert await reopened.count_objects(name_filter="pricing/1") == 11
        assert [o.name for o in (await reopened.list_objects(name_filter="ICING/3")).items] == [
            "Pricing/3", "Pricing/30", "Pricing/31", "Pricing/32", "Pricing/33", "Pricing/34", "Pricing/35",
            "Pricing/36", "Pricing/37", "Pricing/38", "Pricing/39"]
        with read_session(reopened.engine) as s:
            if is_postgres(s):
                index = "SELECT count(*) FROM pg_indexes WHERE indexname = 'ix_objects_name_trgm' " \
                        "AND schemaname = current_schema()"
            else:
                index = "SELECT count(*) FROM sqlite_master WHERE name = 'object_names'"
            assert s.execute(text(index)).scalar_one() == 1
        await reopened.write("after", owner="repo:r1", preview=PREVIEW)  # and kept in step from then on
        assert_counts_right(reopened)
    finally:
        await reopened.close()
    again = await Canvas.open(canvas_url)  # the second open finds them and fills nothing twice
    try:
        assert_counts_right(again)
    finally:
        await again.close()


async def test_a_readers_count_is_what_it_may_list(canvas: Canvas) -> None:
    await _world(canvas)
    await canvas.write("grace-own", owner="n_grace", privacy="private", preview=PREVIEW)
    with write_session(canvas.engine) as s:  # objects a reader may read only because it is them
        s.execute(text("UPDATE objects SET privacy = 'private', owner_id = 'user:grace' WHERE id = 'n_grace'"))
    for reader in (ADA, CHILD, GRACE, PLUGIN):
        with read_session(canvas.engine) as s:
            access = access_for(s, reader)
            assert access is not None
            for type_ in (None, "document", "node", "user"):
                for owner in (None, "user:ada", "user:grace", "n_ada", "profile:work"):
                    where = [access.clause()] + ([ObjectRow.type == type_] if type_ else []) + (
                        [ObjectRow.owner_id == owner] if owner else [])
                    expected = s.execute(select(func.count()).select_from(ObjectRow).where(*where)).scalar_one()
                    got = await canvas.count_objects(type=type_, owner=owner, view=reader)
                    assert got == expected, (reader.node, type_, owner)
        listed = await canvas.list_objects(limit=1000, view=reader)
        assert await canvas.count_objects(view=reader) == len(listed.items)


ALPHABET = list("abcAB_%/ -'\"\\é") + ["É", "ß", "ǅ", "İ", "0", "1"]
NAMES = st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=9), min_size=1, max_size=25, unique=True)


async def _filter_matches_like(canvas: Canvas, names: list[str], needles: list[str], few: int,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(objects_module, "FEW_CANDIDATES", few)
    with write_session(canvas.engine) as s:
        s.execute(text("DELETE FROM objects WHERE type = 'sample'"))
        s.execute(text("INSERT INTO objects (id, type, kind, name, owner_id, privacy, status, created_at, updated_at) "
                       "VALUES (:id, 'sample', '', :name, NULL, 'public', '', 0, 0)"),
                  [{"id": f"s{i}", "name": name} for i, name in enumerate(names)])
    for needle in needles:
        with read_session(canvas.engine) as s:  # the filter without the index: the plain LIKE, in page order
            old = [str(r) for r in s.execute(select(ObjectRow.id).where(*_filters(s, "sample", None, needle))
                                              .order_by(ObjectRow.name, ObjectRow.pk)).scalars()]
            everywhere = s.execute(select(func.count()).select_from(ObjectRow)
                                   .where(*_filters(s, None, None, needle))).scalar_one()
        page = await canvas.list_objects(type="sample", name_filter=needle, limit=1000)
        assert [o.id for o in page.items] == old, needle
        first = await canvas.list_objects(type="sample", name_filter=needle, limit=2)
        assert [o.id for o in first.items] == old[:2] and first.has_more == (len(old) > 2), needle
        assert await canvas.count_objects(type="sample", name_filter=needle) == len(old), needle
        assert await canvas.count_objects(name_filter=needle) == everywhere, needle


@pytest.mark.parametrize("few", [1_000, 0], ids=["from-candidates", "names-in-order"])
async def test_the_trigram_filter_finds_what_the_like_filter_finds(canvas: Canvas, few: int,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["Pricing/annual", "pricing/Monthly", "PRICE", "a%b", "a_b", "axb", "café", "CAFÉ", "straße",
             "Straße-2", "quote\"d", "it's", "back\\slash", "x", "xy", "xyz", "ǅemal", "İstanbul"]
    needles = ["pricing", "RICI", "ici", "a%b", "a_b", "%", "_", "é", "É", "afé", "AFÉ", "raße", "e\"d", "t's",
               "k\\s", "x", "xy", "xyz", "XYZ", "ǆem", "ǅem", "İst", "ist", "zzz", "\"", "'", "  ", "/"]
    await _filter_matches_like(canvas, names, needles, few, monkeypatch)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), names=NAMES)
async def test_the_trigram_filter_matches_like_on_any_names(canvas: Canvas, data: st.DataObject, names: list[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    inner = st.sampled_from(names).flatmap(
        lambda n: st.tuples(st.integers(0, len(n)), st.integers(1, 4)).map(lambda p: n[p[0]:p[0] + p[1]]))
    needles = data.draw(st.lists(st.one_of(inner, st.text(alphabet=ALPHABET, min_size=1, max_size=4)),
                                 min_size=1, max_size=6))
    few = data.draw(st.sampled_from([1_000, 1, 0]))
    await _filter_matches_like(canvas, names, [n for n in needles if n], few, monkeypatch)


def assert_inbox_counts_right(canvas: Canvas) -> None:
    from services.canvas.counters import INBOX_COUNTS, recount_inboxes

    with read_session(canvas.engine) as s:
        kept = {str(o): (int(u), int(t)) for o, u, t in s.connection().execute(
            select(INBOX_COUNTS.c.owner_id, INBOX_COUNTS.c.unread, INBOX_COUNTS.c.total)) if t}
        assert kept == recount_inboxes(s)


async def test_inbox_counts_follow_messages_reads_and_deletes(canvas: Canvas) -> None:
    await canvas.spawn_node(node_id="n1", owner="user:o1")
    await canvas.spawn_node(node_id="n2", owner="user:o1")
    for i in range(5):
        await canvas.message_send(f"hello {i}", to="n1")
    await canvas.message_send("hi", to="n2")
    page = await canvas.inbox("n1", limit=2)
    assert (page.unread, page.total) == (5, 5)
    assert_inbox_counts_right(canvas)
    await canvas.mark_read("n1", [page.items[0].id])
    assert ((await canvas.inbox("n1")).unread, (await canvas.inbox("n1")).total) == (4, 5)
    await canvas.mark_read("n1")
    assert (await canvas.inbox("n1")).unread == 0
    with pytest.raises(RuntimeError), write_session(canvas.engine) as s:  # rolled back: counts unchanged
        s.execute(text("UPDATE inbox SET read_at = NULL, owner_id = 'n2'"))
        raise RuntimeError("the unit of work fails")
    assert_inbox_counts_right(canvas)
    with write_session(canvas.engine) as s:
        s.execute(text("UPDATE inbox SET read_at = NULL WHERE owner_id = 'n1' AND id % 2 = 0"))
    assert_inbox_counts_right(canvas)
    await canvas.delete("n2")  # its entries go with it
    assert_inbox_counts_right(canvas)
    assert (await canvas.inbox("n1")).total == 5


async def test_unread_counts_of_many_inboxes_at_once(canvas: Canvas) -> None:
    await canvas.spawn_node(node_id="n1")
    await canvas.spawn_node(node_id="n2")
    for i in range(3):
        await canvas.message_send(f"m{i}", to="n1")
    await canvas.message_send("x", to="n2")
    await canvas.mark_read("n2")
    counts = await canvas.unread_counts(["n1", "n2", "nobody"])
    assert counts == {"n1": (await canvas.inbox("n1")).unread, "n2": 0, "nobody": 0} == {"n1": 3, "n2": 0, "nobody": 0}


async def test_a_name_filter_is_answered_from_the_trigram_index(canvas: Canvas) -> None:
    """The statement a name filter runs can be served by the engine's trigram index: SQLite's
    ``object_names``; on PostgreSQL, with sequential scans forbidden and the other name indexes out of
    the way (in a transaction rolled back), the plan reads ``ix_objects_name_trgm``. A predicate that is
    not the index's own expression (an ILIKE on the name) could only scan every row."""
    from sqlalchemy import event

    await canvas.ensure_owner("user", "ada")
    await canvas.write("Pricing-0001", owner="user:ada", preview=PREVIEW)
    with write_session(canvas.engine) as s:  # enough other names that reading them all costs more than the index
        s.execute(text("INSERT INTO objects (id, type, kind, name, owner_id, privacy, status, created_at, updated_at) "
                       "VALUES (:id, 'sample', '', :name, NULL, 'public', '', 0, 0)"),
                  [{"id": f"s{i}", "name": "".join(chr(97 + i // 26 ** k % 26) for k in range(4))}
                   for i in range(20_000)])
    if is_postgres(canvas.engine):
        with canvas.engine.connect() as conn:
            conn.execute(text("ANALYZE objects"))
            conn.commit()
    seen: list[tuple[str, object]] = []

    def keep(conn: object, cursor: object, statement: str, params: object, context: object, many: bool) -> None:
        seen.append((statement, params))

    event.listen(canvas.engine, "before_cursor_execute", keep)
    try:
        assert await canvas.count_objects(name_filter="ICING-00") == 1
        assert [o.name for o in (await canvas.list_objects(name_filter="icing-00")).items] == ["Pricing-0001"]
    finally:
        event.remove(canvas.engine, "before_cursor_execute", keep)
    if not is_postgres(canvas.engine):
        assert any("object_names" in statement for statement, _ in seen)
        return
    filtered = [(s, p) for s, p in seen if "LIKE" in s.upper() and "objects" in s]
    assert filtered
    raw = canvas.engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'objects' AND schemaname = current_schema() "
                       "AND indexname LIKE 'ix\\_%' AND indexname <> 'ix_objects_name_trgm'")
        for (other,) in cursor.fetchall():  # inside this transaction only, rolled back below
            cursor.execute(f"DROP INDEX {other}")
        for statement, params in filtered:
            cursor.execute("EXPLAIN " + statement, params)
            plan = "\n".join(str(row[0]) for row in cursor.fetchall())
            assert "ix_objects_name_trgm" in plan, plan
    finally:
        raw.rollback()
        raw.close()
