"""A workspace pointed at a canvas URL keeps its canvas there, and says which server when it cannot use it."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from services.canvas import Canvas
from services.canvas.schema import SCHEMA_VERSION
from services.workspace import Settings, Workspace, WorkspaceOpenError


async def test_a_workspace_with_a_canvas_url_opens_its_canvas_on_that_server(tmp_path, pg_schema_url) -> None:
    workspace = await Workspace.open(tmp_path / "ws", settings=Settings(path=tmp_path / "ws", canvas_url=pg_schema_url))
    try:
        assert workspace.canvas.engine.dialect.name == "postgresql"
        assert await workspace.canvas.count_objects() > 1  # the sample world went to the server
        assert not (tmp_path / "ws" / "canvas.db").exists()
    finally:
        await workspace.close()


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:  # bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _refused(tmp_path, canvas_url: str) -> WorkspaceOpenError:
    with pytest.raises(WorkspaceOpenError) as refused:
        await Workspace.open(tmp_path / "ws", settings=Settings(path=tmp_path / "ws", canvas_url=canvas_url))
    error = refused.value
    assert "s3cret" not in str(error) and "s3cret" not in str(error.path)
    assert not (tmp_path / "ws" / "canvas.db").exists()  # nothing was put in canvas.db instead
    return error


async def test_an_unreachable_canvas_server_is_named_by_its_masked_url_with_what_to_do(tmp_path) -> None:
    port = _closed_port()
    error = await _refused(tmp_path, f"postgresql+psycopg://ada:s3cret@127.0.0.1:{port}/canvas")
    assert error.path == f"postgresql+psycopg://ada:***@127.0.0.1:{port}/canvas"
    assert "cannot be reached" in error.cause and "canvas.db" not in error.cause
    assert "Start the PostgreSQL server" in error.remedy and "--canvas-url" in error.remedy


async def test_a_refused_login_or_a_missing_database_says_so_and_names_the_server(tmp_path, pg_schema_url) -> None:
    server = make_url(pg_schema_url)
    nobody = server.set(username="nobody_here", password="s3cret").render_as_string(hide_password=False)
    error = await _refused(tmp_path, nobody)
    assert error.path == make_url(nobody).render_as_string(hide_password=True)
    assert "refused the login" in error.cause and "PGPASSWORD" in error.remedy
    missing = server.set(database="no_such_canvas", password="s3cret").render_as_string(hide_password=False)
    error = await _refused(tmp_path / "again", missing)
    assert "does not exist" in error.cause and "createdb" in error.remedy


async def test_a_canvas_server_with_a_newer_schema_is_refused_with_what_to_do(tmp_path, pg_schema_url) -> None:
    canvas = await Canvas.open(pg_schema_url, listen=False)
    with canvas.engine.begin() as conn:
        conn.execute(text("UPDATE canvas_meta SET value = :v WHERE key = 'schema_version'"), {"v": str(SCHEMA_VERSION + 1)})
    await canvas.close()
    error = await _refused(tmp_path, pg_schema_url)
    assert f"schema version {SCHEMA_VERSION + 1}, newer" in error.cause and "Upgrade the workbench" in error.remedy
    assert error.path == make_url(pg_schema_url).render_as_string(hide_password=True)
