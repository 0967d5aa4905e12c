"""The outbox's file lock kept between captures: after a group-committed append this process keeps
the cross-process lock a few milliseconds for the next capture (taking it costs a third of a
capture). Kept, it still excludes every other process; any other locked work lets it go at once; a
keeper thread lets it go when idle whatever the event loop does; and captures back to back leave a
gap for a waiting process, so it is never starved."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from services.knowledge.outbox import MemoryOutbox
from services.knowledge.outbox import stores as outbox_stores

from .conftest import turn

_HERE = Path(__file__).resolve().parents[4]

TRY_ONCE = textwrap.dedent(
    """
    import sys
    from services.files import FileLock
    lock = FileLock(sys.argv[1], timeout=0)
    if lock.try_acquire():
        lock.release()
        print("free")
    else:
        print("busy")
    """
)

WAIT_FOR_IT = textwrap.dedent(
    """
    import sys
    from services.files import FileLock
    with FileLock(sys.argv[1], timeout=float(sys.argv[2])):
        print("got", flush=True)
    """
)


def _lock_path(root: Path) -> Path:
    return root / "data" / "outbox" / "capture.lock"


def _child(script: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(_HERE)}, cwd=_HERE)


def _answer(proc: subprocess.Popen[bytes]) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    return out.decode().strip()


async def test_a_kept_lock_excludes_another_process_until_other_work_lets_it_go(
        outbox: MemoryOutbox, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbox_stores, "_LEASE_IDLE_S", 60.0)  # kept for the whole test unless let go
    monkeypatch.setattr(outbox_stores, "_LEASE_MAX_S", 600.0)
    await outbox.capture_turn("run_a", "u", turn("one", "r"))
    assert _answer(_child(TRY_ONCE, str(_lock_path(root)))) == "busy"  # kept: no other process may rewrite
    await outbox.capture_turn("run_a", "u", turn("two", "r"))  # the kept lock serves the next capture
    await outbox.status()  # any other locked work lets it go when it is done
    assert _answer(_child(TRY_ONCE, str(_lock_path(root)))) == "free"
    assert [r["messages"][0]["content"] for r in outbox.stores.read_outbox().records] == ["one", "two"]


async def test_a_kept_lock_is_let_go_while_the_event_loop_is_blocked(outbox: MemoryOutbox, root: Path) -> None:
    await outbox.capture_turn("run_a", "u", turn("one", "r"))
    # the loop is blocked in communicate(): only the keeper thread can let the lock go
    assert _answer(_child(WAIT_FOR_IT, str(_lock_path(root)), "30")) == "got"


async def test_captures_back_to_back_never_starve_a_waiting_process(outbox: MemoryOutbox, root: Path) -> None:
    waiter = _child(WAIT_FOR_IT, str(_lock_path(root)), "50")
    batch_ids = []
    while waiter.poll() is None and len(batch_ids) < 100_000:  # the waiter exits once it held the lock
        batch_ids.append(await outbox.capture_turn(f"run_{len(batch_ids) % 5}", "u", turn("q", "r")))
    assert _answer(waiter) == "got"
    assert [r["batchId"] for r in outbox.stores.read_outbox().records] == batch_ids  # every one durable, in order
