"""Full-text search, lint findings, insight listeners, and the change feed."""

from __future__ import annotations

import pytest

from services.canvas import Canvas, DocumentInvalidError, NameRefusedError, TextRefusedError
from services.canvas.insights import append_approved_link, listener_body

from .conftest import PREVIEW


async def test_search_finds_names_previews_and_bodies(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    await canvas.write("pricing/tiers", owner="user:o1", preview="When pricing a plan, read this because tiers matter.",
                       body="Annual discounts stay under twenty percent.")
    await canvas.write("ops/deploys", owner="user:o1", preview=PREVIEW, body="Deploy on Tuesdays.")
    assert [h.object.name for h in await canvas.search("tiers")] == ["pricing/tiers"]
    assert [h.object.name for h in await canvas.search("discount")] == ["pricing/tiers"]  # prefix match
    assert [h.object.name for h in await canvas.search("tuesdays deploy")] == ["ops/deploys"]
    assert await canvas.search("tiers", type="node") == []
    hit = (await canvas.search("twenty"))[0]
    assert "twenty" in hit.snippet
    for odd in ('"', "AND", "a OR", "NEAR(", "*", "", "-x", "col:val", "((("):
        assert isinstance(await canvas.search(odd), list)  # never a syntax error
    with pytest.raises(TextRefusedError):
        await canvas.search("\x00")  # text no store can hold is refused, as everywhere
    await canvas.read("o1/pricing/tiers")  # reads by nobody record nothing
    await canvas.edit("o1/pricing/tiers", base_revision=1, body="Monthly only.")
    assert await canvas.search("twenty") == []
    assert [h.object.name for h in await canvas.search("monthly")] == ["pricing/tiers"]
    await canvas.delete("o1/pricing/tiers")
    assert await canvas.search("monthly") == []


async def test_list_search_and_edges_record_nothing(canvas: Canvas) -> None:
    await canvas.spawn_node(node_id="n")
    doc = await canvas.write("a", owner="n", preview=PREVIEW, body="alpha")
    before = await canvas.events(doc.object.id)
    await canvas.list_objects()
    await canvas.search("alpha")
    await canvas.edges(doc.object.id)
    await canvas.read(doc.object.id)  # the operator's peek, no reader
    assert await canvas.events(doc.object.id) == before


async def test_lint_reports_each_rule(canvas: Canvas) -> None:
    await canvas.ensure_owner("repo", "wb")
    await canvas.spawn_node(node_id="n")
    await canvas.write("shape", owner="repo:wb", preview="Read this sometime.", body="x")
    await canvas.write("dangling", owner="repo:wb", preview=PREVIEW, body="see [[nowhere/at-all]] and [[shape]]")
    await canvas.write("empty", owner="repo:wb", preview=PREVIEW, body="")
    await canvas.write("insights/pricing", owner="n", preview=PREVIEW, body="no section", kind="preference")
    findings = {(f.name, f.rule) for f in await canvas.lint(owner="repo:wb")}
    assert findings == {("wb/shape", "preview-shape"), ("wb/dangling", "dangling-link"), ("wb/empty", "empty-body")}
    messages = [f.message for f in await canvas.lint("wb/dangling")]
    assert messages == ["[[nowhere/at-all]] links to nothing"]
    node_findings = {f.rule for f in await canvas.lint("n/insights/pricing")}
    assert node_findings == {"listener-owner", "listener-shape"}
    report = await canvas.push_report("n", label="final", preview=PREVIEW, body="done")
    assert await canvas.lint(report.object.id) == []


async def test_a_dangling_link_is_stored_and_heals_when_its_target_appears(canvas: Canvas) -> None:
    await canvas.ensure_owner("user", "o1")
    await canvas.write("a", owner="user:o1", preview=PREVIEW, body="[[later]]")
    assert [f.rule for f in await canvas.lint("o1/a")] == ["dangling-link"]
    assert (await canvas.read("o1/a")).document.body == "[[later]]"  # type: ignore[union-attr]
    await canvas.write("later", owner="user:o1", preview=PREVIEW, body="here")
    assert await canvas.lint("o1/a") == []


async def test_listener_creation_and_approved_links(canvas: Canvas, seen) -> None:
    await canvas.write("insights/capture", owner="app:crtr", preview=PREVIEW, body="the capture workflow")
    listener = await canvas.create_listener("Pricing & Market", owner="user:o1", domain="how we price the product",
                                            exclusions=["payroll"])
    assert listener.object.full_name == "o1/insights/pricing-market" and listener.kind == "preference"
    assert listener.rules == ({"on": "boot", "deliver": "preview"},)
    assert "how we price the product" in listener.preview and "[[insights/capture]]" in listener.body
    assert await canvas.lint(listener.object.id) == []
    await canvas.write("pricing/annual", owner="user:o1", preview=PREVIEW, body="Annual stays under 20%.")
    approved = await canvas.approve_insight(listener.object.id, "o1/pricing/annual")
    assert approved.revision == 2 and approved.body.rstrip().endswith("- [[o1/pricing/annual]]")
    again = await canvas.approve_insight(listener.object.id, "o1/pricing/annual")
    assert again.revision == 2  # already listed: unchanged
    around = await canvas.edges(listener.object.id, kind="links-to")
    assert len(around.outgoing["links-to"]) == 2
    assert any(c.kind == "document.edited" and c.id == listener.object.id for c in seen)
    await canvas.spawn_node(node_id="n")
    with pytest.raises(DocumentInvalidError, match="repo, profile or user"):
        await canvas.create_listener("x", owner="n", domain="d")
    with pytest.raises(NameRefusedError):
        await canvas.create_listener("!!!", owner="user:o1", domain="d")
    with pytest.raises(DocumentInvalidError, match="domain"):
        await canvas.create_listener("other", owner="user:o1", domain="  ")
    assert await canvas.count_objects(type="document", owner="n") == 0


def test_append_approved_link_keeps_the_sections_around_it() -> None:
    body = listener_body("t", "the domain") + "\n## Later\n\ntext\n"
    out = append_approved_link(body, "a/b")
    out = append_approved_link(out, "a/c")
    section = out.split("## Approved insights")[1].split("## Later")[0]
    assert section.strip().splitlines() == ["- [[a/b]]", "- [[a/c]]"]
    assert out.rstrip().endswith("text") and "\n\n## Later" in out
    assert append_approved_link("no section", "x").endswith("## Approved insights\n\n- [[x]]\n")


async def test_changes_are_published_only_after_a_commit(canvas: Canvas, seen) -> None:
    await canvas.ensure_owner("user", "o1")
    count = len(seen)
    with pytest.raises(DocumentInvalidError):
        await canvas.write("a", owner="user:o1", preview="", body="x")
    assert len(seen) == count
    doc = await canvas.write("a", owner="user:o1", preview=PREVIEW, body="x")
    kinds = [c.kind for c in seen[count:]]
    assert kinds == ["object.created", "document.written"] and all(c.source == "canvas" for c in seen)
    assert seen[-1].data == {"name": "o1/a", "revision": 1} and seen[-1].id == doc.object.id
