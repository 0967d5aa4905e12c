"""Faults answer in words: a full disk answers 507 in the wire's envelope while reads keep working;
``--import`` checks the whole file before it replaces anything and names the first bad field; a
workspace that cannot be used is one line and exit 2; what the server writes is private."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
from pathlib import Path

import httpx

from services.control_wire import CONTROL_PREFIX

from .served_http import app_token, bearer

UNLIMITED = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)


async def test_a_full_disk_answers_507_and_reads_keep_working(serve, tmp_path: Path) -> None:
    """The kernel refuses every write past 4 KiB (RLIMIT_FSIZE on the server process: what a full disk
    does to SQLite's writes, through the real store code)."""
    served = serve(tmp_path / "ws")
    pid = served.proc.popen.pid
    token = await app_token(served.url, served.info["token"], "user:d")
    app, operator = bearer(token), bearer(served.info["token"])
    with httpx.Client(base_url=served.url, timeout=30) as http:
        kept = http.post("/v1/runs", headers=app, json={"prompt": "before"}).json()["id"]
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))  # the soft limit
        try:
            for attempt in range(2):
                refused = http.post("/v1/runs", headers=app, json={"prompt": f"on a full disk {attempt}"})
                assert refused.status_code == 507, refused.text + "".join(served.proc.errors)[-3000:]
                error = refused.json()["error"]
                assert error["code"] == "insufficient_storage" and error["retryable"] is True
                scripted = http.post(f"{CONTROL_PREFIX}/runs/{kept}/reply", headers=operator, json={"text": "x"})
                assert scripted.status_code == 507, scripted.text
                assert http.get(f"/v1/runs/{kept}", headers=app).status_code == 200
                assert http.get("/v1/runs", headers=app).status_code == 200
                assert http.get(f"{CONTROL_PREFIX}/state", headers=operator).status_code == 200
        finally:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, UNLIMITED)
        stored = http.post("/v1/runs", headers=app, json={"prompt": "space again"})
        assert stored.status_code == 201, stored.text
    assert served.proc.popen.poll() is None  # alive: SIGXFSZ did not kill it


def _serve_import(tmp_path: Path, doc: object) -> subprocess.CompletedProcess[str]:
    from tests.served.conftest import workbench

    path = tmp_path / "state.json"
    path.write_text(json.dumps(doc))
    return workbench("serve", "--workspace", str(tmp_path / "ws"), "--port", "0", "--import", str(path))


def test_import_names_the_first_bad_field_and_replaces_nothing(serve, tmp_path: Path) -> None:
    served = serve(tmp_path / "ws")
    doc = httpx.get(served.url + CONTROL_PREFIX + "/state", headers=bearer(served.info["token"])).json()
    served.proc.stop()
    before = (tmp_path / "ws" / "cloud.db").read_bytes()
    broken_seq = json.loads(json.dumps(doc))
    broken_seq["runs"][0]["seq"] = "7"
    broken_rev = json.loads(json.dumps(doc))
    del broken_rev["users"][0]["grant"]["rev"]
    broken_key = json.loads(json.dumps(doc))
    broken_key["meta"]["signing_key"] = {"pem": 5, "kid": "k"}
    for broken, field in ((broken_seq, "runs[0].seq must be an integer"), (broken_rev, "users[0].grant.rev is missing"),
                          (broken_key, "meta.signing_key.pem must be a string")):
        done = _serve_import(tmp_path, broken)
        assert done.returncode == 2, done.stderr
        assert field in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert (tmp_path / "ws" / "cloud.db").read_bytes() == before


def test_a_workspace_that_cannot_be_used_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from tests.served.conftest import workbench

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for folder in (blocker / "ws", blocker):
        done = workbench("serve", "--workspace", str(folder), "--port", "0")
        assert done.returncode == 2, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("workbench serve: "), done.stderr


def test_every_file_the_server_writes_is_0600_and_every_folder_0700(serve, tmp_path: Path) -> None:
    old = os.umask(0o022)  # a permissive umask, inherited by the server process
    try:
        served = serve(tmp_path / "ws")
    finally:
        os.umask(old)
    operator = bearer(served.info["token"])
    honcho = httpx.post(served.url + "/honcho/v3/workspaces", json={"id": "w"}, headers=operator)
    assert honcho.status_code < 500
    httpx.post(served.url + CONTROL_PREFIX + "/reset", headers=operator)
    served.proc.stop()
    root = tmp_path / "ws"
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        wanted = 0o700 if path.is_dir() else 0o600
        assert mode == wanted, f"{path.relative_to(tmp_path)} is {oct(mode)}"
