"""One scenario written against the driver surface runs on an in-process FakeCloud and on a served
one through RemoteCloud: the same names and arguments, awaited where a call crosses the wire."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from services.attached import RemoteCloud
from services.cloud import FakeCloud
from services.sdk import CrouterError, MemoryConnectionStore, OAuth2Client, ServiceUnavailableError
from services.served.server import CloudServer, bind_socket, origin_url

from .test_control import KEY


async def _(value: Any) -> Any:
    """The value, awaited when the surface crossed the wire."""
    return await value if inspect.isawaitable(value) else value


async def scenario(cloud: Any, issuer: str, transport: Any) -> list[str]:
    store = MemoryConnectionStore()
    await cloud.connect(store, "user:o1", scopes=["crtr:llm", "crtr:act"])
    seen: list[str] = []
    async with OAuth2Client(client_id="app", issuer=issuer, transport=transport, private_key=KEY, store=store,
                            max_retries=0) as oauth:
        client = await oauth.client("user:o1")
        run = await client.runs.start(prompt="same everywhere")
        fake = await _(cloud.runs.get(run.id))
        await _(fake.reply("first answer"))
        seen.append((await client.runs.get(run.id)).status)
        await _(fake.fail_turn(code="content_refused", message="no"))
        seen.append((await client.runs.get(run.id)).raw["last_turn_error"]["code"])
        await _(cloud.fail_next("run.get", 503, user="user:o1"))
        with pytest.raises(ServiceUnavailableError):
            await client.runs.get(run.id)
        await _(cloud.user("user:o1").grant.revoke("grant_removed"))
        seen.append((await _(cloud.user("user:o1").grant.state))["state"])
        seen.append(",".join(r.status for r in await _(cloud.runs.all)))
        with pytest.raises(CrouterError) as refused:
            await client.runs.get(run.id)
        seen.append(str(refused.value.code))
        await _(cloud.user("user:o1").grant.restore())
        await cloud.connect(store, "user:o1", scopes=["crtr:llm", "crtr:act"])
        seen.append((await (await oauth.client("user:o1")).runs.get(run.id)).status)
    return seen


async def test_one_scenario_drives_an_in_process_cloud_and_a_served_one_alike() -> None:
    local = FakeCloud("app")
    in_process = await scenario(local, local.issuer, local.transport)

    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    server = CloudServer(FakeCloud("app", issuer=url, runtime_url=url), sock)
    await server.start()
    try:
        async with RemoteCloud(server.url, server.token) as remote:
            served = await scenario(remote, server.url, None)
    finally:
        await server.stop()
    assert in_process == served == ["idle", "content_refused", "revoked", "idle", "grant_removed", "idle"]
