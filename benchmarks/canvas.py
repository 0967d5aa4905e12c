"""Canvas at scale: build 100,000 objects and 300,000 edges, then time the UI's queries.

Run: ``python benchmarks/canvas.py [--objects N] [--edges M] [--repeat R] [--db PATH]``.
Prints the build time and, for each query the UI makes (one page of objects by type and owner
with a name filter, a count, one object's neighbourhood both ways, a full-text search, an inbox
page, one object's detail), the median over ``--repeat`` calls through the async ``Canvas`` API,
and its ratio to an indexed point lookup (``Canvas.get`` by id) measured in the same run.
The target is every query under 20 ms at 100k objects / 300k edges.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert, text  # noqa: E402

from services.canvas import Canvas  # noqa: E402
from services.canvas.engine import write_session  # noqa: E402
from services.canvas.models import DocumentRow, EdgeRow, InboxRow, NodeRow, ObjectRow, RevisionRow  # noqa: E402

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
        name = f"{rng.choice(WORDS)}/{rng.choice(WORDS)}-{i:06d}"
        preview = f"When {rng.choice(WORDS)} {rng.choice(WORDS)} comes up, read this because {rng.choice(WORDS)}."
        body = " ".join(rng.choice(VOCABULARY) for _ in range(30)) + " " + rng.choice(WORDS)
        objects.append(dict(pk=pk, id=f"doc_{i:07d}", type="document", kind="knowledge", name=name, handle=None,
                            owner_id=owner, privacy="public", status="", created_at=now, updated_at=now))
        docs.append(dict(object_id=f"doc_{i:07d}", kind="knowledge", preview=preview, summary=None, body=body,
                         rules="[]", revision=1, updated_by=None))
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
    with write_session(canvas.engine) as session:
        for part in _chunks(objects):
            session.execute(insert(ObjectRow), part)
        for part in _chunks(docs):
            session.execute(insert(DocumentRow), part)
            session.execute(insert(RevisionRow), [dict(document_id=d["object_id"], revision=1, name="x", kind="knowledge",
                                                       preview=d["preview"], summary=None, body=d["body"], rules="[]",
                                                       author=None, at=now) for d in part])
        session.execute(insert(NodeRow), [dict(object_id=n, kind="general", mode="base", lifecycle="terminal",
                                               turn_active=False, wake_pending=False, wakes=0, last_seq=0)
                                          for n in node_ids])
        for part in _chunks([dict(src_id=s, dst_id=d, kind=k, created_at=now) for s, d, k in edges]):
            session.execute(insert(EdgeRow), part)
        for part in _chunks(inbox):
            session.execute(insert(InboxRow), part)
        for part in _chunks(fts):
            session.execute(text("INSERT INTO object_fts(rowid, name, preview, body) VALUES (:pk, :name, :preview, :body)"),
                            part)
    with canvas.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE")
        conn.commit()
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"hub": hub, "inbox_owner": inbox_owner, "node": node_ids[1], "docs": n_docs, "edges": len(edges)}


async def timed(repeat: int, call) -> float:
    """Median seconds of ``repeat`` awaited calls (after one warm-up)."""
    await call()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--db", type=Path, default=None, help="database file (default: a temporary folder)")
    args = parser.parse_args()
    folder = tempfile.TemporaryDirectory()
    path = args.db or Path(folder.name) / "canvas.db"
    canvas = await Canvas.open(path)
    start = time.perf_counter()
    ids = await asyncio.to_thread(build, canvas, args.objects, args.edges)
    built = time.perf_counter() - start
    rows = args.objects + int(ids["edges"]) + int(ids["docs"]) * 2 + args.objects
    print(f"canvas benchmark: {args.objects:,} objects, {ids['edges']:,} edges, {args.objects:,} inbox entries "
          f"({path.stat().st_size / 1e6:.0f} MB)")
    print(f"build (Core bulk insert + FTS index + ANALYZE + checkpoint): {built:.2f} s ({rows / built:,.0f} rows/s)")
    base = await timed(args.repeat, lambda: canvas.get(str(ids["hub"])))
    queries = {
        "list page: documents of repo:repo0, name filter 'pricing', 50 rows":
            lambda: canvas.list_objects(type="document", owner="repo:repo0", name_filter="pricing", limit=50),
        "list page: documents of repo:repo0, offset 5000":
            lambda: canvas.list_objects(type="document", owner="repo:repo0", offset=5000, limit=50),
        "list page: all nodes by name": lambda: canvas.list_objects(type="node", limit=50),
        "count: documents of repo:repo0": lambda: canvas.count_objects(type="document", owner="repo:repo0"),
        "neighbourhood of the hub document (both ways, by kind)": lambda: canvas.edges(str(ids["hub"])),
        "neighbourhood of a node (both ways, by kind)": lambda: canvas.edges(str(ids["node"])),
        "full-text search 'annual discount'": lambda: canvas.search("annual discount"),
        "full-text search 'pricing' (common word)": lambda: canvas.search("pricing"),
        "inbox page (50) with unread/total counts": lambda: canvas.inbox(str(ids["inbox_owner"]), limit=50),
        "object detail (document, revisions, events, watchers)": lambda: canvas.read(str(ids["hub"])),
    }
    print(f"baseline: Canvas.get by id (indexed point lookup through the service): {base * 1e3:.2f} ms")
    worst = 0.0
    for label, call in queries.items():
        median = await timed(args.repeat, call)
        worst = max(worst, median)
        print(f"  {median * 1e3:7.2f} ms  ({median / base:5.1f}x baseline)  {label}")
    print(f"slowest query: {worst * 1e3:.2f} ms (target < 20 ms)")
    await canvas.close()
    folder.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
