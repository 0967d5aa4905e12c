"""Seed section "Isolated runs"."""

from __future__ import annotations

import pytest

from services.cloud import FakeCloud
from services.sdk import BadRequestError, CrouterError

from .conftest import ops


async def test_isolated_start_by_default(cloud: FakeCloud, client) -> None:
    run = await client.runs.start(prompt="x", isolated=True)
    assert cloud.runs.all[0].params["isolated"] is True
    assert run.params["isolated"] is True


async def test_cwd_inside_the_runs_root(cloud: FakeCloud, client) -> None:
    root = "/apps/doppel/nodes/run_judge1"
    run = await client.runs.start(prompt="x", isolated=True, cwd=root + "/work", id="run_judge1")
    assert run.id == "run_judge1"
    assert cloud.runs.all[0].params["cwd"] == root + "/work"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"cwd": "/apps/doppel/nodes/run_a"}, "cwd"),  # cwd without isolated
        ({"isolated": True, "cwd": "relative/path"}, "cwd"),
        ({"isolated": True, "cwd": "/apps/doppel/nodes/run_other"}, "cwd"),
        ({"isolated": True, "cwd": "/apps/doppel/nodes/run_a/../run_b"}, "cwd"),
        ({"isolated": "yes"}, "isolated"),
        ({"worktree": "main"}, "worktree"),
    ],
)
async def test_isolated_checks(cloud: FakeCloud, client, fields, param) -> None:
    with pytest.raises(BadRequestError) as info:
        await client.runs.start(prompt="x", id="run_a", **fields)
    assert info.value.status == 400
    assert info.value.code == "invalid_request"
    assert info.value.param == param
    assert cloud.runs.all == []


async def test_isolated_unavailable(private_key_pem, waits) -> None:
    from services.sdk import MemoryConnectionStore, OAuth2Client

    cloud = FakeCloud(client_id="doppel", isolated_runs="unavailable")
    store = MemoryConnectionStore()
    await cloud.connect(store, "user:o1")
    oauth = OAuth2Client(
        client_id="doppel", issuer=cloud.issuer, transport=cloud.transport, private_key=private_key_pem,
        redirect_uri="https://app.test/callback", store=store, sleep=waits,
    )
    client = await oauth.client("user:o1")
    with pytest.raises(CrouterError) as info:
        await client.runs.start(prompt="x", isolated=True)
    assert info.value.status == 503
    assert info.value.code == "isolated_unavailable"
    assert info.value.param == "isolated"
    assert info.value.retryable is True
    starts = ops(cloud, "run.start")
    assert len(starts) == 3
    assert len({c.idempotency_key for c in starts}) == 1
    assert cloud.runs.all == []
    await oauth.aclose()
