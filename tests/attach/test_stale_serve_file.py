"""A ``serve.json`` left by a server that died (or stopped answering) is detected and replaced;
one whose server still holds the workspace but does not answer is refused in plain words."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from services.files import FileLock
from services.served.server import SERVE_LOCK, read_serve_info
from services.workspace import Settings, Workspace, WorkspaceOpenError
from workbench.served import check_ui_serve


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def silent_url() -> str:
    """A loopback URL nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def write_serve_file(folder: Path, pid: int) -> dict[str, object]:
    folder.mkdir(parents=True, exist_ok=True)
    info = {"url": silent_url(), "pid": pid, "token": "left-behind"}
    (folder / "serve.json").write_text(json.dumps(info))
    return info


@pytest.mark.parametrize("pid", [dead_pid(), os.getpid()], ids=["dead process", "no answer"])
async def test_stale_serve_file_is_replaced_when_the_workspace_is_served_again(tmp_path: Path, pid: int) -> None:
    folder = tmp_path / "ws"
    stale = write_serve_file(folder, pid)
    assert check_ui_serve(folder, 0) is None
    workspace = await Workspace.open(settings=Settings(path=folder, serve_port=0))
    try:
        assert workspace.attached is None and workspace.server is not None
        info = read_serve_info(folder)
        assert info is not None and info != stale
        assert info["url"] == workspace.server.url and info["pid"] == os.getpid()
        assert len(workspace.desk.runs()) > 0  # the workspace opened whole, its runs there
    finally:
        await workspace.close()
    assert not (folder / "serve.json").exists()


async def test_stale_serve_file_is_removed_when_a_window_opens_without_serving(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    write_serve_file(folder, dead_pid())
    workspace = await Workspace.open(folder)
    try:
        assert workspace.attached is None and workspace.cloud is not None
        assert workspace.header_status == "ready"
        assert not (folder / "serve.json").exists()
    finally:
        await workspace.close()


async def test_unanswering_server_that_holds_the_workspace_is_refused_and_its_file_kept(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    stale = write_serve_file(folder, os.getpid())
    lock = FileLock(folder / SERVE_LOCK)
    assert lock.try_acquire()
    try:
        with pytest.raises(WorkspaceOpenError) as refused:
            await Workspace.open(folder)
        assert "does not answer" in str(refused.value)
        assert read_serve_info(folder) == stale  # nothing of the holder's was touched
        assert not (folder / "canvas.db").exists()
    finally:
        lock.release()
