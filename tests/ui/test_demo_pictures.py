"""The demo's pictures show the panes: every step, drawn headless, has its five panes titled with their
counts and no toast over any pane's content (what a toast would say is narrated under the caption);
an operator's own session keeps its toasts, and a screenshot taken there leaves them out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Label
from textual.widgets._toast import Toast

from screens.main import PANE_IDS
from screens.widgets.caption import CaptionBar
from services.workspace import Settings
from workbench.demo import DemoApp, DemoStep, load_walkthrough
from tests.toasts import raised

from .conftest import ready, settle


class WatchedDemo(DemoApp):
    """The demo, looked at as each step's picture would be taken."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: dict[str, dict[str, Any]] = {}
        """Per step: the pane titles, the toasts' and panes' regions, and the narration's lines."""

    async def step_shown(self, number: int, step: DemoStep) -> None:
        if step.id == "reply":  # a toast from anywhere (not only a pane action) is narrated too
            self.notify("a toast during the tour", title="Note", timeout=30)
        await super().step_shown(number, step)
        main = self.main
        caption = main.query_one("#caption", CaptionBar)
        self.seen[step.id] = {
            "titles": {p: str(main.pane(p).query_one(".pane-title", Label).render()) for p in PANE_IDS},
            "headlines": {p: main.pane(p).headline() for p in PANE_IDS},
            "panes": {p: main.pane(p).content_region for p in PANE_IDS},
            "toasts": [t.region for t in self.screen.query(Toast)],
            "said": [text for text, _severity in caption.said],
        }


@pytest.mark.long
async def test_every_step_shows_five_titled_panes_and_no_toast_over_them(tmp_path: Path) -> None:
    steps = load_walkthrough()
    shots = tmp_path / "shots"
    app = WatchedDemo(Settings(path=tmp_path / "ws"), steps=steps, speed=float("inf"), screenshots=shots)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        for _ in range(1200):
            await pilot.pause(0.05)
            if len(app.completed) == len(steps):
                break
        assert app.completed == [s.id for s in steps], app.failures
    assert not app.failures
    assert sorted(p.name for p in shots.glob("*.svg")) == [f"{n:02d}-{s.id}.svg" for n, s in enumerate(steps, 1)]
    for step in steps:
        seen = app.seen[step.id]
        for pane_id in PANE_IDS:
            region, title, headline = seen["panes"][pane_id], seen["titles"][pane_id], seen["headlines"][pane_id]
            assert region.width > 10 and region.height > 3, (step.id, pane_id, region)
            assert pane_id.rstrip("s") in headline, (step.id, headline)  # the title names the pane
            assert any(ch.isdigit() for ch in headline), (step.id, pane_id, headline)  # and its count
            assert title.endswith(headline), (step.id, title)
            for toast in seen["toasts"]:
                assert not toast.overlaps(region), (step.id, pane_id, toast)
        assert seen["toasts"] == [], step.id
    assert app.seen["start_run"]["headlines"]["runs"].split(" · ")[0].endswith(" runs")  # "7 runs", not a bare "7"
    assert app.seen["reply"]["said"][-1] == "Note: a toast during the tour"
    assert "Grant of user:grace revoked." in app.seen["revoke"]["said"]
    assert any(text.startswith("Error: ") and "grant_removed" in text for text in app.seen["revoke"]["said"])
    assert app.seen["restore"]["said"] == ["Grant of user:grace restored."]  # each step narrates its own
    svg = (shots / "05-revoke.svg").read_text(encoding="utf-8")
    assert "Grant&#160;of&#160;user:grace&#160;revoked." in svg  # narrated in the picture, under the caption


async def test_an_operator_session_keeps_its_toasts_and_a_screenshot_leaves_them_out(app, settings) -> None:
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await ready(pilot)
        app.notify("a toast the operator is reading", timeout=60)
        await settle(pilot)
        assert [t for t in app.screen.query(Toast)]
        assert "operator&#160;is&#160;reading" in app.export_screenshot()  # on screen, over the panes
        await pilot.press("S")
        await settle(pilot)
        shots = list((Path(settings.path) / "screenshots").glob("*.svg"))
        assert len(shots) == 1
        picture = shots[0].read_text(encoding="utf-8")
        assert "operator&#160;is&#160;reading" not in picture and "runs" in picture
        shown = [str(t.render()) for t in app.screen.query(Toast)]
        assert any("a toast the operator is reading" in text for text in shown)  # still on screen after
        assert any(text.startswith("Screenshot saved: ") for text in (n.message for n in raised(app)))


def _rows(svg: str) -> list[str]:
    """The picture's text, row by row, each character at its column (the SVG places every run of text)."""
    import html
    import re

    rows: dict[float, list[tuple[float, str]]] = {}
    for match in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(float(match.group(2)), []).append((float(match.group(1)), html.unescape(match.group(3))))
    out = []
    for y in sorted(rows):
        line: list[str] = []
        for x, part in sorted(rows[y]):
            column = round(x / 12.2)
            line.extend(" " * (column - len(line)))
            line[column:column + len(part)] = list(part)
        out.append("".join(line).replace("\xa0", " ").rstrip())
    return out


class AgreeingDemo(DemoApp):
    """The demo, with what the judgments pane's list and detail said at each picture."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.states: dict[str, tuple[str, str] | None] = {}

    async def step_shown(self, number: int, step: DemoStep) -> None:
        from screens.judgments import _detail_state, _state

        pane = self.main.pane("judgments")
        item = pane.items.get(pane.selected or "")
        self.states[step.id] = None if item is None or pane.detail is None else (_state(item), _detail_state(pane.detail))
        await super().step_shown(number, step)


@pytest.mark.long
async def test_every_picture_has_its_footer_a_caption_that_fits_and_a_detail_that_agrees(tmp_path: Path) -> None:
    """issue 37: blank footers (revoke, restore), a three-line caption, the sweep without memory, a last step
    offering → next, and a detail still pending under a list that said approved."""
    steps = load_walkthrough()
    shots = tmp_path / "shots"
    app = AgreeingDemo(Settings(path=tmp_path / "ws"), steps=steps, speed=float("inf"), screenshots=shots)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(1200):
            await pilot.pause(0.05)
            if len(app.completed) == len(steps):
                break
        assert app.completed == [s.id for s in steps], app.failures
    for number, step in enumerate(steps, 1):
        rows = _rows((shots / f"{number:02d}-{step.id}.svg").read_text(encoding="utf-8"))
        footer = rows[-1]
        assert "Keys" in footer and "Quit" in footer, (step.id, footer)  # the key bar is never blank
        rule = max(n for n, row in enumerate(rows) if row.startswith("━"))
        caption = [row for row in rows[rule + 1:-1] if not row.lstrip().startswith("said:")]
        assert 1 <= len(caption) <= 2, (step.id, caption)
        assert all(len(row) <= 160 for row in rows[rule + 1:]), step.id
        words = " ".join(" ".join(caption).split())
        assert " ".join(step.caption.split()) in words, (step.id, words)  # whole, not cut at the edge
        if app.states[step.id] is not None:
            listed, detailed = app.states[step.id]
            assert listed == detailed, (step.id, listed, detailed)
        last = number == len(steps)
        assert ("Next step" in footer) is not last and ("→ next" in words) is not last, (step.id, footer, words)
    sweep = _rows((shots / f"{[s.id for s in steps].index('sweep') + 1:02d}-sweep.svg").read_text(encoding="utf-8"))
    assert sweep[0].startswith("memory → ") and any(row.startswith("conversations") for row in sweep)
