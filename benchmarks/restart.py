"""What a served workspace's restart costs as its history grows: time to ``serving`` and memory.

Run: ``python benchmarks/restart.py`` (about a minute; ``--1m`` adds a workspace of 1M events,
about two minutes more; ``--quick`` builds 10k and 50k only). For each size a ``workbench serve``
subprocess is given 1,000 runs through the SDK (``client.runs.start``, as an app starts them) and
their events through the control API (``emit_many``, one call per run), then stopped and started
again on the same folder: the figures are the time from the process start to its ``serving`` line
and the server's resident memory then (``VmRSS`` from ``/proc``; best of 3 restarts), with the
ratio of each to the same figure at 10k events. A restart reads people, keys and, for each run, its
id, person and status from one index of ``cloud.db``: no run's record and no event (aim at 1M: under
2 s and 200 MiB, under 1.5x the 10k figures).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve import APP_KEY, start  # noqa: E402

from services.attached.client import RemoteCloud  # noqa: E402
from services.sdk import Connection, MemoryConnectionStore, OAuth2Client  # noqa: E402

RUNS = 1000


def serve(folder: Path) -> tuple[subprocess.Popen[str], str, float]:
    """``workbench serve`` on ``folder``: the process, its URL and the seconds to ``serving``."""
    began = time.perf_counter()
    proc, url = start([sys.executable, "-m", "workbench", "serve", "--workspace", str(folder), "--port", "0"])
    return proc, url, time.perf_counter() - began


def memory_mib(pid: int) -> tuple[float, float]:
    """The process's resident memory and its peak, in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(60)


async def build(url: str, token: str, events: int) -> float:
    """``RUNS`` runs of ``events // RUNS`` events each; returns the events appended per second."""
    per_run = events // RUNS
    async with RemoteCloud(url, token) as remote:
        conn = await remote.connection("user:scale", scopes=["crtr:llm"])
        store = MemoryConnectionStore()
        await store.save(Connection(**{k: conn[k] for k in (
            "user_id", "access_token", "refresh_token", "expires_at", "scope", "runtime_url", "runtime_id")}))
        oauth = OAuth2Client(client_id=conn["client_id"], issuer=url, private_key=APP_KEY, store=store)
        client = await oauth.client("user:scale")
        batch = [{"type": "node.output_text.delta", "fields": {"delta": "x" * 24, "entry_id": "e0"}}] * per_run
        began = time.perf_counter()
        for _ in range(RUNS):
            run = await client.runs.start(prompt="scale")
            remote_run = await remote.runs.get(run.id)
            await remote_run.emit_many(batch)
        elapsed = time.perf_counter() - began
        await oauth.aclose()
    return events / elapsed


async def measure(events: int) -> tuple[float, float, float]:
    """Build a workspace of ``events`` events, then restart it: (seconds, MiB, peak MiB), best of 3."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ws"
        proc, url, _ = serve(folder)
        try:
            token = json.loads((folder / "serve.json").read_text())["token"]
            rate = await build(url, token, events)
        finally:
            stop(proc)
        size = (folder / "cloud.db").stat().st_size / 2**20
        best: tuple[float, float, float] | None = None
        for _ in range(3):
            proc, _, seconds = serve(folder)
            try:
                rss, peak = memory_mib(proc.pid)
            finally:
                stop(proc)
            if best is None or seconds < best[0]:
                best = (seconds, rss, peak)
        assert best is not None
        print(f"{events:>9,} events ({RUNS} runs, cloud.db {size:6.1f} MiB, built at {rate:7,.0f} events/s): "
              f"restart to serving {best[0]:5.2f} s, memory after start {best[1]:6.1f} MiB (peak {best[2]:6.1f})",
              flush=True)
        return best


async def main() -> None:
    sizes = [10_000, 50_000] if "--quick" in sys.argv else [10_000, 100_000]
    if "--1m" in sys.argv:
        sizes.append(1_000_000)
    figures = {n: await measure(n) for n in sizes}
    base = figures[sizes[0]]
    for n in sizes[1:]:
        seconds, rss, _ = figures[n]
        print(f"{n:>9,} events / {sizes[0]:,}: restart {seconds / base[0]:.2f}x, memory {rss / base[1]:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
