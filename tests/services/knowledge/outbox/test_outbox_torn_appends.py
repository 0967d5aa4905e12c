"""A failed append (disk full half-way through a write) is cut back: no torn bytes are ever left."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from services.knowledge.outbox import MemoryOutbox, OutboxWriteError

from .conftest import contents, turn


def _fail_halfway(monkeypatch: pytest.MonkeyPatch, path: Path, *, at: str = "write") -> list[int]:
    """Make writes to ``path`` stop with ENOSPC: half of the first write lands, then the disk is full.

    With ``at="fsync"`` every byte is written and the fsync fails instead.
    """
    real_write, real_fsync = os.write, os.fsync
    target = os.stat(path) if path.exists() else None
    landed: list[int] = []

    def ours(fd: int) -> bool:
        nonlocal target
        if target is None and path.exists():
            target = os.stat(path)
        return target is not None and os.path.samestat(os.fstat(fd), target)

    def write(fd: int, data: bytes) -> int:
        if at == "write" and ours(fd):
            if not landed:
                half = max(1, len(data) // 2)
                landed.append(real_write(fd, bytes(data[:half])))
                return landed[-1]
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        if at == "fsync" and ours(fd) and not landed:
            landed.append(1)
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    return landed


@pytest.mark.parametrize("at", ["write", "fsync"])
async def test_capture_refused_by_a_full_disk_leaves_no_torn_bytes(outbox: MemoryOutbox, fake,
                                                                   monkeypatch: pytest.MonkeyPatch, at: str) -> None:
    first = await outbox.capture_turn("run_a", "u", turn("kept", "k"))
    before = outbox.stores.outbox_path.read_bytes()
    landed = _fail_halfway(monkeypatch, outbox.stores.outbox_path, at=at)
    with pytest.raises(OutboxWriteError, match="No space left on device.*nothing was added"):
        await outbox.capture_turn("run_a", "u", turn("x" * 5000, "refused"))
    assert landed  # the fault did strike in the middle of the append
    monkeypatch.undo()
    assert outbox.stores.outbox_path.read_bytes() == before  # cut back to where the append began
    snapshot = outbox.stores.read_outbox()
    assert snapshot.corrupt == [] and [r["batchId"] for r in snapshot.records] == [first]
    later = await outbox.capture_turn("run_a", "u", turn("after", "a"))
    result = await outbox.sweep()
    assert result.quarantined == 0 and result.errors == []
    assert contents(fake, "conv-run_a") == ["kept", "k", "after", "a"]  # the refused turn is never delivered
    assert later != first


async def test_delivered_mark_refused_by_a_full_disk_is_cut_back_and_sent_once(outbox: MemoryOutbox, fake,
                                                                              monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    await outbox.capture_turn("run_m", "u", turn("q", "a"))
    _fail_halfway(monkeypatch, outbox.stores.outbox_path)
    failed = await outbox.sweep()  # sent, ledger written, the mark's append fails half-way
    monkeypatch.undo()
    assert any("No space left on device" in e for e in failed.errors)
    # No torn mark was left for compaction to find: nothing quarantined; the ledger's window
    # already counts the batch, so compaction dropped the record silently.
    assert failed.quarantined == 0 and not outbox.stores.quarantine_path.exists()
    assert outbox.stores.read_outbox().records == [] and outbox.stores.read_outbox().corrupt == []
    calls = len(fake.calls)
    again = await outbox.sweep()
    assert again.errors == [] and len(fake.calls) == calls
    assert contents(fake) == ["q", "a"]


async def test_quarantine_refused_by_a_full_disk_keeps_the_outbox_whole(outbox: MemoryOutbox, fake,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    await outbox.capture_turn("run_q", "u", turn("q", "a"))
    with open(outbox.stores.outbox_path, "ab") as handle:
        handle.write(b"{not json}\n")
    outbox.stores.quarantine_path.write_bytes(b"")
    _fail_halfway(monkeypatch, outbox.stores.quarantine_path)
    failed = await outbox.sweep()
    monkeypatch.undo()
    assert failed.quarantined == 0 and outbox.stores.quarantine_path.read_bytes() == b""
    assert len(outbox.stores.read_outbox().corrupt) == 1  # still in the outbox, not lost
    again = await outbox.sweep()
    assert again.quarantined == 1 and outbox.stores.quarantined_count() == 1
    assert contents(fake) == ["q", "a"]
