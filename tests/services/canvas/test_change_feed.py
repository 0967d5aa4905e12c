"""The change feed across processes on PostgreSQL (LISTEN/NOTIFY), and a lost listening connection."""

from __future__ import annotations

import asyncio
import uuid
import subprocess
import sys
import textwrap

import psycopg
import pytest

from services.canvas import Canvas, CanvasUnavailableError
from services.changes import Change, ChangeFeed

from .conftest import PREVIEW, plain

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from services.canvas import Canvas
    async def main():
        canvas = await Canvas.open(sys.argv[1], listen=False)
        for line in sys.stdin:
            name = line.strip()
            if not name:
                break
            await canvas.write(name, owner="user:o1", preview="When told, read this because it is a test.", body=name)
            print("written", name, flush=True)
        await canvas.close()
    asyncio.run(main())
    """
)


class Heard:
    """Every change published on ``feed`` from now on (from any thread), awaited in order."""

    def __init__(self, feed: ChangeFeed) -> None:
        loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[Change] = asyncio.Queue()
        self.aclose_ = feed.subscribe(lambda c: loop.call_soon_threadsafe(self.queue.put_nowait, c))

    async def aclose(self) -> None:
        self.aclose_()


async def _next(changes: Heard, predicate, timeout: float = 60.0) -> Change:
    """The next change matching ``predicate``; a generous timeout, only so a failure cannot hang."""
    async def find() -> Change:
        while True:
            change = await changes.queue.get()
            if predicate(change):
                return change
    return await asyncio.wait_for(find(), timeout)


async def test_a_change_in_another_process_reaches_this_change_feed(pg_schema_url, clock) -> None:
    feed = ChangeFeed()
    canvas = await Canvas.open(pg_schema_url, changes=feed, clock=clock)
    await canvas.ensure_owner("user", "o1")
    changes = Heard(feed)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, pg_schema_url, stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    for name in ("first", "second"):
        proc.stdin.write(f"{name}\n".encode())
        await proc.stdin.drain()
        heard = await _next(changes, lambda c, n=name: c.kind == "document.written" and c.data.get("name") == f"o1/{n}")
        assert heard.source == "canvas" and heard.data["remote"] is True and heard.data["revision"] == 1
        assert (await canvas.read(heard.id)).document.body == name  # type: ignore[union-attr]
    proc.stdin.write(b"\n")
    await proc.stdin.drain()
    _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    await changes.aclose()
    await canvas.close()


async def test_own_changes_are_published_once_and_only_after_commit(pg_schema_url, clock) -> None:
    seen: list[Change] = []
    feed = ChangeFeed()
    feed.subscribe(seen.append)
    a = await Canvas.open(pg_schema_url, changes=feed, clock=clock)
    other_feed = ChangeFeed()
    b = await Canvas.open(pg_schema_url, changes=other_feed, clock=clock)
    heard = Heard(other_feed)
    doc = await a.write("once", owner="user:o1", preview=PREVIEW, body="x")
    remote = await _next(heard, lambda c: c.kind == "document.written")
    assert remote.id == doc.object.id
    await b.write("back", owner="user:o1", preview=PREVIEW, body="y")
    for _ in range(50):  # wait for b's change to reach a, then check a's own change was not echoed
        if any(c.kind == "document.written" and c.data.get("remote") for c in seen):
            break
        await asyncio.sleep(0.05)
    written = [c for c in seen if c.kind == "document.written"]
    assert [(c.data["name"], bool(c.data.get("remote"))) for c in written] == [("o1/once", False), ("o1/back", True)]
    await heard.aclose()
    await a.close()
    await b.close()


def _tagged(url: str) -> tuple[str, str]:
    """``url`` with an application name of its own, so a test kills only its own connections (the
    server is shared with the tests running beside it)."""
    tag = f"wb_{uuid.uuid4().hex[:12]}"
    return f"{url}{'&' if '?' in url else '?'}application_name={tag}", tag


async def test_a_lost_listening_connection_is_announced_and_reconnects(pg_schema_url, clock) -> None:
    pg_schema_url, tag = _tagged(pg_schema_url)
    feed = ChangeFeed()
    canvas = await Canvas.open(pg_schema_url, changes=feed, clock=clock)
    other = await Canvas.open(pg_schema_url, clock=clock, listen=False)
    changes = Heard(feed)
    assert canvas.listener is not None
    with psycopg.connect(plain(pg_schema_url.split("?")[0]), autocommit=True) as admin:
        killed = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE query LIKE 'LISTEN %%' AND application_name = %s AND pid <> pg_backend_pid()",
                               (tag,)).fetchall()
    assert killed
    lost = await _next(changes, lambda c: c.kind == "canvas.connection.lost")
    assert lost.source == "canvas" and lost.data["error"]
    restored = await _next(changes, lambda c: c.kind == "canvas.connection.restored")
    assert restored.data == {"reload": True}
    await other.write("after", owner="user:o1", preview=PREVIEW, body="z")
    heard = await _next(changes, lambda c: c.kind == "document.written")
    assert heard.data["name"] == "o1/after"  # heard again after the reconnection
    assert (await canvas.read("o1/after")).document is not None  # the pool reconnects too
    await changes.aclose()
    await other.close()
    await canvas.close()


async def test_dropped_pool_connections_reconnect_on_the_next_unit_of_work(pg_schema_url, clock) -> None:
    pg_schema_url, tag = _tagged(pg_schema_url)
    canvas = await Canvas.open(pg_schema_url, clock=clock, listen=False)
    await canvas.write("before", owner="user:o1", preview=PREVIEW, body="a")
    with psycopg.connect(plain(pg_schema_url.split("?")[0]), autocommit=True) as admin:
        killed = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE application_name = %s AND pid <> pg_backend_pid()", (tag,)).fetchall()
    assert killed
    await canvas.write("after", owner="user:o1", preview=PREVIEW, body="b")  # the pool pings and reconnects
    assert await canvas.count_objects(type="document") == 2
    await canvas.close()


async def test_an_unreachable_server_is_a_clear_canvas_error_without_the_password(clock) -> None:
    with pytest.raises(CanvasUnavailableError, match="could not be reached") as refused:
        await Canvas.open("postgresql+psycopg://ada:s3cret@127.0.0.1:1/canvas?connect_timeout=2", clock=clock)
    assert "s3cret" not in str(refused.value)
