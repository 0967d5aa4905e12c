"""A window's control client lets go of each answer once it is read: httpx binds a response and its
stream to each other, so an answer read whole (the runs list of a big workspace is tens of MB) stayed
in memory until Python's cyclic collector next ran. Unbound, it is freed as soon as it is read."""

from __future__ import annotations

import gc
from pathlib import Path

import httpx

from services.attached.client import ControlError, RemoteCloud
from services.workspace import Settings, Workspace


def responses() -> list[httpx.Response]:
    return [o for o in gc.get_objects() if isinstance(o, httpx.Response)]


async def test_an_answer_read_and_a_refusal_are_freed_without_the_collector(tmp_path: Path) -> None:
    served = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    try:
        async with RemoteCloud.from_workspace(served.path) as remote:
            await remote.call("GET", "/people")  # the connection made, what it keeps for good made too
            gc.collect()
            gc.disable()
            try:
                before = len(responses())
                answer = await remote.call("GET", "/runs")
                assert answer["runs"]
                try:
                    await remote.call("GET", "/runs/run_missing")
                except ControlError as exc:
                    assert exc.status == 404
                else:
                    raise AssertionError("an unknown run was answered")
                assert len(responses()) == before  # nothing of either answer waits for the collector
            finally:
                gc.enable()
    finally:
        await served.close()
