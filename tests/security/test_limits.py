"""Limits, documented and configurable: request bodies, JSON depth, prompt/message/event sizes, the
call record, the grant long-poll and event streams per token; memory stays flat under a flood of
refused bodies."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from services.control_wire import CONTROL_PREFIX
from services.served.guard import _plainly_fine, json_problem

from .conftest import Guarded, envelope_of

MB = 1024 * 1024


async def test_a_body_over_the_cap_is_a_413_with_the_limit_declared_or_chunked(tight: Guarded) -> None:
    big = b'{"prompt": "' + b"x" * (70 * 1024) + b'"}'
    declared = await tight.http.post("/v1/runs", headers=tight.as_app(), content=big)
    assert declared.status_code == 413
    assert envelope_of(declared)["details"] == {"limit": 64 * 1024}

    async def chunks():  # no Content-Length: refused once the cap is passed
        for _ in range(40):
            yield b" " * 4096

    chunked = await tight.http.post("/v1/runs", headers=tight.as_app(), content=chunks())
    assert chunked.status_code == 413
    assert "65536 bytes" in str(envelope_of(chunked)["message"])
    assert tight.cloud.runs.all == []


async def test_prompt_message_name_and_event_sizes_are_capped_by_field(tight: Guarded) -> None:
    refused = await tight.http.post("/v1/runs", headers=tight.as_app(), json={"prompt": "p" * 1001})
    assert refused.status_code == 413 and envelope_of(refused)["param"] == "prompt"
    run_id = (await tight.http.post("/v1/runs", headers=tight.as_app(), json={"prompt": "p" * 1000})).json()["id"]
    for path, body, field in ((f"/v1/runs/{run_id}/messages", {"text": "m" * 501}, "text"),
                              (f"/v1/runs/{run_id}/rename", {"name": "n" * 501}, "name")):
        answer = await tight.http.post(path, headers=tight.as_app(), json=body)
        assert answer.status_code == 413 and envelope_of(answer)["param"] == field, answer.text
    emitted = await tight.http.post(f"{CONTROL_PREFIX}/runs/{run_id}/emit", headers=tight.as_operator(),
                                    json={"events": [{"type": "node.activity", "fields": {"a": "e" * 3000}}]})
    assert emitted.status_code == 413 and envelope_of(emitted)["param"] == "events[0]"
    replied = await tight.http.post(f"{CONTROL_PREFIX}/runs/{run_id}/reply", headers=tight.as_operator(),
                                    json={"text": "r" * 501})
    assert replied.status_code == 413
    deep = await tight.http.post("/v1/runs", headers=tight.as_app(), json={"prompt": "x", "a": [[[[[[[[[1]]]]]]]]]})
    assert deep.status_code == 400 and "deeper than 8" in str(envelope_of(deep)["message"])
    # many containers, none too deep: read from the text alone, accepted; one too deep among them: refused
    wide = {"prompt": "x", "a": [{"b": [1, "]]]]]]]]]]"]} for _ in range(50)]}
    assert (await tight.http.post("/v1/runs", headers=tight.as_app(), json=wide)).status_code == 201
    wide["a"].append([[[[[[[[[1]]]]]]]]])
    deep = await tight.http.post("/v1/runs", headers=tight.as_app(), json=wide)
    assert deep.status_code == 400 and "deeper than 8" in str(envelope_of(deep)["message"])
    # a lone surrogate as raw UTF-8 bytes (``json.loads`` decodes bytes with surrogatepass)
    raw = '{"prompt": "a\ud800b"}'.encode("utf-8", "surrogatepass")
    refused = await tight.http.post("/v1/runs", headers={**tight.as_app(), "content-type": "application/json"},
                                    content=raw)
    assert refused.status_code == 400 and "surrogate" in str(envelope_of(refused)["message"])


_LEAF = st.one_of(st.integers(), st.sampled_from(["x", "[", "]{", "\\", '"', 'a\\"b', "\u0000", "\ud800", "é"]))
_JSON_VALUES = st.recursive(_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["k", "[k", "\u0000"]), inner, max_size=3)),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(_JSON_VALUES, st.booleans(), st.integers(min_value=1, max_value=8))
def test_a_body_passed_from_its_text_alone_is_one_the_full_check_passes(value: object, as_ascii: bool, depth: int) -> None:
    body = json.dumps(value, ensure_ascii=as_ascii).encode("utf-8", "surrogatepass")
    problem = json_problem(json.loads(body), depth)
    if _plainly_fine(body, depth):
        assert problem is None
    elif b"\\u" not in body and b"\xed" not in body:
        assert problem is not None  # nothing risky in the text: only nesting sends it to the full check


async def test_the_call_record_is_bounded_and_keeps_nothing_of_unauthenticated_calls(tight: Guarded) -> None:
    for _ in range(120):
        assert (await tight.http.get("/v1/runs", headers=tight.as_app())).status_code == 200
    assert len(tight.cloud.calls) <= 50 + 50 // 8
    kept = list(tight.cloud.calls)
    for auth in ({}, {"authorization": "Bearer junk"}, {"authorization": f"Bearer {tight.control}"}):
        answer = await tight.http.post("/v1/runs", headers={**auth, "content-type": "application/json"},
                                       json={"prompt": "y" * 60_000})
        assert answer.status_code == 401
    assert tight.cloud.calls == kept


async def test_a_grant_long_poll_holds_at_most_the_limit(tight: Guarded) -> None:
    version = (await tight.http.get("/v1/grant", headers=tight.as_app())).json()["version"]
    held = await tight.http.get(f"/v1/grant?wait=100000&since={version}", headers=tight.as_app(), timeout=20)
    assert held.status_code == 200 and held.json()["version"] == version


async def test_event_streams_per_token_are_bounded(tight: Guarded) -> None:
    run_id = (await tight.http.post("/v1/runs", headers=tight.as_app(), json={"prompt": "s"})).json()["id"]
    path = f"/v1/runs/{run_id}/events"
    async with tight.http.stream("GET", path, headers=tight.as_app()) as one, \
            tight.http.stream("GET", path, headers=tight.as_app()) as two:
        assert one.status_code == two.status_code == 200
        third = await tight.http.get(path, headers=tight.as_app())
        assert third.status_code == 429 and envelope_of(third)["code"] == "too_many_streams"
    for _ in range(100):  # closed ones count no more, once the server has seen them go
        async with tight.http.stream("GET", path, headers=tight.as_app()) as again:
            if again.status_code == 200:
                break
        await asyncio.sleep(0.05)
    assert again.status_code == 200


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _refused_upload(port: int, size: int, *, token: str | None) -> int:
    """Send a JSON POST declaring ``size`` bytes; read the answer's status, then push the body anyway."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        sock.sendall((f"POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                      f"{auth}Content-Length: {size}\r\n\r\n").encode())
        head = sock.recv(4096).decode("latin-1")
        chunk = b"x" * (256 * 1024)
        try:
            for _ in range(size // len(chunk)):
                sock.sendall(chunk)
        except OSError:
            pass  # the server closed the connection: it did not want the body
        return int(head.split(" ", 2)[1])


def test_memory_stays_flat_under_200_refused_5mb_bodies(serve, tmp_path: Path) -> None:
    served = serve(tmp_path / "ws")
    pid = served.proc.popen.pid
    for _ in range(10):  # warm up: the first answers allocate what every answer reuses
        assert _refused_upload(served.port, 5 * MB, token=None) == 413
    before = _rss_kb(pid)
    statuses = {_refused_upload(served.port, 5 * MB, token=None if i % 2 else served.info["token"])
                for i in range(200)}
    after = _rss_kb(pid)
    assert statuses == {413}
    growth_mb = (after - before) / 1024
    assert growth_mb < 20, f"RSS grew by {growth_mb:.1f} MB over 200 refused 5 MB bodies (1000 MB sent)"
    assert httpx.get(served.url + "/.well-known/openid-configuration").status_code == 200


async def test_the_directory_s_records_are_bounded_too(tight: Guarded) -> None:
    for _ in range(80):
        answer = await tight.http.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": "x"})
        assert answer.status_code in (400, 401)
    assert len(tight.cloud.directory_calls) <= 50 + 50 // 8
    assert len(tight.cloud.refreshes) <= 50 + 50 // 8
