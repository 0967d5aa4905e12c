"""``workbench serve``'s server answers Honcho's API under ``/honcho`` beside the cloud on one
origin: the official SDK's contract runs there, and the cloud's own routes are untouched."""

from __future__ import annotations

import httpx

from services.cloud import FakeCloud
from services.honcho import FakeHonchoService
from services.served.server import CloudServer, bind_socket, origin_url
from services.wire import DIRECTORY_DISCOVERY_PATH

from .test_contract import SdkDriver, run_contract


async def test_the_served_workspace_answers_honcho_under_a_prefix_beside_the_cloud(tmp_path) -> None:
    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    service = FakeHonchoService(tmp_path / "served-honcho.json")
    server = CloudServer(FakeCloud("app", issuer=url, runtime_url=url), sock, honcho=service)
    await server.start()
    try:
        assert server.honcho_url == url + "/honcho"
        await run_contract(SdkDriver(server.honcho_url, "served", server.honcho_key or ""), service, "served")
        async with httpx.AsyncClient() as http:
            discovery = await http.get(url + DIRECTORY_DISCOVERY_PATH)
            assert discovery.status_code == 200 and discovery.json()["issuer"] == url
            outside = await http.post(url + "/people", json={"id": "w"})
            assert outside.status_code != 201  # the cloud's routes are not Honcho's
            root = await http.post(url + "/v3/workspaces", json={"id": "w"},
                                   headers={"Authorization": f"Bearer {server.honcho_key}"})
            assert root.status_code == 201  # the root alias the TypeScript SDK reaches (it drops /honcho)
    finally:
        await server.stop()
    service.close()
    kept = FakeHonchoService(tmp_path / "served-honcho.json")  # the database beside that name
    assert "I keep bees on the roof" in [m["content"] for m in kept.all_messages("served")]
