"""Fixtures: a real canvas on each engine (a file in tmp_path, a schema on a real PostgreSQL server),
a fake clock and the change feed it publishes on.

Every test that takes ``canvas`` or ``canvas_url`` runs once per engine (``engine_name``). The
PostgreSQL server is ``WORKBENCH_TEST_PG_URL`` or one started for the session (``pgserver``); each
test gets its own schema (``search_path``), dropped afterwards. Without a server, the PostgreSQL
runs skip locally and FAIL when ``CI`` is set.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest

from services.canvas import Canvas
from services.changes import ChangeFeed
from services.clock import FakeClock

from .pgserver import server_url

ENGINES = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine_name" in metafunc.fixturenames:
        metafunc.parametrize("engine_name", ENGINES)


def pg_server() -> str:
    """The test server's URL; skips (fails under ``CI``) when there is none."""
    url = server_url()
    if url is None:
        message = "no PostgreSQL server: set WORKBENCH_TEST_PG_URL or install the postgresql package"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return url


def plain(url: str) -> str:
    """A SQLAlchemy ``postgresql+psycopg://`` URL as a libpq one."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def with_schema(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    """A URL whose connections work in a fresh schema of the test server."""
    url = pg_server()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield with_schema(url, schema)
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def canvas_url(engine_name: str, tmp_path, request: pytest.FixtureRequest) -> str:
    """Where the canvas lives: a file path for SQLite, a URL for PostgreSQL."""
    if engine_name == "sqlite":
        return str(tmp_path / "canvas.db")
    return request.getfixturevalue("pg_schema_url")


@pytest.fixture
async def canvas(canvas_url: str, feed: ChangeFeed, clock: FakeClock) -> AsyncIterator[Canvas]:
    opened = await Canvas.open(canvas_url, changes=feed, clock=clock)
    yield opened
    await opened.close()


@pytest.fixture
async def sqlite_canvas(tmp_path, feed: ChangeFeed, clock: FakeClock) -> AsyncIterator[Canvas]:
    """A canvas on SQLite only, for tests of SQLite's own machinery (pragmas, query plans)."""
    opened = await Canvas.open(tmp_path / "canvas.db", changes=feed, clock=clock)
    yield opened
    await opened.close()


PREVIEW = "When testing the canvas, read this because it shows the shape."
