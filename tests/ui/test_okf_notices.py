"""The judgments pane shows what needs the operator in OKF, with the way out, and ``j`` judges again."""

from __future__ import annotations

from pathlib import Path

from services.knowledge.okf import deterministic_judge_reply
from services.workspace import JUDGE_USER
from tests.ui.conftest import ready, settle


async def test_a_refused_note_and_an_invalid_judgment_show_in_the_pane_and_j_judges_again(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        source = (await ws.okf.sources())[0]
        notes = Path(source.home) / "notes"
        (notes / "latin.md").write_bytes(b"caf\xe9 \x1b[31m latin-1\n")
        judge = ws.cloud.user(JUDGE_USER).runs
        judge.respond(lambda ctx: ctx.run.reply('{"outcomes":' + "[" * 100000))
        (notes / "pump.md").write_text("We decided to run the pump at night because power is shared.\n", encoding="utf-8")
        await ws.okf.capture_now(source.id)
        await pilot.press("5")
        await settle(pilot, 5)
        pane = app.main.pane("judgments")
        [bad] = [i for i in await ws.okf.queue() if i.state == "invalid"]
        pane.select_key(f"okf:{bad.id}")
        await settle(pilot, 5)
        shown = str(app.main.query_one("#judgment-text").render())
        assert "knowledge needs attention (1)" in shown and "notes/latin.md" in shown and "not UTF-8" in shown
        assert "way out: save notes/latin.md as a plain UTF-8 file" in shown
        assert pane.count_label.endswith("· 1 ⚠")
        assert "nests deeper than 32 levels" in shown and "j judges it again" in shown
        judge.respond(lambda ctx: ctx.run.reply(deterministic_judge_reply(ctx.run.params["prompt"])))
        pane.focus_main()
        await pilot.press("j")
        await settle(pilot, 8)
        again = next(i for i in await ws.okf.queue() if i.id == bad.id)
        assert again.state == "pending" and again.attempt == 2
