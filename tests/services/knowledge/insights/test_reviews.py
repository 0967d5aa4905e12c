"""Insight reviews against a real canvas in a real SQLite file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from services.canvas import Canvas, ObjectNotFoundError
from services.changes import ChangeFeed
from services.knowledge.insights import (
    InsightReviews,
    Proposal,
    ProposalError,
    ReviewError,
    ReviewStateError,
    parse_proposal,
)

MARKDOWN = """# Proposed insight: short answers first

- **destination:** principles/short-answers (user:ada) — new flat doc, linked from [[ada/insights/writing]]
- **visibility:** none: read on demand through the listener
- **source:** Ada, on a long reply: "just tell me the answer, then why"

## Proposed durable truth

- Lead with the answer; reasoning follows, because Ada decides from the first line.
- Keep replies under five lines unless asked for depth.
"""


@pytest.fixture
async def world(tmp_path: Path):
    feed = ChangeFeed()
    canvas = await Canvas.open(tmp_path / "canvas.db", changes=feed)
    await canvas.ensure_owner("user", "ada")
    await canvas.create_listener("writing", owner="user:ada", domain="how Ada wants writing done")
    reviews = await InsightReviews.open(tmp_path / "knowledge", canvas, changes=feed)
    yield canvas, reviews, feed
    await canvas.close()


def test_parse_the_capture_template() -> None:
    proposal = parse_proposal(MARKDOWN)
    assert proposal.title == "short answers first"
    assert (proposal.owner, proposal.name, proposal.listener) == ("user:ada", "principles/short-answers", "ada/insights/writing")
    assert len(proposal.candidates) == 2 and proposal.source.startswith("Ada")


@pytest.mark.parametrize(
    "broken",
    [
        MARKDOWN.replace("# Proposed insight: short answers first", "# Something"),
        MARKDOWN.replace("- **source:**", "- source"),
        MARKDOWN.split("## Proposed durable truth")[0] + "## Proposed durable truth\n",
        MARKDOWN.replace("principles/short-answers (user:ada)", "somewhere nice"),
    ],
)
def test_broken_proposals_are_refused(broken: str) -> None:
    with pytest.raises(ProposalError):
        parse_proposal(broken)


async def test_nothing_is_written_before_approval(world) -> None:
    canvas, reviews, _ = world
    review = await reviews.submit_markdown(MARKDOWN, proposer="node:n1")
    assert review.status == "pending"
    with pytest.raises(ObjectNotFoundError):
        await canvas.get("ada/principles/short-answers")
    assert [r.id for r in await reviews.list("pending")] == [review.id]


async def test_approve_an_edited_candidate_writes_and_links(world) -> None:
    canvas, reviews, feed = world
    seen = []
    feed.subscribe(lambda c: seen.append((c.source, c.kind)))
    review = await reviews.submit_markdown(MARKDOWN)
    done = await reviews.approve(review.id, candidate=1, text="Keep replies under five lines unless Ada asks for depth.")
    assert done.status == "approved" and done.document == "ada/principles/short-answers"
    detail = await canvas.read("ada/principles/short-answers")
    assert detail.document.body == "Keep replies under five lines unless Ada asks for depth."
    assert detail.document.kind == "knowledge" and detail.document.rules == ()
    assert detail.document.preview.startswith("When ") and "read this because" in detail.document.preview
    listener = await canvas.read("ada/insights/writing")
    assert "[[ada/principles/short-answers]]" in listener.document.body.split("## Approved insights")[1]
    assert ("insights", "review.approved") in seen
    stored = json.loads((reviews.folder / f"{review.id}.json").read_text())
    assert stored["status"] == "approved" and stored["chosen"] == 1


async def test_approving_an_existing_destination_makes_a_new_revision(world) -> None:
    canvas, reviews, _ = world
    first = await reviews.submit_markdown(MARKDOWN)
    await reviews.approve(first.id)
    second = await reviews.submit_markdown(MARKDOWN)
    done = await reviews.approve(second.id, candidate=1)
    assert done.revision == 2
    listener = await canvas.read("ada/insights/writing")
    assert listener.document.body.count("[[ada/principles/short-answers]]") == 1


async def test_reject_records_the_reason_and_writes_nothing(world) -> None:
    canvas, reviews, _ = world
    review = await reviews.submit_markdown(MARKDOWN)
    with pytest.raises(ReviewError):
        await reviews.reject(review.id, "  ")
    done = await reviews.reject(review.id, "that restates the instruction, not the why")
    assert done.status == "rejected" and done.reason.startswith("that restates")
    with pytest.raises(ObjectNotFoundError):
        await canvas.get("ada/principles/short-answers")
    with pytest.raises(ReviewStateError):
        await reviews.approve(review.id)


async def test_two_approvals_at_once_one_wins(world) -> None:
    canvas, reviews, _ = world
    review = await reviews.submit_markdown(MARKDOWN)
    other = InsightReviews(reviews.root.parent, canvas)
    results = await asyncio.gather(reviews.approve(review.id), other.approve(review.id, candidate=1), return_exceptions=True)
    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, BaseException)]
    assert len(winners) == 1 and len(losers) == 1 and isinstance(losers[0], ReviewStateError)
    detail = await canvas.read("ada/principles/short-answers")
    assert detail.document.revision == 1


async def test_bad_ids_candidates_and_corrupt_files(world) -> None:
    canvas, reviews, _ = world
    with pytest.raises(ReviewError):
        await reviews.get("../../etc/passwd")
    with pytest.raises(ReviewError):
        await reviews.get("ir_missing")
    review = await reviews.submit_markdown(MARKDOWN)
    with pytest.raises(ReviewError):
        await reviews.approve(review.id, candidate=5)
    with pytest.raises(ReviewError):
        await reviews.approve(review.id, text="   ")
    (reviews.folder / "ir_broken.json").write_text("{not json")
    listed = await reviews.list()
    broken = [r for r in listed if r.id == "ir_broken"]
    assert broken and broken[0].status == "invalid" and "not valid JSON" in broken[0].errors[0]
    assert (await reviews.get(review.id)).status == "pending"  # the good review is untouched


def test_proposal_fields_are_required() -> None:
    with pytest.raises(ProposalError):
        Proposal("t", "user:a", "n", None, "none", "", ("x",))
    with pytest.raises(ProposalError):
        Proposal("t", "user:a", "n", None, "none", "src", ("  ",))
