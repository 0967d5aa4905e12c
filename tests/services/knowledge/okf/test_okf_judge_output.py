"""Judge replies are untrusted: whatever they hold, the run ends pending or invalid, never half-applied.

Each class of bad reply is refused with its reason BEFORE the judgment is pending, the base stays as
it was, the reply is kept as storable text for the operator, and the run can be judged again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from services.cloud import FakeCloud, generate_private_key_pem
from services.files import UnstorableTextError, atomic_write_text
from services.knowledge.okf import CrouterJudgeClient, FixedReplyJudgeClient, RunStateError, deterministic_judge_reply
from services.knowledge.okf.limits import MAX_CONCEPT_BYTES, MAX_JUDGMENT_BYTES
from services.knowledge.okf.proposal import read_proposal
from services.knowledge.okf.tree import read_tree
from services.sdk import MemoryConnectionStore, OAuth2Client

from .conftest import DECISION, LIMIT, World, make_world


def mutated(change: Callable[[dict], None], *, ascii_only: bool = True) -> Callable[[str], str]:
    """A judge that replies with the deterministic judgment after ``change`` edited it."""
    def reply(prompt: str) -> str:
        doc = json.loads(deterministic_judge_reply(prompt))
        change(doc)
        return json.dumps(doc, ensure_ascii=ascii_only)

    return reply


def first_concept(doc: dict) -> dict:
    return next(c for o in doc["outcomes"] for c in o["concepts"])


def set_path(path: str) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        first_concept(doc)["path"] = path
    return change


async def judged(tmp_path: Path, reply: str | Callable[[str], str], *notes: tuple[str, str]) -> tuple[World, FixedReplyJudgeClient]:
    judge = FixedReplyJudgeClient(reply)
    world = await make_world(tmp_path, judge)
    for name, text in notes or (("retries.md", DECISION),):
        (world.notes / name).write_text(text)
    await world.harvest.capture_now(world.source_id)
    return world, judge


async def assert_refused_and_rejudgeable(world: World, judge: FixedReplyJudgeClient, message: str,
                                         base_before: dict[str, bytes]) -> None:
    [item] = await world.harvest.queue()
    assert item.state == "invalid", item  # never left "judging"
    assert any(message in p for p in item.problems), item.problems
    assert read_tree(world.base) == base_before and not Path(f"{world.base}.okf-publication.json").exists()
    with pytest.raises(RunStateError, match="invalid, not pending"):
        await world.harvest.approve(item.id)
    detail = await world.harvest.detail(item.id)
    assert detail.reply is not None  # the reply is kept for the operator, as storable text
    work = world.harvest.runs.work_dir(world.source_id, item.id)
    (work / "judgment.json").read_bytes().decode("utf-8")
    json.dumps(world.harvest.state.load_run(world.source_id, item.id)).encode("utf-8")
    judge._reply = deterministic_judge_reply  # the operator fixes the judge and judges again
    assert (await world.harvest.rejudge(item.id)).state == "pending"


@pytest.mark.parametrize("path, message", [
    ("expert/decisions/" + "a" * 300 + ".md", "this file system allows 255"),
    ("expert/index.md/x.md", "expert/index.md is a file, not a folder"),
    ("expert/" + "/".join(["d" * 250] * 17) + "/x.md", "bytes on disk; the limit is"),
    ("expert/decisions/line\nbreak.md", "holds a control character"),
])
async def test_judged_paths_the_file_system_cannot_hold_are_refused_before_pending(
        tmp_path: Path, path: str, message: str) -> None:
    judge_reply = mutated(set_path(path))
    world = await make_world(tmp_path, FixedReplyJudgeClient(judge_reply))
    base_before = read_tree(world.base)
    (world.notes / "retries.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id)
    judge = world.harvest.judge
    assert isinstance(judge, FixedReplyJudgeClient)
    await assert_refused_and_rejudgeable(world, judge, message, base_before)


async def test_two_outcomes_making_one_path_a_file_and_a_folder_are_refused(tmp_path: Path) -> None:
    def clash(doc: dict) -> None:
        first, second = (o["concepts"][0] for o in doc["outcomes"])
        first["path"] = "expert/decisions/x.md"
        second["path"] = "expert/decisions/x.md/y.md"

    world, judge = await judged(tmp_path, mutated(clash), ("retries.md", DECISION), ("export.md", LIMIT))
    base_before = read_tree(world.base)
    await assert_refused_and_rejudgeable(world, judge, "expert/decisions/x.md is a file, not a folder", base_before)


async def test_a_judged_path_that_is_a_folder_in_the_base_is_refused(tmp_path: Path) -> None:
    world = await make_world(tmp_path, FixedReplyJudgeClient(deterministic_judge_reply))
    (world.base / "expert" / "decisions" / "retries.md").mkdir(parents=True)  # an empty folder, invisible to trees
    (world.notes / "retries.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id)
    [item] = await world.harvest.queue()
    assert item.state == "invalid" and any("is a folder in the base" in p for p in item.problems), item.problems
    assert (world.base / "expert" / "decisions" / "retries.md").is_dir()


SURROGATE_TEXT = mutated(lambda doc: first_concept(doc).update(text=first_concept(doc)["text"] + "\udc80"))
RAW_SURROGATE = mutated(lambda doc: first_concept(doc).update(text=first_concept(doc)["text"] + "\udc80"),
                        ascii_only=False)
NUL_REASON = mutated(lambda doc: doc["outcomes"][0].update(reason="nul \x00 here"))
DEEP = '{"version": 1, "exclusionsReviewed": true, "removals": [], "outcomes": ' + "[" * 40 + "]" * 40 + "}"


@pytest.mark.parametrize("reply, message", [
    ('{"outcomes":' + "[" * 100000, "nests deeper than 32 levels"),
    (DEEP, "nests deeper than 32 levels"),
    ('{"version": ' + "1" * 5000 + "}", "not valid JSON"),
    ('{"version": 1, "pad": "' + "x" * (MAX_JUDGMENT_BYTES + 1) + '"}', "a judgment is capped at 2 MiB"),
    (SURROGATE_TEXT, "lone surrogate U+DC80"),
    (RAW_SURROGATE, "the reply is not storable text: lone surrogate U+DC80"),
    (NUL_REASON, "NUL character"),
    (mutated(lambda doc: first_concept(doc).update(text=first_concept(doc)["text"] + "x" * MAX_CONCEPT_BYTES)),
     "a concept is capped at 256 KiB"),
    (mutated(lambda doc: first_concept(doc).update(text=first_concept(doc)["text"] + "x" * (8 << 20))),
     "a judgment is capped at 2 MiB"),
])
async def test_a_reply_that_cannot_be_parsed_or_stored_ends_invalid_never_judging(
        tmp_path: Path, reply: str | Callable[[str], str], message: str) -> None:
    world, judge = await judged(tmp_path, reply)
    await assert_refused_and_rejudgeable(world, judge, message, read_tree(world.base))


async def test_a_bad_reply_from_a_cloud_judge_run_ends_invalid_never_judging(tmp_path: Path) -> None:
    cloud = FakeCloud(client_id="doppel")
    store = MemoryConnectionStore()
    await cloud.connect(store, "user:o1", scopes=["crtr:llm"])
    oauth = OAuth2Client(client_id="doppel", issuer=cloud.issuer, transport=cloud.transport,
                         private_key=generate_private_key_pem(), redirect_uri="https://app.test/callback", store=store)
    try:
        cloud.runs.respond(lambda ctx: ctx.run.reply('{"outcomes":' + "[" * 100000))
        world = await make_world(tmp_path, CrouterJudgeClient(await oauth.client("user:o1"), app="doppel"))
        (world.notes / "retries.md").write_text(DECISION)
        await world.harvest.capture_now(world.source_id)
        [item] = await world.harvest.queue()
        assert item.state == "invalid" and "nests deeper than 32 levels" in item.problems[0]
        cloud.runs.respond(lambda ctx: ctx.run.reply(deterministic_judge_reply(ctx.run.params["prompt"])))
        assert (await world.harvest.rejudge(item.id)).state == "pending"
    finally:
        await oauth.aclose()


async def test_a_failure_while_recording_a_judgment_ends_it_invalid_never_judging(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    world = await make_world(tmp_path, FixedReplyJudgeClient(deterministic_judge_reply))
    (world.notes / "retries.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id, judge=False)
    from services.knowledge.okf import runs as runs_module

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runs_module, "proposal_document", broken)
    await world.harvest.harvest(world.source_id)
    [item] = await world.harvest.queue()
    assert item.state == "invalid" and "could not be recorded (No space left on device" in item.problems[0]
    monkeypatch.undo()
    assert (await world.harvest.rejudge(item.id)).state == "pending"


async def test_run_files_keep_hashes_and_changed_files_never_a_copy_of_the_base(world: World) -> None:
    big = "---\ntype: Lesson\ntitle: Big\ndescription: A big one.\n---\n# Big\n\n" + "a filler line\n" * 80_000
    (world.base / "ops" / "big.md").write_text(big)
    index = world.base / "ops" / "index.md"
    index.write_text(index.read_text() + "* [Big](big.md) - A big one.\n")
    (world.notes / "retries.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id)
    [item] = await world.harvest.queue(["pending"])
    run_dir = world.harvest.state.run_dir(world.source_id, item.id)
    assert (run_dir / "run.json").stat().st_size < 32 * 1024  # a 1 MiB base file is not copied in
    proposal = json.loads((run_dir / "team-proposal.json").read_text())
    assert (run_dir / "team-proposal.json").stat().st_size < 32 * 1024
    delta = read_proposal(proposal)
    assert set(delta.changed) == {"expert/decisions/retries.md", "expert/index.md", "expert/log.md"}
    assert "ops/big.md" in proposal["beforeFiles"] and "ops/big.md" not in proposal["before"]
    assert (await world.harvest.approve(item.id)).state == "approved"
    assert (world.base / "ops" / "big.md").read_text() == big


def test_atomic_write_text_refuses_unencodable_text_before_writing(tmp_path: Path) -> None:
    target = tmp_path / "judgment.json"
    target.write_text("old\n")
    with pytest.raises(UnstorableTextError, match="lone surrogate U\\+DC80"):
        atomic_write_text(target, "new \udc80")
    assert target.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["judgment.json"]
