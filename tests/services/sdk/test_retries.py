"""The seed's retry table, row by row, with a recording sleep (no real waits)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from services import wire
from services.sdk import (
    APIConnectionError,
    AuthenticationError,
    BadRequestError,
    Crouter,
    InternalServerError,
    OAuth2Client,
    RateLimitError,
    ServiceUnavailableError,
)

from .conftest import SleepRecorder
from .wirefake import RUNTIME, MiniWire, envelope

READS: dict[str, Callable[[Crouter], Awaitable[Any]]] = {
    "grant.get": lambda c: c.grant.get(),
    "run.get": lambda c: c.runs.get("run_1"),
    "run.list": lambda c: c.runs.list(),
    "run.delete": lambda c: c.runs.delete("run_1"),
    "trace.get": lambda c: c.runs.trace("run_1"),
    "question.get": lambda c: c.questions.get("q_1"),
    "memory.list": lambda c: c.memory.list(),
    "memory.get": lambda c: c.memory.get("o1/notes/a.md"),
    "provider.tools": lambda c: c.providers.tools(),
    "profile.list": lambda c: c.profiles.list(),
}
SENDS: dict[str, Callable[[Crouter], Awaitable[Any]]] = {
    "run.start": lambda c: c.runs.start(prompt="hello"),
    "run.message": lambda c: c.runs.message("run_1", "again"),
}
OTHER_POSTS: dict[str, Callable[[Crouter], Awaitable[Any]]] = {
    "run.interrupt": lambda c: c.runs.interrupt("run_1"),
    "run.cancel": lambda c: c.runs.cancel("run_1"),
    "run.rename": lambda c: c.runs.rename("run_1", "new"),
    "question.answer": lambda c: c.questions.answer("q_1", {"a": 1}),
    "provider.call": lambda c: c.providers.call("sms", "send", {"to": "x"}),
}


def test_the_tables_cover_every_operation_but_the_stream() -> None:
    covered = set(READS) | set(SENDS) | set(OTHER_POSTS)
    assert covered == {r.op for r in wire.ROUTES} - {"run.events"}
    assert set(READS) == wire.RETRYABLE_READS and set(SENDS) == wire.KEYED_SENDS


async def _client(oauth: OAuth2Client, sleeps: SleepRecorder) -> Crouter:
    client = await oauth.client("user:o1")
    sleeps.waits.clear()
    return client


# -- row: a status >= 500, or 429, on GET and DELETE operations: 3 to surface -----------------


@pytest.mark.parametrize("op", sorted(READS))
async def test_read_retries_5xx_twice_then_succeeds(op: str, oauth, mini: MiniWire, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script(op, 500, 503)
    await READS[op](client)
    assert mini.ops().count(op) == 3
    assert sleeps.waits == [0.25, 0.5]


@pytest.mark.parametrize("op", sorted(READS))
async def test_read_surfaces_the_third_5xx(op: str, oauth, mini: MiniWire, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script(op, 500, 500, 502)
    with pytest.raises(InternalServerError) as caught:
        await READS[op](client)
    assert caught.value.status == 502
    assert mini.ops().count(op) == 3
    assert sleeps.waits == [0.25, 0.5]


async def test_read_retries_429(oauth, mini: MiniWire, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script("run.get", 429, 429, 429)
    with pytest.raises(RateLimitError):
        await client.runs.get("run_1")
    assert mini.ops().count("run.get") == 3


async def test_read_does_not_retry_a_4xx(oauth, mini: MiniWire, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script("run.get", envelope(404, "not_found"))
    with pytest.raises(Exception) as caught:
        await client.runs.get("run_1")
    assert caught.value.status == 404  # type: ignore[attr-defined]
    assert mini.ops().count("run.get") == 1 and sleeps.waits == []


# -- row: 'unreachable' on the same reads: 3 to surface ------------------------------------------


@pytest.mark.parametrize("op", sorted(READS))
async def test_read_unreachable_three_times_raises_api_connection_error(op, oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script(op, "unreachable", "unreachable", "unreachable")
    with pytest.raises(APIConnectionError):
        await READS[op](client)
    assert mini.ops().count(op) == 3
    assert sleeps.waits == [0.25, 0.5]


async def test_read_unreachable_twice_is_absorbed(oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script("run.list", "unreachable", "unreachable")
    runs = await client.runs.list()
    assert [r.id for r in runs] == ["run_1", "run_2"]


# -- row: keyed sends, retryable envelope or unreachable: resent with the same key ---------------


@pytest.mark.parametrize("op", sorted(SENDS))
async def test_keyed_send_resends_with_the_same_key(op, oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script(op, envelope(503, "isolated_unavailable", retryable=True), "unreachable")
    await SENDS[op](client)
    keys = [req.headers.get(wire.IDEMPOTENCY_KEY) for o, req in mini.calls if o == op]
    assert len(keys) == 3 and keys[0] and len(set(keys)) == 1
    assert sleeps.waits == [0.5, 1.0]


@pytest.mark.parametrize("op", sorted(SENDS))
async def test_keyed_send_surfaces_the_third_retryable_error(op, oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script(op, *[envelope(503, "isolated_unavailable", retryable=True, param="isolated")] * 3)
    with pytest.raises(ServiceUnavailableError) as caught:
        await SENDS[op](client)
    assert caught.value.code == "isolated_unavailable" and caught.value.param == "isolated"
    assert caught.value.envelope["retryable"] is True
    assert mini.ops().count(op) == 3


async def test_keyed_send_waits_retry_after_s(oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script("run.start", envelope(429, "slow_down", retryable=True, retry_after_s=3), envelope(503, "busy", retry_after_s=0.1))
    await client.runs.start(prompt="hi", idempotency_key="key-1")
    keys = [req.headers.get(wire.IDEMPOTENCY_KEY) for o, req in mini.calls if o == "run.start"]
    assert keys == ["key-1"] * 3
    assert sleeps.waits == [3.0, 0.1]


# -- row: a plain status or retryable false on keyed sends: 1 to surface -------------------------


@pytest.mark.parametrize("op", sorted(SENDS))
@pytest.mark.parametrize("answer", [503, 500, envelope(503, "nope", retryable=False)])
async def test_keyed_send_does_not_retry_a_non_retryable_answer(op, answer, oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script(op, answer)
    with pytest.raises(InternalServerError):
        await SENDS[op](client)
    assert mini.ops().count(op) == 1 and sleeps.waits == []


# -- row: the other POSTs are never retried ------------------------------------------------------


@pytest.mark.parametrize("op", sorted(OTHER_POSTS))
@pytest.mark.parametrize("answer", ["unreachable", envelope(503, "busy", retryable=True), 500])
async def test_other_posts_are_sent_once(op, answer, oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script(op, answer)
    with pytest.raises((APIConnectionError, InternalServerError)):
        await OTHER_POSTS[op](client)
    assert mini.ops().count(op) == 1 and sleeps.waits == []


# -- row: 401 through oauth.client: refresh once, repeat once; 2 to surface ---------------------


@pytest.mark.parametrize("op", sorted({**READS, **SENDS, **OTHER_POSTS}))
async def test_one_401_refreshes_and_repeats(op, oauth, mini, sleeps) -> None:
    calls = {**READS, **SENDS, **OTHER_POSTS}
    client = await _client(oauth, sleeps)
    assert mini.token_refreshes() == 1
    mini.script(op, envelope(401, "grant_revoked"))
    await calls[op](client)
    assert mini.token_refreshes() == 2
    tokens = [req.headers["authorization"] for o, req in mini.calls if o == op]
    assert tokens == ["Bearer at_1", "Bearer at_2"]


async def test_two_401s_surface_the_401(oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script("run.get", envelope(401, "invalid_token"), envelope(401, "invalid_token"))
    with pytest.raises(AuthenticationError):
        await client.runs.get("run_1")
    assert mini.ops().count("run.get") == 2 and mini.token_refreshes() == 2


async def test_composition_one_401_then_three_500s_on_grant_get_surfaces_the_500(oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script("grant.get", envelope(401, "invalid_token"), 500, 500, 500)
    with pytest.raises(InternalServerError) as caught:
        await client.grant.get()
    assert caught.value.status == 500
    assert mini.ops().count("grant.get") == 4
    assert sleeps.waits == [0.25, 0.5]


async def test_composition_one_401_then_two_500s_is_absorbed(oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script("grant.get", envelope(401, "invalid_token"), 500, 500)
    assert (await client.grant.get())["version"] == 1


async def test_keyed_send_keeps_its_key_across_the_refresh(oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script("run.start", envelope(401, "invalid_token"), envelope(503, "busy"))
    await client.runs.start(prompt="hi")
    keys = {req.headers.get(wire.IDEMPOTENCY_KEY) for o, req in mini.calls if o == "run.start"}
    assert len(keys) == 1 and mini.ops().count("run.start") == 3


async def test_a_fixed_token_crouter_raises_401_without_refreshing(mini, sleeps) -> None:
    client = Crouter(runtime_url=RUNTIME, token="fixed-token", transport=mini.transport, sleep=sleeps)
    mini.script("run.get", envelope(401, "invalid_token"))
    with pytest.raises(AuthenticationError):
        await client.runs.get("run_1")
    assert mini.token_refreshes() == 0 and mini.ops() == ["run.get"]
    await client.aclose()


# -- max_retries -----------------------------------------------------------------------------------


async def test_a_calls_max_retries_overrides_the_default(oauth, mini, sleeps) -> None:
    client = await _client(oauth, sleeps)
    mini.script("run.get", 500)
    with pytest.raises(InternalServerError):
        await client.runs.get("run_1", max_retries=0)
    assert mini.ops().count("run.get") == 1
    mini.script("run.start", *[envelope(503, "busy")] * 4)
    await client.runs.start(prompt="x", max_retries=4)
    assert mini.ops().count("run.start") == 5
    assert sleeps.waits == [0.5, 1.0, 2.0, 4.0]


async def test_a_clients_max_retries_changes_every_call(mini, sleeps) -> None:
    client = Crouter(runtime_url=RUNTIME, token="fixed-token", transport=mini.transport, sleep=sleeps, max_retries=3)
    mini.script("memory.list", 500, 500, 500)
    assert [item["name"] for item in await client.memory.list()] == ["o1/notes/a.md"]
    assert mini.ops().count("memory.list") == 4
    assert sleeps.waits == [0.25, 0.5, 1.0]
    await client.aclose()


async def test_a_400_names_its_param(mini, sleeps) -> None:
    client = Crouter(runtime_url=RUNTIME, token="fixed-token", transport=mini.transport, sleep=sleeps)
    mini.script("run.start", envelope(400, "invalid_request", param="cwd"))
    with pytest.raises(BadRequestError) as caught:
        await client.runs.start(prompt="x", isolated=True, cwd="../etc")
    assert caught.value.param == "cwd" and caught.value.code == "invalid_request"
    assert mini.ops() == ["run.start"]
    await client.aclose()
