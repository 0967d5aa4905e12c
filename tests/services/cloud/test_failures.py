"""Seed section "Failures, gates and the directory": the answer table and the retry table, row by row."""

from __future__ import annotations

import asyncio
import math

import httpx
import pytest

from services.cloud import FakeCloud
from services.sdk import (
    APIConnectionError,
    AuthenticationError,
    CrouterError,
    InternalServerError,
    MemoryConnectionStore,
    OAuth2Client,
    RunNoticeError,
    RuntimeVersionError,
    verify_run_notice,
)

from .conftest import USER, ops


async def _fresh(private_key_pem, waits=None, refusals=None, **options):
    cloud = FakeCloud(client_id="doppel", **options)
    store = MemoryConnectionStore()
    await cloud.connect(store, USER)
    oauth = OAuth2Client(
        client_id="doppel", issuer=cloud.issuer, transport=cloud.transport, private_key=private_key_pem,
        redirect_uri="https://app.test/callback", store=store, sleep=waits,
        on_refusal=refusals.append if refusals is not None else None,
    )
    return cloud, store, oauth


# Each read operation, called through the SDK against a run and a question that exist.
READS = {
    "grant.get": lambda c, ids: c.grant.get(),
    "run.get": lambda c, ids: c.runs.get(ids["run"]),
    "run.list": lambda c, ids: c.runs.list(),
    "run.delete": lambda c, ids: c.runs.delete(ids["run"]),
    "trace.get": lambda c, ids: c.runs.trace(ids["run"]),
    "question.get": lambda c, ids: c.questions.get(ids["question"]),
    "memory.list": lambda c, ids: c.memory.list(),
    "memory.get": lambda c, ids: c.memory.get("doc"),
    "provider.tools": lambda c, ids: c.providers.tools(),
    "profile.list": lambda c, ids: c.profiles.list(),
}
OTHER_POSTS = {
    "run.interrupt": lambda c, ids: c.runs.interrupt(ids["run"]),
    "run.cancel": lambda c, ids: c.runs.cancel(ids["run"]),
    "run.rename": lambda c, ids: c.runs.rename(ids["run"], "n"),
    "question.answer": lambda c, ids: c.questions.answer(ids["question"], {"a": 1}),
    "provider.call": lambda c, ids: c.providers.call("sms", "send", {}),
}


async def _world(cloud: FakeCloud, client) -> dict[str, str]:
    run = await client.runs.start(prompt="p")
    question = cloud.runs.all[-1].ask(title="q")
    cloud.user(USER).memory.put("doc", "body")
    cloud.providers.define("sms", tools={"send": {"group": "send", "handler": lambda call: {"ok": True}}})
    return {"run": run.id, "question": question}


# -- the answer table ---------------------------------------------------------------------------


async def test_unreachable_runtime_raises_api_connection_error(cloud: FakeCloud, client) -> None:
    ids = await _world(cloud, client)
    cloud.fail_next("run.cancel", "unreachable")
    with pytest.raises(APIConnectionError):
        await client.runs.cancel(ids["run"])


async def test_status_number_answers_a_runtime_envelope(cloud: FakeCloud, client) -> None:
    cloud.fail_next("run.start", 418)
    with pytest.raises(CrouterError) as info:
        await client.runs.start(prompt="p")
    assert info.value.status == 418 and info.value.origin == "runtime" and info.value.retryable is False


async def test_envelope_answer(cloud: FakeCloud, client) -> None:
    cloud.fail_next("run.start", FakeCloud.error(409, "custom_conflict", "scripted", param="prompt", details={"k": 1}))
    with pytest.raises(CrouterError) as info:
        await client.runs.start(prompt="p")
    assert (info.value.status, info.value.code, info.value.message) == (409, "custom_conflict", "scripted")
    assert (info.value.param, info.value.details) == ("prompt", {"k": 1})


@pytest.mark.parametrize("op", ["directory.discovery", "directory.token", "directory.jwks"])
def test_directory_ops_refuse_envelopes(cloud: FakeCloud, op) -> None:
    with pytest.raises(ValueError):
        cloud.fail_next(op, FakeCloud.error(500, "x"))


async def test_discovery_unreachable_and_status(private_key_pem) -> None:
    for answer, error in (("unreachable", APIConnectionError), (500, CrouterError)):
        cloud, _, oauth = await _fresh(private_key_pem)
        cloud.fail_next("directory.discovery", answer)
        with pytest.raises(error):
            await oauth.client(USER)
        assert cloud.directory_calls[0].answer == ("unreachable" if answer == "unreachable" else "500")
        await oauth.aclose()


async def test_token_unreachable_no_on_refusal(private_key_pem) -> None:
    refusals: list = []
    cloud, store, oauth = await _fresh(private_key_pem, refusals=refusals)
    cloud.fail_next("directory.token", "unreachable")
    with pytest.raises(APIConnectionError):
        await oauth.client(USER)
    assert refusals == [] and await store.get(USER) is not None
    assert cloud.refreshes[0].answer == "unreachable"
    await oauth.aclose()


async def test_token_5xx_is_internal_server_error_and_keeps_the_connection(private_key_pem) -> None:
    """The seed's "runtime outage on an ordinary call" recipe."""
    refusals: list = []
    cloud, store, oauth = await _fresh(private_key_pem, refusals=refusals)
    client = await oauth.client(USER)
    await client.grant.get()
    cloud.user(USER).expire_tokens()
    cloud.fail_next("directory.token", 503, user=USER)
    with pytest.raises(InternalServerError) as info:
        await client.grant.get()
    assert (info.value.code, info.value.origin) == ("invalid_request", "directory")
    assert refusals == [] and await store.get(USER) is not None
    assert (await client.grant.get())["state"] == "active"  # the next call refreshes fine
    await oauth.aclose()


async def test_jwks_unreachable_or_status_fails_notice_verification(private_key_pem) -> None:
    for answer in ("unreachable", 500):
        delivered: list = []
        cloud, _, oauth = await _fresh(
            private_key_pem,
            run_notice={"url": "https://app.test/run-notices", "deliver": lambda req: delivered.append(req) or 200},
        )
        client = await oauth.client(USER)
        run = await client.runs.start(prompt="p")
        cloud.runs.all[0].reply("poke")
        await cloud.settle_tasks()
        assert delivered
        cloud.fail_next("directory.jwks", answer)
        with pytest.raises(RunNoticeError):
            await verify_run_notice(
                delivered[-1], run_notice_url="https://app.test/run-notices", issuer=cloud.issuer,
                grantee="app:doppel", transport=cloud.transport,
            )
        assert run.id
        await oauth.aclose()


# -- the retry table ----------------------------------------------------------------------------


@pytest.mark.parametrize("op", sorted(READS))
async def test_401_refreshes_once_then_repeats_once(cloud: FakeCloud, client, op) -> None:
    ids = await _world(cloud, client)
    before = len(cloud.refreshes)
    cloud.fail_next(op, 401, user=USER, times=1)
    await READS[op](client, ids)
    assert len(cloud.refreshes) == before + 1
    cloud.fail_next(op, 401, user=USER, times=2)
    with pytest.raises(AuthenticationError):
        await READS[op](client, ids)


@pytest.mark.parametrize("op", ["run.start", "run.message", *sorted(OTHER_POSTS)])
async def test_401_on_posts_refreshes_and_repeats(cloud: FakeCloud, client, op) -> None:
    ids = await _world(cloud, client)
    call = {
        "run.start": lambda: client.runs.start(prompt="p"),
        "run.message": lambda: client.runs.message(ids["run"], "m"),
        **{k: (lambda f=f: f(client, ids)) for k, f in OTHER_POSTS.items()},
    }[op]
    cloud.fail_next(op, 401, times=1)
    await call()
    cloud.fail_next(op, 401, times=2)
    with pytest.raises(AuthenticationError):
        await call()


@pytest.mark.parametrize("answer", [500, 503, 429, "unreachable"])
@pytest.mark.parametrize("op", sorted(READS))
async def test_reads_retry_twice_with_backoff(cloud: FakeCloud, client, waits, op, answer) -> None:
    ids = await _world(cloud, client)
    waits.seconds.clear()
    cloud.fail_next(op, answer, times=2)
    await READS[op](client, ids) if op != "run.delete" else await READS[op](client, ids)
    assert waits.seconds == [0.25, 0.5]
    if op == "run.delete":
        ids = await _world(cloud, client)
    waits.seconds.clear()
    cloud.fail_next(op, answer, times=3)
    with pytest.raises(APIConnectionError if answer == "unreachable" else CrouterError):
        await READS[op](client, ids)
    assert len([c for c in cloud.calls if c.op == op and c.status is not None or c.op == op]) >= 3


async def test_max_retries_option(cloud: FakeCloud, client) -> None:
    ids = await _world(cloud, client)
    cloud.fail_next("run.get", 500, times=1)
    with pytest.raises(CrouterError):
        await client.runs.get(ids["run"], max_retries=0)


@pytest.mark.parametrize("answer", [FakeCloud.error(503, "busy"), "unreachable"])
@pytest.mark.parametrize("op", ["run.start", "run.message"])
async def test_keyed_sends_resend_with_the_same_key(cloud: FakeCloud, client, waits, op, answer) -> None:
    ids = await _world(cloud, client)
    call = (lambda: client.runs.start(prompt="p")) if op == "run.start" else (lambda: client.runs.message(ids["run"], "m"))
    waits.seconds.clear()
    cloud.fail_next(op, answer, times=2)
    await call()
    sent = ops(cloud, op)[-3:]
    assert len({c.idempotency_key for c in sent}) == 1 and sent[0].idempotency_key
    assert waits.seconds == [0.5, 1.0]
    cloud.fail_next(op, answer, times=3)
    with pytest.raises(CrouterError):
        await call()


async def test_keyed_send_honours_retry_after(cloud: FakeCloud, client, waits) -> None:
    waits.seconds.clear()
    cloud.fail_next("run.start", FakeCloud.error(503, "busy", retry_after_s=7), times=2)
    await client.runs.start(prompt="p")
    assert waits.seconds == [7.0, 7.0]


@pytest.mark.parametrize("answer", [503, FakeCloud.error(500, "nope", retryable=False)])
async def test_keyed_sends_not_retried_on_status_or_non_retryable(cloud: FakeCloud, client, answer) -> None:
    cloud.fail_next("run.start", answer, times=1)
    with pytest.raises(CrouterError):
        await client.runs.start(prompt="p")
    assert len(ops(cloud, "run.start")) == 1


@pytest.mark.parametrize("op", sorted(OTHER_POSTS))
async def test_other_posts_never_retried(cloud: FakeCloud, client, op) -> None:
    ids = await _world(cloud, client)
    cloud.fail_next(op, FakeCloud.error(503, "busy"), times=1)
    with pytest.raises(CrouterError):
        await OTHER_POSTS[op](client, ids)
    assert len(ops(cloud, op)) == 1


async def test_composition_one_401_then_three_500s_surfaces_the_500(cloud: FakeCloud, client) -> None:
    answers = iter([401, 500, 500, 500])
    cloud.intercept("grant.get", lambda ctx: next(answers, None))
    with pytest.raises(InternalServerError) as info:
        await client.grant.get()
    assert info.value.status == 500


async def test_run_events_reconnect_from_cursor_on_retryable_errors(cloud: FakeCloud, client, waits) -> None:
    run = await client.runs.start(prompt="p")
    fake = cloud.runs.all[0]
    fake.reply("abc")
    cloud.fail_next("run.events", 503, times=4)
    seen = []
    async for event in client.runs.events(run.id):
        seen.append(event.seq)
        if event.seq == fake.seq:
            fake.close_idle()
    assert seen == list(range(1, fake.seq + 1))
    assert len(waits.seconds) == 4


async def test_run_events_end_on_non_retryable(cloud: FakeCloud, client) -> None:
    run = await client.runs.start(prompt="p")
    cloud.fail_next("run.events", 404)
    with pytest.raises(CrouterError):
        async for _ in client.runs.events(run.id):
            pass


async def test_run_events_end_on_stream_dropped(cloud: FakeCloud, client) -> None:
    run = await client.runs.start(prompt="p")
    fake = cloud.runs.all[0]
    seen = []

    async def read() -> None:
        async for event in client.runs.events(run.id):
            seen.append(event)

    task = asyncio.create_task(read())
    await asyncio.sleep(0.02)
    fake.reply("x")
    await asyncio.sleep(0.02)
    fake.delete()
    await asyncio.wait_for(task, 2)
    assert seen and seen[-1].type == "node.turn.completed"


async def test_infinite_failure_and_its_remover(cloud: FakeCloud, client) -> None:
    remove = cloud.fail_next("*", "unreachable", user=USER, times=math.inf)
    with pytest.raises(APIConnectionError):
        await client.runs.list()
    remove()
    assert await client.runs.list() == []


async def test_intercept_acts_and_gate_holds(cloud: FakeCloud, client) -> None:
    seen = []

    async def spy(ctx):
        seen.append((ctx.op, ctx.user_id, ctx.body))
        return None

    cloud.intercept("run.start", spy, times=1)
    await client.runs.start(prompt="watched")
    assert seen == [("run.start", USER, {"prompt": "watched"})]
    gate = cloud.gate("run.list")
    pending = asyncio.create_task(client.runs.list())
    await asyncio.sleep(0.02)
    assert not pending.done() and gate.held == 1
    gate.release()
    assert len(await asyncio.wait_for(pending, 2)) == 1


async def test_runtime_version_too_old(private_key_pem) -> None:
    cloud, _, oauth = await _fresh(private_key_pem, runtime_version="1.0.0")
    client = await oauth.client(USER)
    with pytest.raises(RuntimeVersionError) as info:
        await client.runs.list()
    assert info.value.status == 426
    await oauth.aclose()


async def test_reset_keeps_grants_and_refresh_tokens(cloud: FakeCloud, client) -> None:
    cloud.runs.respond(lambda ctx: ctx.run.reply("x"))
    await client.runs.start(prompt="p", idempotency_key="same")
    cloud.fail_next("run.list", 500, times=math.inf)
    cloud.user(USER).memory.put("d", "b")
    cloud.reset()
    assert cloud.runs.all == [] and cloud.calls == [] and cloud.user(USER).memory.documents == {}
    assert await client.runs.list() == []  # intercept cleared, grant and tokens kept
    again = await client.runs.start(prompt="p", idempotency_key="same")
    await cloud.settle_tasks()
    assert cloud.runs.all[0].id == again.id and cloud.runs.all[0].events == []  # responder cleared


async def test_unreachable_raises_from_the_transport(cloud: FakeCloud) -> None:
    cloud.fail_next("*", "unreachable")
    async with httpx.AsyncClient(transport=cloud.transport) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get("https://runtime.test/v1/runs")
