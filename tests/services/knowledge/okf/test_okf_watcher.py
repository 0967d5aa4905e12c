"""The notes watcher: debouncing on a fake clock, editor saves through temp+rename, polling fallback."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from services.clock import Clock, FakeClock
from services.knowledge.okf import Debouncer
from services.knowledge.okf import watcher as watcher_module

from .conftest import DECISION, LIMIT, make_world


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_debouncer_coalesces_a_burst_per_key() -> None:
    clock = FakeClock()
    fired: list[str] = []

    async def fire(key: str) -> None:
        fired.append(key)

    debouncer = Debouncer(fire, window=0.2, clock=clock)
    for _ in range(50):
        debouncer.touch("a")
        clock.advance(0.05)
        await settle()
    assert fired == []  # 50 events 50 ms apart: never a quiet 200 ms window
    debouncer.touch("b")
    clock.advance(0.19)  # 240 ms after a's last event, 190 ms after b's
    await settle()
    assert fired == ["a"]
    clock.advance(0.02)
    await settle()
    assert fired == ["a", "b"] and not debouncer.pending()
    debouncer.touch("a")
    await debouncer.cancel()
    clock.advance(1)
    await settle()
    assert sorted(fired) == ["a", "b"]


async def wait_for(predicate, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_editor_save_through_temp_and_rename_is_captured_once(tmp_path: Path) -> None:
    world = await make_world(tmp_path, clock=Clock())
    try:
        await world.harvest.start_watcher()
        assert world.harvest.watcher.mode == "watching"
        temp = world.notes / ".retries.md.swp"
        temp.write_text("draft")
        (world.notes / "retries.md~").write_text("backup")
        temp.write_text(DECISION)
        os.replace(temp, world.notes / "retries.md")
        await wait_for(lambda: "judgment.pending" in world.kinds())
        status = world.harvest.state.status(world.source_id)
        assert len(status["captured"]["inputs"]) == 1
        [item] = await world.harvest.queue()
        detail = await world.harvest.detail(item.id)
        assert [o.input_name for o in detail.outcomes] == ["retries.md"]
        assert detail.outcomes[0].input_text == DECISION
    finally:
        await world.harvest.close()
    assert world.harvest.watcher.mode == "stopped"


async def test_observer_refused_degrades_to_polling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class NoWatches(watcher_module.Observer):  # type: ignore[misc, valid-type]
        def start(self) -> None:
            raise OSError(28, "inotify watch limit reached")

    monkeypatch.setattr(watcher_module, "Observer", NoWatches)
    clock = FakeClock()
    world = await make_world(tmp_path, clock=clock)
    try:
        await world.harvest.start_watcher()
        assert world.harvest.watcher.mode == "polling"
        assert "inotify watch limit reached" in (world.harvest.watcher.problem or "")
        (world.notes / "retries.md").write_text(DECISION)
        await settle()  # the poller is waiting on the clock
        clock.advance(2.0)
        await wait_for(lambda: "judgment.pending" in world.kinds())
        assert len(await world.harvest.queue()) == 1
    finally:
        await world.harvest.close()


async def test_a_failing_capture_does_not_stop_the_watcher(tmp_path: Path) -> None:
    world = await make_world(tmp_path, clock=Clock())
    try:
        await world.harvest.start_watcher()
        index = world.base / "ops" / "index.md"
        saved = index.read_bytes()
        index.unlink()  # judging the captured note now fails: the base lost a node index
        (world.notes / "first.md").write_text(DECISION)
        await wait_for(lambda: world.harvest.watcher.last_error is not None)
        assert "E_INDEX" in (world.harvest.watcher.last_error or "")
        index.write_bytes(saved)
        (world.notes / "good.md").write_text(LIMIT)
        await wait_for(lambda: "judgment.pending" in world.kinds())
    finally:
        await world.harvest.close()


async def test_a_bad_note_is_skipped_while_watching_and_the_others_are_judged(tmp_path: Path) -> None:
    world = await make_world(tmp_path, clock=Clock())
    try:
        await world.harvest.start_watcher()
        (world.notes / "bad.md").write_bytes(b"\xff not utf-8")
        (world.notes / "good.md").write_text(DECISION)
        await wait_for(lambda: "judgment.pending" in world.kinds())
        notices = await world.harvest.notices()
        assert [(n.kind, n.subject) for n in notices] == [("note-skipped", "expert: notes/bad.md")]
        assert "not UTF-8" in notices[0].reason and "UTF-8" in notices[0].remedy
    finally:
        await world.harvest.close()


async def test_a_burst_of_notes_is_captured_in_a_few_batches(tmp_path: Path) -> None:
    world = await make_world(tmp_path, clock=Clock())
    try:
        await world.harvest.start_watcher()
        for n in range(300):
            (world.notes / f"burst-{n:03d}.md").write_text(f"Note {n}: the sky was blue.\n")
        await wait_for(lambda: len(world.harvest.state.status(world.source_id)["captured"]["inputs"]) == 300)
        await wait_for(lambda: not world.harvest.watcher._debouncer.pending())
        assert world.kinds().count("capture.completed") < 30  # coalesced, not one capture per file
        [report] = await world.harvest.capture_now(world.source_id)  # a full rescan finds nothing missed
        assert report.captured == () and report.unchanged == 300
    finally:
        await world.harvest.close()


async def test_a_missing_home_is_not_recreated_by_the_watcher(tmp_path: Path) -> None:
    import shutil

    world = await make_world(tmp_path, clock=Clock())
    shutil.rmtree(world.home)
    try:
        await world.harvest.start_watcher()
        assert world.harvest.watcher.mode == "watching"
        assert not world.home.exists()
    finally:
        await world.harvest.close()
