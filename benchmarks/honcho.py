"""Honcho fake figures: messages/s through the official Python SDK, and list and search latency at
100,000 messages.

Run: ``python benchmarks/honcho.py`` (``--messages``, ``--sdk-messages`` to scale). Prints:

1. messages/s added through ``honcho-ai`` (``Session.add_messages``, batches of 100) over real
   HTTP to the fake served by uvicorn in a process of its own, beside the same batches posted with
   a bare ``httpx.Client`` in the same run (the SDK's own overhead is the ratio);
2. with ``--messages`` messages stored (default 100,000, in 20 sessions, added in batches of 100
   in-process), the median and 95th percentile time of one ``messages/list`` page (50 items, a
   page deep in the session, with and without a metadata filter) and of one session and one
   workspace search, answered by the service in-process (no HTTP), against the aims:
   list page < 20 ms, search < 50 ms.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
# this script is named honcho.py: its own folder must not shadow the honcho-ai package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from services.honcho import FakeHonchoService  # noqa: E402

WORDS = "bees honey roof tea garden river window lamp paper music winter summer bread stone".split()


def text(i: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(12)) + f" note {i}"


def serve(state: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "services.served.honcho", "--state", str(state),
                             "--key", "bench"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    return proc, line.removeprefix("serving ")


def sdk_rate(count: int, folder: Path) -> tuple[float, float]:
    from honcho import Honcho

    proc, url = serve(folder / "sdk.db")
    try:
        honcho = Honcho(base_url=url, workspace_id="bench", api_key="bench", max_retries=0)
        session, alice = honcho.session("s"), honcho.peer("alice")
        start = time.perf_counter()
        for b in range(0, count, 100):
            session.add_messages([alice.message(text(i)) for i in range(b, min(count, b + 100))])
        sdk = count / (time.perf_counter() - start)
        with httpx.Client(base_url=url, headers={"Authorization": "Bearer bench"}) as http:
            start = time.perf_counter()
            for b in range(0, count, 100):
                http.post("/v3/workspaces/bench/sessions/raw/messages",
                          json={"messages": [{"peer_id": "alice", "content": text(i)}
                                             for i in range(b, min(count, b + 100))]}).raise_for_status()
            raw = count / (time.perf_counter() - start)
    finally:
        proc.terminate()
        proc.wait(10)
    return sdk, raw


def timed(call: Callable[[], httpx.Response], runs: int = 40) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        answer = call()
        times.append((time.perf_counter() - start) * 1000)
        assert answer.status_code == 200, answer.text
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--sdk-messages", type=int, default=3_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sdk, raw = sdk_rate(args.sdk_messages, folder)
        print(f"1. add messages over HTTP: honcho-ai SDK {sdk:,.0f} msg/s, bare httpx {raw:,.0f} msg/s "
              f"(SDK / bare = {sdk / raw:.2f})")
        service = FakeHonchoService(folder / "big.db")
        client = httpx.Client(transport=httpx.MockTransport(service.handle), base_url="http://honcho.fake")
        start = time.perf_counter()
        for b in range(0, args.messages, 100):
            client.post(f"/v3/workspaces/w/sessions/s{(b // 100) % 20}/messages",
                        json={"messages": [{"peer_id": ("alice", "bob")[i % 2], "content": text(i),
                                            "metadata": {"n": i % 10}}
                                           for i in range(b, min(args.messages, b + 100))]}).raise_for_status()
        print(f"   stored {args.messages:,} messages in-process in {time.perf_counter() - start:.1f} s")
        deep_page = max(1, args.messages // 20 // 50 // 2)
        figures = {
            "list page (50, page %d)" % deep_page: timed(lambda: client.post(
                "/v3/workspaces/w/sessions/s3/messages/list", params={"page": deep_page, "size": 50}, json={})),
            "list page, metadata filter": timed(lambda: client.post(
                "/v3/workspaces/w/sessions/s3/messages/list", params={"page": 2, "size": 50},
                json={"filters": {"metadata": {"n": {"gte": 5}}}})),
            "session search": timed(lambda: client.post("/v3/workspaces/w/sessions/s3/search",
                                                        json={"query": "honey garden", "limit": 10})),
            "workspace search": timed(lambda: client.post("/v3/workspaces/w/search",
                                                          json={"query": "river lamp", "limit": 10})),
            "peer search, filtered": timed(lambda: client.post(
                "/v3/workspaces/w/peers/alice/search", json={"query": "stone", "filters": {"session_id": "s4"}})),
        }
        print(f"2. at {args.messages:,} messages (median / p95, ms; aims: list page < 20, search < 50):")
        for name, (median, p95) in figures.items():
            aim = 20 if name.startswith("list") else 50
            print(f"   {name:32s} {median:7.2f} / {p95:7.2f}   {'meets' if p95 < aim else 'MISSES'} the aim < {aim} ms")
        client.close()
        service.close()


if __name__ == "__main__":
    main()
