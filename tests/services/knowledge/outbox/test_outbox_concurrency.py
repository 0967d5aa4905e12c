"""Never lose an append: sweeps racing 1,000 concurrent captures, and two other processes appending."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

from services.clock import Clock
from services.knowledge.outbox import MemoryOutbox

from .conftest import contents

APPENDER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from services.changes import ChangeFeed
    from services.honcho import FakeHonchoService
    from services.knowledge.outbox import MemoryOutbox

    async def main(root, tag, count):
        box = await MemoryOutbox.open(Path(root), ChangeFeed(), honcho_service=FakeHonchoService())
        for i in range(count):
            await box.capture_turn(f"proc_{tag}_{i % 7}", "u", [{"role": "user", "text": f"{tag}-{i}"}])
        await box.aclose()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


async def _sweep_until(outbox: MemoryOutbox, done: asyncio.Event) -> int:
    sweeps = 0
    while not done.is_set():
        await outbox.sweep()
        sweeps += 1
        await asyncio.sleep(0)
    return sweeps


async def test_sweeps_racing_1000_concurrent_captures_lose_nothing(outbox: MemoryOutbox, fake) -> None:
    done = asyncio.Event()
    sweeper = asyncio.create_task(_sweep_until(outbox, done))
    texts = [f"c-{i}" for i in range(1000)]
    await asyncio.gather(*(outbox.capture_turn(f"run_{i % 25}", "u", [{"role": "user", "text": t}])
                           for i, t in enumerate(texts)))
    done.set()
    sweeps = await sweeper
    assert sweeps >= 1
    final = await outbox.sweep()
    assert final.errors == []
    delivered = Counter(contents(fake))
    assert set(delivered) == set(texts)
    assert max(delivered.values()) == 1  # each exactly once
    assert outbox.stores.read_outbox().records == []


async def test_two_processes_appending_while_this_one_sweeps(feed, fake, root: Path) -> None:
    # The other processes stamp records with the system clock, so this one uses it too.
    outbox = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=Clock())
    try:
        await _race_two_processes(outbox, fake, root)
    finally:
        await outbox.aclose()


async def _race_two_processes(outbox: MemoryOutbox, fake, root: Path) -> None:
    count = 250
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(root), tag, str(count)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for tag in ("A", "B")]
    local = [f"L-{i}" for i in range(100)]
    done = asyncio.Event()
    sweeper = asyncio.create_task(_sweep_until(outbox, done))
    for i, text in enumerate(local):
        await outbox.capture_turn(f"local_{i % 3}", "u", [{"role": "user", "text": text}])
    while any(p.poll() is None for p in procs):
        await asyncio.sleep(0.02)
    done.set()
    await sweeper
    for proc in procs:
        _, err = proc.communicate()
        assert proc.returncode == 0, err.decode()
    await outbox.sweep()
    expected = {f"{tag}-{i}" for tag in ("A", "B") for i in range(count)} | set(local)
    delivered = Counter(contents(fake))
    assert set(delivered) == expected
    assert max(delivered.values()) == 1
    assert outbox.stores.read_outbox().records == []


KILLED_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from services.changes import ChangeFeed
    from services.honcho import FakeHonchoService
    from services.knowledge.outbox import MemoryOutbox

    async def main(root):
        box = await MemoryOutbox.open(Path(root), ChangeFeed(), honcho_service=FakeHonchoService())
        i = 0
        while True:
            batch = await box.capture_turn("run_k", "u", [{"role": "user", "text": "x" * 20000 + str(i)}])
            print(batch, flush=True)
            i += 1

    asyncio.run(main(sys.argv[1]))
    """
)


async def test_acknowledged_captures_survive_a_sigkill(outbox: MemoryOutbox, fake, root: Path) -> None:
    """A writer killed at a random point: every capture it acknowledged is there and gets delivered."""
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(root)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    acked: list[str] = []
    assert proc.stdout is not None
    while len(acked) < 60:
        line = proc.stdout.readline()
        assert line, proc.stderr.read().decode() if proc.stderr else "writer died"
        acked.append(line.decode().strip())
    proc.kill()
    rest, _ = proc.communicate()
    acked.extend(x for x in rest.decode().split() if x)
    snapshot = outbox.stores.read_outbox()
    present = {r["batchId"] for r in snapshot.records}
    assert set(acked) <= present
    assert len(snapshot.corrupt) <= 1  # at most the one line the kill cut short
    result = await outbox.sweep()
    assert result.delivered_records == len(present)
    assert result.quarantined == len(snapshot.corrupt)
    assert len(fake.all_messages()) == len(present)
