"""OKF harvest judgments in an attached window: the serving process judges, every window lists the
queue and approves or rejects through the stores' own locks; a judgment is published once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from services.knowledge.okf import OkfError
from services.knowledge.okf.attached import ATTACHED_CODE, AttachedHarvest
from services.workspace import Settings, Workspace
from tests.attach.test_two_windows import select, until
from tests.ui.conftest import ready, settle
from workbench.app import make_app


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    yield workspace
    await workspace.close()


def base_text(workspace: Any) -> str:
    return "\n".join(p.read_text() for p in sorted((workspace.bases_path() / "team" / "gardener").rglob("*.md")))


async def test_a_judgment_pending_in_the_serving_workspace_is_approved_in_an_attached_window(served: Any) -> None:
    pending = [j for j in await served.okf.queue(["pending"]) if j.inputs == 3][0]
    before = base_text(served)
    seen: list[Any] = []
    unsubscribe = served.feed.subscribe(lambda c: seen.append(c) if c.source == "okf" else None)
    attached = make_app(Settings(path=served.path))
    try:
        async with attached.run_test(size=(120, 40)) as pilot:
            ws = await ready(pilot)
            assert isinstance(ws.okf, AttachedHarvest)
            key = f"okf:{pending.id}"
            pane = await select(pilot, "judgments", key, "5")  # listed in the attached window
            assert pane.items[key].state == "pending"
            await pilot.press("y")
            await settle(pilot)
            await pilot.press("y")  # the whole judgment: confirmed
            await settle(pilot)
            assert attached.errors == []
            assert await until(pilot, lambda: pane.items[key].state == "approved"), pane.items[key].state
            assert [j.state for j in await served.okf.queue() if j.id == pending.id] == ["approved"]
            assert "water" in base_text(served) and base_text(served) != before  # published into the base
            # the serving window heard it through the change stream and shows it settled
            assert any(c.id == pending.id and c.kind == "judgment.approved" and c.data.get("origin") == ws.desk.origin
                       for c in seen)
            with pytest.raises(OkfError) as again:  # published once: the serving window cannot approve it again
                await served.okf.approve(pending.id)
            assert "approved" in str(again.value)
            other = [j for j in await served.okf.queue(["pending"]) if j.id != pending.id][0]
            await served.okf.reject(other.id, "not this one")  # and the serving window's decisions show here
            assert await until(pilot, lambda: pane.items[f"okf:{other.id}"].state == "rejected")
            assert list(ws.desk.errors) == []
    finally:
        unsubscribe()


async def test_two_windows_approving_one_judgment_publish_it_once(served: Any) -> None:
    pending = [j for j in await served.okf.queue(["pending"]) if j.inputs == 3][0]
    window = await Workspace.open(served.path)
    try:
        results = await asyncio.gather(window.okf.approve(pending.id), served.okf.approve(pending.id),
                                       return_exceptions=True)
        won = [r for r in results if not isinstance(r, BaseException)]
        lost = [r for r in results if isinstance(r, BaseException)]
        assert len(won) == 1 and len(lost) == 1 and isinstance(lost[0], OkfError), results
        assert "pending" in str(lost[0])  # the loser was refused before delivering anything
        assert (await served.okf.detail(pending.id)).item.state == "approved"
        assert (await window.okf.detail(pending.id)).item.state == "approved"
    finally:
        await window.close()


async def test_judging_in_an_attached_window_is_refused_and_the_queue_left_as_it_was(served: Any) -> None:
    window = await Workspace.open(served.path)
    try:
        queue = await window.okf.queue()
        assert [(j.id, j.state) for j in queue] == [(j.id, j.state) for j in await served.okf.queue()]
        rejudgeable = queue[0]
        sources = await window.okf.sources()
        attempts = (lambda: window.okf.rejudge(rejudgeable.id), lambda: window.okf.harvest(sources[0].id),
                    lambda: window.okf.capture_now())
        for attempt in attempts:
            with pytest.raises(OkfError) as refused:
                await attempt()
            assert refused.value.code == ATTACHED_CODE and "serves this workspace" in str(refused.value)
        assert [(j.id, j.state) for j in await served.okf.queue()] == [(j.id, j.state) for j in queue]
    finally:
        await window.close()


async def test_a_base_bound_by_the_serving_window_after_attaching_is_known_to_the_attached_one(served: Any) -> None:
    window = await Workspace.open(served.path)
    try:
        assert "extra" not in window.okf.bindings.bases
        await served.okf.init_base("extra", {"notes": {"path": "notes", "owner": "extra-id"}},
                                   path=served.bases_path() / "extra")
        await window.okf.queue()
        assert "extra" in window.okf.bindings.bases
        assert "extra" in window.okf.runs.directory_aliases()
    finally:
        await window.close()
