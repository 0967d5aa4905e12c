"""Lists the wire defines reach the panes from ``services.wire``, never as copies.

The grants pane once offered ``invalid_grant`` and ``consent_required``, codes the SDK does not
record as refusals, so refusing with them showed no badge.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest
from textual.widgets import Select

from screens.grants import REFUSAL_CODES
from screens.run_lines import STATUS_GLYPHS
from screens.runs import SETTLE_KINDS, TURN_CODES
from services import wire
from services.desk import SETTLE_CHOICES
from tests.ui.conftest import ready, settle
from tests.ui.test_grants_keys import pick


def test_pane_lists_are_the_wire_literals() -> None:
    assert REFUSAL_CODES == get_args(wire.RefusalCode)
    assert TURN_CODES == get_args(wire.TurnErrorCode)
    assert SETTLE_KINDS == get_args(wire.Outcome) == SETTLE_CHOICES
    assert set(STATUS_GLYPHS) == {*get_args(wire.RunStatus), "deleted"}


async def choose(pilot: Any, field: str, value: str) -> None:
    select = pilot.app.screen.query_one(f"#field-{field}", Select)
    assert [v for _, v in select._options] == list(REFUSAL_CODES)
    select.value = value
    await pilot.press("ctrl+s")
    await settle(pilot)


@pytest.mark.parametrize("code", [c for c in get_args(wire.RefusalCode) if c != "grant_removed"])
async def test_every_refusal_code_the_pane_offers_is_met_by_the_app_and_badged(app, code) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        await pick(pilot, "user:linus")
        await pilot.press("f")
        await settle(pilot)
        await choose(pilot, "code", code)
        assert ws.cloud.user("user:linus").refusal == code
        app.main.pane("runs").act("", lambda: ws.desk.start_run("user:linus", "after the refusal"))
        await settle(pilot)
        assert [r.code for r in ws.desk.refusals if r.user_id == "user:linus"] == [code]
        badges = app.main.query_one("#badges")
        assert badges.refusals == 1 and "‼ 1 refusal/min" in badges.render().plain
        assert any(code in e for e in app.errors)
