"""Canvas at scale, on SQLite and on PostgreSQL side by side: build 100,000 objects and 300,000 edges,
then time the UI's queries.

Run: ``python benchmarks/canvas.py [--objects N] [--edges M] [--repeat R] [--db PATH] [--pg-url URL]
[--batch B] [--engines sqlite,postgresql]``. PostgreSQL is ``--pg-url``, else ``WORKBENCH_TEST_PG_URL``, else a
throwaway local server started for the run (``tests/services/canvas/pgserver.py``); the benchmark
works in a schema of its own and drops it afterwards. For each engine it prints the bulk build rate,
the insert throughput through the API (``Canvas.write``: one unit of work per document, with its
revision, event and search index; then ``Canvas.write_many``: the same for ``--batch`` documents per
unit of work, and its ratio to the first), a bulk load of ``--bulk`` linked documents (each links the
next and one further on, most in a later batch) through ``Canvas.write_many`` beside the same rows
inserted with plain SQL (``executemany`` per table on the same engine, as many documents per
transaction, search index included) into another empty canvas, as a ratio (aim: within 3x), the change-feed latency between two canvases (PostgreSQL:
``NOTIFY`` to the other canvas's feed), and, for each query the UI makes (one page of objects by type and owner
with a name filter, a count, one object's neighbourhood both ways, a full-text search, an inbox
page, one object's detail), the median over ``--repeat`` calls through the async ``Canvas`` API,
and its ratio to an indexed point lookup (``Canvas.get`` by id) measured in the same run.
The target is every query under 20 ms at 100k objects / 300k edges, on each engine.

Eligibility and delivery: a node whose person owns 1% of the documents (about 1,000 of 100k; with boot rules at
every level, a seventh private and a seventh friends-only) gets its boot context timed (target
< 20 ms; also as a ratio to ``Canvas.get``; the bulk load files the documents' rules by owner and event
through the canvas's own triggers, as any write does), and the searches and a list page are timed again as that node reads them (filtered
by eligibility inside the query), each with its ratio to the operator's unfiltered figure
(target <= 1.5).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import bindparam, text  # noqa: E402
from sqlmodel import Session  # noqa: E402

from services.canvas import Canvas, ReaderView  # noqa: E402
from services.canvas.engine import is_postgres, write_session  # noqa: E402
from services.canvas.service import WRITE_MANY_LIMIT  # noqa: E402
from services.canvas.search import index_many  # noqa: E402
from services.changes import ChangeFeed  # noqa: E402

WORDS = ("pricing deploy canvas inbox node repo profile insight listener harvest judgment grant token run event "
         "stream watcher revision preview summary owner privacy public friends private report job custom queue "
         "alpha beta gamma delta tuesday annual discount market craft domain boundary principle").split()
VOCABULARY = [f"{a}{b}{c}" for a in "bcdfghklmnprstvz" for b in "aeiou" for c in ("n", "r", "s", "l", "t", "m")] * 1
VOCABULARY = [w + s for w in VOCABULARY for s in ("", "a", "o", "ex", "ing")]
"""About 2,400 made-up words for bodies, so a search word is as selective as in real writing."""
CHUNK = 10_000


def _chunks(rows: list[dict], size: int = CHUNK):
    for i in range(0, len(rows), size):
        yield rows[i:i + size]


def bulk_insert(session: Session, table: str, rows: list[dict[str, object]]) -> None:
    """Insert ``rows`` (all with the same keys) into ``table`` through the driver itself, in the
    session's transaction: ``executemany`` of plain tuples on SQLite, ``COPY`` on PostgreSQL. The ORM
    would build and check an object per row, which at a million rows costs minutes."""
    if not rows:
        return
    columns = list(rows[0])
    raw = session.connection().connection.driver_connection
    if is_postgres(session):
        with raw.cursor() as cursor, cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(tuple(row[c] for c in columns))
        return
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    cursor = raw.cursor()
    for part in _chunks(rows, 50_000):
        cursor.executemany(sql, [tuple(row[c] for c in columns) for row in part])
    cursor.close()


def sqlite_load(path: str, tables: tuple[tuple[str, list[dict[str, object]]], ...],
                fts: list[dict[str, object]]) -> None:
    """A bulk load as SQLite's own documentation advises: one transaction on a plain connection (no
    foreign-key check per row: the rows are built consistent), the tables' indexes dropped first and
    built again after from sorted data, then the search index."""
    conn = sqlite3.connect(path, isolation_level=None)
    names = [t for t, _ in tables]
    marks = ", ".join("?" * len(names))
    ddl = conn.execute(f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
                       f"AND tbl_name IN ({marks})", names).fetchall()
    for name, _ in ddl:
        conn.execute(f'DROP INDEX "{name}"')
    conn.execute("BEGIN")
    for table, rows in tables:
        if not rows:
            continue
        columns = list(rows[0])
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        for part in _chunks(rows, 50_000):
            conn.executemany(sql, [tuple(row[c] for c in columns) for row in part])
    conn.executemany("INSERT INTO object_fts(rowid, name, preview, body) VALUES (:rowid, :name, :preview, :body)", fts)
    conn.execute("COMMIT")
    for _, sql in ddl:
        conn.execute(sql)
    conn.close()


def build(canvas: Canvas, n_objects: int, n_edges: int, seed: int = 7) -> dict[str, object]:
    """Fill the canvas with Core bulk inserts; returns the ids the queries use."""
    rng = random.Random(seed)
    now = time.time()
    owners = [("user", "o1")] + [("repo", f"repo{i}") for i in range(10)] + [("profile", f"p{i}") for i in range(5)]
    n_nodes, n_jobs = max(10, n_objects // 50), max(5, n_objects // 100)
    n_docs = n_objects - len(owners) - n_nodes - n_jobs
    objects: list[dict] = []
    pk = 1000
    for type_, handle in owners:
        pk += 1
        objects.append(dict(pk=pk, id=f"{type_}:{handle}", type=type_, kind="", name=handle, handle=handle,
                            owner_id=None, privacy="public", status="", created_at=now, updated_at=now))
    node_ids = [f"node_{i:06d}" for i in range(n_nodes)]
    for node_id in node_ids:
        pk += 1
        objects.append(dict(pk=pk, id=node_id, type="node", kind="general", name=node_id, handle=node_id,
                            owner_id="user:o1", privacy="public", status=rng.choice(["active", "idle", "done"]),
                            created_at=now, updated_at=now))
    for i in range(n_jobs):
        pk += 1
        objects.append(dict(pk=pk, id=f"job_{i:06d}", type="job", kind="", name=f"job_{i:06d}", handle=None,
                            owner_id=rng.choice(node_ids), privacy="public", status="exited", created_at=now,
                            updated_at=now))
    doc_owner_ids = [f"{t}:{h}" for t, h in owners] + node_ids[:50]
    docs: list[dict] = []
    fts: list[dict] = []
    for i in range(n_docs):
        pk += 1
        owner = doc_owner_ids[i % len(doc_owner_ids)] if i % 3 else "repo:repo0"
        owner = "user:o1" if i % 97 == 1 else owner  # 1% of the documents (1,000 of 100,000): the boot node's person
        name = f"{rng.choice(WORDS)}/{rng.choice(WORDS)}-{i:06d}"
        preview = f"When {rng.choice(WORDS)} {rng.choice(WORDS)} comes up, read this because {rng.choice(WORDS)}."
        body = " ".join(rng.choice(VOCABULARY) for _ in range(30)) + " " + rng.choice(WORDS)
        privacy = "private" if i % 7 == 3 else "friends" if i % 7 == 5 else "public"
        rules = BOOT_RULES[i % len(BOOT_RULES)] if owner == "user:o1" else "[]"
        objects.append(dict(pk=pk, id=f"doc_{i:07d}", type="document", kind="knowledge", name=name, handle=None,
                            owner_id=owner, privacy=privacy, status="", created_at=now, updated_at=now))
        docs.append(dict(object_id=f"doc_{i:07d}", kind="knowledge", preview=preview, summary=None, body=body,
                         rules=rules, revision=1, updated_by=None))
        fts.append(dict(pk=pk, name=name, preview=preview, body=body))
    all_ids = [o["id"] for o in objects]
    hub = "doc_0000000"
    edges: set[tuple[str, str, str]] = set()
    kinds = ("links-to", "watches", "acted-on")
    while len(edges) < n_edges:
        src = rng.choice(node_ids) if rng.random() < 0.4 else rng.choice(all_ids)
        dst = hub if rng.random() < 0.002 else rng.choice(all_ids)
        if src != dst:
            edges.add((src, dst, rng.choice(kinds)))
    inbox_owner = node_ids[0]
    inbox = [dict(owner_id=inbox_owner if i % 10 == 0 else rng.choice(node_ids), kind="event", event_id=None,
                  object_id=rng.choice(all_ids), object_name="x", event_type=rng.choice(["edited", "created"]),
                  level=rng.randint(1, 10), actor_id=None, at=now + i, summary=f"event {i}", body=None,
                  read_at=None if rng.random() < 0.5 else now, ref=None) for i in range(n_objects)]
    revisions = [dict(document_id=d["object_id"], revision=1, name="x", kind="knowledge", preview=d["preview"],
                      summary=None, body=d["body"], rules="[]", author=None, at=now) for d in docs]
    nodes = [dict(object_id=n, kind="general", mode="base", lifecycle="terminal", turn_active=False,
                  wake_pending=False, wakes=0, last_seq=0) for n in node_ids]
    edge_rows = [dict(src_id=s, dst_id=d, kind=k, created_at=now) for s, d, k in edges]
    tables = (("objects", objects), ("documents", docs), ("revisions", revisions), ("nodes", nodes),
              ("edges", edge_rows), ("inbox", inbox))
    if not is_postgres(canvas.engine):
        sqlite_load(str(canvas.engine.url.database), tables,
                    [dict(rowid=r["pk"], name=r["name"], preview=r["preview"], body=r["body"]) for r in fts])
    else:
        with write_session(canvas.engine) as session:
            for table, rows in tables:
                bulk_insert(session, table, rows)
            for part in _chunks(fts):
                index_many(session, part)
            # explicit keys were inserted: move the key sequence past them
            session.execute(text("SELECT setval(pg_get_serial_sequence('objects', 'pk'), (SELECT max(pk) FROM objects))"))
    if is_postgres(canvas.engine):  # what autovacuum does soon after a bulk load: statistics and the visibility map
        loaded = ", ".join([t for t, _ in tables] + ["object_search"])  # this schema's tables only: a database-wide
        with canvas.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:  # run meets others' DDL
            conn.exec_driver_sql(f"VACUUM (ANALYZE) {loaded}")
    else:
        with canvas.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    boot_node = node_ids[min(60, len(node_ids) - 1)]  # owns no documents; its person (user:o1) owns 1% of the documents
    return {"hub": hub, "inbox_owner": inbox_owner, "node": node_ids[1], "docs": n_docs, "edges": len(edges),
            "boot_node": boot_node}


async def timed(repeat: int, call) -> float:
    """Median seconds of ``repeat`` awaited calls (after one warm-up)."""
    await call()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


QUERIES = {
    "list page: documents of repo:repo0, name filter 'pricing', 50 rows":
        lambda c, ids: c.list_objects(type="document", owner="repo:repo0", name_filter="pricing", limit=50),
    "list page: documents of repo:repo0, offset 5000":
        lambda c, ids: c.list_objects(type="document", owner="repo:repo0", offset=5000, limit=50),
    "list page: all nodes by name": lambda c, ids: c.list_objects(type="node", limit=50),
    "count: documents of repo:repo0": lambda c, ids: c.count_objects(type="document", owner="repo:repo0"),
    "neighbourhood of the hub document (both ways, by kind)": lambda c, ids: c.edges(str(ids["hub"])),
    "neighbourhood of a node (both ways, by kind)": lambda c, ids: c.edges(str(ids["node"])),
    "full-text search 'annual discount'": lambda c, ids: c.search("annual discount"),
    "full-text search 'pricing' (common word)": lambda c, ids: c.search("pricing"),
    "inbox page (50) with unread/total counts": lambda c, ids: c.inbox(str(ids["inbox_owner"]), limit=50),
    "object detail (document, revisions, events, watchers)": lambda c, ids: c.read(str(ids["hub"])),
}
PREVIEW = "When measuring the canvas, read this because it is a benchmark."
BOOT_RULES = ('[{"deliver": "preview", "on": "boot"}]', '[{"deliver": "name", "on": "boot"}]',
              '[{"deliver": "content", "on": "boot"}]', '[{"deliver": "preview", "if": {"mode": "orchestrator"}, "on": "boot"}]',
              "[]")
"""The rules of user:o1's documents, in turn: most load at some level, some need an orchestrator, some have none."""


def reader(ids: dict[str, object]) -> ReaderView:
    """The benchmark's reader: the boot node, run by user o1."""
    return ReaderView(node=str(ids["boot_node"]), person="o1")


DELIVERY = {
    "boot context, node whose person owns 1% of the documents (< 20 ms)":
        lambda c, ids: c.boot_context(str(ids["boot_node"])),
    "search 'pricing' as a node (eligibility filtered)":
        lambda c, ids: c.search("pricing", view=reader(ids)),
    "search 'annual discount' as a node (filtered)":
        lambda c, ids: c.search("annual discount", view=reader(ids)),
    "list page 'pricing' as a node (filtered)":
        lambda c, ids: c.list_objects(type="document", name_filter="pricing", limit=50, view=reader(ids)),
}
"""Eligibility and delivery figures; each search is also given as a ratio to the operator's same search."""


async def feed_latency(target: str, samples: int = 20) -> float:
    """Median seconds from one canvas's committed write to its change on another canvas's feed."""
    feed = ChangeFeed()
    writer = await Canvas.open(target, listen=False)
    reader = await Canvas.open(target, changes=feed)
    loop = asyncio.get_running_loop()
    arrived: asyncio.Queue[float] = asyncio.Queue()
    unsubscribe = feed.subscribe(lambda c: loop.call_soon_threadsafe(arrived.put_nowait, time.perf_counter())
                                 if c.kind == "document.written" else None)
    if not is_postgres(writer.engine):  # SQLite: one process's canvases share no feed; the local feed is the figure
        writer.changes = feed
    times = []
    for i in range(samples):
        start = time.perf_counter()
        await writer.write(f"latency/{uuid.uuid4().hex[:8]}-{i}", owner="user:o1", preview=PREVIEW, body="x")
        times.append(await asyncio.wait_for(arrived.get(), 10) - start)
    unsubscribe()
    await writer.close()
    await reader.close()
    return statistics.median(times)


def built_ids(n_objects: int, n_edges: int) -> dict[str, object]:
    """The ids ``build`` returns for a canvas of ``n_objects`` built before (``--reuse``)."""
    n_nodes = max(10, n_objects // 50)
    n_docs = n_objects - 16 - n_nodes - max(5, n_objects // 100)
    return {"hub": "doc_0000000", "inbox_owner": "node_000000", "node": "node_000001", "docs": n_docs,
            "edges": n_edges, "boot_node": f"node_{min(60, n_nodes - 1):06d}"}


async def run_engine(target: str, args: argparse.Namespace) -> dict[str, float]:
    """Build, measure and return ``{figure: value}`` for one engine (ms, or rows/s)."""
    start = time.perf_counter()
    canvas = await Canvas.open(target)
    out: dict[str, float] = {"open (a canvas built before: any one-off backfill), s": time.perf_counter() - start}
    if args.reuse:
        ids = built_ids(args.objects, args.edges)
        out["edges"] = float(args.edges)
    else:
        start = time.perf_counter()
        ids = await asyncio.to_thread(build, canvas, args.objects, args.edges)
        built = time.perf_counter() - start
        rows = args.objects + int(ids["edges"]) + int(ids["docs"]) * 2 + args.objects
        out.update({"bulk build, rows/s": rows / built, "edges": float(ids["edges"])})
    n = args.inserts
    run = uuid.uuid4().hex[:6]  # names of their own, so a canvas measured again (--reuse) takes them too
    if n:
        start = time.perf_counter()
        for i in range(n):
            await canvas.write(f"inserted-{run}/{i}", owner="user:o1", preview=PREVIEW, body=f"inserted body {i}")
        one_by_one = n / (time.perf_counter() - start)
        out["API inserts (Canvas.write), docs/s"] = one_by_one
        start = time.perf_counter()
        for first in range(0, n, args.batch):
            await canvas.write_many([{"name": f"batched-{run}/{i}", "owner": "user:o1", "preview": PREVIEW,
                                      "body": f"batched body {i}"} for i in range(first, min(n, first + args.batch))])
        batched = n / (time.perf_counter() - start)
        out[f"API inserts (Canvas.write_many, {args.batch} a call), docs/s"] = batched
        out["  batched / one by one"] = batched / one_by_one
    out["change feed latency, ms"] = await feed_latency(target) * 1e3
    base = await timed(args.repeat, lambda: canvas.get(str(ids["hub"])))
    out["baseline: Canvas.get by id, ms"] = base * 1e3
    worst = 0.0
    for label, call in QUERIES.items():
        median = await timed(args.repeat, lambda call=call: call(canvas, ids))
        worst = max(worst, median)
        out[label] = median * 1e3
    out["slowest query, ms (target < 20)"] = worst * 1e3
    context = await canvas.boot_context(str(ids["boot_node"]))
    out["boot context: share of its view loaded"] = len(context.items) / max(1, len(context.items) + len(context.not_loaded))
    out["boot context: documents loaded"] = float(len(context.items))
    out["boot context: documents weighed (its view)"] = float(len(context.items) + len(context.not_loaded))
    for label, call in DELIVERY.items():
        out[label] = await timed(args.repeat, lambda call=call: call(canvas, ids)) * 1e3
    out["  boot context / Canvas.get by id"] = (
        out["boot context, node whose person owns 1% of the documents (< 20 ms)"] / out["baseline: Canvas.get by id, ms"])
    out["  filtered / operator search 'pricing' (<= 1.5)"] = (
        out["search 'pricing' as a node (eligibility filtered)"] / out["full-text search 'pricing' (common word)"])
    out["  filtered / operator 'annual discount' (<= 1.5)"] = (
        out["search 'annual discount' as a node (filtered)"] / out["full-text search 'annual discount'"])
    plain = await timed(args.repeat, lambda: canvas.list_objects(type="document", name_filter="pricing", limit=50))
    out["  filtered / operator list page 'pricing'"] = (
        out["list page 'pricing' as a node (filtered)"] / (plain * 1e3))
    await canvas.close()
    return out


def _linked_documents(n: int) -> list[dict[str, object]]:
    """``n`` documents, each linking the next one and one further on: most links point at a document
    of a later batch, as an import of an existing corpus does."""
    return [{"name": f"bulk/{i}", "owner": "user:o1", "preview": PREVIEW,
             "body": f"bulk body {i} {random.choice(VOCABULARY)} links [[bulk/{(i + 1) % n}]] "
                     f"and [[bulk/{(i * 7 + 3) % n}]]"} for i in range(n)]


_BULK_TABLES = (  # (table, columns copied as they are): the rows a write_many of documents makes
    ("objects", "id, type, kind, name, handle, owner_id, privacy, status, created_at, updated_at"),
    ("documents", "object_id, kind, preview, summary, body, rules, revision, updated_by"),
    ("revisions", "document_id, revision, name, kind, preview, summary, body, rules, author, at"),
    ("links", "document_id, target, target_id"),
    ("edges", "src_id, dst_id, kind, created_at"),
    ("events", "object_id, type, level, actor_id, at, data"),
)


async def bulk_load(through_api: str, plain: str, n: int, batch: int) -> dict[str, float]:
    """Load ``n`` linked documents into the empty canvas ``through_api`` with ``Canvas.write_many``
    (``batch`` a call), then insert the same rows, read back from it, into the empty canvas ``plain``
    with plain SQL on the same engine: ``executemany`` per table, ``batch`` documents per
    transaction, with the search index's rows. Returns both times and their ratio."""
    documents = _linked_documents(n)
    canvas = await Canvas.open(through_api)
    start = time.perf_counter()
    for first in range(0, n, batch):
        await canvas.write_many(documents[first:first + batch])
    api = time.perf_counter() - start
    rows: dict[str, list[tuple[object, ...]]] = {}
    with write_session(canvas.engine) as session:
        docs = "(SELECT id FROM objects WHERE type = 'document')"
        where = {"objects": "type = 'document'", "documents": f"object_id IN {docs}",
                 "revisions": f"document_id IN {docs}", "links": f"document_id IN {docs}",
                 "edges": f"src_id IN {docs}", "events": f"object_id IN {docs}"}
        for table, columns in _BULK_TABLES:
            order = {"objects": "pk", "documents": "object_id"}.get(table, "id")
            rows[table] = [tuple(r) for r in session.execute(
                text(f"SELECT {columns} FROM {table} WHERE {where[table]} ORDER BY {order}")).all()]
        full = dict(session.execute(text("SELECT document_id, name FROM revisions")).all())
    await canvas.close()
    batch_of = {row[0]: i // batch for i, row in enumerate(rows["objects"])}
    batches: list[dict[str, list[tuple[object, ...]]]] = [{t: [] for t, _ in _BULK_TABLES}
                                                          for _ in range(len(range(0, n, batch)))]
    target = {"links": 2, "edges": 1}  # a link or edge goes in with the later of its two ends
    for table, _ in _BULK_TABLES:
        for row in rows[table]:
            at = batch_of[str(row[0])]
            if table in target:
                at = max(at, batch_of.get(str(row[target[table]]), 0))
            batches[at][table].append(row)
    search = [[{"id": d[0], "name": full[d[0]], "preview": d[2], "body": d[4]} for d in part["documents"]]
              for part in batches]
    ids_of = text("SELECT id, pk FROM objects WHERE id IN :ids").bindparams(bindparam("ids", expanding=True))
    other = await Canvas.open(plain)
    await other.ensure_owner("user", "o1")
    start = time.perf_counter()
    for part, entries in zip(batches, search):
        with write_session(other.engine) as session:
            conn = session.connection()
            for table, columns in _BULK_TABLES:
                if part[table]:
                    marks = ", ".join(f":c{i}" for i in range(len(part[table][0])))
                    conn.execute(text(f"INSERT INTO {table} ({columns}) VALUES ({marks})"),
                                 [{f"c{i}": v for i, v in enumerate(r)} for r in part[table]])
            pks = dict(conn.execute(ids_of, {"ids": [e["id"] for e in entries]}).all())
            index_many(session, [{"pk": pks[e["id"]], "name": e["name"], "preview": e["preview"], "body": e["body"]}
                                 for e in entries])
    sql = time.perf_counter() - start
    await other.close()
    return {f"bulk load: {n:,} linked documents via write_many, s": api,
            "bulk load: the same rows in plain SQL (executemany), s": sql,
            "  write_many / plain SQL (aim <= 3)": api / sql}


def pg_target(url: str | None, keep: str | None = None) -> tuple[str, str, str]:
    """``(canvas URL in a fresh schema, or in the schema ``keep``, server URL, schema)``; starts a
    throwaway server if needed."""
    import os

    import psycopg

    if url is None:
        url = os.environ.get("WORKBENCH_TEST_PG_URL")
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "services" / "canvas"))
        from pgserver import server_url  # type: ignore[import-not-found]

        url = server_url()
    if url is None:
        raise SystemExit("no PostgreSQL: pass --pg-url, set WORKBENCH_TEST_PG_URL, or install postgresql")
    schema = keep or f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}", url, schema


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--inserts", type=int, default=500, help="documents written through the API per engine")
    parser.add_argument("--batch", type=int, default=100, help="documents per Canvas.write_many call")
    parser.add_argument("--bulk", type=int, default=10_000,
                        help="linked documents bulk-loaded through write_many and as plain SQL (0: skip)")
    parser.add_argument("--db", type=Path, default=None, help="SQLite database file (default: a temporary folder)")
    parser.add_argument("--pg-url", default=None, help="postgresql+psycopg:// URL of a server to measure")
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--reuse", action="store_true",
                        help="measure the canvas already built at --db / --pg-schema (same --objects, --edges)")
    parser.add_argument("--pg-schema", default=None,
                        help="PostgreSQL: build in (or, with --reuse, measure) this schema and keep it")
    args = parser.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    folder = tempfile.TemporaryDirectory()
    results: dict[str, dict[str, float]] = {}
    if "sqlite" in engines:
        results["SQLite"] = await run_engine(str(args.db or Path(folder.name) / "canvas.db"), args)
        if args.bulk:
            results["SQLite"].update(await bulk_load(str(Path(folder.name) / "bulk-api.db"),
                                                     str(Path(folder.name) / "bulk-sql.db"), args.bulk, WRITE_MANY_LIMIT))
        print(f"SQLite done: {results['SQLite']}", file=sys.stderr, flush=True)  # kept if a later engine fails
    if "postgresql" in engines:
        import psycopg

        target, server, schema = pg_target(args.pg_url, args.pg_schema)
        try:
            results["PostgreSQL"] = await run_engine(target, args)
            if args.bulk:
                api_target, _, api_schema = pg_target(server)
                sql_target, _, sql_schema = pg_target(server)
                try:
                    results["PostgreSQL"].update(await bulk_load(api_target, sql_target, args.bulk, WRITE_MANY_LIMIT))
                finally:
                    with psycopg.connect(server.replace("+psycopg", ""), autocommit=True) as conn:
                        conn.execute(f"DROP SCHEMA {api_schema} CASCADE")
                        conn.execute(f"DROP SCHEMA {sql_schema} CASCADE")
        finally:
            if args.pg_schema is None:
                with psycopg.connect(server.replace("+psycopg", ""), autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA {schema} CASCADE")
    folder.cleanup()
    names = list(results)
    first = results[names[0]]
    print(f"canvas benchmark: {args.objects:,} objects, {int(first['edges']):,} edges, {args.objects:,} inbox entries; "
          f"medians of {args.repeat} calls through the async Canvas API")
    print(f"{'':62}" + "".join(f"{n:>14}" for n in names) + f"{'aim':>10}{'worst/aim':>11}"
          + ("  PG/SQLite" if len(names) == 2 else ""))
    for label in first:
        if label == "edges":
            continue
        values = [results[n][label] for n in names]
        aim = aim_of(label)
        against = f"{aim:10,.1f}{max(values) / aim:10.2f}x" if aim else " " * 21
        ratio = f"  {values[1] / values[0]:8.2f}x" if len(values) == 2 and values[0] else ""
        print(f"{label[:62]:62}" + "".join(f"{v:14,.2f}" for v in values) + against + ratio)


def aim_of(label: str) -> float | None:
    """The aim a figure is held to (ms for a query, a ratio for a ``<=`` line), or None."""
    if "(<= 1.5)" in label:
        return 1.5
    if "(aim <= 3)" in label:
        return 3.0
    if label.startswith(("list page", "count", "neighbourhood", "full-text", "inbox", "object detail", "boot context,",
                         "search ", "slowest")):
        return 20.0
    return None

if __name__ == "__main__":
    asyncio.run(main())
