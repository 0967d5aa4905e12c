"""Base URLs with a path, reused client-chosen run ids, responders after the answer, wire lists."""

from __future__ import annotations

from typing import get_args

import httpx
import pytest

from services import wire
from services.cloud import FakeCloud
from services.sdk import Crouter, CrouterError, MemoryConnectionStore, OAuth2Client, refusal_of

from .conftest import USER

BASES = ["https://cloud.test/tenant-a", "https://cloud.test/tenant-a/", "https://cloud.test/a/b/"]


async def _client(cloud: FakeCloud, private_key_pem: str, issuer: str | None = None) -> tuple[OAuth2Client, object]:
    store = MemoryConnectionStore()
    await cloud.connect(store, USER, scopes=["crtr:llm", "crtr:act"])
    oauth = OAuth2Client(client_id="doppel", issuer=issuer or cloud.issuer, transport=cloud.transport,
                         private_key=private_key_pem, redirect_uri="https://app.test/callback", store=store)
    return oauth, await oauth.client(USER)


async def _round_trip(cloud: FakeCloud, client) -> None:
    cloud.runs.respond(lambda ctx: ctx.run.reply("echo: " + ctx.run.params["prompt"]))
    run = await client.runs.start(prompt="hello")
    assert (await client.runs.get(run.id)).id == run.id
    assert (await client.runs.reply(run.id, "again").collect()).text == "echo: hello"
    assert (await client.grant.get())["state"] == "active"
    await cloud.settle_tasks()
    assert [c.status for c in cloud.calls if c.status and c.status >= 400] == []
    assert {c.path for c in cloud.calls} >= {"/v1/runs", f"/v1/runs/{run.id}", "/v1/grant"}


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("callable_url", [False, True], ids=["fixed", "callable"])
async def test_runtime_url_with_a_path_prefix_reaches_every_route(private_key_pem, base, callable_url) -> None:
    cloud = FakeCloud(client_id="doppel", runtime_url=(lambda user_id: base) if callable_url else base)
    oauth, client = await _client(cloud, private_key_pem)
    try:
        assert client.runtime_url == base.rstrip("/")
        await _round_trip(cloud, client)
        direct = cloud.crouter(USER)
        assert (await direct.grant.get())["user_id"] == USER
        await direct.aclose()
    finally:
        await oauth.aclose()


async def test_callable_runtime_url_gives_each_person_their_own_prefix(private_key_pem) -> None:
    cloud = FakeCloud(client_id="doppel", runtime_url=lambda user_id: f"https://rt.test/people/{user_id.split(':')[1]}/")
    oauth, client = await _client(cloud, private_key_pem)
    try:
        assert client.runtime_url == "https://rt.test/people/o1"
        await _round_trip(cloud, client)
        # the person's token at another person's runtime path is not a route of theirs
        await cloud.connect(MemoryConnectionStore(), "user:o2")
        elsewhere = Crouter(runtime_url="https://rt.test/people/o2", token=cloud.state.mint_access(cloud.user(USER))[0],
                            transport=cloud.transport)
        with pytest.raises(CrouterError) as error:
            await elsewhere.grant.get()
        assert error.value.status == 404 and error.value.code == "not_found"
        await elsewhere.aclose()
    finally:
        await oauth.aclose()


@pytest.mark.parametrize("issuer", ["https://dir.test/realm", "https://dir.test/realm/"])
async def test_issuer_with_a_path_prefix_serves_discovery_refresh_and_jwks(private_key_pem, issuer) -> None:
    cloud = FakeCloud(client_id="doppel", issuer=issuer, runtime_url="https://dir.test/runtime/")
    oauth, client = await _client(cloud, private_key_pem, issuer=issuer)
    try:
        discovery = await oauth.discovery()
        assert discovery["token_endpoint"] == "https://dir.test/realm/oauth/token"
        assert discovery["jwks_uri"] == "https://dir.test/realm/.well-known/jwks.json"
        assert [r.answer for r in cloud.refreshes] == ["ok"]
        assert [c.path for c in cloud.directory_calls][:2] == ["/.well-known/openid-configuration", "/oauth/token"]
        await _round_trip(cloud, client)  # same host as the directory, its own path
        async with httpx.AsyncClient(transport=cloud.transport) as http:
            assert (await http.get("https://dir.test/realm/.well-known/jwks.json")).json()["keys"]
            assert (await http.get("https://dir.test/realmx/.well-known/jwks.json")).status_code == 404
    finally:
        await oauth.aclose()


def test_join_url_and_route_under_are_inverse() -> None:
    for base in [*BASES, "https://h.test", "https://h.test/"]:
        for route in ("/v1/runs", "/v1/memory/a/b", "/"):
            assert wire.route_under(base, wire.join_url(base, route)) == route
    assert wire.route_under("https://h.test/a", "https://h.test/ab/v1/runs") is None
    assert wire.route_under("https://h.test/a", "http://h.test/a/v1/runs") is None
    assert wire.route_under("https://h.test/a", "https://other.test/a/v1/runs") is None
    assert wire.route_under("https://h.test", "https://h.test:443/v1/runs") == "/v1/runs"


async def test_reusing_a_deleted_runs_client_chosen_id_keeps_the_deleted_run(cloud: FakeCloud, client) -> None:
    first = await client.runs.start(prompt="one", id="run_mine")
    with pytest.raises(CrouterError) as live:
        await client.runs.start(prompt="again", id="run_mine")
    assert live.value.status == 409 and live.value.code == "run_exists"
    await client.runs.delete(first.id)
    second = await client.runs.start(prompt="two", id="run_mine")
    assert second.id == first.id == "run_mine"
    runs = cloud.user(USER).runs.all
    assert [(r.id, r.params["prompt"], r.deleted) for r in runs] == [("run_mine", "one", True), ("run_mine", "two", False)]
    assert cloud.runs.get("run_mine") is runs[1]
    assert (await client.runs.get("run_mine")).params["prompt"] == "two"
    assert [r.params["prompt"] for r in await client.runs.list()] == ["two"]
    assert runs[0].events == [] and runs[0].deleted  # the deleted run is kept whole, not revived
    await client.runs.delete("run_mine")
    assert [r.deleted for r in cloud.runs.all] == [True, True]


async def test_a_deleted_runs_start_key_creates_a_new_run_and_keeps_the_old(cloud: FakeCloud, client) -> None:
    first = await client.runs.start(prompt="keyed", id="run_k", idempotency_key="k1")
    cloud.runs.get("run_k").delete()
    again = await client.runs.start(prompt="keyed", id="run_k", idempotency_key="k1")
    assert again.id == first.id and len(cloud.runs.all) == 2
    assert [r.deleted for r in cloud.runs.all] == [True, False]


async def test_responders_run_after_the_answer_until_settle_tasks(cloud: FakeCloud, client) -> None:
    cloud.runs.respond(lambda ctx: ctx.run.reply("echo: " + ctx.run.params["prompt"]))
    run = await client.runs.start(prompt="hello")
    assert run.status == "running"
    await cloud.settle_tasks()
    assert (await client.runs.get(run.id)).status == "idle"
    assert cloud.runs.all[-1].events[-1]["type"] == "node.turn.completed"


async def test_refusal_codes_outside_the_wire_list_are_refused_by_the_fake(cloud: FakeCloud, client) -> None:
    user = cloud.user(USER)
    for code in ("invalid_grant", "consent_required", ""):
        with pytest.raises(ValueError, match="not a refusal code"):
            user.refuse(code)
        with pytest.raises(ValueError, match="not a refusal code"):
            user.grant.revoke(code)
    assert user.refusal is None and user.grant.active
    assert (await client.grant.get())["state"] == "active"  # nothing half applied


async def test_every_wire_refusal_code_is_recorded_by_the_sdk(private_key_pem) -> None:
    for code in get_args(wire.RefusalCode):
        cloud = FakeCloud(client_id="doppel")
        error = await cloud.refusal_error(code)
        assert refusal_of(error) is not None and refusal_of(error).code == code


def test_wire_lists_are_the_literals() -> None:
    assert wire.REFUSAL_CODES == get_args(wire.RefusalCode)
    assert wire.OUTCOMES == get_args(wire.Outcome)
    assert wire.TURN_ERROR_CODES == get_args(wire.TurnErrorCode)
    assert wire.SETTLE_ENDINGS == get_args(wire.SettleEnding)
    assert set(wire.FAILURES) < set(wire.OUTCOMES)
