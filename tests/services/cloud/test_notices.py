"""Seed section "Run notices and forwarding"."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from services.cloud import FakeCloud
from services.sdk import MemoryConnectionStore, OAuth2Client, RunNoticeError, forward_run_events, verify_run_notice

from .conftest import USER

URL = "https://app.test/run-notices"


class Route:
    """The app's notice route: verifies each notice with the real SDK and answers scripted statuses."""

    def __init__(self, cloud: FakeCloud, statuses: list[int] | None = None) -> None:
        self.cloud = cloud
        self.statuses = list(statuses or [])
        self.claims: list[dict] = []
        self.requests: list[httpx.Request] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        claims = await verify_run_notice(
            request, run_notice_url=URL, issuer=self.cloud.issuer, grantee="app:chat", transport=self.cloud.transport
        )
        self.claims.append(claims)
        return httpx.Response(self.statuses.pop(0) if self.statuses else 204)


async def _setup(private_key_pem, statuses=None, **notice):
    holder: dict = {}
    cloud = FakeCloud(client_id="chat", run_notice={"url": URL, "deliver": lambda r: holder["route"](r), **notice})
    route = holder["route"] = Route(cloud, statuses)
    store = MemoryConnectionStore()
    await cloud.connect(store, USER)
    oauth = OAuth2Client(client_id="chat", issuer=cloud.issuer, transport=cloud.transport,
                         private_key=private_key_pem, redirect_uri="https://app.test/callback", store=store)
    return cloud, route, await oauth.client(USER), oauth


async def test_a_burst_coalesces_into_one_verified_notice(private_key_pem) -> None:
    cloud, route, client, oauth = await _setup(private_key_pem)
    run = await client.runs.start(prompt="p")
    cloud.runs.all[0].reply("a burst of events", chunks=5)
    await cloud.settle_tasks()
    assert len(cloud.notices) == 1 and cloud.notices[0].status == 204
    claims = route.claims[0]
    assert (claims["sub"], claims["run_id"], claims["grantee"], claims["aud"]) == (USER, run.id, "app:chat", URL)
    assert claims["seq"] == cloud.runs.all[0].seq
    await oauth.aclose()


async def test_no_notice_while_a_stream_is_open_then_one_for_unread(private_key_pem) -> None:
    cloud, route, client, oauth = await _setup(private_key_pem)
    run = await client.runs.start(prompt="p")
    fake = cloud.runs.all[0]
    stream = client.runs.events(run.id)
    first = asyncio.create_task(stream.__anext__())
    await asyncio.sleep(0.02)
    fake.reply("seen live")
    await first
    fake.reply("appended while the app is not reading")
    await cloud.settle_tasks()
    assert cloud.notices == []
    await stream.aclose()
    await asyncio.sleep(0.02)
    await cloud.settle_tasks()
    assert len(cloud.notices) == 1  # the stream closed with events unread
    await oauth.aclose()


async def test_three_attempts_on_5xx_and_thrown_deliver(private_key_pem) -> None:
    cloud, route, client, oauth = await _setup(private_key_pem, statuses=[500, 502, 503])
    await client.runs.start(prompt="p")
    cloud.runs.all[0].reply("x")
    await cloud.settle_tasks()
    assert [(a.attempt, a.status) for a in cloud.notices] == [(1, 500), (2, 502), (3, 503)]
    await oauth.aclose()


async def test_401_re_mints_once(private_key_pem) -> None:
    cloud, route, client, oauth = await _setup(private_key_pem, statuses=[401, 401])
    await client.runs.start(prompt="p")
    cloud.runs.all[0].reply("x")
    await cloud.settle_tasks()
    assert [a.status for a in cloud.notices] == [401, 401]
    assert cloud.notices[0].claims["jti"] != cloud.notices[1].claims["jti"]
    await oauth.aclose()


async def test_other_status_ends_the_send(private_key_pem) -> None:
    cloud, route, client, oauth = await _setup(private_key_pem, statuses=[404])
    await client.runs.start(prompt="p")
    cloud.runs.all[0].reply("x")
    await cloud.settle_tasks()
    assert [a.status for a in cloud.notices] == [404]
    await oauth.aclose()


async def test_thrown_deliver_is_retried(private_key_pem) -> None:
    calls = []

    def deliver(request):
        calls.append(request)
        if len(calls) < 3:
            raise ConnectionError("route down")
        return 200

    cloud = FakeCloud(client_id="chat", run_notice={"url": URL, "deliver": deliver})
    store = MemoryConnectionStore()
    await cloud.connect(store, USER)
    run = cloud.crouter(USER)
    started = await run.runs.start(prompt="p")
    cloud.runs.all[0].reply("x")
    await cloud.settle_tasks()
    assert [a.error is not None for a in cloud.notices] == [True, True, False]
    assert started.id
    await run.aclose()


async def test_no_notice_without_an_active_grant(private_key_pem) -> None:
    cloud, route, client, oauth = await _setup(private_key_pem)
    await client.runs.start(prompt="p")
    cloud.user(USER).grant.revoke()
    cloud.runs.all[0].reply("x")
    await cloud.settle_tasks()
    assert cloud.notices == []
    await oauth.aclose()


async def test_forged_and_foreign_notices_are_refused(private_key_pem) -> None:
    cloud, route, client, oauth = await _setup(private_key_pem)
    other = FakeCloud(client_id="chat", run_notice={"url": URL, "deliver": lambda r: 200})
    token, _ = other.state.notices.mint(type("R", (), {"id": "run_x", "user_id": USER, "seq": 1})())
    foreign = httpx.Request("POST", URL, headers={"Authorization": f"Bearer {token}"}, json={})
    with pytest.raises(RunNoticeError):
        await verify_run_notice(foreign, run_notice_url=URL, issuer=cloud.issuer, grantee="app:chat", transport=cloud.transport)
    own, _ = cloud.state.notices.mint(type("R", (), {"id": "run_x", "user_id": USER, "seq": 1})())
    request = httpx.Request("POST", URL, headers={"Authorization": f"Bearer {own}"}, json={})
    for kwargs in ({"grantee": "app:other"}, {"run_notice_url": "https://evil.test/"}):
        args = {"run_notice_url": URL, "issuer": cloud.issuer, "grantee": "app:chat", **kwargs}
        with pytest.raises(RunNoticeError):
            await verify_run_notice(request, transport=cloud.transport, **args)
    claims = await verify_run_notice(request, run_notice_url=URL, issuer=cloud.issuer, grantee="app:chat", transport=cloud.transport)
    assert claims["run_id"] == "run_x"
    await oauth.aclose()


async def test_forward_run_events_reads_until_idle_close(private_key_pem) -> None:
    cloud = FakeCloud(client_id="chat", stream_idle_ms=50)
    store = MemoryConnectionStore()
    await cloud.connect(store, USER)
    client = cloud.crouter(USER)
    run = await client.runs.start(prompt="p")
    cloud.runs.all[0].reply("forward me", chunks=3)
    sent = []

    async def send(event) -> None:
        sent.append(event.type)

    cursor = await forward_run_events(client, run.id, send)
    assert sent[0] == "node.turn.started" and sent[-1] == "node.turn.completed"
    assert cursor == cloud.runs.all[0].seq
    await client.aclose()
