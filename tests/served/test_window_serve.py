"""The window open and serving (``workbench --serve``): a real app over HTTP sees the operator's keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.attached.client import RemoteCloud
from services.sdk import CrouterError, MemoryConnectionStore, OAuth2Client
from services.workspace import Settings
from tests.served.test_control import KEY
from tests.toasts import said
from tests.ui.conftest import ready, settle, type_text
from workbench.app import make_app


async def test_an_app_over_http_receives_the_reply_typed_with_r_and_is_refused_after_k(tmp_path: Path) -> None:
    app = make_app(Settings(path=tmp_path / "ws", serve_port=0))
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        info = (tmp_path / "ws" / "serve.json").read_text()
        assert ws.server.url in info
        toasts = said(app)
        assert f"serving {ws.server.url} (control token in serve.json)" in toasts
        async with RemoteCloud(ws.server.url, ws.server.token) as remote:
            store = MemoryConnectionStore()
            await remote.connect(store, "user:app", scopes=["crtr:llm", "crtr:act"])
        async with OAuth2Client(client_id="workbench", issuer=ws.server.url, private_key=KEY, store=store,
                                max_retries=0) as oauth:
            client = await oauth.client("user:app")
            run = await client.runs.start(prompt="what should I do today?")  # over a real socket
            await settle(pilot)

            await pilot.press("3")  # the runs pane
            pane = pilot.app.main.pane("runs")
            pane.select_key(run.id)
            pane.focus_main()
            await settle(pilot)
            assert pane.selected == run.id
            await pilot.press("r")
            await settle(pilot)
            await type_text(pilot, "Write the served-cloud tests")
            await pilot.press("ctrl+s")
            await settle(pilot)

            text = ""
            stream = client.runs.events(run.id, after=0)
            async for event in stream:
                if event.type == "node.output_text.done":
                    text = event.data["text"]
                if event.type == "node.turn.completed":
                    break
            await stream.aclose()
            assert text == "Write the served-cloud tests"

            await pilot.press("4")
            await settle(pilot)
            grants = pilot.app.main.pane("grants")
            grants.select_key("user:app")
            grants.focus_main()
            await settle(pilot)
            await pilot.press("k")
            await settle(pilot)
            await pilot.press("ctrl+s")
            await settle(pilot)
            assert ws.cloud.user("user:app").grant.state["state"] == "revoked"
            with pytest.raises(CrouterError) as refused:
                await client.runs.get(run.id)
            assert refused.value.code == "grant_revoked"
        await pilot.press("q")
    assert not (tmp_path / "ws" / "serve.json").exists()
