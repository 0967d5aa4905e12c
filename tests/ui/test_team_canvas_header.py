"""The header names a team's canvas on PostgreSQL: engine, user, host, database and schema, never the password."""

from __future__ import annotations

from sqlalchemy.engine import make_url

from services.clock import FakeClock
from services.workspace import Settings
from workbench.app import make_app

from ..services.canvas.conftest import pg_schema_url  # noqa: F401 - the fixture
from .conftest import ready


async def test_the_header_names_the_canvas_server_and_schema(tmp_path, pg_schema_url) -> None:  # noqa: F811
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock(), canvas_url=pg_schema_url))
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        header = str(app.query_one("#badges").render())
        url = make_url(pg_schema_url)
        schema = pg_schema_url.rsplit("%3D", 1)[1]
        assert f"canvas → PostgreSQL {url.username}@{url.host}:{url.port}/{url.database} (schema {schema})" in header


async def test_a_canvas_in_the_workspace_adds_nothing_to_the_header(app) -> None:
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        assert "canvas →" not in str(app.query_one("#badges").render())
