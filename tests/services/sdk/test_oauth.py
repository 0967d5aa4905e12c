"""OAuth2Client: refresh, rotation saved before use, single-flight, refusals, directory faults,
two app processes, watchers."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from services.sdk import (
    APIConnectionError,
    AuthenticationError,
    InternalServerError,
    MemoryConnectionStore,
    OAuth2Client,
    Refusal,
    RefusalError,
    SQLModelConnectionStore,
    refusal_of,
)

from .conftest import expired_connection
from .wirefake import ISSUER, TOKEN_ENDPOINT, MiniWire, decode_assertion, run_dto


def make_oauth(mini: MiniWire, store: Any, key: bytes, **options: Any) -> OAuth2Client:
    return OAuth2Client(
        client_id="doppel", issuer=ISSUER, transport=mini.transport, private_key=key, store=store, **options
    )


async def test_client_refreshes_an_expired_connection_with_a_signed_assertion(oauth, mini, store) -> None:
    client = await oauth.client("user:o1")
    assert mini.token_refreshes() == 1
    header, claims = decode_assertion(mini.assertions[0])
    assert header["alg"] == "RS256" and header["jwk"]["kty"] == "RSA" and "d" not in header["jwk"]
    assert claims["iss"] == claims["sub"] == "doppel" and claims["aud"] == TOKEN_ENDPOINT
    assert claims["exp"] > claims["iat"] and claims["jti"]
    saved = await store.get("user:o1")
    assert saved.refresh_token == "rt_1" and saved.access_token == "at_1"
    assert saved.scope == ["crtr:llm", "crtr:act"] and saved.runtime_id == "runtime:test"
    run = await client.runs.get("run_1")
    assert run.id == "run_1"
    _, request = mini.calls[-1]
    assert request.headers["authorization"] == "Bearer at_1"
    assert request.headers["Crouter-Min-Runtime-Version"] == "1.2.0"


async def test_an_ec_key_signs_es256(mini, store, ec_pem) -> None:
    oauth = make_oauth(mini, store, ec_pem)
    await oauth.client("user:o1")
    header, _ = decode_assertion(mini.assertions[0])
    assert header["alg"] == "ES256" and header["jwk"]["crv"] == "P-256"
    await oauth.aclose()


def test_a_key_that_is_not_pem_is_refused(mini) -> None:
    with pytest.raises(Exception) as caught:
        make_oauth(mini, MemoryConnectionStore(), b"not a key")
    assert "PEM" in str(caught.value)


async def test_the_rotated_refresh_token_is_saved_before_the_new_access_token_is_used(oauth, mini, store) -> None:
    seen: list[str] = []

    async def run_get(request: httpx.Request, params: dict[str, str]) -> Any:
        seen.append((await store.get("user:o1")).refresh_token)
        return run_dto(params["run_id"])

    mini.handlers["run.get"] = run_get
    client = await oauth.client("user:o1")
    await client.runs.get("run_1")
    mini.valid_access.discard("at_1")
    await client.runs.get("run_1")
    assert seen == ["rt_1", "rt_2"]


async def test_a_fresh_token_is_not_refreshed_and_discovery_is_fetched_once(oauth, mini) -> None:
    client = await oauth.client("user:o1")
    await client.runs.get("run_1")
    await oauth.client("user:o1")
    mini.valid_access.discard("at_1")
    await client.runs.get("run_1")
    assert mini.token_refreshes() == 2
    assert [op for op, _ in mini.directory_calls].count("directory.discovery") == 1


async def test_an_access_token_near_expiry_is_refreshed_before_use(mini, store, rsa_pem, clock) -> None:
    oauth = make_oauth(mini, store, rsa_pem, clock=clock)
    client = await oauth.client("user:o1")
    clock.advance(3600)
    await client.runs.get("run_1")
    assert mini.token_refreshes() == 2
    assert mini.calls[-1][1].headers["authorization"] == "Bearer at_2"
    await oauth.aclose()


async def test_twenty_concurrent_401s_make_one_refresh(oauth, mini) -> None:
    client = await oauth.client("user:o1")
    mini.valid_access.discard("at_1")
    mini.token_gate = asyncio.Event()
    tasks = [asyncio.ensure_future(client.runs.get(f"run_{i}")) for i in range(20)]
    for _ in range(50):
        await asyncio.sleep(0)
    mini.token_gate.set()
    runs = await asyncio.gather(*tasks)
    assert [r.id for r in runs] == [f"run_{i}" for i in range(20)]
    assert mini.token_refreshes() == 2  # the first one plus one for all twenty
    retried = [req.headers["authorization"] for op, req in mini.calls if op == "run.get"]
    assert retried.count("Bearer at_2") == 20


# -- refusals --------------------------------------------------------------------------------------


async def test_a_refusal_removes_the_connection_runs_on_refusal_once_and_sets_refusal_of(
    mini, store, rsa_pem
) -> None:
    refusals: list[Refusal] = []
    oauth = make_oauth(mini, store, rsa_pem, on_refusal=refusals.append)
    client = await oauth.client("user:o1")
    mini.refuse_code = "grant_removed"
    mini.valid_access.discard("at_1")
    results = await asyncio.gather(*[client.runs.get("run_1") for _ in range(5)], return_exceptions=True)
    assert all(isinstance(r, RefusalError) for r in results)
    refusal = refusal_of(results[0])
    assert refusal == refusals[0] and refusal.code == "grant_removed" and refusal.user_id == "user:o1"
    assert len(refusals) == 1
    assert await store.get("user:o1") is None
    # later calls raise the same refusal without asking the directory or the callback again
    before = mini.token_refreshes()
    with pytest.raises(RefusalError) as caught:
        await client.runs.get("run_1")
    assert refusal_of(caught.value).code == "grant_removed"
    assert mini.token_refreshes() == before and len(refusals) == 1
    await oauth.aclose()


async def test_on_refusal_set_by_method_may_be_async(mini, store, rsa_pem) -> None:
    oauth = make_oauth(mini, store, rsa_pem)
    seen: list[str] = []

    @oauth.on_refusal
    async def handler(refusal: Refusal) -> None:
        await asyncio.sleep(0)
        seen.append(refusal.code)

    mini.refuse_code = "refresh_token_expired"
    with pytest.raises(RefusalError) as caught:
        await oauth.client("user:o1")
    assert seen == ["refresh_token_expired"]
    assert caught.value.origin == "directory" and caught.value.envelope["code"] == "refresh_token_expired"
    await oauth.aclose()


async def test_a_superseded_refresh_token_is_refused_reused(mini, rsa_pem) -> None:
    store_a, store_b = MemoryConnectionStore(), MemoryConnectionStore()
    await store_a.save(expired_connection())
    await store_b.save(expired_connection())
    refusals: list[Refusal] = []
    a = make_oauth(mini, store_a, rsa_pem, on_refusal=refusals.append)
    b = make_oauth(mini, store_b, rsa_pem, on_refusal=refusals.append)
    await a.client("user:o1")
    with pytest.raises(RefusalError):
        await b.client("user:o1")
    assert [r.code for r in refusals] == ["refresh_token_reused"]
    assert await store_b.get("user:o1") is None
    assert (await store_a.get("user:o1")).refresh_token == "rt_1"  # the other app's connection is kept
    await a.aclose()
    await b.aclose()


async def test_a_shared_store_with_a_lock_prevents_reuse(mini, store, rsa_pem) -> None:
    a = make_oauth(mini, store, rsa_pem)
    b = make_oauth(mini, store, rsa_pem)
    await asyncio.gather(a.client("user:o1"), b.client("user:o1"))
    assert mini.token_refreshes() == 1
    await a.aclose()
    await b.aclose()


async def test_two_processes_on_one_sqlite_file_refresh_once(mini, rsa_pem, tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'connections.db'}"
    first, second = SQLModelConnectionStore(url), SQLModelConnectionStore(url)
    await first.save(expired_connection())
    a, b = make_oauth(mini, first, rsa_pem), make_oauth(mini, second, rsa_pem)
    mini.token_gate = asyncio.Event()
    tasks = [asyncio.ensure_future(a.client("user:o1")), asyncio.ensure_future(b.client("user:o1"))]
    for _ in range(20):
        await asyncio.sleep(0.005)
    mini.token_gate.set()
    await asyncio.gather(*tasks)
    assert mini.token_refreshes() == 1
    assert (await second.get("user:o1")).refresh_token == "rt_1"
    for oauth, st in ((a, first), (b, second)):
        await oauth.aclose()
        st.close()


# -- directory faults ------------------------------------------------------------------------------


async def test_a_5xx_from_the_token_endpoint_keeps_the_connection(mini, store, rsa_pem) -> None:
    refusals: list[Refusal] = []
    oauth = make_oauth(mini, store, rsa_pem, on_refusal=refusals.append)
    mini.script("directory.token", 503)
    with pytest.raises(InternalServerError) as caught:
        await oauth.client("user:o1")
    assert caught.value.code == "invalid_request" and caught.value.origin == "directory"
    assert refusal_of(caught.value) is None and refusals == []
    assert (await store.get("user:o1")).refresh_token == "rt_0"
    await oauth.client("user:o1")  # the kept connection still refreshes once the directory is back
    await oauth.aclose()


async def test_an_unreachable_directory_raises_api_connection_error_without_on_refusal(mini, store, rsa_pem) -> None:
    refusals: list[Refusal] = []
    oauth = make_oauth(mini, store, rsa_pem, on_refusal=refusals.append)
    mini.script("directory.token", "unreachable")
    with pytest.raises(APIConnectionError):
        await oauth.client("user:o1")
    assert refusals == [] and (await store.get("user:o1")) is not None
    await oauth.aclose()


async def test_a_failed_discovery_fails_the_refresh(mini, store, rsa_pem) -> None:
    oauth = make_oauth(mini, store, rsa_pem)
    mini.script("directory.discovery", 500)
    with pytest.raises(InternalServerError):
        await oauth.client("user:o1")
    mini.script("directory.discovery", "unreachable")
    with pytest.raises(APIConnectionError):
        await oauth.client("user:o1")
    assert (await store.get("user:o1")) is not None
    await oauth.aclose()


async def test_no_stored_connection_is_an_authentication_error(oauth) -> None:
    with pytest.raises(AuthenticationError) as caught:
        await oauth.client("user:nobody")
    assert caught.value.code == "not_connected" and "user:nobody" in str(caught.value)


# -- watchers --------------------------------------------------------------------------------------


async def test_watch_grants_long_polls_and_yields_each_new_version(oauth, mini) -> None:
    versions = iter([1, 1, 2, 2, 3])
    queries: list[dict[str, str]] = []

    def grant_get(request: httpx.Request, params: dict[str, str]) -> Any:
        queries.append(dict(request.url.params))
        return {"version": next(versions), "state": "active"}

    mini.handlers["grant.get"] = grant_get
    seen = []
    async for grant in oauth.watch_grants("user:o1", wait=5):
        seen.append(grant["version"])
        if len(seen) == 3:
            break
    assert seen == [1, 2, 3]
    assert queries[0] == {} and queries[1] == {"wait": "5", "since": "1"} and queries[3]["since"] == "2"


async def test_watch_runs_yields_new_and_changed_runs(oauth, mini, sleeps) -> None:
    pages = iter(
        [
            [run_dto("run_1")],
            [run_dto("run_1")],
            [run_dto("run_1", status="idle"), run_dto("run_2")],
        ]
    )
    mini.handlers["run.list"] = lambda request, params: {"runs": next(pages)}
    seen = []
    async for run in oauth.watch_runs("user:o1", interval=2.0):
        seen.append((run.id, run.status))
        if len(seen) == 3:
            break
    assert seen == [("run_1", "running"), ("run_1", "idle"), ("run_2", "running")]
    assert sleeps.waits == [2.0, 2.0]


class DictStore:
    """A store without ``lock``: only the three required methods."""

    def __init__(self) -> None:
        self.items: dict[str, Any] = {}

    async def get(self, user_id: str) -> Any:
        return self.items.get(user_id)

    async def save(self, conn: Any) -> None:
        self.items[conn.user_id] = conn

    async def delete(self, user_id: str) -> None:
        self.items.pop(user_id, None)


async def test_a_store_without_lock_still_refreshes_single_flight(mini, rsa_pem) -> None:
    store = DictStore()
    await store.save(expired_connection())
    oauth = make_oauth(mini, store, rsa_pem)
    mini.token_gate = asyncio.Event()
    tasks = [asyncio.ensure_future(oauth.client("user:o1")) for _ in range(5)]
    for _ in range(20):
        await asyncio.sleep(0)
    mini.token_gate.set()
    await asyncio.gather(*tasks)
    assert mini.token_refreshes() == 1 and store.items["user:o1"].refresh_token == "rt_1"
    await oauth.aclose()
