"""The run follower reads runs through the window's desk: in a window attached to a served cloud, it
builds the same canvas nodes, events and inboxes as the follower of a window whose cloud runs
in-process, and it never reads a run from the server itself."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx


from services.canvas import Canvas, RunBridge
from services.changes import ChangeFeed
from services.cloud import FakeCloud, generate_private_key_pem
from services.attached.client import RemoteCloud
from services.attached import ServedDesk
from services.desk.embedded import embedded_desk
from services.follower import RunFollower
from services.served.control import ControlApp
from services.sdk import MemoryConnectionStore, OAuth2Client
from services.served.server import CloudServer, bind_socket, origin_url

KEY = generate_private_key_pem("ec")


async def snapshot(canvas: Canvas) -> dict[str, Any]:
    """What the follower put in the canvas, without the ids and times the canvas itself picks."""
    objects = (await canvas.list_objects(limit=500)).items
    shape: dict[str, Any] = {"objects": sorted((o.type, o.kind, o.full_name, o.status) for o in objects)}
    for obj in objects:
        if obj.type != "node":
            continue
        node = (await canvas.read(obj.id)).node
        events = await canvas.events(obj.id, limit=500)
        inbox = await canvas.inbox(obj.id)
        shape[obj.id] = (
            (node.status, node.activity, node.outcome, node.kind, node.parent_id) if node else None,
            [(e.type, e.level, {k: v for k, v in e.data.items() if k not in ("at",)}) for e in reversed(events)],
            [(e.kind, e.body) for e in inbox.items],
        )
    return shape


async def test_the_follower_pointed_at_a_served_cloud_builds_the_same_canvas_as_in_process(
        served_cloud: tuple[FakeCloud, CloudServer], tmp_path: Path) -> None:
    cloud, server = served_cloud
    local = await Canvas.open(tmp_path / "in-process.db")
    wired = await Canvas.open(tmp_path / "wire.db")
    remote = RemoteCloud(server.url, server.token)
    store = MemoryConnectionStore()
    await remote.connect(store, "user:o1", scopes=["crtr:llm", "crtr:act"])
    oauth = OAuth2Client(client_id="app", issuer=server.url, private_key=KEY, store=store, max_retries=0)
    client = await oauth.client("user:o1")
    early = await client.runs.start(prompt="before the follower")  # caught up from the wire
    await remote.runs.get(early.id)
    cloud.runs.get(early.id).reply("caught up")

    desk = embedded_desk(cloud, ControlApp(cloud, "", change_log=False), cloud.changes, clock=cloud.clock)
    in_process = RunFollower(desk, cloud.changes, bridge=RunBridge(local))
    feed = ChangeFeed()
    attached = ServedDesk(remote, feed)
    await attached.start()  # returns once the server's change stream is subscribed
    over_wire = RunFollower(attached, feed, bridge=RunBridge(wired))
    reads: list[str] = []  # every run the window reads from the server from now on

    async def read(request: httpx.Request) -> None:
        if request.method == "GET" and "/runs/" in request.url.path:
            reads.append(request.url.path.rsplit("/", 1)[-1])

    remote._http.event_hooks["request"].append(read)
    changes: list[str] = []
    feed.subscribe(lambda c: changes.append(c.id) if c.source == "cloud" and c.kind.startswith("run.") else None)
    await in_process.start()
    await over_wire.start()
    try:
        live = await client.runs.start(prompt="while followed")  # followed live, through the change stream
        # The canvas journals each state of a node a follower reads (a ``configured`` event per change it
        # sees), so both followers are let see the started run before the fake moves it on; the calls
        # below are synchronous, so every read after them sees the run as it ends.
        for _ in range(500):
            await in_process.idle()
            await over_wire.idle()
            started = await snapshot(local)
            if live.id in started and await snapshot(wired) == started:
                break
            await asyncio.sleep(0.01)
        assert await snapshot(wired) == await snapshot(local)
        fake = cloud.runs.get(live.id)
        fake.reply("one", chunks=3)
        fake.emit("node.message.received", {"message": {"id": "m7", "text": "a queued note"}, "start_turn": False})
        fake.emit("run.renamed", {"name": "renamed on the wire"})
        fake.fail_turn(code="model_error", message="the model failed")
        fake.settle(result="done")
        await in_process.idle()
        expected = await snapshot(local)
        assert live.id in expected and early.id in expected
        for _ in range(500):  # bounded: until the wire follower has applied what the stream carried
            await over_wire.idle()
            if await snapshot(wired) == expected:
                break
            await asyncio.sleep(0.01)
        assert await snapshot(wired) == expected
        assert list(over_wire.errors) == [] and list(in_process.errors) == []
        # the follower reads the desk: a run is read from the server once per batch of its changes, at most
        assert reads and reads.count(live.id) <= changes.count(live.id)
    finally:
        await in_process.stop()
        await over_wire.stop()
        await attached.stop()
        await oauth.aclose()
        await remote.aclose()
        await local.close()
        await wired.close()


async def test_a_window_attached_to_a_headless_server_follows_its_runs_into_the_canvas_once(
        tmp_path: Path) -> None:
    from services.workspace import Workspace

    folder = tmp_path / "ws"
    folder.mkdir()
    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    cloud = FakeCloud("app", issuer=url, runtime_url=url)
    server = CloudServer(cloud, sock, folder=folder)  # as `workbench serve` does: no window, no follower
    await server.start()
    first = await Workspace.open(folder)
    second = await Workspace.open(folder)
    try:
        assert first.attached is not None and second.attached is not None
        assert first.follower is not None and second.follower is None  # one process follows
        store = MemoryConnectionStore()
        async with RemoteCloud(server.url, server.token) as remote:
            await remote.connect(store, "user:o1", scopes=["crtr:llm", "crtr:act"])
        async with OAuth2Client(client_id="app", issuer=server.url, private_key=KEY, store=store,
                                max_retries=0) as oauth:
            run = await (await oauth.client("user:o1")).runs.start(prompt="followed by a window")
            cloud.runs.get(run.id).reply("seen by the canvas")
        async def replies(ws: Workspace) -> list[object]:
            return [e.data.get("text") for e in await ws.canvas.events(run.id) if e.type == "node.output_text.done"]

        for _ in range(500):  # bounded: until the change stream has carried the whole run to the follower
            await first.follower.idle()
            page = await first.canvas.list_objects(type="node")
            if any(o.id == run.id and o.status == "idle" for o in page.items) and await replies(first):
                break
            await asyncio.sleep(0.01)
        node = await first.canvas.read(run.id)
        assert node.node is not None
        texts = await replies(second)
        assert texts == ["seen by the canvas"]  # the other window reads the same canvas
        assert list(first.follower.errors) == []
    finally:
        await second.close()
        await first.close()
        await server.stop()
