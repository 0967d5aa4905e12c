"""A workspace whose canvas is on SQLite never loads the PostgreSQL dialect (a window's start-up imports the canvas on
its way to the live panes), and a canvas on PostgreSQL still gets the partial unique indexes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest

from services.canvas import Canvas
from services.changes import ChangeFeed
from services.clock import FakeClock

from .conftest import plain

ROOT = Path(__file__).resolve().parents[3]

ON_SQLITE = textwrap.dedent(
    """
    import asyncio, sys
    from services.workspace import Workspace

    async def main():
        for _ in range(2):  # a new workspace (the sample world written into its canvas), then a reopen
            workspace = await Workspace.open(sys.argv[1])
            await workspace.close()

    asyncio.run(main())
    print("loaded:" + ",".join(sorted(m for m in sys.modules if m.startswith("sqlalchemy.dialects.postgresql"))))
    """
)


@pytest.mark.slow
def test_a_workspace_on_sqlite_never_imports_the_postgresql_dialect(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", ON_SQLITE, str(tmp_path / "ws")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    lines = [line for line in out.stdout.splitlines() if line.startswith("loaded:")]
    assert lines, out.stdout + out.stderr
    assert lines[0] == "loaded:"


async def test_a_canvas_on_postgresql_has_the_partial_unique_indexes(pg_schema_url: str, feed: ChangeFeed,
                                                                      clock: FakeClock) -> None:
    canvas = await Canvas.open(pg_schema_url, changes=feed, clock=clock)
    await canvas.close()
    with psycopg.connect(plain(pg_schema_url)) as conn:
        rows = dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                                 "AND indexname LIKE 'ux_objects_%'").fetchall())
    assert rows["ux_objects_owner_doc_name"].endswith("WHERE ((type)::text = 'document'::text)")
    assert rows["ux_objects_handle"].endswith("WHERE (handle IS NOT NULL)")
