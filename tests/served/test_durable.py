"""A served cloud kept on disk: kill -9 mid-stream, restart, nothing acknowledged lost."""

from __future__ import annotations

import json
from pathlib import Path

from services.attached.client import RemoteCloud

from .conftest import Proc


def _events_until(client: Proc, last: int) -> list[int]:
    """The seqs the app prints until it has printed ``last``."""
    seqs: list[int] = []
    while not seqs or seqs[-1] != last:
        line = client.json()
        assert "event" in line, line
        seqs.append(line["event"])
    return seqs


async def test_server_killed_mid_stream_resumes_every_event_exactly_once_and_old_tokens_verify(
    serve, app, tmp_path: Path
) -> None:
    folder = tmp_path / "ws"
    served = serve(folder)
    async with RemoteCloud(served.url, served.info["token"]) as remote:
        connection = await remote.connection("user:o1", scopes=["crtr:llm"])
    client = app()
    client.send({"cmd": "connect", "connection": connection})
    run_id = client.send({"cmd": "start", "prompt": "count"})["run"]
    assert client.send({"cmd": "follow", "run": run_id}) == {"following": run_id}

    async with RemoteCloud(served.url, served.info["token"]) as remote:
        run = await remote.runs.get(run_id)
        first = await run.emit_many([{"type": "node.activity", "fields": {"activity": f"a{i}"}} for i in range(300)])
        seen = _events_until(client, first[-1])
        acknowledged = list(first)
        # more events go out while the stream is busy; the server dies with some of them unsent
        for _ in range(5):
            acknowledged += await run.emit_many([{"type": "node.activity", "fields": {"activity": "b"}}] * 200)
    served.proc.kill()  # SIGKILL: no flush, no clean-up
    assert served.proc.popen.returncode == -9
    assert (folder / "serve.json").exists()  # left behind by the killed process: stale now

    again = serve(folder, port=served.port)  # the same origin: the issuer the tokens name
    assert again.url == served.url and again.info["token"] != served.info["token"]
    async with RemoteCloud(again.url, again.info["token"]) as remote:
        run = await remote.runs.get(run_id)
        head = run.seq
        assert head >= acknowledged[-1]  # everything acknowledged before the kill is there
        later = await run.emit_many([{"type": "node.activity", "fields": {"activity": "after"}}] * 50)
        assert later[0] == head + 1
        seen += _events_until(client, later[-1])
    assert seen == list(range(1, later[-1] + 1))  # no gap, no duplicate
    status = client.send({"cmd": "get", "run": run_id})
    assert status["status"] == "running"
    assert client.send({"cmd": "stats"}) == {"refreshes": 1}  # the token from before the kill still verified


async def test_restart_keeps_people_grants_refusals_runs_questions_and_keys(serve, app, tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    served = serve(folder)
    async with RemoteCloud(served.url, served.info["token"]) as remote:
        connection = await remote.connection("user:o1")
        client = app()
        client.send({"cmd": "connect", "connection": connection})
        run_id = client.send({"cmd": "start"})["run"]
        run = await remote.runs.get(run_id)
        question = await run.ask(title="which day?")
        await remote.connection("user:o2")
        await remote.user("user:o2").refuse("grant_suspended")
        await remote.user("user:o1").memory.put("plan", "monday first")
        before = await remote.export_state()
    served.proc.kill()
    again = serve(folder, port=served.port)
    async with RemoteCloud(again.url, again.info["token"]) as remote:
        after = await remote.export_state()
        assert after == before
        run = await remote.runs.get(run_id)
        assert run.status == "waiting_on_user" and run.question["id"] == question
        assert (await remote.user("user:o2").state())["refusal"] == "grant_suspended"
    assert client.send({"cmd": "get", "run": run_id})["status"] == "waiting_on_user"
    assert json.loads((folder / "serve.json").read_text())["pid"] == again.proc.popen.pid
