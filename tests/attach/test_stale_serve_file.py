"""A ``serve.json`` left by a server that died (or stopped answering) is detected and replaced;
one whose server still holds the workspace but does not answer is refused in plain words."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _slow_server(delay: float | None) -> tuple[str, Any]:
    """A loopback HTTP server in a thread that answers ``[]`` after ``delay`` seconds (None: never)."""
    import http.server
    import threading
    import time as clock

    release = threading.Event()

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            if delay is None:
                release.wait(30)
                return
            clock.sleep(delay)
            body = b"[]"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        release.set()
        server.shutdown()
        server.server_close()
    return f"http://127.0.0.1:{server.server_address[1]}", stop


async def test_a_live_server_slow_to_answer_is_waited_for_and_one_that_never_answers_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from services.attached import discovery

    monkeypatch.setattr(discovery, "PROBE_TIMEOUT_S", 0.5)
    monkeypatch.setattr(discovery, "BUSY_WAIT_S", 3.0)
    folder = tmp_path / "ws"
    folder.mkdir()
    lock = FileLock(folder / SERVE_LOCK)
    assert lock.try_acquire()  # the server's process (this one) holds the workspace
    try:
        url, stop = _slow_server(1.2)  # busy: answers after more than one probe's time
        try:
            (folder / "serve.json").write_text(json.dumps({"url": url, "pid": os.getpid(), "token": "t"}))
            found = await discovery.find_server(folder)
            assert found is not None and found.url == url
        finally:
            stop()
        url, stop = _slow_server(None)  # takes the connection, never answers
        try:
            (folder / "serve.json").write_text(json.dumps({"url": url, "pid": os.getpid(), "token": "t"}))
            with pytest.raises(discovery.AttachError, match="does not answer"):
                await discovery.find_server(folder)
            assert read_serve_info(folder) is not None  # the holder's file is kept
        finally:
            stop()
    finally:
        lock.release()
