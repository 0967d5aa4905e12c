"""Memory outbox figures: capture rate, sweep time at 100,000 records, and an idle re-sweep against one read.

Run: ``python benchmarks/outbox.py`` (``--records``, ``--conversations``, ``--captures`` to scale).
Prints:

1. captures per second through ``MemoryOutbox.capture_turn`` (the module mutex, the file lock,
   an fsynced append; concurrent captures share one append and fsync), sequential and 100 at a
   time, against a baseline measured in the same run: a plain unlocked, unsynced
   ``open/append/close`` of the same line, and the disk's fsync time;
2. the time of one sweep (plan, establish, deliver, compact) over an outbox of ``--records``
   records across ``--conversations`` conversations, delivered to the embedded fake Honcho;
3. the status view over that outbox, first open in a new process (read through the status
   index) and after one more capture;
4. the ratio of a sweep over an already delivered outbox (every record flipped, nothing sent) to
   reading and parsing the same file once, and the ratio of a re-fired sweep (after compaction)
   to that read;
5. records/s delivered by a sweep of ``--http-records`` records over real HTTP to the Honcho fake
   served by uvicorn in a process of its own (loopback), beside the same sweep delivered to the
   in-process fake, in the same run, and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.changes import ChangeFeed  # noqa: E402
from services.honcho import FakeHonchoService  # noqa: E402
from services.knowledge.outbox import MemoryOutbox  # noqa: E402


SEQUENTIAL_THEN = 1_578
"""Sequential captures/s of 3ed8c2c (issue 25's table); side by side: benchmarks/compare.sh or /work/base25."""
CONCURRENT_AIM = 10_000
"""100 concurrent captures, each durable before it returns: captures/s aimed at."""
SWEEP_AIM = 3.0
"""A sweep delivering 100k records, at most this many times one read of the outbox."""
STATUS_AIM_MS = 100.0
"""The status view's first open over 100k pending records."""


def _record(conv: str, i: int, now_ms: int) -> dict:
    return {"batchId": f"b_{uuid.uuid4().hex}", "conversationId": conv, "owner": "user:o1", "status": "pending",
            "createdAt": now_ms, "messages": [
                {"role": "user", "peerId": "user_o1", "content": f"question {i} about the plan", "createdAt": now_ms},
                {"role": "assistant", "peerId": "assistant", "content": f"answer {i}: it is on track",
                 "createdAt": now_ms}]}


async def _captures(base: Path, count: int) -> None:
    box = await MemoryOutbox.open(base / "captures", ChangeFeed(), honcho_service=FakeHonchoService())
    message = [{"role": "user", "text": "question about the plan"}, {"role": "assistant", "text": "on track"}]
    start = time.perf_counter()
    for i in range(count):
        await box.capture_turn(f"run_{i % 50}", "user:o1", message)
    sequential = count / (time.perf_counter() - start)
    start = time.perf_counter()
    for offset in range(0, count, 100):
        await asyncio.gather(*(box.capture_turn(f"run_{i % 50}", "user:o1", message)
                               for i in range(offset, min(count, offset + 100))))
    concurrent = count / (time.perf_counter() - start)
    await box.aclose()
    line = (json.dumps(_record("run_0", 0, 0), separators=(",", ":")) + "\n").encode()
    path = base / "plain.jsonl"
    start = time.perf_counter()
    for _ in range(count):
        with open(path, "ab") as handle:
            handle.write(line)
    plain = count / (time.perf_counter() - start)
    print(f"captures/s, sequential (mutex + file lock + fsynced append): {sequential:,.0f}"
          f"  (3ed8c2c did {SEQUENTIAL_THEN:,}/s on the reference machine: ratio {sequential / SEQUENTIAL_THEN:.2f}x)")
    print(f"captures/s, 100 concurrent at a time (group commit):       {concurrent:,.0f}"
          f"  (aim >= {CONCURRENT_AIM:,}/s: ratio {concurrent / CONCURRENT_AIM:.2f}x; "
          f"{concurrent / sequential:.1f}x sequential in this run)")
    print(f"baseline: plain unlocked unsynced appends/s:               {plain:,.0f}"
          f"  (capture costs {plain / sequential:.1f}x a plain append)")
    print(f"fsync of one small append on this disk now:                {_fsync_ms(base):.2f} ms")


def _fsync_ms(base: Path, count: int = 50) -> float:
    """One fsynced append, timed here: every durable capture waits at least this long."""
    fd = os.open(base / "fsync.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(count):
            os.write(fd, b"x" * 300 + b"\n")
            os.fsync(fd)
        return (time.perf_counter() - start) / count * 1000
    finally:
        os.close(fd)


def _fill(box: MemoryOutbox, records: int, conversations: int) -> list[dict]:
    now_ms = int(time.time() * 1000)
    batch = [_record(f"run_{i % conversations:04d}", i, now_ms) for i in range(records)]
    box.stores.append_lines(batch)
    return batch


def _read_once(box: MemoryOutbox, repeats: int = 3) -> float:
    return _read_once_timed(box, repeats)[0]


def _read_once_timed(box: MemoryOutbox, repeats: int = 3) -> tuple[float, float]:
    """Median wall and process CPU seconds of one read and parse of the outbox."""
    times, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        box.stores.read_outbox()
        times.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(times), statistics.median(cpus)


async def _sweeps(base: Path, records: int, conversations: int) -> None:
    box = await MemoryOutbox.open(base / "sweep", ChangeFeed(), honcho_service=FakeHonchoService())
    batch = _fill(box, records, conversations)
    size = box.stores.outbox_path.stat().st_size
    pending_read, pending_read_cpu = _read_once_timed(box, 1)
    box.stores.flush_index()
    # A new process over the same outbox: nothing cached in memory, only the index on disk.
    fresh = await MemoryOutbox.open(base / "sweep", ChangeFeed(), honcho_service=FakeHonchoService())
    start = time.perf_counter()
    await fresh.status()
    first_status = time.perf_counter() - start
    await fresh.aclose()
    await box.capture_turn("run_0000", "user:o1", [{"role": "user", "text": "one more"}])
    start = time.perf_counter()
    status = await box.status()
    next_status = time.perf_counter() - start
    assert status.pending_total == records + 1
    print(f"status view over {records:,} pending records, first open in a new process: {first_status * 1000:.0f} ms "
          f"(aim < {STATUS_AIM_MS:.0f} ms: ratio {first_status * 1000 / STATUS_AIM_MS:.2f}x; "
          f"{first_status / pending_read:.3f}x one parse of the outbox, {pending_read * 1000:.0f} ms); "
          f"after one more capture {next_status * 1000:.0f} ms")
    records += 1
    start, cpu = time.perf_counter(), time.process_time()
    result = await box.sweep()
    elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - cpu
    assert result.errors == [] and result.delivered_records == records, result.errors[:3]
    print(f"sweep of {records:,} records / {conversations:,} conversations ({size / 1e6:.1f} MB, "
          f"{result.delivered_messages:,} messages delivered): {elapsed:.2f} s = {elapsed / pending_read:.1f}x "
          f"reading the outbox once (aim <= {SWEEP_AIM:g}x: ratio {elapsed / pending_read / SWEEP_AIM:.2f}x the aim); "
          f"process CPU {elapsed_cpu:.2f} s = {elapsed_cpu / pending_read_cpu:.1f}x the read's "
          f"(less swayed by other load on the machine)")

    # The same records again, each flipped by a delivered mark and counted in its ledger's window:
    # the state deliver_pending leaves before any compaction.
    marks: dict[str, list[str]] = {}
    for record in batch:
        marks.setdefault(record["conversationId"], []).append(record["batchId"])
    box.stores.append_lines(batch + [{"op": "delivered", "batchIds": ids, "at": 0} for ids in marks.values()])
    read = _read_once(box)
    calls = len(box.fake_honcho.calls)
    start = time.perf_counter()
    result = await box.sweep()
    delivered_sweep = time.perf_counter() - start
    assert result.delivered_records == 0 and len(box.fake_honcho.calls) == calls
    print(f"read + parse the delivered outbox once:            {read * 1000:.0f} ms")
    print(f"sweep over the already delivered outbox:           {delivered_sweep * 1000:.0f} ms "
          f"(ratio {delivered_sweep / read:.2f}x one read; 0 network calls; compaction rewrote: {result.rewrote})")
    start = time.perf_counter()
    again = await box.sweep()
    refire = time.perf_counter() - start
    assert not again.rewrote and len(box.fake_honcho.calls) == calls
    print(f"re-fired sweep after compaction (empty outbox):    {refire * 1000:.1f} ms "
          f"(ratio {refire / read:.3f}x the read above; no write)")
    await box.aclose()


async def _delivery_rates(base: Path, records: int, conversations: int) -> None:
    async def rate(name: str, **target: object) -> float:
        box = await MemoryOutbox.open(base / name, ChangeFeed(), **target)  # type: ignore[arg-type]
        _fill(box, records, conversations)
        start = time.perf_counter()
        result = await box.sweep()
        elapsed = time.perf_counter() - start
        assert result.errors == [] and result.delivered_records == records, result.errors[:3]
        await box.aclose()
        return records / elapsed

    in_process = await rate("in-process", honcho_service=FakeHonchoService())
    server = subprocess.Popen([sys.executable, "-m", "services.served.honcho", "--port", "0"],
                              cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[-1]
        over_http = await rate("over-http", base_url=url)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"sweep delivery, {records:,} records / {conversations:,} conversations, in-process fake: "
          f"{in_process:,.0f} records/s")
    print(f"sweep delivery, same records over real HTTP (uvicorn, loopback, own process): "
          f"{over_http:,.0f} records/s (ratio {over_http / in_process:.2f}x in-process)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--conversations", type=int, default=1_000)
    parser.add_argument("--captures", type=int, default=2_000)
    parser.add_argument("--http-records", type=int, default=5_000)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="outbox-bench-"))
    try:
        await _captures(base, args.captures)
        await _sweeps(base, args.records, args.conversations)
        await _delivery_rates(base, args.http_records, max(1, min(args.conversations, args.http_records // 50)))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
