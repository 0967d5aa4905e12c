"""``workbench serve``: a real port, a real app process, the control API and its token."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import httpx

from services.attached.client import ControlError, RemoteCloud

from .conftest import workbench


def test_serve_on_port_zero_announces_its_url_and_a_private_serve_json(serve, tmp_path: Path) -> None:
    served = serve(tmp_path / "ws")
    assert served.port > 0
    info = served.info
    assert info["url"] == served.url and info["pid"] == served.proc.popen.pid and len(info["token"]) >= 32
    assert stat.S_IMODE(os.stat(tmp_path / "ws" / "serve.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "ws" / "cloud.db").st_mode) == 0o600
    discovery = httpx.get(served.url + "/.well-known/openid-configuration", timeout=10).json()
    assert discovery["issuer"] == served.url
    served.proc.stop()
    assert served.proc.popen.returncode == 0
    assert not (tmp_path / "ws" / "serve.json").exists()


async def test_app_process_over_http_is_driven_through_remote_cloud(serve, app, tmp_path: Path) -> None:
    served = serve(tmp_path / "ws")
    printed = workbench("connect", "--workspace", str(tmp_path / "ws"), "user:o1", "--scope", "crtr:llm", "crtr:act")
    assert printed.returncode == 0, printed.stderr
    connection = json.loads(printed.stdout)
    assert connection["issuer"] == served.url and connection["runtime_url"] == served.url
    client = app()
    assert client.send({"cmd": "connect", "connection": connection}) == {"ok": True}
    run_id = client.send({"cmd": "start", "prompt": "plan my week"})["run"]
    async with RemoteCloud(served.url, served.info["token"]) as remote:
        run = await remote.runs.get(run_id)
        assert run.user_id == "user:o1" and run.status == "running" and run.params["prompt"] == "plan my week"

        await run.reply("here is the plan")
        turn = client.send({"cmd": "turn", "run": run_id, "after": 0})
        assert turn["stop_reason"] == "end_turn" and turn["text"] == "here is the plan"

        await run.fail_turn(code="model_error", message="the model fell over")
        failed = client.send({"cmd": "turn", "run": run_id, "after": turn["cursor"]})
        assert failed["stop_reason"] == "error"
        assert failed["error"] == {"code": "model_error", "message": "the model fell over"}
        assert client.send({"cmd": "get", "run": run_id})["last_turn_error"]["code"] == "model_error"

        await remote.user("user:o1").grant.revoke("grant_removed")
        refused = client.send({"cmd": "get", "run": run_id})
        assert refused["error_code"] == "grant_removed" and refused["error_type"] == "RefusalError"
        assert (await remote.user("user:o1").grant.state)["state"] == "revoked"

        await remote.user("user:o1").grant.restore()
        assert client.send({"cmd": "connect", "connection": await remote.connection("user:o1")}) == {"ok": True}
        assert client.send({"cmd": "get", "run": run_id})["status"] == "idle"
        assert (await run.refresh()).last_turn_error == {"code": "model_error", "message": "the model fell over"}


async def test_control_api_without_the_token_or_with_a_wrong_one_is_a_plain_401(serve, tmp_path: Path) -> None:
    served = serve(tmp_path / "ws")
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as http:
        for headers in ({}, {"Authorization": "Bearer not-the-token"}, {"Authorization": served.info["token"]},
                        {"Authorization": "Basic " + served.info["token"]}):
            for method, path in (("GET", "/_workbench/v1/runs"), ("POST", "/_workbench/v1/reset"),
                                 ("GET", "/_workbench/v1/state"), ("GET", "/_workbench/v1/nothing")):
                answer = await http.request(method, path, headers=headers)
                assert answer.status_code == 401, (method, path, headers)
                assert answer.json() == {"error": {"status": 401, "code": "unauthorized", "origin": "runtime",
                                                   "message": "the control API needs the token in serve.json",
                                                   "retryable": False, "details": None, "param": None}}
        ok = await http.get("/_workbench/v1/runs", headers={"Authorization": f"Bearer {served.info['token']}"})
        assert ok.status_code == 200 and len(ok.json()["runs"]) >= 4  # the sample world's runs
    async with RemoteCloud(served.url, "wrong") as remote:
        try:
            await remote.reset()
        except ControlError as exc:
            assert exc.status == 401
        else:
            raise AssertionError("a wrong token was accepted")
    async with RemoteCloud(served.url, served.info["token"]) as remote:
        assert len(await remote.runs.all) >= 4  # the refused reset changed nothing


def test_non_loopback_host_is_refused_unless_allowed(tmp_path: Path) -> None:
    refused = workbench("serve", "--workspace", str(tmp_path / "ws"), "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode == 2
    assert "not a loopback address" in refused.stderr and "--allow-remote" in refused.stderr
    assert not (tmp_path / "ws" / "serve.json").exists()


def test_allowed_remote_host_says_who_can_reach_it(serve, tmp_path: Path) -> None:
    served = Path(tmp_path / "ws")
    from .conftest import Proc
    import sys

    proc = Proc([sys.executable, "-m", "workbench", "serve", "--workspace", str(served), "--host", "0.0.0.0",
                 "--port", "0", "--allow-remote", "--public-url", "http://workbench.test:8790"])
    try:
        warning = proc.line()
        assert warning.startswith("warning: anyone who can reach this machine on port")
        assert proc.line() == "serving http://workbench.test:8790"
        port = warning.split(" on port ")[1].split(",")[0]  # the bound port, named in the warning
        discovery = httpx.get(f"http://127.0.0.1:{port}/.well-known/openid-configuration", timeout=10).json()
        assert discovery["token_endpoint"] == "http://workbench.test:8790/oauth/token"
    finally:
        proc.stop()
    assert not (served / "serve.json").exists()


def test_a_second_server_on_a_served_workspace_is_refused(serve, tmp_path: Path) -> None:
    served = serve(tmp_path / "ws")
    second = workbench("serve", "--workspace", str(tmp_path / "ws"), "--port", "0")
    assert second.returncode == 2 and f"already served at {served.url}" in second.stderr
    assert json.loads((tmp_path / "ws" / "serve.json").read_text()) == served.info


async def test_sigint_with_streams_open_stops_cleanly_and_removes_serve_json(serve, app, tmp_path: Path) -> None:
    import signal

    served = serve(tmp_path / "ws")
    async with RemoteCloud(served.url, served.info["token"]) as remote:
        connection = await remote.connection("user:o1")
    client = app()
    client.send({"cmd": "connect", "connection": connection})
    run_id = client.send({"cmd": "start"})["run"]
    assert client.send({"cmd": "follow", "run": run_id}) == {"following": run_id}
    async with RemoteCloud(served.url, served.info["token"]) as remote:
        await (await remote.runs.get(run_id)).reply("streaming")
    while client.json().get("type") != "node.turn.completed":
        pass  # the app's stream is open and has read the turn
    served.proc.popen.send_signal(signal.SIGINT)
    assert served.proc.popen.wait(15) == 0  # open streams were ended, not waited for
    assert not (tmp_path / "ws" / "serve.json").exists()


def test_a_port_already_in_use_is_refused_plainly(serve, tmp_path: Path) -> None:
    served = serve(tmp_path / "first")
    refused = workbench("serve", "--workspace", str(tmp_path / "second"), "--port", str(served.port))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"cannot listen on 127.0.0.1 port {served.port}" in refused.stderr
    assert not (tmp_path / "second" / "serve.json").exists()
