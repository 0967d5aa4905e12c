"""A recorded step costs what it changed: it reads only the runs that changed, and only their new
events; what it writes is still the whole truth (each observation, loaded, is what the control API shows)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.record import compare, load_recording, observe, start_recording
from services.workspace import Settings, Workspace


async def _filled(workspace: Workspace, runs: int, events: int) -> list[str]:
    """``runs`` runs of another person, each with ``events`` events (through the control API)."""
    made = []
    for number in range(runs):
        run_id = await workspace.desk.start_run("user:grace", f"filler {number}")
        batch = [{"type": "node.activity", "fields": {"text": f"{number}.{i}"}} for i in range(events)]
        await workspace.desk.control.call("POST", f"/runs/{run_id}/emit", {"events": batch})
        made.append(run_id)
    return made


async def test_a_step_reads_only_the_runs_it_changed_and_observes_the_whole_truth(tmp_path: Path) -> None:
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws"))
    path = tmp_path / "steps.jsonl"
    try:
        fillers = await _filled(workspace, 20, 40)
        run_id = await workspace.desk.start_run("user:ada", "the one that changes")
        recorder = await start_recording(path, workspace)
        await workspace.desk.reply(run_id, "first", chunks=1)  # the first step's observation is whole

        # every whole read of a run's log, from now on (the book's and the mirror's, both real)
        book: Any = workspace.desk.book
        mirror = workspace.desk.mirror
        read: list[str] = []
        book_events, mirror_source = book.events, mirror.source

        def book_read(run: str) -> Sequence[dict[str, Any]]:
            read.append(run)
            return book_events(run)  # type: ignore[no-any-return]

        def mirror_read(run: str) -> Sequence[dict[str, Any]]:
            read.append(run)
            return mirror_source(run)  # type: ignore[misc]

        book.events, mirror.source = book_read, mirror_read
        for number in range(10):
            await workspace.desk.reply(run_id, f"reply {number}", chunks=2)
        assert set(read) <= {run_id}, sorted(set(read))  # the twenty unchanged runs were never read

        # what changes other runs still shows: a deletion, a log cut at its start, a new run
        await workspace.desk.delete_run(fillers[0])
        await workspace.desk.control.call("POST", f"/runs/{fillers[1]}/expire_events", {"up_to": 30})
        fresh = await workspace.desk.start_run("user:ada", "a new one")
        await workspace.desk.reply(fresh, "hello", chunks=1)
        truth = await observe(workspace.desk.control, workspace.insights, workspace.okf)
        await recorder.stop()
    finally:
        await workspace.close()
    recording = load_recording(path)
    assert recording.ended and len(recording.steps) == 15
    last = recording.steps[-1]["observed"]
    assert last is not None
    assert compare(last, truth, {}) is None, compare(last, truth, {})
    cut = next(r for r in last["runs"] if r["id"] == fillers[1])
    assert 0 < len(cut["events"]) < 40  # cut at its start, as the cloud shows it
    assert next(r for r in last["runs"] if r["id"] == fillers[0])["deleted"] is True
    # the steps after the first carry only what changed: never the unchanged runs
    lines = path.read_text(encoding="ascii").splitlines()
    assert all(filler not in line for line in lines[4:13] for filler in fillers), "an unchanged run was written"
