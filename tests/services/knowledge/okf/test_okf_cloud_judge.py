"""Judging through a real FakeCloud run via the real SDK (isolated, cwd inside the run's root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.cloud import FakeCloud, generate_private_key_pem
from services.knowledge.okf import CrouterJudgeClient, deterministic_judge_reply
from services.sdk import MemoryConnectionStore, OAuth2Client

from .conftest import DECISION, make_world


@pytest.fixture
async def cloud_client():
    cloud = FakeCloud(client_id="doppel")
    store = MemoryConnectionStore()
    await cloud.connect(store, "user:o1", scopes=["crtr:llm"])
    oauth = OAuth2Client(client_id="doppel", issuer=cloud.issuer, transport=cloud.transport,
                         private_key=generate_private_key_pem(), redirect_uri="https://app.test/callback", store=store)
    yield cloud, await oauth.client("user:o1")
    await oauth.aclose()


async def test_judgment_comes_from_an_isolated_cloud_run(tmp_path: Path, cloud_client) -> None:
    cloud, client = cloud_client
    cloud.runs.respond(lambda ctx: ctx.run.reply(deterministic_judge_reply(ctx.run.params["prompt"])))
    judge = CrouterJudgeClient(client, app="doppel")
    world = await make_world(tmp_path, judge)
    (world.notes / "retries.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id)
    [item] = await world.harvest.queue()
    assert item.state == "pending" and item.promote == 1
    [run] = cloud.runs.all
    assert run.params["isolated"] is True
    assert run.params["cwd"] == f"/apps/doppel/nodes/{judge.runs[0]}/work" and run.id == judge.runs[0]
    assert "<<<input.json" in run.params["prompt"]
    assert (await world.harvest.approve(item.id)).state == "approved"


async def test_a_failed_judge_turn_leaves_an_invalid_judgment(tmp_path: Path, cloud_client) -> None:
    cloud, client = cloud_client
    cloud.runs.respond(lambda ctx: ctx.run.fail_turn(code="model_error", message="the model fell over"))
    world = await make_world(tmp_path, CrouterJudgeClient(client, app="doppel"))
    (world.notes / "retries.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id)
    [item] = await world.harvest.queue()
    assert item.state == "invalid" and "the model fell over" in item.problems[0]


async def test_a_silent_judge_run_is_given_up(tmp_path: Path, cloud_client) -> None:
    cloud, client = cloud_client
    cloud.runs.respond(None)
    world = await make_world(tmp_path, CrouterJudgeClient(client, app="doppel", timeout=0.3))
    (world.notes / "retries.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id)
    [item] = await world.harvest.queue()
    assert item.state == "invalid" and "did not reply within 0.3s" in item.problems[0]
