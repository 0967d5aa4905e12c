"""Crash oracle: a writer killed mid-edit leaves a sound database holding every acknowledged revision."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap

from sqlalchemy import text

from services.canvas import Canvas
from services.canvas.engine import read_session

from .conftest import PREVIEW

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from services.canvas import Canvas
    async def main():
        canvas = await Canvas.open(sys.argv[1])
        while True:
            doc = (await canvas.read("o1/log")).document
            await canvas.edit("o1/log", base_revision=doc.revision, body=doc.body + "x")
            print(doc.revision + 1, flush=True)   # acknowledged: committed
    asyncio.run(main())
    """
)


async def test_sigkill_during_edits_loses_no_acknowledged_revision(canvas_url, clock, engine_name) -> None:
    path = canvas_url
    canvas = await Canvas.open(path, clock=clock)
    await canvas.ensure_owner("user", "o1")
    await canvas.write("log", owner="user:o1", preview=PREVIEW, body="")
    for round_ in range(4):
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(path),
                                                    stdout=asyncio.subprocess.PIPE)
        acknowledged = 0
        assert proc.stdout is not None
        while acknowledged < 5 + round_ * 7:  # a different point in the loop each round
            line = await proc.stdout.readline()
            assert line, "the writer stopped on its own"
            acknowledged = int(line)
        os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()
        rest = await proc.stdout.read()
        for line in rest.split():
            acknowledged = max(acknowledged, int(line))
        with read_session(canvas.engine) as session:
            if engine_name == "sqlite":
                assert session.execute(text("PRAGMA integrity_check")).scalar() == "ok"
        doc = (await canvas.read("o1/log")).document
        assert doc is not None
        assert doc.revision in (acknowledged, acknowledged + 1)  # before or after the one in flight
        assert len(doc.body) == doc.revision - 1                # the body matches its revision whole
        revisions = [r.revision for r in await canvas.history("o1/log", limit=10_000)]
        assert revisions == list(range(doc.revision, 0, -1))    # every acknowledged revision is there
    await canvas.close()
