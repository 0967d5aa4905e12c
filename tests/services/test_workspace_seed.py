"""A new workspace's seeding runs its independent parts at once (the sample knowledge beside the
follower's catch-up): the world's judgments are the same as when each step waited for the one before,
and a failure in one part names its folder, stops the others and leaves nothing running."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from assets import ASSETS_DIR
from services.clock import FakeClock
from services.workspace import JUDGE_USER, Settings, Workspace, WorkspaceOpenError


async def test_the_notes_are_judged_before_the_settled_runs_record(tmp_path: Path) -> None:
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws", clock=FakeClock()))
    try:
        details = [await workspace.okf.detail(item.id) for item in await workspace.okf.queue()]
        kinds = sorted(sorted({o.input_kind for o in detail.outcomes}) for detail in details)
        assert kinds == [["note"], ["record"]]
        assert {o.input_name for d in details for o in d.outcomes} >= {"watering.md", "run_sample_garden"}
        judge_runs = [run for run in workspace.cloud.runs.all if run.user_id == JUDGE_USER]  # in the order started
        prompts = [str(run.params["prompt"]) for run in judge_runs]
        assert len(prompts) == 2 and "watering.md" in prompts[0] and "run_sample_garden" in prompts[1]
    finally:
        await workspace.close()


async def test_a_failure_while_the_knowledge_is_seeded_names_the_knowledge_folder_and_stops_everything(
        tmp_path: Path) -> None:
    world = json.loads((ASSETS_DIR / "sample" / "world.json").read_text(encoding="utf-8"))
    world["knowledge"]["home"]["owns"] = ["team/no-such-node"]  # the home claims a node the base lacks
    world_file = tmp_path / "world.json"
    world_file.write_text(json.dumps(world), encoding="utf-8")
    root = tmp_path / "ws"
    tasks_before = asyncio.all_tasks()
    with pytest.raises(WorkspaceOpenError) as info:
        await asyncio.wait_for(Workspace.open(settings=Settings(path=root, clock=FakeClock(), world=world_file)), 120)
    assert info.value.path == root / "knowledge" and "no-such-node" in info.value.cause
    assert not (root / "workspace.json").exists()  # not marked made: the next open seeds again
    await asyncio.sleep(0)
    assert {t for t in asyncio.all_tasks() if not t.done()} - tasks_before == set()  # nothing left running
