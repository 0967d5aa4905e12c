"""Many workspaces, one team canvas: fresh workspaces in their own processes open one PostgreSQL canvas
at once; the sample world is in it once, and each sees the others' changes live."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from services.canvas import Canvas
from services.canvas.engine import canvas_label
from services.workspace import Settings, Workspace

ROOT = Path(__file__).resolve().parents[3]
WORLD = json.loads((ROOT / "assets" / "sample" / "world.json").read_text(encoding="utf-8"))

CHILD = r"""
import asyncio, json, sys
from services.workspace import Settings, Workspace

async def main(path, url, me, others):
    workspace = await Workspace.open(settings=Settings(path=path, canvas_url=url))
    heard = asyncio.Queue()
    loop = asyncio.get_running_loop()
    workspace.feed.subscribe(lambda change: loop.call_soon_threadsafe(heard.put_nowait, change))  # nothing is missed
    print(json.dumps({"opened": me}), flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # every workspace is open and listening
    await workspace.canvas.write(f"notes/from-{me}", preview="When reading the team canvas, read this because it says hi.",
                                 owner="user:ada")
    waiting = {f"notes/from-{other}" for other in others}
    async with asyncio.timeout(60):
        while waiting:
            change = await heard.get()
            if change.kind == "object.created" and change.data.get("remote"):
                waiting.discard(change.data.get("name"))
    print(json.dumps({"saw": sorted(others)}), flush=True)
    await workspace.close()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
"""


async def test_three_fresh_workspaces_open_one_canvas_at_once_and_see_each_other(tmp_path, pg_schema_url) -> None:
    names = ["a", "b", "c"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / name), pg_schema_url, name,
                          *[n for n in names if n != name]],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for name in names
    ]
    try:
        for child in children:  # all three opened (concurrently), none failed
            line = child.stdout.readline()  # type: ignore[union-attr]
            assert line, child.stderr.read()  # type: ignore[union-attr]
            assert json.loads(line)["opened"]
        for child in children:
            child.stdin.write("go\n")  # type: ignore[union-attr]
            child.stdin.flush()  # type: ignore[union-attr]
        for child, name in zip(children, names):
            line = child.stdout.readline()  # type: ignore[union-attr]
            assert line, child.stderr.read()  # type: ignore[union-attr]
            assert json.loads(line)["saw"] == sorted(n for n in names if n != name)
            assert child.wait(timeout=60) == 0
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait()
    canvas = await Canvas.open(pg_schema_url, listen=False)
    try:  # the world is there once: one of each document, the node's two messages once
        documents = (await canvas.list_objects(type="document", limit=200)).items
        named = sorted(d.name for d in documents)
        assert named == sorted(set(named))
        assert "preferences/replies" in named and "insights/writing" in named
        assert {"notes/from-a", "notes/from-b", "notes/from-c"} <= set(named)
        inbox = await canvas.inbox("run_sample_review", limit=200)
        messages = [entry.body for entry in inbox.items if entry.kind == "message"]
        assert sorted(messages) == sorted(message["body"] for message in WORLD["canvas"]["messages"])
    finally:
        await canvas.close()


async def test_a_workspace_reopened_after_a_failed_first_open_binds_nothing_twice(tmp_path, pg_schema_url) -> None:
    first = await Workspace.open(settings=Settings(path=tmp_path / "first", canvas_url=pg_schema_url))
    await first.close()
    # a second fresh workspace on the same canvas, whose first open stops after binding its base
    (tmp_path / "second").mkdir()
    second = await Workspace.open(settings=Settings(path=tmp_path / "second", canvas_url=pg_schema_url))
    await second.close()
    (tmp_path / "second" / "workspace.json").unlink()  # as if that open had failed before finishing
    again = await Workspace.open(settings=Settings(path=tmp_path / "second", canvas_url=pg_schema_url))
    try:
        assert [s.agent for s in await again.okf.sources()] == ["gardener"]
        assert list(again.okf.bindings.bases) == ["team", "project"]  # the world's directory and Git bases, once each
    finally:
        await again.close()


def test_the_header_names_a_postgresql_canvas_without_its_password() -> None:
    url = "postgresql+psycopg://ada:s3cret@db.team.internal:5432/canvas?options=-csearch_path%3Dteam_a"
    label = canvas_label(url)
    assert label == "canvas → PostgreSQL ada@db.team.internal:5432/canvas (schema team_a)"
    assert "s3cret" not in label
    assert canvas_label("postgresql+psycopg://db.team.internal/canvas") == \
        "canvas → PostgreSQL db.team.internal/canvas (schema public)"
    assert canvas_label(None) == ""  # canvas.db in the workspace: nothing to say
