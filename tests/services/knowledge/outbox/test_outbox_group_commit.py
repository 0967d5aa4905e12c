"""Group commit of captures: concurrent captures share appends and fsyncs, each returns only after the
fsync that covers its own line, and a failed shared append loses nobody's turn silently."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from services.knowledge.outbox import MemoryOutbox, OutboxWriteError

from .conftest import contents, turn


def _watch_fsyncs(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[int]:
    """Record the outbox's size at every fsync of it (the real fsync still runs)."""
    real_fsync = os.fsync
    synced: list[int] = []

    def fsync(fd: int) -> None:
        real_fsync(fd)
        if path.exists() and os.path.samestat(os.fstat(fd), os.stat(path)):
            synced.append(os.fstat(fd).st_size)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def _line_ends(path: Path) -> dict[str, int]:
    """Each record's batch id and the file offset just after its line."""
    ends: dict[str, int] = {}
    offset = 0
    for line in path.read_bytes().splitlines(keepends=True):
        offset += len(line)
        start = line.find(b'"batchId":"')
        if start >= 0:
            ends[line[start + 11: line.index(b'"', start + 11)].decode()] = offset
    return ends


async def test_500_concurrent_captures_are_all_durable_when_they_return(outbox: MemoryOutbox, fake,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = outbox.stores.outbox_path
    await outbox.capture_turn("run_warm", "u", turn("warm", "up"))
    synced = _watch_fsyncs(monkeypatch, path)
    covered: dict[str, int] = {}

    async def capture(i: int) -> str:
        batch = await outbox.capture_turn(f"run_{i % 9}", "u", turn(f"q{i}", f"a{i}"))
        covered[batch] = max(synced, default=0)  # what was fsynced when this caller got its answer
        return batch

    ids = await asyncio.gather(*(capture(i) for i in range(500)))
    ends = _line_ends(path)
    assert len(set(ids)) == 500 and set(ids) <= set(ends)
    assert all(ends[batch] <= covered[batch] for batch in ids)  # returned only after the fsync covering it
    assert len(synced) < 100  # shared: far fewer fsyncs than captures
    result = await outbox.sweep()
    assert result.errors == [] and result.delivered_records == 501
    assert sorted(contents(fake)) == sorted(["warm", "up"] + [t for i in range(500) for t in (f"q{i}", f"a{i}")])


async def test_a_failed_shared_append_fails_every_caller_of_it_and_keeps_nothing_of_it(
        outbox: MemoryOutbox, fake, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = await outbox.capture_turn("run_a", "u", turn("kept", "k"))
    path = outbox.stores.outbox_path
    before = path.read_bytes()
    real_fsync = os.fsync
    failures: list[int] = []

    def fsync(fd: int) -> None:
        if not failures and os.path.samestat(os.fstat(fd), os.stat(path)):
            failures.append(fd)
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    results = await asyncio.gather(*(outbox.capture_turn("run_a", "u", turn(f"q{i}", "a")) for i in range(50)),
                                   return_exceptions=True)
    monkeypatch.undo()
    refused = [r for r in results if isinstance(r, BaseException)]
    accepted = [r for r in results if isinstance(r, str)]
    assert refused and all(isinstance(r, OutboxWriteError) and "nothing was added" in str(r) for r in refused)
    assert len(refused) + len(accepted) == 50
    ids = [r["batchId"] for r in outbox.stores.read_outbox().records]
    assert ids == [kept] + accepted  # every accepted capture is there, no refused one is
    assert path.read_bytes().startswith(before)
    result = await outbox.sweep()
    assert result.errors == [] and result.quarantined == 0
    assert len(contents(fake, "conv-run_a")) == 2 * (1 + len(accepted))


CONCURRENT_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from services.changes import ChangeFeed
    from services.honcho import FakeHonchoService
    from services.knowledge.outbox import MemoryOutbox

    async def main(root, tag):
        box = await MemoryOutbox.open(Path(root), ChangeFeed(), honcho_service=FakeHonchoService())
        for round in range(4):
            ids = await asyncio.gather(*(box.capture_turn(f"p_{tag}_{i % 5}", "u", [{"role": "user", "text": f"{tag}-{round}-{i}"}])
                                        for i in range(50)))
            print(" ".join(ids), flush=True)
        await box.aclose()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_group_commits_from_two_processes_interleave_without_loss(outbox: MemoryOutbox, fake,
                                                                        root: Path) -> None:
    here = Path(__file__).resolve().parents[4]
    env = {**os.environ, "PYTHONPATH": str(here)}
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT_WRITER, str(root), tag], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env, cwd=here) for tag in ("x", "y")]
    mine = await asyncio.gather(*(outbox.capture_turn(f"run_{i % 3}", "u", turn(f"m{i}", "r")) for i in range(100)))
    acked = set(mine)
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        acked |= set(out.decode().split())
    snapshot = outbox.stores.read_outbox()
    assert snapshot.corrupt == [] and {r["batchId"] for r in snapshot.records} == acked
    assert len(acked) == 500
    status = await outbox.status()
    assert status.pending_total == 500
    result = await outbox.sweep()
    assert result.errors == [] and result.delivered_records == 500


async def test_callers_behind_a_cancelled_lone_capture_are_still_written(
        outbox: MemoryOutbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture that finds nobody writing writes its own line at once; cancelled while it does,
    its write still finishes, and the captures that queued behind it are written and return."""
    stores = outbox.stores
    real_append = stores.append_lines
    entered, release = threading.Event(), threading.Event()

    def slow_append(values):  # the first append waits (in its worker thread) until released
        if not entered.is_set():
            entered.set()
            release.wait(30)
        real_append(values)

    monkeypatch.setattr(stores, "append_lines", slow_append)
    lone = asyncio.create_task(outbox.capture_turn("run_a", "u", turn("lone", "r")))
    while not entered.is_set():
        await asyncio.sleep(0.005)
    behind = [asyncio.create_task(outbox.capture_turn("run_a", "u", turn(f"q{i}", "a"))) for i in range(3)]
    await asyncio.sleep(0.05)
    assert not any(task.done() for task in behind)  # queued behind the lone write
    lone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await lone
    release.set()
    ids = await asyncio.wait_for(asyncio.gather(*behind), 30)
    records = stores.read_outbox()
    assert records.corrupt == []
    assert [r["messages"][0]["content"] for r in records.records] == ["lone", "q0", "q1", "q2"]
    assert [r["batchId"] for r in records.records][1:] == ids
