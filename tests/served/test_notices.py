"""Run notices from a served cloud reach an app's HTTP route and verify against the served JWKS."""

from __future__ import annotations

import asyncio

import httpx
import uvicorn

from services.cloud import FakeCloud
from services.served.asgi import read_body
from services.attached.client import RemoteCloud
from services.sdk import MemoryConnectionStore, OAuth2Client, verify_run_notice
from services.served.server import CloudServer, bind_socket, http_run_notices, origin_url

from .test_control import KEY


async def test_a_run_with_no_stream_open_notifies_the_app_over_http(tmp_path) -> None:
    received: list[dict[str, object]] = []
    arrived = asyncio.Event()
    app_sock = bind_socket("127.0.0.1", 0)
    notice_url = origin_url(*app_sock.getsockname()[:2]) + "/run-notices"
    cloud_sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*cloud_sock.getsockname()[:2])

    async def app_route(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        request = httpx.Request(scope["method"], notice_url, headers=scope["headers"], content=body)
        claims = await verify_run_notice(request, run_notice_url=notice_url, issuer=url, grantee="app:app")
        received.append(claims)
        arrived.set()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    receiver = uvicorn.Server(uvicorn.Config(app_route, lifespan="off", log_level="warning"))
    receiving = asyncio.ensure_future(receiver.serve(sockets=[app_sock]))
    cloud = FakeCloud("app", issuer=url, runtime_url=url, run_notice=http_run_notices(notice_url))
    server = CloudServer(cloud, cloud_sock)
    await server.start()
    try:
        async with RemoteCloud(server.url, server.token) as remote:
            store = MemoryConnectionStore()
            await remote.connect(store, "user:o1")
            async with OAuth2Client(client_id="app", issuer=url, private_key=KEY, store=store) as oauth:
                client = await oauth.client("user:o1")
                run = await client.runs.start(prompt="notify me")
                await (await remote.runs.get(run.id)).reply("while you were away")
                await asyncio.wait_for(arrived.wait(), 20)
        claims = received[0]
        assert claims["run_id"] == run.id and claims["sub"] == "user:o1" and claims["aud"] == notice_url
        assert claims["seq"] >= 4
        await cloud.settle_tasks()
        assert [a.status for a in cloud.notices][-1] == 204
    finally:
        await server.stop()
        receiver.should_exit = True
        await receiving
