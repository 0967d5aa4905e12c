"""The same canvas on both engines: search agrees, the database enforces names and revisions under
writers in several processes, and the schema version is checked at open."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import psycopg
import pytest
from sqlalchemy import inspect, text

from services.canvas import Canvas, CanvasSchemaError, NameTakenError
from services.canvas.engine import create_schema, make_engine, database_url, write_session
from services.canvas.schema import SCHEMA_VERSION, schema_version

from .conftest import PREVIEW

CORPUS = {
    "pricing/tiers": ("When pricing a plan, read this because tiers matter.", "Annual discounts stay under twenty percent."),
    "ops/deploys": (PREVIEW, "Deploy on Tuesdays. NEAR the release, freeze - no \"hotfix\" * ever."),
    "near/misses": (PREVIEW, "A near miss is logged; AND and OR are words here (really)."),
    "quotes": (PREVIEW, "She said \"it's fine\" and it wasn't; col:val stays text."),
    "tiers-of-service": (PREVIEW, "Service tiers are gold and silver."),
    "odd/tokens": (PREVIEW, "Mail user@example.com, see https://x.test/a or v1.5 and foo_bar in /etc/hosts."),
}
HOSTILE = ['"', "AND", "a OR", "NEAR(", "NEAR", "near", "*", "", "-x", "-deploy", "col:val", "(((", "it's",
           '"hotfix"', "tier*", "tiers -gold", "\"it's fine\"", "' OR 1=1 --", "\\", "&|!:*", "deploy NEAR release",
           "tuesdays deploy", "discount", "TIERS", "séance", "日本", "deploys", "ops/deploys", "o1", "foo_bar", "1.5",
           "user@example.com", "https://x.test/a"]


async def _fill(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    for name, (preview, body) in CORPUS.items():
        await canvas.write(name, owner="user:o1", preview=preview, body=body)


async def test_search_finds_the_same_objects_on_both_engines_for_hostile_queries(tmp_path, pg_schema_url, clock) -> None:
    lite = await Canvas.open(tmp_path / "canvas.db", clock=clock)
    pg = await Canvas.open(pg_schema_url, clock=clock)
    await _fill(lite)
    await _fill(pg)
    for query in HOSTILE:
        on_lite = {h.object.name for h in await lite.search(query)}
        on_pg = {h.object.name for h in await pg.search(query)}
        assert on_lite == on_pg, query
    assert {h.object.name for h in await pg.search("tiers")} == {"pricing/tiers", "tiers-of-service"}
    for canvas in (lite, pg):  # a name hit ranks above a body hit on both
        assert (await canvas.search("deploys"))[0].object.name == "ops/deploys"
        assert [h.object.name for h in await canvas.search("tiers", type="node")] == []
    await lite.close()
    await pg.close()


RACER = textwrap.dedent(
    """
    import asyncio, json, sys
    from services.canvas import Canvas, CanvasError
    async def main():
        canvas = await Canvas.open(sys.argv[1])
        results = []
        for round_ in range(int(sys.argv[2])):
            try:
                await canvas.write(f"race/{round_}", owner="user:o1", preview="When racing, read this because.",
                                   body=sys.argv[3])
                results.append("ok")
            except CanvasError as exc:
                results.append(exc.code)
            try:
                await canvas.edit("o1/shared", base_revision=round_ + 1, body=sys.argv[3] + str(round_))
                results.append("edited")
            except CanvasError as exc:
                results.append(exc.code)
        print(json.dumps(results))
        await canvas.close()
    asyncio.run(main())
    """
)


async def test_concurrent_writers_in_several_processes_get_the_same_clear_canvas_errors(canvas_url, clock) -> None:
    """4 processes create the same names and edit one document from the same revision at once:
    each name is created once, each revision saved once; every loser gets a coded canvas error."""
    canvas = await Canvas.open(canvas_url, clock=clock)
    await canvas.ensure_owner("user", "o1")
    await canvas.write("shared", owner="user:o1", preview=PREVIEW, body="base")
    rounds = 6
    procs = [await asyncio.create_subprocess_exec(sys.executable, "-c", RACER, canvas_url, str(rounds), f"p{i}",
                                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(4)]
    outcomes = []
    for proc in procs:
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        outcomes.append(json.loads(out))
    flat = [o for results in outcomes for o in results]
    assert set(flat) <= {"ok", "name_taken", "edited", "stale_revision"}, flat
    assert flat.count("ok") == rounds and flat.count("name_taken") == 3 * rounds
    edited = flat.count("edited")
    assert edited >= 1 and edited + flat.count("stale_revision") == 4 * rounds
    doc = (await canvas.read("o1/shared")).document
    assert doc is not None and doc.revision == 1 + edited  # every saved edit, none lost, none twice
    history = await canvas.history("o1/shared", limit=1000)
    assert [r.revision for r in history] == list(range(doc.revision, 0, -1))
    assert await canvas.count_objects(type="document") == 1 + rounds
    await canvas.close()


async def test_a_unique_violation_reaching_the_database_is_name_taken_and_writes_nothing(canvas_url, clock) -> None:
    """A writer that skips the canvas's own check still meets the database's unique index."""
    canvas = await Canvas.open(canvas_url, clock=clock)
    await canvas.write("a", owner="user:o1", preview=PREVIEW, body="x")
    before = await canvas.count_objects()
    with pytest.raises(NameTakenError, match="taken by another writer"):
        with write_session(canvas.engine) as session:
            session.execute(text("INSERT INTO objects(id, type, kind, name, privacy, status, created_at, updated_at) "
                                 "VALUES ('user:zz', 'user', '', 'zz', 'public', '', 0, 0)"))
            session.execute(text("INSERT INTO objects(id, type, kind, name, owner_id, privacy, status, created_at, "
                                 "updated_at) VALUES ('dup', 'document', '', 'a', 'user:o1', 'public', '', 0, 0)"))
    assert await canvas.count_objects() == before  # the whole unit of work rolled back
    await canvas.close()


async def test_a_newer_schema_is_refused_at_open_with_a_clear_message_and_nothing_changed(canvas_url, clock) -> None:
    canvas = await Canvas.open(canvas_url, clock=clock)
    await canvas.write("a", owner="user:o1", preview=PREVIEW, body="kept")
    with canvas.engine.begin() as conn:
        conn.execute(text("UPDATE canvas_meta SET value = :v WHERE key = 'schema_version'"),
                     {"v": str(SCHEMA_VERSION + 1)})
    await canvas.close()
    with pytest.raises(CanvasSchemaError, match=f"schema version {SCHEMA_VERSION + 1}, newer") as refused:
        await Canvas.open(canvas_url, clock=clock)
    assert "password" not in str(refused.value) and "upgrade the workbench" in str(refused.value)
    engine = make_engine(database_url(canvas_url))
    with engine.connect() as conn:
        assert schema_version(conn) == SCHEMA_VERSION + 1
        assert conn.execute(text("SELECT count(*) FROM documents")).scalar() == 1
    engine.dispose()


async def test_an_unversioned_canvas_is_migrated_at_open_and_keeps_its_objects(canvas_url, clock) -> None:
    canvas = await Canvas.open(canvas_url, clock=clock)
    await canvas.write("a", owner="user:o1", preview=PREVIEW, body="kept")
    with canvas.engine.begin() as conn:  # as a canvas from before versioning, missing a later index
        conn.execute(text("DROP TABLE canvas_meta"))
        conn.execute(text("DROP INDEX ix_objects_type_name"))
        assert schema_version(conn) == 0
    await canvas.close()
    again = await Canvas.open(canvas_url, clock=clock)
    assert (await again.read("o1/a")).document.body == "kept"  # type: ignore[union-attr]
    with again.engine.connect() as conn:
        assert schema_version(conn) == SCHEMA_VERSION
    assert [h.object.name for h in await again.search("kept")] == ["a"]
    assert create_schema(again.engine) == SCHEMA_VERSION  # opening again changes nothing
    await again.close()


async def test_a_version_1_canvas_gets_the_new_indexes_at_open_and_keeps_its_objects(canvas_url, clock) -> None:
    canvas = await Canvas.open(canvas_url, clock=clock)
    await canvas.write("pricing/tiers", owner="user:o1", preview=PREVIEW, body="kept")
    await canvas.write("notes", owner="user:o1", preview=PREVIEW, body="pricing is kept here")
    postgres = canvas.engine.dialect.name == "postgresql"
    with canvas.engine.begin() as conn:  # as a canvas written before names had their own search index
        if postgres:
            conn.execute(text("DROP INDEX ix_object_search_name"))
        conn.execute(text("DROP INDEX ix_objects_type_owner_name_pk"))
        conn.execute(text("CREATE INDEX ix_objects_type_owner_name ON objects (type, owner_id, name)"))
        conn.execute(text("UPDATE canvas_meta SET value = '1' WHERE key = 'schema_version'"))
    await canvas.close()
    again = await Canvas.open(canvas_url, clock=clock)
    with again.engine.connect() as conn:
        assert schema_version(conn) == SCHEMA_VERSION == 4
        indexes = {index["name"] for index in inspect(conn).get_indexes("objects")}
        assert "ix_objects_type_owner_name_pk" in indexes and "ix_objects_type_owner_name" not in indexes
        if postgres:
            assert conn.execute(text("SELECT count(*) FROM pg_indexes WHERE indexname = 'ix_object_search_name' "
                                     "AND schemaname = current_schema()")).scalar() == 1
    assert [h.object.name for h in await again.search("pricing")] == ["pricing/tiers", "notes"]
    assert (await again.read("o1/notes")).document.body == "pricing is kept here"  # type: ignore[union-attr]
    await again.close()


async def test_a_common_word_ranks_name_hits_first_and_fills_the_page_from_the_rest(canvas, engine_name) -> None:
    """PostgreSQL ranks the objects whose name holds the words first (their own index), then the
    others; SQLite's bm25 weighs the name ten times the body: the same page on both here."""
    for i in range(4):
        await canvas.write(f"pricing/plan-{i}", owner="user:o1", preview=PREVIEW, body="tiers")
    for i in range(6):
        await canvas.write(f"note-{i}", owner="user:o1", preview=PREVIEW, body=f"pricing came up {i} times")
    page = [h.object.name for h in await canvas.search("pricing", limit=6)]
    assert sorted(page[:4]) == [f"pricing/plan-{i}" for i in range(4)]
    assert len(page) == 6 and all(name.startswith("note-") for name in page[4:])
    assert len(await canvas.search("pricing", limit=50)) == 10
    assert [h.object.name for h in await canvas.search("pricing plan", limit=2)] == ["pricing/plan-0", "pricing/plan-1"]
    assert await canvas.search("pricing", type="node") == []
    names = {h.object.name for h in await canvas.search("pric", type="document", limit=100)}
    assert len(names) == 10  # the last word is a prefix in both tiers


async def test_pages_by_name_and_name_filters_are_the_same_on_both_engines(canvas, engine_name) -> None:
    """Byte-wise order on both (PostgreSQL's name column is COLLATE "C") and a filter that ignores case."""
    names = ["b", "B", "a-b", "a_b", "Zeta", "zeta", "a.b", "a@b", "a+b", "10", "9", "pricing/Tiers", "PRICING/x"]
    for name in names:
        await canvas.write(name, owner="user:o1", preview=PREVIEW, body="x")
    page = await canvas.list_objects(type="document", limit=100)
    assert [o.name for o in page.items] == sorted(names, key=lambda n: n.encode())
    found = await canvas.list_objects(type="document", name_filter="pricing")
    assert sorted(o.name for o in found.items) == ["PRICING/x", "pricing/Tiers"]
    assert await canvas.count_objects(type="document", name_filter="TIERS") == 1
    assert await canvas.count_objects(type="document", name_filter="a_") == 1  # "_" is a letter, not a wildcard


async def test_a_writer_held_past_the_busy_timeout_on_postgresql_is_canvas_busy(pg_schema_url, clock) -> None:
    from services.canvas import CanvasBusyError
    from services.canvas.engine import _LOCK_CLASS

    from .conftest import plain

    canvas = await Canvas.open(pg_schema_url, clock=clock, busy_timeout_ms=200, listen=False)
    await canvas.ensure_owner("user", "o1")
    with psycopg.connect(plain(pg_schema_url), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s, hashtext(current_schema()))", (_LOCK_CLASS,))
        with pytest.raises(CanvasBusyError, match="busy"):
            await canvas.write("a", owner="user:o1", preview=PREVIEW, body="b")
        assert await canvas.count_objects(type="document") == 0  # readers never wait
    await canvas.write("a", owner="user:o1", preview=PREVIEW, body="b")
    assert await canvas.count_objects(type="document") == 1
    await canvas.close()


async def test_a_read_refuses_to_write_and_on_postgresql_keeps_the_servers_plans(canvas, engine_name) -> None:
    """A read unit of work never keeps a write: SQLite's is rolled back; PostgreSQL's runs ``READ ONLY``
    (a write in it is refused) and is committed, so the statements psycopg prepared on the connection
    survive and the server does not plan each repeated read again."""
    from sqlalchemy.exc import DBAPIError

    from services.canvas.engine import read_session

    await canvas.ensure_owner("user", "o1")
    await canvas.write("kept", owner="user:o1", preview=PREVIEW, body="b")
    if engine_name == "postgresql":
        with pytest.raises(DBAPIError, match="read-only transaction"):
            with read_session(canvas.engine) as session:
                session.execute(text("UPDATE objects SET name = 'changed' WHERE name = 'kept'"))
    else:
        with read_session(canvas.engine) as session:
            session.execute(text("UPDATE objects SET name = 'changed' WHERE name = 'kept'"))
    assert (await canvas.read("o1/kept")).document.body == "b"
    for _ in range(8):  # more than psycopg's threshold (5) for preparing a statement it has run
        await canvas.list_objects(type="document", owner="user:o1")
    if engine_name == "postgresql":
        with read_session(canvas.engine) as session:
            prepared = session.execute(text("SELECT statement FROM pg_prepared_statements")).scalars().all()
        assert any("FROM objects" in statement for statement in prepared), prepared
