"""Served-cloud figures: the SDK over loopback, and events through a served stream with durable state.

Run: ``python benchmarks/serve.py`` (about 30 s; ``--quick`` for a short run). Two servers run as
subprocesses in the same run: ``workbench serve`` on a fresh workspace (state kept in
``cloud.db``) and a bare uvicorn app answering ``hello`` to every request.

1. Round trips per second: ``client.runs.get`` through the SDK (``OAuth2Client`` with the served
   URL as ``issuer``, no transport) beside a bare ``httpx.AsyncClient`` GET of the hello app, in
   alternating rounds; the ratio is the served cost per call (aim: at most 3x the bare app).
2. Events per second from a served stream to an SDK consumer (``client.runs.events``): a producer
   appends events through the control API in batches of 1,000 while the consumer reads; the rate
   is events over the time from the first append to the last event read (aim: at least 50,000/s).
   Every event is committed to ``cloud.db`` before the stream sends it. The same again with 4 and
   16 runs streamed at once (a producer and a consumer each): the store commits every stream's
   events together (group commit), so the rate should grow with the number of streams. Beside
   each rate: the server's CPU time for those events (from ``/proc``), as events per server
   CPU-second, a figure other processes on a shared machine disturb less.
3. What the Host/Origin/limit checks cost (``services/served/guard.py``): the guard around an app that
   answers at once, beside that app alone, called as ASGI apps in this process (no sockets), for a GET
   with a bearer token and for a JSON POST (body read, content type, depth and text policy checked);
   the difference is the checks' cost per request.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from services.cloud import generate_private_key_pem  # noqa: E402
from services.attached.client import RemoteCloud  # noqa: E402
from services.sdk import Connection, MemoryConnectionStore, OAuth2Client  # noqa: E402

APP_KEY = generate_private_key_pem("ec")
"""The app's one client key (the directory holds a client to the first key it sees)."""

HELLO = """
import asyncio, socket, sys, uvicorn

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"5")]})
    await send({"type": "http.response.body", "body": b"hello"})

sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as workbench serve does
sock.bind(("127.0.0.1", 0))
print(f"serving http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False))
server.run(sockets=[sock])
"""


def start(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(args, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("serving "):
            return proc, line.split(" ", 1)[1].strip()
    raise RuntimeError(f"{args} did not start")


async def rate(calls: int, fn) -> float:  # type: ignore[no-untyped-def]
    began = time.perf_counter()
    for _ in range(calls):
        await fn()
    return calls / (time.perf_counter() - began)


async def round_trips(served: str, token: str, hello: str, rounds: int, calls: int) -> None:
    async with RemoteCloud(served, token) as remote:
        conn = await remote.connection("user:bench", scopes=["crtr:llm"])
    store = MemoryConnectionStore()
    await store.save(Connection(**{k: conn[k] for k in (
        "user_id", "access_token", "refresh_token", "expires_at", "scope", "runtime_url", "runtime_id")}))
    oauth = OAuth2Client(client_id=conn["client_id"], issuer=served, private_key=APP_KEY,
                         store=store)
    client = await oauth.client("user:bench")
    run = await client.runs.start(prompt="bench")
    bare = httpx.AsyncClient()

    async def sdk_call() -> None:
        await client.runs.get(run.id)

    async def bare_call() -> None:
        (await bare.get(hello)).raise_for_status()

    await rate(50, sdk_call)
    await rate(50, bare_call)
    sdk_rates, bare_rates = [], []
    for _ in range(rounds):
        bare_rates.append(await rate(calls, bare_call))
        sdk_rates.append(await rate(calls, sdk_call))
    await bare.aclose()
    await oauth.aclose()
    sdk, base = statistics.median(sdk_rates), statistics.median(bare_rates)
    print(f"round trip, bare uvicorn hello app (httpx GET): {base:8.0f} calls/s  ({1e6 / base:6.0f} us/call)")
    print(f"round trip, SDK runs.get on the served cloud:   {sdk:8.0f} calls/s  ({1e6 / sdk:6.0f} us/call)")
    print(f"served / bare time per call: {base / sdk:.2f}x  (aim <= 3x)")


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) process ``pid`` has used so far (None where ``/proc`` is missing)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def stream_rate(served: str, token: str, total: int, streams: int = 1, server_pid: int | None = None) -> float:
    """Events/s from ``streams`` runs at once, each with its own producer (batches of 1,000 through
    the control API) and its own SDK consumer; ``total`` events in all. Returns the read rate."""
    per_stream = total // streams
    per_stream -= per_stream % min(1000, per_stream)  # whole batches only: every event produced is awaited
    async with RemoteCloud(served, token) as remote:
        conn = await remote.connection(f"user:stream{streams}", scopes=["crtr:llm"])
        store = MemoryConnectionStore()
        await store.save(Connection(**{k: conn[k] for k in (
            "user_id", "access_token", "refresh_token", "expires_at", "scope", "runtime_url", "runtime_id")}))
        oauth = OAuth2Client(client_id=conn["client_id"], issuer=served, private_key=APP_KEY,
                             store=store)
        client = await oauth.client(f"user:stream{streams}")
        batch = [{"type": "node.output_text.delta", "fields": {"delta": "x" * 24, "entry_id": "e0"}}] * min(
            1000, per_stream)
        seen = 0
        lanes = []
        for _ in range(streams):
            run = await client.runs.start(prompt="stream")
            remote_run = await remote.runs.get(run.id)
            lanes.append((run.id, remote_run, remote_run.seq))

        async def consume(run_id: str, head: int) -> None:
            nonlocal seen
            last = head + per_stream
            stream = client.runs.events(run_id, after=head)
            async for event in stream:
                seen += 1
                if event.seq == last:
                    break
            await stream.aclose()

        async def produce(remote_run) -> None:  # type: ignore[no-untyped-def]
            for _ in range(per_stream // len(batch)):
                await remote_run.emit_many(batch)

        consumers = [asyncio.ensure_future(consume(run_id, head)) for run_id, _, head in lanes]
        await asyncio.sleep(0.2)  # the streams are open before the first event
        cpu_before = cpu_seconds(server_pid) if server_pid is not None else None
        began = time.perf_counter()
        await asyncio.gather(*(produce(remote_run) for _, remote_run, _ in lanes))
        produced = time.perf_counter() - began
        await asyncio.wait_for(asyncio.gather(*consumers), 120)
        elapsed = time.perf_counter() - began
        cpu_after = cpu_seconds(server_pid) if server_pid is not None else None
        await oauth.aclose()
    count = per_stream * streams
    assert seen == count, (seen, count)
    label = "1 stream" if streams == 1 else f"{streams} streams at once"
    print(f"events appended through the control API, {label}: {count / produced:8.0f} events/s")
    print(f"events read by the SDK from the served stream (durable), {label}: {count / elapsed:8.0f} events/s"
          f"  ({count} events in {elapsed:.2f} s; aim >= 50,000/s)")
    if cpu_before is not None and cpu_after is not None and cpu_after > cpu_before:
        used = cpu_after - cpu_before
        print(f"server CPU time, {label}: {used:.2f} s = {count / used:8.0f} events per server CPU-second"
              " (less noisy than the rate on a shared machine)")
    return count / elapsed


async def guard_cost(calls: int) -> None:
    try:
        from services.served.guard import GuardApp
    except ImportError:
        print("request checks: none in this version")
        return

    async def answer(scope, receive, send):  # type: ignore[no-untyped-def]
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    guarded = GuardApp(answer, origin="http://127.0.0.1:8790")
    body = json.dumps({"prompt": "hello " * 20, "name": "a run", "params": {"a": [1, 2, {"b": "c"}]}}).encode()
    headers = [(b"host", b"127.0.0.1:8790"), (b"authorization", b"Bearer " + b"x" * 600),
               (b"user-agent", b"python-httpx/0.28"), (b"accept", b"*/*")]

    async def send(message):  # type: ignore[no-untyped-def]
        return None

    def request(method: str, path: str, content: bytes):  # type: ignore[no-untyped-def]
        scope = {"type": "http", "method": method, "path": path, "headers": headers + (
            [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())]
            if content else [])}

        async def receive():  # type: ignore[no-untyped-def]
            return {"type": "http.request", "body": content, "more_body": False}

        return scope, receive

    for label, method, path, content in (("GET /v1/runs/{id}", "GET", "/v1/runs/run_1", b""),
                                         ("POST /v1/runs (JSON)", "POST", "/v1/runs", body)):
        scope, receive = request(method, path, content)
        timings = {}
        for name, app in (("bare", answer), ("guarded", guarded)):
            for _ in range(200):
                await app(scope, receive, send)
            began = time.perf_counter()
            for _ in range(calls):
                await app(scope, receive, send)
            timings[name] = (time.perf_counter() - began) / calls * 1e6
        print(f"request checks, {label:22s}: {timings['guarded'] - timings['bare']:5.1f} us/request "
              f"(app alone {timings['bare']:.1f} us, with the checks {timings['guarded']:.1f} us)")


async def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        served_proc, served = start([sys.executable, "-m", "workbench", "serve", "--workspace",
                                     str(Path(folder) / "ws"), "--port", "0"])
        hello_proc, hello = start([sys.executable, "-c", HELLO])
        try:
            token = json.loads((Path(folder) / "ws" / "serve.json").read_text())["token"]
            await round_trips(served, token, hello, rounds=3 if quick else 7, calls=200 if quick else 500)
            total = 20_000 if quick else 100_000
            rates = {n: await stream_rate(served, token, total=total, streams=n, server_pid=served_proc.pid)
                     for n in (1, 4, 16)}
            print("durable events/s by concurrency (one group commit covers every stream's events): "
                  + ", ".join(f"{n}: {rate:,.0f}" for n, rate in rates.items())
                  + f"; {max(rates, key=rates.__getitem__)} streams best, "
                  f"{max(rates.values()) / rates[1]:.2f}x one stream")
            await guard_cost(calls=5_000 if quick else 20_000)
        finally:
            for proc in (served_proc, hello_proc):
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    asyncio.run(main("--quick" in sys.argv))
