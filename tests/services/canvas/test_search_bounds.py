"""Search cost is bounded on large documents: bounded windows, a cap on hits weighed and on results.

The speed itself is measured by ``benchmarks/search.py``; these tests pin down the bounded work.
"""

from __future__ import annotations

from services.canvas import Canvas
from services.canvas.search import MAX_RESULTS, MAX_SNIPPET_HITS, SNIPPET_CHARS, SNIPPET_SCAN, make_snippet

from .conftest import PREVIEW

LINE = '{"s": "ok"},\n'
MIB = LINE * (1024 * 1024 // len(LINE))


async def test_search_work_is_bounded_on_a_large_document(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    big = await canvas.write("big", owner="user:o1", preview=PREVIEW, body=MIB)
    hits = await canvas.search("ok")
    assert [h.object.id for h in hits] == [big.object.id]
    assert '"ok"' in hits[0].snippet and len(hits[0].snippet) <= SNIPPET_CHARS + 2
    # the same text through the snippet builder: a bounded window, a bounded number of matches
    snippet = make_snippet([PREVIEW, MIB, "big"], ["ok"])
    assert snippet.hits_considered == MAX_SNIPPET_HITS  # of about 80,000 matches
    assert snippet.scanned <= len(PREVIEW) + SNIPPET_SCAN + len("big")
    assert snippet.text == hits[0].snippet


async def test_a_match_beyond_the_window_is_found_but_its_snippet_is_not_looked_for_there(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    body = "filler " * (SNIPPET_SCAN // 7 + 10) + "needle at the far end"
    doc = await canvas.write("deep", owner="user:o1", preview=PREVIEW, body=body)
    hits = await canvas.search("needle")
    assert [h.object.id for h in hits] == [doc.object.id]  # the index finds it ...
    assert "needle" not in hits[0].snippet and hits[0].snippet.startswith("When testing")  # ... the window stops


async def test_a_snippet_sits_where_most_query_words_meet(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    body = "alpha stands alone here. " * 20 + "Later alpha and beta meet in one sentence."
    await canvas.write("meet", owner="user:o1", preview=PREVIEW, body=body)
    hit = (await canvas.search("alpha beta"))[0]
    assert "alpha and beta meet" in hit.snippet and hit.snippet.startswith("…")
    assert make_snippet(["no match here"], ["zzz"]).text == "no match here"


async def test_one_search_returns_a_bounded_number_of_hits(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    for i in range(MAX_RESULTS + 5):
        await canvas.write(f"n{i}", owner="user:o1", preview=PREVIEW, body="common word")
    assert len(await canvas.search("common", limit=10_000)) == MAX_RESULTS
    assert len(await canvas.search("common", limit=0)) == 1
