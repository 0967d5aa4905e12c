"""``workbench serve --export`` / ``--import``: the whole state snapshotted and restored."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from services.attached.client import RemoteCloud

from .conftest import workbench


async def test_export_then_import_into_a_fresh_workspace_gives_the_same_state(serve, app, tmp_path: Path) -> None:
    first = tmp_path / "first"
    served = serve(first)
    async with RemoteCloud(served.url, served.info["token"]) as remote:
        connection = await remote.connection("user:o1", scopes=["crtr:llm", "sms:send"])
        client = app()
        client.send({"cmd": "connect", "connection": connection})
        run_id = client.send({"cmd": "start", "prompt": "export me"})["run"]
        run = await remote.runs.get(run_id)
        await run.reply("kept")
        await run.ask(title="still open?")
        await remote.user("user:o1").memory.put("notes", "first line")
        await remote.user("user:ada").grant.revoke("grant_suspended")
        live = await remote.export_state()
    exported = workbench("serve", "--workspace", str(first), "--export", str(tmp_path / "live.json"))
    assert exported.returncode == 0, exported.stderr  # from the running server, through the control API
    assert json.loads((tmp_path / "live.json").read_text()) == live
    served.proc.stop()

    snapshot = tmp_path / "state.json"
    exported = workbench("serve", "--workspace", str(first), "--export", str(snapshot))
    assert exported.returncode == 0, exported.stderr  # from the stored state, no server
    assert stat.S_IMODE(os.stat(snapshot).st_mode) == 0o600  # it holds the signing key
    doc = json.loads(snapshot.read_text())
    assert doc == live

    second = tmp_path / "second"
    restored = serve(second, "--import", str(snapshot))
    async with RemoteCloud(restored.url, restored.info["token"]) as remote:
        assert await remote.export_state() == doc
        run = await remote.runs.get(run_id)
        assert run.status == "waiting_on_user" and run.params["prompt"] == "export me"
        assert (await remote.user("user:ada").grant.state)["revoked_code"] == "grant_suspended"
    restored.proc.stop()
    again = workbench("serve", "--workspace", str(second), "--export", str(tmp_path / "again.json"))
    assert again.returncode == 0 and json.loads((tmp_path / "again.json").read_text()) == doc


@pytest.mark.long
def test_malformed_import_file_is_refused_and_the_stored_state_is_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    first = workbench("connect", "--workspace", str(folder), "user:o1")
    assert first.returncode == 0, first.stderr
    before = workbench("serve", "--workspace", str(folder), "--export", str(tmp_path / "before.json"))
    assert before.returncode == 0
    bad_files = {
        "not-json.json": "{ nope",
        "other.json": json.dumps({"format": "something-else"}),
        "broken.json": json.dumps({"format": "workbench-cloud-state", "version": 1, "meta": {}}),
        "bad-run.json": json.dumps({**json.loads((tmp_path / "before.json").read_text()),
                                    "runs": [{"id": "run_x", "user_id": "u", "params": {}, "events": ["x"]}]}),
    }
    for name, text in bad_files.items():
        (tmp_path / name).write_text(text)
        refused = workbench("serve", "--workspace", str(folder), "--port", "0", "--import", str(tmp_path / name))
        assert refused.returncode == 2, (name, refused.stdout, refused.stderr)
        assert "workbench serve:" in refused.stderr and "Traceback" not in refused.stderr
        assert not (folder / "serve.json").exists()
        after = workbench("serve", "--workspace", str(folder), "--export", str(tmp_path / "after.json"))
        assert after.returncode == 0
        assert (tmp_path / "after.json").read_text() == (tmp_path / "before.json").read_text()


def test_an_unreadable_cloud_db_is_refused_plainly_and_left_as_it_was(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "cloud.db").write_bytes(b"this is not a database" * 100)
    refused = workbench("serve", "--workspace", str(folder), "--port", "0")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "cannot" in refused.stderr and "cloud.db" in refused.stderr
    assert (folder / "cloud.db").read_bytes() == b"this is not a database" * 100
    assert not (folder / "serve.json").exists()
