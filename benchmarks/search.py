"""Canvas search on large documents: the cost of one search must not grow with a document's hits.

Run: ``python benchmarks/search.py [--repeat R] [--sizes 64,256,1024,4096] [--compare]``.

For each size (KiB) it writes one document made of ``{"s": "ok"},`` lines (every line a hit for
``ok``) and prints the median time of ``Canvas.search("ok")`` through the async API, its ratio to
an indexed point lookup (``Canvas.get`` by id) measured in the same run, and the ratio to the same
search over a one-line document. The target is one 1 MiB document searched in under 200 ms.

``--compare`` also times FTS5's own ``snippet()`` on 64 and 128 KiB of the same text, the way
search used to build snippets: its cost grows with the square of the hits (it took over 20 s on
the 1 MiB document), which is why the canvas now builds snippets from a bounded window.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import text  # noqa: E402

from services.canvas import Canvas  # noqa: E402

PREVIEW = "When measuring search, read this because it is the benchmark's document."
LINE = '{"s": "ok"},\n'


async def timed(repeat: int, call) -> float:
    """Median seconds of ``repeat`` awaited calls (after one warm-up)."""
    await call()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def fts_snippet_seconds(canvas: Canvas, full_name: str) -> float:
    """One FTS5 ``snippet()`` over the indexed document ``full_name`` (the former way)."""
    start = time.perf_counter()
    with canvas.engine.connect() as conn:
        conn.execute(text("SELECT snippet(object_fts, -1, '', '', '…', 12) FROM object_fts "
                          "WHERE object_fts MATCH :m AND name = :n"), {"m": '"ok"*', "n": full_name}).all()
    return time.perf_counter() - start


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--sizes", default="64,256,1024,4096", help="document sizes in KiB, comma separated")
    parser.add_argument("--compare", action="store_true", help="also time FTS5 snippet() on 64 and 128 KiB")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    with tempfile.TemporaryDirectory() as folder:
        worst_1mib = None
        for kib in sizes:
            canvas = await Canvas.open(Path(folder) / f"search-{kib}.db")
            await canvas.ensure_owner("user", "bench")
            small = await canvas.write("small", owner="user:bench", preview=PREVIEW, body=LINE)
            base = await timed(args.repeat, lambda c=canvas, i=small.object.id: c.get(i))
            one_line = await timed(args.repeat, lambda c=canvas: c.search("ok"))
            await canvas.delete(small.object.id)
            body = LINE * (kib * 1024 // len(LINE))
            await canvas.write("big", owner="user:bench", preview=PREVIEW, body=body)
            median = await timed(args.repeat, lambda c=canvas: c.search("ok"))
            hits = await canvas.search("ok")
            assert hits and "ok" in hits[0].snippet
            print(f"{kib:6d} KiB ({body.count(chr(10)):,} hits): search('ok') {median * 1e3:7.2f} ms  "
                  f"({median / base:5.1f}x a point lookup, {median / one_line:4.1f}x the same search on one line)")
            if kib == 1024:
                worst_1mib = median
            if args.compare and kib == sizes[0]:
                for part in (64, 128):
                    await canvas.write(f"fts{part}", owner="user:bench", preview=PREVIEW,
                                       body=LINE * (part * 1024 // len(LINE)))
                    seconds = fts_snippet_seconds(canvas, f"bench/fts{part}")
                    print(f"        FTS5 snippet() on {part} KiB: {seconds * 1e3:9.1f} ms (grows with hits squared)")
            await canvas.close()
        if worst_1mib is not None:
            print(f"1 MiB document: {worst_1mib * 1e3:.2f} ms (target < 200 ms)")


if __name__ == "__main__":
    asyncio.run(main())
