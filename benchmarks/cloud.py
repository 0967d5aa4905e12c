"""Prints the fake cloud's figures: runs.get round trips through SDK + FakeCloud beside a bare
httpx.MockTransport answering the same JSON (the ratio is the figure; aim <= 1.5x), and events/s read
through a RunStream from a run emitting 50,000 deltas (aim >= 100,000 events/s, in process), by the
wall clock and per second of the process's CPU time (steadier on a machine shared with other load).

Usage: python benchmarks/cloud.py [--calls N] [--events N] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx

from services.cloud import FakeCloud, generate_private_key_pem
from services.sdk import MemoryConnectionStore, OAuth2Client

USER = "user:bench"


async def _sdk_client(cloud: FakeCloud):
    store = MemoryConnectionStore()
    await cloud.connect(store, USER)
    oauth = OAuth2Client(client_id="bench", issuer=cloud.issuer, transport=cloud.transport,
                         private_key=generate_private_key_pem("ec"), redirect_uri="https://app.test/cb", store=store)
    return oauth, await oauth.client(USER)


async def round_trips(calls: int) -> tuple[float, float]:
    cloud = FakeCloud(client_id="bench")
    oauth, client = await _sdk_client(cloud)
    run = await client.runs.start(prompt="bench")
    cloud.runs.get(run.id).reply("a reply to make the DTO realistic")
    body = cloud.runs.get(run.id).to_dto()
    bare = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: httpx.Response(200, json=body)),
                             base_url="https://runtime.test")

    async def sdk_pass() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            await client.runs.get(run.id)
        return calls / (time.perf_counter() - start)

    async def bare_pass() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            (await bare.get(f"/v1/runs/{run.id}")).json()
        return calls / (time.perf_counter() - start)

    sdk_rates, bare_rates = [], []
    for _ in range(5):  # interleaved, so both see the same machine noise
        sdk_rates.append(await sdk_pass())
        bare_rates.append(await bare_pass())
        cloud.calls.clear()
    await bare.aclose()
    await oauth.aclose()
    return statistics.median(sdk_rates), statistics.median(bare_rates)


async def stream_rate(events: int) -> tuple[float, float]:
    """Events/s read through a RunStream, by the wall clock and per second of this process's CPU
    time (the producer and the consumer share the process; on a shared machine the CPU figure
    moves less with other load)."""
    cloud = FakeCloud(client_id="bench", stream_idle_ms=500)
    oauth, client = await _sdk_client(cloud)
    run = await client.runs.start(prompt="bench")
    fake = cloud.runs.get(run.id)
    count = 0
    start = time.perf_counter()
    cpu = time.process_time()

    async def produce() -> None:
        for i in range(events):
            fake.emit("node.output_text.delta", {"delta": "x", "entry_id": "e"})
            if i % 1000 == 999:
                await asyncio.sleep(0)
        fake.close_idle()

    producer = asyncio.create_task(produce())
    async for _ in client.runs.events(run.id):
        count += 1
    await producer
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    await oauth.aclose()
    assert count == events, (count, events)
    return count / elapsed, count / cpu


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3, help="RunStream rounds (the best is printed)")
    args = parser.parse_args()
    sdk, bare = await round_trips(args.calls)
    print(f"runs.get through SDK + FakeCloud: {sdk:,.0f} calls/s")
    print(f"runs.get through bare MockTransport: {bare:,.0f} calls/s")
    print(f"cost ratio (bare / SDK+fake): {bare / sdk:.2f}x   (aim <= 1.5x)")
    rates = [await stream_rate(args.events) for _ in range(args.rounds)]
    wall, cpu = max(r[0] for r in rates), max(r[1] for r in rates)
    print(f"RunStream: {args.events:,} deltas at {wall:,.0f} events/s, {cpu:,.0f} per CPU-second "
          f"(best of {args.rounds})   (aim >= 100,000 events/s)")


if __name__ == "__main__":
    asyncio.run(main())
