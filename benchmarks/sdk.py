"""SDK figures: request overhead, event-stream throughput, SSE parsing and notice verification.

Run: ``python benchmarks/sdk.py`` (about 20 s; ``--quick`` for a short run). Every figure is printed
beside a baseline measured in the same run:

1. ``runs.get`` round trips per second through ``Crouter`` over an ``httpx.MockTransport`` that
   returns a run DTO, beside a bare ``httpx.AsyncClient`` GET on the same transport.
2. events per second read through ``RunStream`` from one response streaming 50,000 delta events,
   beside a bare ``aiter_lines`` count of the same body.
3. ``SSEParser`` alone on the same body, fed in 4 KiB chunks.
4. ``verify_run_notice`` per second with cached keys, beside a bare ``jwt.decode``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import jwt  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from jwt.algorithms import RSAAlgorithm  # noqa: E402

from services import wire  # noqa: E402
from services.sdk import Crouter, SSEParser, verify_run_notice  # noqa: E402

RUNTIME = "https://runtime.test"
ISSUER = "https://directory.test"
NOTICE_URL = "https://app.test/run-notices"
RUN = {
    "id": "run_1", "user_id": "user:o1", "name": None, "status": "idle", "activity": None,
    "params": {"prompt": "hello"}, "outcome": None, "result": None, "last_turn_error": None,
    "question": None, "pending": [], "messages": [], "created_at": "2026-11-30T03:00:00.000Z",
    "updated_at": "2026-11-30T03:00:00.000Z", "last_event_id": 5,
}  # fmt: skip


def best_of(rounds: int, fn) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """Median, min and max of ``fn()`` (a rate) over ``rounds`` runs."""
    rates = [fn() for _ in range(rounds)]
    return statistics.median(rates), min(rates), max(rates)


def paired(rounds: int, baseline, subject) -> tuple[tuple[float, float, float], tuple[float, float, float]]:  # type: ignore[no-untyped-def]
    """Like ``best_of`` for two rates measured in alternating rounds (same machine load for both)."""
    a, b = [], []
    for _ in range(rounds):
        a.append(baseline())
        b.append(subject())
    return (statistics.median(a), min(a), max(a)), (statistics.median(b), min(b), max(b))


def show(label: str, figure: tuple[float, float, float], unit: str) -> None:
    median, low, high = figure
    print(f"  {label:<44} {median:>12,.0f} {unit}  ({low:,.0f}-{high:,.0f})")


# -- 1. request overhead ---------------------------------------------------------------------------


def run_handler(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=RUN)


async def sdk_gets(n: int) -> float:
    client = Crouter(runtime_url=RUNTIME, token="t", transport=httpx.MockTransport(run_handler))
    start = time.perf_counter()
    for _ in range(n):
        await client.runs.get("run_1")
    elapsed = time.perf_counter() - start
    await client.aclose()
    return n / elapsed


async def bare_gets(n: int) -> float:
    async with httpx.AsyncClient(transport=httpx.MockTransport(run_handler)) as client:
        start = time.perf_counter()
        for _ in range(n):
            (await client.get(RUNTIME + "/v1/runs/run_1", headers={"Authorization": "Bearer t"})).json()
        return n / (time.perf_counter() - start)


# -- 2./3. streams ---------------------------------------------------------------------------------


def stream_body(events: int) -> bytes:
    parts = []
    for seq in range(1, events + 1):
        data = {"id": f"ev_{seq}", "seq": seq, "run_id": "run_1", "node_id": "run_1",
                "type": "node.output_text.delta", "at": "2026-11-30T03:00:00.000Z", "delta": "x", "entry_id": "e1"}  # fmt: skip
        parts.append(f"id: {seq}\nevent: node.output_text.delta\ndata: {json.dumps(data)}\n\n")
    parts.append('event: stream_idle\ndata: {"idle_ms": 60000}\n\n')
    return "".join(parts).encode()


def chunked(body: bytes, size: int = 4096) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def stream_transport(chunks: list[bytes]) -> httpx.MockTransport:
    async def handler(request: httpx.Request) -> httpx.Response:
        async def content():  # type: ignore[no-untyped-def]
            for chunk in chunks:
                yield chunk

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content())

    return httpx.MockTransport(handler)


async def sdk_stream(chunks: list[bytes], events: int) -> float:
    client = Crouter(runtime_url=RUNTIME, token="t", transport=stream_transport(chunks))
    start = time.perf_counter()
    count = 0
    async for _ in client.runs.events("run_1"):
        count += 1
    elapsed = time.perf_counter() - start
    await client.aclose()
    assert count == events, count
    return count / elapsed


async def bare_stream(chunks: list[bytes], events: int) -> float:
    async with httpx.AsyncClient(transport=stream_transport(chunks)) as client:
        start = time.perf_counter()
        count = 0
        async with client.stream("GET", RUNTIME + "/v1/runs/run_1/events") as response:
            async for line in response.aiter_lines():
                if line.startswith("data: ") and '"seq"' in line:
                    count += 1
        assert count == events, count
        return count / (time.perf_counter() - start)


def parser_only(chunks: list[bytes], events: int) -> float:
    parser = SSEParser()
    start = time.perf_counter()
    count = sum(len(parser.feed(chunk)) for chunk in chunks)
    elapsed = time.perf_counter() - start
    assert count == events + 1, count
    return count / elapsed


# -- 4. notices ------------------------------------------------------------------------------------


def notice_setup() -> tuple[httpx.MockTransport, str, object]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**RSAAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": "k1", "alg": "RS256"}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == wire.DIRECTORY_DISCOVERY_PATH:
            return httpx.Response(200, json={"jwks_uri": ISSUER + wire.DIRECTORY_JWKS_PATH})
        return httpx.Response(200, json={"keys": [jwk]})

    now = int(time.time())
    claims = {"iss": ISSUER, "aud": NOTICE_URL, "sub": "user:o1", "grantee": "app:chat", "run_id": "run_1",
              "seq": 3, "iat": now, "exp": now + 3600, "jti": "n"}  # fmt: skip
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1", "typ": wire.NOTICE_TOKEN_TYPE})
    return httpx.MockTransport(handler), token, key.public_key()


async def sdk_notices(transport: httpx.MockTransport, token: str, n: int) -> float:
    request = httpx.Request("POST", NOTICE_URL, headers={"Authorization": f"Bearer {token}"}, json={"run_id": "run_1"})
    start = time.perf_counter()
    for _ in range(n):
        await verify_run_notice(
            request, run_notice_url=NOTICE_URL, issuer=ISSUER, grantee="app:chat", transport=transport
        )
    return n / (time.perf_counter() - start)


def bare_notices(token: str, public_key: object, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        jwt.decode(token, public_key, algorithms=["RS256"], audience=NOTICE_URL, issuer=ISSUER)  # type: ignore[arg-type]
    return n / (time.perf_counter() - start)


def main() -> None:
    quick = "--quick" in sys.argv
    rounds = 3 if quick else 5
    gets = 1000 if quick else 3000
    events = 10_000 if quick else 50_000
    notices = 300 if quick else 1500
    run = asyncio.run

    print(f"runs.get round trips ({gets} per round, {rounds} rounds)")
    run(bare_gets(200))
    run(sdk_gets(200))  # warm both paths up
    bare, sdk = paired(rounds, lambda: run(bare_gets(gets)), lambda: run(sdk_gets(gets)))
    show("bare AsyncClient GET + json", bare, "calls/s")
    show("Crouter.runs.get (SDK)", sdk, "calls/s")
    print(f"  SDK cost per call vs bare: {bare[0] / sdk[0]:.2f}x  (aim, SDK + FakeCloud in benchmarks/cloud.py: <= 1.5x)")

    body = stream_body(events)
    chunks = chunked(body)
    print(f"\nevent stream ({events:,} deltas, {len(body) / 1e6:.1f} MB in 4 KiB chunks)")
    bare_s, sdk_s = paired(rounds, lambda: run(bare_stream(chunks, events)), lambda: run(sdk_stream(chunks, events)))
    parsed = best_of(rounds, lambda: parser_only(chunks, events))
    show("bare aiter_lines count", bare_s, "events/s")
    show("SSEParser.feed alone", parsed, "events/s")
    show("RunStream (parse + JSON + RunEvent)", sdk_s, "events/s")
    print(f"  RunStream vs bare line count: {bare_s[0] / sdk_s[0]:.2f}x slower  (aim: RunStream >= 100,000 events/s)")

    transport, token, public_key = notice_setup()
    print(f"\nrun notice verification ({notices} per round, keys cached)")
    bare_n, sdk_n = paired(
        rounds, lambda: bare_notices(token, public_key, notices), lambda: run(sdk_notices(transport, token, notices))
    )
    show("bare jwt.decode RS256", bare_n, "verifies/s")
    show("verify_run_notice", sdk_n, "verifies/s")
    print(f"  verify_run_notice vs bare decode: {bare_n[0] / sdk_n[0]:.2f}x")


if __name__ == "__main__":
    main()
