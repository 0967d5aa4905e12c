"""Recording beside a served workspace: a window attached to ``workbench serve`` records as an embedded
one does, and a failure scripted from another process (``RemoteCloud.fail_next``, raw
``POST /_workbench/v1/fail_next``) is recorded where the cloud arms it, so the file replays as it happened."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from services.attached.client import RemoteCloud
from services.clock import FakeClock
from services.desk import OperatorError
from services.record import app_client, load_recording, replay, start_recording
from services.sdk import CrouterError
from services.workspace import Settings, Workspace
from tests.served.conftest import Proc, Served
from workbench.app import make_app
from workbench.cli import main

from ..ui.conftest import ready, settle


@pytest.fixture
def serve() -> Any:
    """``serve(folder)`` starts ``workbench serve`` on a free loopback port; stopped when the test ends."""
    started: list[Proc] = []

    def start(folder: Path) -> Served:
        served = Served(folder)
        started.append(served.proc)
        return served

    yield start
    for proc in started:
        proc.stop()


def _kinds(path: Path) -> list[tuple[str, str]]:
    return [(str(s["kind"]), str(s.get("path") or s.get("op") or s.get("action"))) for s in load_recording(path).steps]


async def test_an_attached_window_records_and_the_file_replays(serve: Any, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "ws"
    await (await Workspace.open(settings=Settings(path=folder))).close()  # the sample world, on disk
    served = serve(folder)
    path = tmp_path / "attached.jsonl"
    app = make_app(Settings(path=folder, clock=FakeClock()), record=path)
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        for _ in range(250):
            if app.recorder is not None or app.errors:
                break
            await pilot.pause(0.02)
        assert app.recorder is not None, app.errors
        assert ws.cloud is None and ws.attached is not None and ws.attached.url == served.url
        desk = ws.desk
        run_id = await desk.start_run("user:ada", "attached and recorded")
        await desk.reply(run_id, "first answer", chunks=2)
        await desk.control.call("POST", "/fail_next", {"op": "run.message", "answer": 409, "user": "user:ada",
                                                       "times": 1})
        with pytest.raises(OperatorError):
            await desk.send_message(run_id, "refused by the scripted failure")
        await desk.send_message(run_id, "answered")
        await desk.fail_turn(run_id, "model_error", "the model timed out")
        await desk.revoke("user:grace", "grant_removed")
        await desk.restore("user:grace")
        await desk.settle(run_id, "result", "done")
        await settle(pilot)
        steps = app.recorder.steps
    recording = load_recording(path)
    assert recording.ended and recording.header["source"] == "attached"
    assert len(recording.steps) == steps >= 9
    kinds = _kinds(path)
    assert kinds.count(("failure", "/fail_next")) == 1  # armed once, recorded once
    assert kinds.index(("failure", "/fail_next")) < kinds.index(("operator", f"/runs/{run_id}/message"))
    last = recording.steps[-1]["observed"]
    assert last is not None
    ours = next(r for r in last["runs"] if r["id"] == run_id)
    assert ours["status"] == "settled" and "node.settled" in ours["events"]
    assert last["grants"]["user:grace"] == "active"
    assert await asyncio.to_thread(main, ["replay", str(path)]) == 0  # the command, as an operator runs it
    assert f"all {len(recording.steps)} steps matched the recording" in capsys.readouterr().out


_RAW_FAIL_NEXT = """
import json, sys, urllib.request
url, token, body = sys.argv[1], sys.argv[2], sys.argv[3]
request = urllib.request.Request(url + "/_workbench/v1/fail_next", data=body.encode(), method="POST",
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
print(urllib.request.urlopen(request, timeout=20).read().decode())
"""


async def test_failures_scripted_from_outside_the_window_are_recorded_and_replayed(tmp_path: Path) -> None:
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    path = tmp_path / "outside.jsonl"
    oauth = app_client(workspace, over_http=True)
    assert workspace.server is not None
    remote = RemoteCloud(workspace.server.url, workspace.server.token)
    seen: list[int] = []
    try:
        recorder = await start_recording(path, workspace)
        ada = await oauth.client("user:ada")
        run = await ada.runs.start(prompt="scripted from outside")
        # RemoteCloud in this process, over HTTP
        await remote.fail_next("run.message", 422, user="user:ada", times=1)
        with pytest.raises(CrouterError) as first:
            await ada.runs.message(run.id, "refused once", max_retries=0)
        seen.append(first.value.status)
        # another process, raw HTTP
        body = json.dumps({"op": "run.get", "answer": {"status": 409, "code": "busy", "message": "slow"},
                           "user": "user:ada", "times": 1})
        child = await asyncio.create_subprocess_exec(sys.executable, "-c", _RAW_FAIL_NEXT, workspace.server.url,
                                                     workspace.server.token, body,
                                                     stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(child.communicate(), 60)
        assert child.returncode == 0, err.decode()
        assert json.loads(out)["id"]
        with pytest.raises(CrouterError) as second:
            await ada.runs.get(run.id, max_retries=0)
        seen.append(second.value.status)
        # in this process, on the cloud itself
        assert workspace.cloud is not None
        workspace.cloud.fail_next("run.get", 403, user="user:ada", times=1)
        with pytest.raises(CrouterError):
            await ada.runs.get(run.id, max_retries=0)
        await ada.runs.message(run.id, "answered")
        await recorder.stop()
    finally:
        await remote.aclose()
        await oauth.aclose()
        await workspace.close()
    assert seen == [422, 409]
    recording = load_recording(path)
    failures = [s for s in recording.steps if s["kind"] == "failure"]
    assert [(f["body"] or {}).get("op") for f in failures] == ["run.message", "run.get", "run.get"]
    assert (failures[1]["body"] or {})["answer"] == {"status": 409, "code": "busy", "message": "slow",
                                                    "origin": "runtime", "retryable": False, "details": None,
                                                    "param": None, "retry_after_s": None}
    order = [s["kind"] if s["kind"] == "failure" else f"{s['kind']}:{s.get('op')}:{s.get('status')}"
             for s in recording.steps]
    assert order == ["app:run.start:201", "failure", "app:run.message:422", "failure", "app:run.get:409",
                     "failure", "app:run.get:403", "app:run.message:201"], order
    for served in (False, True):
        report = await replay(recording, tmp_path / f"replay-{served}", served=served)
        assert report.matched, report.divergence
        assert len(report.played) == len(recording.steps)
