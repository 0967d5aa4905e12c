"""The official SDKs' whole v3 surface against the standalone fake and the ``/honcho`` mount of
``workbench serve``, both requiring their key: the Python SDK (``sdk_scenario.py``, its route table
in the docstring) and the TypeScript SDK (``sdk_scenario.cjs``, one Node process per fake) run the
same steps and are held to the same checks; every route the Python SDK's resources call is reached
(checked against the fake's own record of calls)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from services.cloud import FakeCloud
from services.honcho import FakeHonchoService
from services.honcho.service import HONCHO_ROUTES
from services.served.honcho import HonchoServer
from services.served.server import CloudServer, bind_socket, origin_url

from .sdk_scenario import run_python_scenario

HERE = Path(__file__).resolve().parent


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def ts_sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A node_modules folder holding @honcho-ai/sdk: ``$WORKBENCH_HONCHO_TS_SDK``, else installed with npm
    into a throwaway folder. Without Node or npm the TypeScript half is skipped, except in CI."""
    given = os.environ.get("WORKBENCH_HONCHO_TS_SDK")
    if given:
        return Path(given)
    if shutil.which("node") is None or shutil.which("npm") is None:
        if _in_ci():
            pytest.fail("CI needs node and npm for the TypeScript SDK's contract")
        pytest.skip("node and npm are not installed")
    folder = tmp_path_factory.mktemp("honcho-ts")
    done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), "@honcho-ai/sdk"],
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        if _in_ci():
            pytest.fail(f"npm install @honcho-ai/sdk failed: {done.stderr[-2000:]}")
        pytest.skip(f"npm install @honcho-ai/sdk failed: {done.stderr[-500:]}")
    return folder / "node_modules"


async def run_ts_scenario(node_modules: Path, url: str, key: str) -> dict[str, Any]:
    done = await asyncio.to_thread(
        subprocess.run, ["node", str(HERE / "sdk_scenario.cjs"), url, key],
        env={**os.environ, "NODE_PATH": str(node_modules)}, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def check(seen: dict[str, Any]) -> None:
    assert seen["workspace_metadata"] == {"team": "bees"} and "contract" in seen["workspaces"]
    assert seen["alice_metadata"] == {"role": "user", "level": 3}
    assert seen["bob_metadata"] == {"role": "bot", "level": 7}
    assert seen["users"] == ["alice"] and seen["levelled"] == ["alice", "bob"]
    assert seen["s1_metadata"] == {"topic": "bees"} and seen["s1_updated"] == {"topic": "bees", "v": 2}
    assert seen["sessions_bees"] == ["s1"]
    assert seen["alice_config"] is True
    assert seen["members_after_remove"] == ["alice"] and seen["members_after_set"] == ["alice", "bob"]
    assert seen["alice_sessions"] == ["s1"]
    assert seen["never_created_messages"] == [] and seen["late_messages"] == ["first words"]
    assert seen["filtered"] == ["Bees need water", "Honey comes in July"]
    assert seen["got_message"] == "I keep bees on the roof" and seen["updated_message"] == {"n": 1, "edited": True}
    assert seen["clone_count"] == 2
    assert set(seen["workspace_search"]) == {"I keep bees on the roof", "Bees need water"}
    assert seen["session_search"] == ["Honey comes in July"] and seen["peer_search"] == ["I keep bees on the roof"]
    assert seen["card"] == ["Keeps bees", "Lives in town"]
    assert seen["representation"].startswith("[fake Honcho representation] alice: 4 messages")
    assert "fake Honcho representation" in seen["session_representation"]
    assert seen["peer_context_card"] == ["Keeps bees", "Lives in town"]
    assert seen["chat"].startswith("[fake Honcho: a deterministic answer, no model]") and "bees" in seen["chat"]
    assert seen["chat_stream"].startswith("[fake Honcho")
    # no summary before a session's 20th message, as real Honcho; then the short one up to it
    assert seen["context_messages"] == 3 and seen["context_summary"] is None and seen["summaries"] is False
    assert seen["context_summary_at_20"].startswith("[fake Honcho summary] 20 messages")
    assert seen["summaries_at_20"] == [True, True]
    assert seen["conclusions"] == ["likes bees"] and seen["queried"] == ["likes bees"]
    assert seen["conclusions_after_delete"] == []
    assert seen["queue"] == 0
    lengths, metadata = seen["upload"]
    assert sum(lengths) == 30_000 and max(lengths) <= 25_000 and len(lengths) == 2 and metadata == {"src": "notes"}
    assert seen["s2_after_delete"] == 404 and seen["workspace_delete_with_sessions"] == 409
    assert seen["workspace_delete"] == 200 and "contract" not in seen["workspaces_after_delete"]


def reached(service: FakeHonchoService) -> set[tuple[str, str]]:
    patterns = [(m, p, re.compile("^" + re.sub(r"\{\w\}", "[^/]+", p) + "$")) for m, p in HONCHO_ROUTES]
    return {(m, p) for method, path in service.calls for m, p, rx in patterns
            if m == method and rx.match(path.removeprefix("/honcho"))}


async def test_both_sdks_reach_every_route_on_the_standalone_fake(ts_sdk: Path) -> None:
    service = FakeHonchoService(api_key="standalone-key")
    server = HonchoServer(service, "127.0.0.1", 0)
    await server.start()
    try:
        check(await asyncio.to_thread(run_python_scenario, server.url, "standalone-key"))
        check(await run_ts_scenario(ts_sdk, server.url, "standalone-key"))
    finally:
        await server.stop()
    missing = set(HONCHO_ROUTES) - reached(service)
    assert missing == set()


async def test_both_sdks_run_the_same_scenario_on_the_served_mount(tmp_path: Path, ts_sdk: Path) -> None:
    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    service = FakeHonchoService(tmp_path / "served-honcho.db")
    server = CloudServer(FakeCloud("app", issuer=url, runtime_url=url), sock, honcho=service)
    await server.start()
    try:
        assert server.honcho_key and server.honcho_url
        check(await asyncio.to_thread(run_python_scenario, server.honcho_url, server.honcho_key))
        check(await run_ts_scenario(ts_sdk, server.honcho_url, server.honcho_key))
    finally:
        await server.stop()


@pytest.mark.parametrize("key", [None, "wrong"])
async def test_without_the_key_the_sdk_gets_honchos_401(key: str | None) -> None:
    import httpx

    service = FakeHonchoService(api_key="right")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(transport=service.transport, base_url="http://h") as http:
        answer = await http.post("/v3/workspaces", json={"id": "w"}, headers=headers)
    assert answer.status_code == 401
    assert answer.json() == {"detail": "No access token provided" if key is None else "Invalid JWT"}
    assert service.workspace_ids() == []
