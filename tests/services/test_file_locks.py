"""One file lock (``services.files``): across processes, timeouts, re-entrancy, async, and Windows imports."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import services
from services.files import AsyncFileLock, FileLock, LockTimeoutError

HOLDER = textwrap.dedent(
    """
    import sys
    from services.files import FileLock

    lock = FileLock(sys.argv[1])
    lock.acquire()
    print("held", flush=True)
    sys.stdin.readline()
    lock.release()
    """
)


@contextmanager
def held_by_another_process(path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child process holding the lock on ``path`` until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"held", proc.stderr
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(30)


def test_a_lock_held_by_another_process_times_out_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "state" / "x.lock"
    with held_by_another_process(path):
        lock = FileLock(path, timeout=0.2)
        assert not lock.try_acquire()
        with pytest.raises(LockTimeoutError, match=r"x\.lock is locked by another holder; gave up after waiting 0\.2 s"):
            lock.acquire()
        with pytest.raises(LockTimeoutError):
            with lock:
                pass
    with FileLock(path, timeout=5):  # free again once that process let go
        pass


def test_a_lock_is_reentrant_per_handle_and_excludes_other_threads_and_handles(tmp_path: Path) -> None:
    path = tmp_path / "y.lock"
    lock = FileLock(path)
    other = FileLock(path, timeout=0.1)
    with lock:
        with lock:  # the holder may take it again
            assert not other.try_acquire()  # another handle is another holder
        seen: list[bool] = []
        thread = threading.Thread(target=lambda: seen.append(FileLock(path).try_acquire()))
        thread.start()
        thread.join()
        assert seen == [False]
    assert other.try_acquire()
    other.release()
    with pytest.raises(RuntimeError, match="not held"):
        lock.release()


async def test_the_async_lock_never_blocks_the_loop_and_times_out_plainly(tmp_path: Path) -> None:
    path = tmp_path / "z.lock"
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.005)

    with held_by_another_process(path):
        task = asyncio.create_task(ticker())
        waiter = AsyncFileLock(path, timeout=0.3)
        with pytest.raises(LockTimeoutError, match="z.lock is locked by another holder"):
            async with waiter:
                pass
        assert not await waiter.try_acquire()
        stop.set()
        await task
        assert ticks > 1  # the loop kept running while the lock was waited for
    async with AsyncFileLock(path, timeout=5):
        pass


async def test_async_waiters_queue_and_a_cancelled_waiter_leaves_nothing_held(tmp_path: Path) -> None:
    path = tmp_path / "q.lock"
    first = AsyncFileLock(path)
    order: list[str] = []
    await first.acquire()
    second = asyncio.create_task(_take(AsyncFileLock(path), order, "second"))
    cancelled = asyncio.create_task(_take(AsyncFileLock(path), order, "cancelled"))
    await asyncio.sleep(0.05)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert not second.done()  # waiting behind the first holder, within this process
    assert not FileLock(path).try_acquire()  # and the file lock excludes other holders meanwhile
    first.release()
    await second
    assert order == ["second"]
    assert await AsyncFileLock(path).try_acquire()  # nothing left held


async def _take(lock: AsyncFileLock, order: list[str], name: str) -> None:
    async with lock:
        order.append(name)


def test_services_import_where_fcntl_does_not_exist() -> None:
    """As on Windows: no module of ``services`` needs ``fcntl`` to import, and the lock still works."""
    code = textwrap.dedent(
        """
        import sys, pkgutil, importlib, tempfile, warnings, pathlib
        sys.modules["fcntl"] = None
        warnings.simplefilter("ignore")
        import services
        for info in pkgutil.walk_packages(services.__path__, "services."):
            importlib.import_module(info.name)
        from services.files import FileLock
        with FileLock(pathlib.Path(tempfile.mkdtemp()) / "w.lock"):
            pass
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "ok"


def test_no_hand_written_flock_is_left_in_services() -> None:
    root = Path(services.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name.split(".")[0] in ("fcntl", "msvcrt") for name in names):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []
