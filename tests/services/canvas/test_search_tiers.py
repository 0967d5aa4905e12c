"""SQLite ranks a search with many hits in tiers (``search.fts_tiers``): the hits whose name and preview
hold the words first, then the name's, then the preview's, then the rest, each tier ranked by bm25.
Only the best tiers' hits are ranked, so a common word costs what its best hits cost; the hits are
the same ones either way.

``RANK_ALL`` is the number of hits above which a one-word query is tiered; the tests set it to 0
(every one-word query is tiered) and compare with it set high (every hit ranked by bm25, as a small
search and a search of several words are)."""

from __future__ import annotations

import sqlite3

import pytest

from services.canvas import Canvas
from services.canvas import search as search_module
from services.canvas.search import fts_query, fts_tiers

from .conftest import PREVIEW

MENTION = "When pricing comes up, read this because it shows the pricing shape."


async def _world(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    for i in range(3):
        await canvas.write(f"pricing/both-{i}", owner="user:o1", preview=MENTION, body="tiers")
    for i in range(3):
        await canvas.write(f"pricing/name-{i}", owner="user:o1", preview=PREVIEW, body="tiers")
    for i in range(3):
        await canvas.write(f"preview-{i}", owner="user:o1", preview=MENTION, body="tiers")
    for i in range(3):  # the body repeats the word: pure bm25 may lift it, the tiers keep it last
        await canvas.write(f"body-{i}", owner="user:o1", preview=PREVIEW, body="pricing " * 40)
    await canvas.write("unrelated", owner="user:o1", preview=PREVIEW, body="nothing here")


def _tier(name: str) -> int:
    return ["both", "name", "preview", "body"].index(name.split("/")[-1].split("-")[0])


async def test_a_tiered_search_ranks_name_and_preview_hits_first_and_finds_the_same_hits(
        sqlite_canvas: Canvas, monkeypatch: pytest.MonkeyPatch) -> None:
    await _world(sqlite_canvas)
    monkeypatch.setattr(search_module, "RANK_ALL", 10**9)
    every = [h.object.name for h in await sqlite_canvas.search("pricing", limit=50)]
    monkeypatch.setattr(search_module, "RANK_ALL", 0)
    tiered = [h.object.name for h in await sqlite_canvas.search("pricing", limit=50)]
    assert sorted(tiered) == sorted(every) and len(tiered) == 12  # the same hits, each once
    assert [_tier(n) for n in tiered] == sorted(_tier(n) for n in tiered)  # best tier first
    assert [_tier(n) for n in tiered] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    page = [h.object.name for h in await sqlite_canvas.search("pricing", limit=4)]  # a page is cut across tiers
    assert sorted(page[:3]) == [f"pricing/both-{i}" for i in range(3)] and page[3].startswith("pricing/name-")
    assert [h.object.name for h in await sqlite_canvas.search("pric", limit=50)] == tiered  # the last word a prefix
    assert await sqlite_canvas.search("pricing", type="node") == []
    several = [h.object.name for h in await sqlite_canvas.search("pricing shape", limit=50)]  # ranked whole
    assert sorted(several) == sorted(tiered)  # "shape" is in every preview: the same twelve, by bm25 alone
    snippets = await sqlite_canvas.search("pricing", limit=1)
    assert "pricing" in snippets[0].snippet


async def test_within_a_tier_bm25_still_weighs_the_body(sqlite_canvas: Canvas, monkeypatch: pytest.MonkeyPatch) -> None:
    await sqlite_canvas.ensure_owner("user", "o1")
    await sqlite_canvas.write("pricing/plain", owner="user:o1", preview=PREVIEW, body="tiers")
    await sqlite_canvas.write("pricing/told", owner="user:o1", preview=PREVIEW, body="pricing pricing pricing")
    monkeypatch.setattr(search_module, "RANK_ALL", 0)
    assert [h.object.name for h in await sqlite_canvas.search("pricing")] == ["pricing/told", "pricing/plain"]


def test_the_tiers_split_every_hit_into_exactly_one_tier(tmp_path) -> None:
    conn = sqlite3.connect(tmp_path / "fts.db")
    conn.execute("CREATE VIRTUAL TABLE object_fts USING fts5(name, preview, body, "
                 "tokenize='unicode61 remove_diacritics 2')")
    texts = ["alpha beta", "alpha", "beta", "gamma", ""]
    rows = [(n, p, b) for n in texts for p in texts for b in texts]
    conn.executemany("INSERT INTO object_fts(name, preview, body) VALUES (?, ?, ?)", rows)
    for query in ("alpha", "alpha beta", "beta alp", "gamma", "delta", 'a "quoted" NEAR(x'):
        match = fts_query(query)
        if not match:
            continue
        hits = {r for (r,) in conn.execute("SELECT rowid FROM object_fts WHERE object_fts MATCH ?", (match,))}
        found = [r for tier in fts_tiers(match)
                 for (r,) in conn.execute("SELECT rowid FROM object_fts WHERE object_fts MATCH ?", (tier,))]
        assert sorted(found) == sorted(hits), query  # every hit, none twice


async def test_count_by_type_is_each_types_count_in_one_read(canvas: Canvas) -> None:
    await _world(canvas)
    types = ("document", "node", "user", "custom")
    total, counts = await canvas.count_by_type(types)
    assert total == await canvas.count_objects()
    assert counts == {t: await canvas.count_objects(type=t) for t in types}
    assert counts["document"] == 13 and counts["user"] == 1
    assert counts["node"] == 0 and counts["custom"] == 0
