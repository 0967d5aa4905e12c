"""A workspace pointed at a canvas URL keeps its canvas there, and says which server when it cannot use it."""

from __future__ import annotations

from services.workspace import Settings, Workspace


async def test_a_workspace_with_a_canvas_url_opens_its_canvas_on_that_server(tmp_path, pg_schema_url) -> None:
    workspace = await Workspace.open(tmp_path / "ws", settings=Settings(path=tmp_path / "ws", canvas_url=pg_schema_url))
    try:
        assert workspace.canvas.engine.dialect.name == "postgresql"
        assert await workspace.canvas.count_objects() > 1  # the sample world went to the server
        assert not (tmp_path / "ws" / "canvas.db").exists()
    finally:
        await workspace.close()
