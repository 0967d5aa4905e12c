"""Every grants key through the real App, asserting on the real grants afterwards."""

from __future__ import annotations

from typing import Any, get_args

from textual.widgets import Select

from services.wire import RefusalCode
from tests.ui.conftest import ready, settle, type_text


async def pick(pilot: Any, user: str) -> Any:
    await pilot.press("4")
    await settle(pilot)
    pane = pilot.app.main.pane("grants")
    pane.select_key(user)
    pane.focus_main()
    await settle(pilot)
    assert pane.selected == user
    return pane


async def test_k_revokes_with_a_code_and_u_restores(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pick(pilot, "user:grace")
        rev = ws.cloud.user("user:grace").grant.state["rev"]
        await pilot.press("k")
        await settle(pilot)
        codes = app.screen.query_one("#field-code", Select)
        assert [value for _, value in codes._options] == list(get_args(RefusalCode))  # the wire's codes, no others
        assert codes.value == "grant_revoked"
        codes.value = "grant_removed"
        await pilot.press("ctrl+s")
        await settle(pilot)
        state = ws.cloud.user("user:grace").grant.state
        assert state["state"] == "revoked" and state["revoked_code"] == "grant_removed" and state["rev"] > rev
        detail = str(app.main.query_one("#grant-detail").render())
        assert "revoked" in detail and "grant_removed" in detail
        await pilot.press("u")
        await settle(pilot)
        assert ws.cloud.user("user:grace").grant.state["state"] == "revoked"  # it asks first
        await pilot.press("y")
        await settle(pilot)
        assert ws.cloud.user("user:grace").grant.state["state"] == "active"
        run_id = await ws.desk.start_run("user:grace", "works again")
        assert ws.cloud.runs.get(run_id).user_id == "user:grace"


async def test_f_refuses_t_expires_tokens_e_edits_scopes_and_bad_scopes_are_refused(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pick(pilot, "user:linus")
        await pilot.press("f")
        await settle(pilot)
        await pilot.press("ctrl+s")  # the first refusal code: grant_removed
        await settle(pilot)
        assert ws.cloud.user("user:linus").refusal == "grant_removed"
        serial = ws.cloud.user("user:linus").tokens_valid_from
        await pilot.press("t")
        await settle(pilot)
        assert ws.cloud.user("user:linus").tokens_valid_from >= serial
        linus_run = next(r.id for r in ws.desk.runs() if r.user_id == "user:linus")
        assert [a.action for a in ws.desk.log(linus_run)][-2:] == ["grant refuse", "grant expire tokens"]
        await pilot.press("e")
        await settle(pilot)
        await type_text(pilot, "crtr:llm sms:send")
        await pilot.press("enter")
        await settle(pilot)
        assert ws.cloud.user("user:linus").grant.state["resolved_scopes"] == ["crtr:llm", "sms:send"]
        assert "crtr:llm sms:send" in str(app.main.query_one("#grant-detail").render())
        await bad_scopes_case(pilot, app, ws)


async def bad_scopes_case(pilot: Any, app: Any, ws: Any) -> None:
    await pick(pilot, "user:ada")
    before = list(ws.cloud.user("user:ada").grant.state["resolved_scopes"])
    await pilot.press("e")
    await settle(pilot)
    await type_text(pilot, "notascope")
    await pilot.press("enter")
    await settle(pilot)
    assert any("notascope" in e for e in app.errors)
    assert ws.cloud.user("user:ada").grant.state["resolved_scopes"] == before
    assert app.is_running
