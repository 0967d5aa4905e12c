"""The control API's driver table over a real socket: a served FakeCloud in this process."""

from __future__ import annotations

import asyncio

import pytest

from services.cloud import FakeCloud, generate_private_key_pem
from services.attached.client import ControlError, RemoteCloud
from services.sdk import APIConnectionError, MemoryConnectionStore, OAuth2Client, ServiceUnavailableError
from services.served.server import CloudServer, bind_socket, origin_url


async def _client(remote: RemoteCloud, url: str, user: str) -> tuple[OAuth2Client, object]:
    store = MemoryConnectionStore()
    await remote.connect(store, user, scopes=["crtr:llm"])
    oauth = OAuth2Client(client_id="app", issuer=url, private_key=KEY, store=store, max_retries=0)
    return oauth, await oauth.client(user)


KEY = generate_private_key_pem("ec")


async def test_scripted_failures_gates_and_refusals_reach_an_sdk_client_over_http(served_cloud) -> None:
    cloud, server = served_cloud
    async with RemoteCloud(server.url, server.token) as remote:
        oauth, client = await _client(remote, server.url, "user:o1")
        failure = await remote.fail_next("run.start", 503, user="user:o1")
        with pytest.raises(ServiceUnavailableError):
            await client.runs.start(prompt="x")
        run = await client.runs.start(prompt="x")
        await (await remote.fail_next("run.get", "unreachable", times=1)).remove()
        await remote.fail_next("run.get", "unreachable")
        with pytest.raises(APIConnectionError):
            await client.runs.get(run.id)
        gate = await remote.gate("run.get")
        held = asyncio.ensure_future(client.runs.get(run.id))
        for _ in range(500):  # bounded: until the served request is held at the gate
            if cloud.state.failures.gates[0].held:
                break
            await asyncio.sleep(0.01)
        assert await gate.release() == 1
        assert (await held).id == run.id
        await failure.remove()
        with pytest.raises(ControlError) as missing:
            await failure.remove()
        assert missing.value.status == 404 and missing.value.code == "failure_not_found"
        await remote.user("user:o1").expire_tokens()
        await client.runs.get(run.id)  # a refresh, then the call
        assert oauth.refresh_count == 2
        await remote.user("user:o1").refuse("grant_suspended")
        with pytest.raises(Exception) as refused:
            await client.runs.get(run.id)
        assert getattr(refused.value, "code", None) == "grant_suspended"
        await oauth.aclose()


async def test_remote_runs_drive_every_fake_run_action(served_cloud) -> None:
    cloud, server = served_cloud
    async with RemoteCloud(server.url, server.token) as remote:
        oauth, client = await _client(remote, server.url, "user:o1")
        started = await client.runs.start(prompt="drive me")
        run = await remote.user("user:o1").runs.get(started.id)
        await run.set_activity("writing")
        assert run.status == "running" and run.activity == "writing"
        question = await run.ask(title="which?", slots=[{"name": "day"}])
        assert run.status == "waiting_on_user" and run.question["id"] == question
        await client.questions.answer(question, {"day": "monday"})
        await run.reply("done", chunks=3)
        await run.idle()
        event = await run.emit("node.turn.started", {"input": {"text": "c", "message_ids": []}, "entry_id": "c1"},
                               node_id="child-1")
        assert event["node_id"] == "child-1"
        with pytest.raises(ControlError) as bad:
            await run.settle(failure="not-a-failure")
        assert bad.value.status == 400
        await run.settle(result="all done")
        assert run.status == "settled" and run.result == "all done"
        with pytest.raises(ControlError) as again:  # a second settle is refused, the first outcome kept
            await run.settle(failure="canceled")
        assert again.value.status == 409 and again.value.code == "run_settled"
        await run.expire_events(2)
        assert (await run.refresh()).events[0]["seq"] == 3
        await run.delete()
        assert run.deleted and cloud.runs.get(started.id).deleted
        with pytest.raises(ControlError) as gone:
            await run.reply("too late")
        assert gone.value.status == 404 and gone.value.code == "run_not_found"
        assert [r.id for r in await remote.runs.all] == [started.id]
        await remote.reset()
        assert await remote.runs.all == []
        await oauth.aclose()


async def test_the_change_stream_publishes_what_the_cloud_changes(served_cloud) -> None:
    cloud, server = served_cloud
    async with RemoteCloud(server.url, server.token) as remote:
        changes = remote.changes()
        first = asyncio.ensure_future(changes.__anext__())
        subscribers = len(cloud.changes._subscribers)
        for _ in range(500):  # bounded: until the served change stream has subscribed
            if len(cloud.changes._subscribers) > subscribers:
                break
            await asyncio.sleep(0.01)
        await remote.connection("user:o1")
        change = await asyncio.wait_for(first, 10)
        assert (change.source, change.kind, change.id) == ("cloud", "grant.changed", "user:o1")
        oauth, client = await _client(remote, server.url, "user:o2")
        run = await client.runs.start(prompt="watch")
        cloud.runs.get(run.id).reply("seen")
        kinds = []
        while "run.event" not in kinds or kinds.count("run.event") < 5:
            kinds.append((await asyncio.wait_for(changes.__anext__(), 10)).kind)
        assert "run.started" in kinds
        await changes.aclose()
        await oauth.aclose()


async def test_reset_and_state_import_through_the_control_api_are_kept_on_disk(tmp_path) -> None:
    from services.served.persist import CloudStore
    from services.cloud.state import export_state

    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    cloud = FakeCloud("app", issuer=url, runtime_url=url)
    store = CloudStore(tmp_path / "cloud.db")
    await store.load(cloud)
    server = CloudServer(cloud, sock, store=store)
    await server.start()
    try:
        async with RemoteCloud(server.url, server.token) as remote:
            oauth, client = await _client(remote, server.url, "user:o1")
            run = await client.runs.start(prompt="before")
            snapshot = await remote.export_state()
            await remote.reset()
            assert await remote.runs.all == []
            assert (await asyncio.to_thread(store.stored_state))["runs"] == []
            with pytest.raises(ControlError) as bad:
                await remote.import_state({"format": "workbench-cloud-state", "version": 1, "runs": "no"})
            assert bad.value.status == 400 and bad.value.code == "invalid_state"
            assert (await asyncio.to_thread(store.stored_state))["runs"] == []  # the refused import wrote nothing
            await remote.import_state(snapshot)
            assert [r.id for r in await remote.runs.all] == [run.id]
            assert (await client.runs.get(run.id)).params["prompt"] == "before"  # tokens from before verify
            await oauth.aclose()
    finally:
        await server.stop()
        await store.close()
    reopened = FakeCloud("app", issuer=url, runtime_url=url)
    other = CloudStore(tmp_path / "cloud.db")
    await other.load(reopened)
    assert export_state(reopened) == snapshot
    await other.close()


async def test_a_client_that_goes_away_mid_stream_is_dropped_from_the_run(served_cloud) -> None:
    cloud, server = served_cloud
    async with RemoteCloud(server.url, server.token) as remote:
        oauth, client = await _client(remote, server.url, "user:o1")
        run = await client.runs.start(prompt="watch then leave")
        stream = client.runs.events(run.id, after=0)
        fake = cloud.runs.get(run.id)
        fake.reply("one")
        async for event in stream:
            if event.type == "node.turn.completed":
                break
        assert len(fake.streams) == 1  # served, still open
        await stream.aclose()  # the client hangs up without a closing frame
        for _ in range(500):  # bounded: until the server noticed the disconnect
            if not fake.streams:
                break
            await asyncio.sleep(0.01)
        assert fake.streams == []
        fake.reply("nobody is streaming now")  # appending still works; nothing is written to the dead socket
        assert (await client.runs.get(run.id)).status == "idle"
        await oauth.aclose()


async def test_a_batch_emit_refused_in_the_middle_keeps_what_came_before_on_disk_and_answers_the_refusal(
        tmp_path) -> None:
    """``POST /runs/{id}/emit`` with a list: events before a refused one are appended, streamed,
    published and stored in order; the refused one and those after it are not; the caller gets the
    refusal alone. An oversized event refuses the whole batch before anything is appended."""
    import httpx

    from services.cloud.limits import Limits
    from services.served.asgi import CONTROL_PREFIX
    from services.served.persist import CloudStore

    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    cloud = FakeCloud("app", issuer=url, runtime_url=url)
    store = CloudStore(tmp_path / "cloud.db")
    await store.load(cloud)
    server = CloudServer(cloud, sock, store=store, limits=Limits(event_bytes=2000))
    await server.start()
    published: list[tuple[str, int]] = []
    try:
        async with RemoteCloud(server.url, server.token) as remote:
            oauth, client = await _client(remote, server.url, "user:o1")
            run = await client.runs.start(prompt="batch")
            fake = cloud.runs.get(run.id)
            head = fake.seq
            cloud.changes.subscribe(lambda c: published.append((c.id, c.data["event"]["seq"]))
                                    if c.kind == "run.event" else None)
            stream = client.runs.events(run.id, after=head)
            operator = {"authorization": f"Bearer {server.token}"}
            emit = f"{server.url}{CONTROL_PREFIX}/runs/{run.id}/emit"
            ok = {"type": "node.output_text.delta", "fields": {"delta": "x", "entry_id": "e0"}}
            child = {**ok, "node_id": "child"}
            async with httpx.AsyncClient(headers=operator) as http:
                # the third event has no type: 400, the two before it kept (one of them a child's)
                answer = await http.post(emit, json={"events": [ok, child, {"fields": {}}, ok]})
                assert answer.status_code == 400, answer.text
                assert answer.json()["error"]["code"] == "invalid_request"
                assert "type" in answer.json()["error"]["message"]
                assert [e["seq"] for e in fake.events[-2:]] == [head + 1, head + 2] and fake.seq == head + 2
                assert [e["node_id"] for e in fake.events[-2:]] == [run.id, "child"]
                # an event too large anywhere in the batch: 413 naming it, nothing of the batch appended
                answer = await http.post(emit, json={"events": [ok, {**ok, "fields": {"delta": "y" * 3000}}]})
                assert answer.status_code == 413 and answer.json()["error"]["param"] == "events[1]"
                assert fake.seq == head + 2
                # a whole batch accepted: every seq answered, in order, across node changes
                answer = await http.post(emit, json={"events": [ok, child, child, ok]})
                assert answer.status_code == 200, answer.text
                assert answer.json()["seqs"] == [head + 3, head + 4, head + 5, head + 6]
            seen = []
            async for event in stream:
                seen.append((event.seq, event.node_id))
                if event.seq == head + 6:
                    break
            await stream.aclose()
            assert seen == [(head + 1, run.id), (head + 2, "child"), (head + 3, run.id), (head + 4, "child"),
                            (head + 5, "child"), (head + 6, run.id)]
            assert published == [(run.id, head + n) for n in range(1, 7)]
            doc = await asyncio.to_thread(store.stored_state)  # every answered call was committed first
            assert doc is not None
            kept = next(r for r in doc["runs"] if r["id"] == run.id)["events"]
            assert [e["seq"] for e in kept if e["seq"] > head] == [head + n for n in range(1, 7)]
            fake.delete()  # a deleted run refuses the whole batch
            async with httpx.AsyncClient(headers=operator) as http:
                answer = await http.post(emit, json={"events": [ok]})
            assert answer.status_code == 404 and answer.json()["error"]["code"] == "run_not_found"
            await oauth.aclose()
    finally:
        await server.stop()
        await store.close()


async def test_an_event_type_that_is_not_one_line_of_text_is_refused_over_http_with_nothing_appended(
        served_cloud) -> None:
    cloud, server = served_cloud
    async with RemoteCloud(server.url, server.token) as remote:
        oauth, client = await _client(remote, server.url, "user:o1")
        started = await client.runs.start(prompt="types")
        run = await remote.user("user:o1").runs.get(started.id)
        start = cloud.runs.get(started.id).seq
        for bad in ("x\ndata: {}\n\nevent: node.turn.completed", "a\rb", "", 7):
            with pytest.raises(ControlError) as refused:
                await run.emit(bad, {"k": 1})  # type: ignore[arg-type]
            assert refused.value.status == 400 and "type" in str(refused.value)
        with pytest.raises(ControlError) as burst:
            await run.emit_many([{"type": "node.activity", "fields": {"activity": "thinking"}}, {"type": "a\nb"}])
        assert burst.value.status == 400
        assert [e["seq"] for e in cloud.runs.get(started.id).events if e["seq"] > start] == [start + 1]
        await oauth.aclose()


async def test_a_batch_of_changes_reaches_another_subscriber_in_order_each_as_sent(served_cloud) -> None:
    from services.changes import Change

    cloud, server = served_cloud
    async with RemoteCloud(server.url, server.token) as remote, RemoteCloud(server.url, server.token) as other:
        stream = other.changes()
        first = asyncio.ensure_future(stream.__anext__())
        subscribers = len(cloud.changes._subscribers)
        for _ in range(500):  # bounded: until the served change stream has subscribed
            if len(cloud.changes._subscribers) > subscribers:
                break
            await asyncio.sleep(0.01)
        sent = [Change("canvas", "object.updated", f"obj_{n}", {"origin": "window-a", "n": n}) for n in range(300)]
        await remote.publish_many(sent)
        await remote.publish(Change("insights", "review.changed", "single", {"origin": "window-a"}))  # still taken
        got = [await asyncio.wait_for(first, 10)]
        while len(got) < 301:
            got.append(await asyncio.wait_for(stream.__anext__(), 10))
        assert got[:300] == sent
        assert (got[300].source, got[300].id, got[300].data) == ("insights", "single", {"origin": "window-a"})
        await stream.aclose()


@pytest.mark.parametrize(("body", "param"), [
    ({"changes": "not a list"}, "changes"),
    ({"changes": [{"source": "canvas", "kind": "a"}, "not an object"]}, "changes[1]"),
    ({"changes": [{"source": "canvas", "kind": "a"}, {"source": "canvas"}]}, "changes[1].kind"),
    ({"changes": [{"source": "canvas", "kind": "a"}, {"source": "canvas", "kind": "b", "data": [1]}]},
     "changes[1].data"),
    ({"changes": [{"source": "canvas", "kind": "a"}, {"source": "cloud", "kind": "run.deleted"}]},
     "changes[1].source"),
    ({"changes": [{"source": "canvas", "kind": "a"}, {"source": "", "kind": "b"}]}, "changes[1].source"),
    ({"changes": [{"source": "canvas", "kind": "a"}], "source": "canvas"}, "source"),
    ({"changes": [{"source": "canvas", "kind": str(n)} for n in range(1001)]}, "changes"),
])
async def test_a_malformed_batch_is_a_400_naming_the_change_and_publishes_none_of_it(
        served_cloud, body: dict[str, object], param: str) -> None:
    cloud, server = served_cloud
    published: list[object] = []
    unsubscribe = cloud.changes.subscribe(published.append)
    try:
        async with RemoteCloud(server.url, server.token) as remote:
            answer = await remote._http.post("/changes", json=body)
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["code"] == "invalid_request" and error["param"] == param, error
        assert published == []  # all or nothing: the well-formed changes before the bad one are not published
    finally:
        unsubscribe()
