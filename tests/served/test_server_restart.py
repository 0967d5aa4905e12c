"""Attached windows follow the server's life: a ``workbench serve`` killed with SIGKILL is seen as
gone (the header says since when, actions are refused with that reason), and when a server answers
on the workspace again (the same port or another, a new process with a new token) the window reads
``serve.json`` again, reconnects, reads everything again and says it is back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.attached import RemoteCloud
from services.desk import OperatorError
from services.workspace import Workspace
from tests.toasts import until_said
from tests.ui.conftest import ready
from workbench.app import make_app
from services.settings import Settings


async def _until(check: Callable[[], bool], timeout: float = 30.0) -> bool:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():
        if loop.time() > end:
            return False
        await asyncio.sleep(0.05)
    return True


async def _start_run(url: str, token: str, prompt: str) -> str:
    async with RemoteCloud(url, token) as remote:
        answer = await remote.call("POST", "/people/user:ada/runs", {"prompt": prompt})
    return str(answer["run_id"])


@pytest.mark.parametrize("same_port", [True, False], ids=["same port", "another port"])
async def test_an_attached_window_sees_the_server_go_and_come_back(serve, tmp_path: Path, same_port: bool) -> None:
    folder = tmp_path / "ws"
    first = serve(folder)
    window = await Workspace.open(folder)
    seen: list[Any] = []
    unsubscribe = window.feed.subscribe(seen.append)
    try:
        assert window.header_status.startswith(f"attached to {first.url}")
        run_id = window.desk.runs()[0].id
        first.proc.kill()  # SIGKILL: the server says nothing on its way out

        assert await _until(lambda: any(c.kind == "attach.lost" for c in seen), timeout=10)
        assert window.header_status.startswith("server gone since ") and first.url in window.header_status
        with pytest.raises(OperatorError, match="has not answered since"):
            await window.desk.reply(run_id, "while the server is down")

        again = serve(folder, port=first.port if same_port else 0)
        assert again.info["token"] != first.info["token"]
        started = await _start_run(again.url, again.info["token"], "made on the new server")
        assert await _until(lambda: any(c.kind == "attach.back" for c in seen))
        assert await _until(lambda: started in {r.id for r in window.desk.runs()})
        assert window.header_status == f"attached to {again.url} (served by process {again.info['pid']})"
        await window.desk.reply(started, "acting again")  # actions go through the new server, with its token
        assert await _until(lambda: window.desk.detail(started).status == "idle")
    finally:
        unsubscribe()
        await window.close()


async def test_the_header_and_a_toast_say_the_server_is_gone_and_back(serve, tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    first = serve(folder)
    app = make_app(Settings(path=folder))
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        badges = app.main.query_one("#badges")
        assert "attached to" in badges.status
        first.proc.kill()
        for _ in range(400):
            await pilot.pause(0.05)
            if badges.status.startswith("server gone since"):
                break
        assert badges.status.startswith("server gone since")
        assert any("stopped answering" in m for m in await until_said(pilot, lambda m: any("stopped answering" in x for x in m)))
        again = serve(folder)
        for _ in range(600):
            await pilot.pause(0.05)
            if badges.status.startswith("attached to"):
                break
        assert badges.status == f"attached to {again.url} (served by process {again.info['pid']})"
        # the header follows the desk's state; the toast comes with the batch that says so (the same moment or the next)
        assert any("is back" in message for message in await until_said(pilot, lambda m: any("is back" in x for x in m)))
