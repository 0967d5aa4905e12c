"""``workbench --serve``: the workspace the UI opens also serves its cloud, kept in ``cloud.db``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from services.cloud import generate_private_key_pem
from services.attached.client import RemoteCloud
from services.sdk import Connection, MemoryConnectionStore, OAuth2Client
from services.workspace import Settings, Workspace

FIELDS = ("user_id", "access_token", "refresh_token", "expires_at", "scope", "runtime_url", "runtime_id")


async def test_an_open_workspace_serves_its_cloud_and_keeps_it_across_opens(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    key = generate_private_key_pem("ec")
    workspace = await Workspace.open(folder, settings=Settings(serve_port=0))
    try:
        info = json.loads((folder / "serve.json").read_text())
        assert info["url"] == workspace.server.url == workspace.cloud.issuer
        async with RemoteCloud(info["url"], info["token"]) as remote:
            connection = await remote.connection("user:app", scopes=["crtr:llm"])
            sample = {run.id for run in await remote.runs.all}
        assert sample == {run.id for run in workspace.cloud.runs.all}
        store = MemoryConnectionStore()
        await store.save(Connection(**{k: connection[k] for k in FIELDS}))
        async with OAuth2Client(client_id="workbench", issuer=info["url"], private_key=key, store=store) as oauth:
            client = await oauth.client("user:app")
            run = await client.runs.start(prompt="from a real app")  # over a real socket
            await workspace.desk.reply(run.id, "the operator answers")  # the `r` key's action
            fake = workspace.cloud.runs.get(run.id)
            assert fake.status == "idle" and fake.events[-1]["type"] == "node.turn.completed"
            assert (await client.runs.get(run.id)).status == "idle"
    finally:
        await workspace.close()
    assert not (folder / "serve.json").exists()
    for secret in ("cloud.db", "connections.db"):  # signing key, refresh tokens: owner-only
        assert (folder / secret).stat().st_mode & 0o077 == 0

    again = await Workspace.open(folder, settings=Settings(serve_port=0))
    try:
        assert again.cloud.runs.get(run.id).status == "idle"  # kept, and the sample not seeded twice
        assert sorted(r.id for r in again.cloud.runs.all if r.id in sample) == sorted(sample)
        async with httpx.AsyncClient() as http:
            discovery = (await http.get(again.server.url + "/.well-known/openid-configuration")).json()
        assert discovery["issuer"] == again.server.url
    finally:
        await again.close()


async def test_a_workspace_already_served_is_not_served_twice(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    first = await Workspace.open(folder, settings=Settings(serve_port=0))
    try:
        second = await Workspace.open(folder, settings=Settings(serve_port=0))
        try:  # it attaches to the first one's cloud instead of starting a second
            assert second.server is None and second.cloud is None
            assert second.attached.url == first.server.url
        finally:
            await second.close()
        assert json.loads((folder / "serve.json").read_text())["url"] == first.server.url
    finally:
        await first.close()
