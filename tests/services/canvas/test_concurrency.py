"""Two writers on one database lose nothing: two Canvas instances, threads, and a second process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

from sqlalchemy import text

from services.canvas import Canvas, StaleRevisionError
from services.canvas.engine import read_session

from .conftest import PREVIEW


async def test_two_canvases_editing_one_document_from_one_base(canvas_url, clock, engine_name) -> None:
    """8 editors x 10 edits from a shared base: successes + stale refusals = 80; revisions add up."""
    path = canvas_url
    a = await Canvas.open(path, clock=clock)
    b = await Canvas.open(path, clock=clock)
    await a.ensure_owner("user", "o1")
    await a.write("shared", owner="user:o1", preview=PREVIEW, body="base")
    outcomes: list[str] = []

    async def editor(canvas: Canvas, who: int) -> None:
        for i in range(10):
            current = (await canvas.read("o1/shared")).document
            assert current is not None
            try:
                await canvas.edit("o1/shared", base_revision=current.revision, body=f"{who}-{i}")
                outcomes.append("ok")
            except StaleRevisionError as refused:
                assert refused.body == f"{who}-{i}"  # the refused text is handed back
                outcomes.append("stale")

    await asyncio.gather(*(editor(a if n % 2 else b, n) for n in range(8)))
    assert len(outcomes) == 80
    successes = outcomes.count("ok")
    assert successes >= 10
    history = await b.history("o1/shared", limit=1000)
    assert [r.revision for r in history] == list(range(1 + successes, 0, -1))  # no gap, no lost revision
    doc = (await a.read("o1/shared")).document
    assert doc is not None and doc.revision == 1 + successes and doc.body == history[0].body
    await a.close()
    await b.close()


async def test_two_canvases_writing_documents_at_once_lose_nothing(canvas_url, clock, engine_name) -> None:
    path = canvas_url
    a = await Canvas.open(path, clock=clock)
    b = await Canvas.open(path, clock=clock)
    await a.ensure_owner("user", "o1")

    async def writer(canvas: Canvas, prefix: str) -> None:
        for i in range(30):
            await canvas.write(f"{prefix}/{i}", owner="user:o1", preview=PREVIEW, body=f"{prefix} {i}")

    await asyncio.gather(writer(a, "a"), writer(b, "b"), writer(a, "c"), writer(b, "d"))
    assert await a.count_objects(type="document") == 120
    assert len(await b.search("c 29")) >= 1
    await a.close()
    await b.close()


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from services.canvas import Canvas
    async def main():
        canvas = await Canvas.open(sys.argv[1])
        for i in range(40):
            await canvas.write(f"child/{i}", owner="user:o1", preview="When a child writes, read this because.",
                               body=str(i))
            await canvas.message_send(f"child {i}", to="inboxed")
        await canvas.close()
    asyncio.run(main())
    """
)


async def test_a_second_process_writing_at_the_same_time_loses_nothing(canvas_url, clock, engine_name) -> None:
    path = canvas_url
    canvas = await Canvas.open(path, clock=clock)
    await canvas.ensure_owner("user", "o1")
    await canvas.spawn_node(node_id="inboxed", lifecycle="resident")
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", CHILD, str(path),
                                                 stderr=subprocess.PIPE)
    for i in range(40):
        await canvas.write(f"parent/{i}", owner="user:o1", preview=PREVIEW, body=str(i))
        await canvas.message_send(f"parent {i}", to="inboxed")
    _, err = await child.communicate()
    assert child.returncode == 0, err.decode()
    assert await canvas.count_objects(type="document") == 80
    page = await canvas.inbox("inboxed", limit=1000)
    assert page.total == 80 and page.unread == 80
    with read_session(canvas.engine) as session:
        if engine_name == "sqlite":
            assert session.execute(text("PRAGMA integrity_check")).scalar() == "ok"
        revisions = session.execute(text("SELECT count(*) FROM revisions")).scalar()
    assert revisions == 80
    await canvas.close()


async def test_two_canvases_opening_a_new_file_at_once_both_work(canvas_url, clock, engine_name) -> None:
    path = canvas_url if engine_name == "postgresql" else str(Path(canvas_url).parent / "fresh" / "canvas.db")
    a, b = await asyncio.gather(Canvas.open(path, clock=clock), Canvas.open(path, clock=clock))
    await a.write("x", owner="user:o1", preview=PREVIEW, body="from a")
    assert (await b.read("o1/x")).document.body == "from a"  # type: ignore[union-attr]
    await a.close()
    await b.close()
