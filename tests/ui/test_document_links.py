"""A link in a document body shows its URL and asks before anything opens.

``App.open_url`` is the OS boundary (it starts the browser): the test App records calls instead.
"""

from __future__ import annotations

from typing import Any

from textual.widgets._markdown import MarkdownParagraph

from screens.dialogs import ConfirmDialog
from screens.widgets.document import DocumentView
from services.clock import FakeClock
from services.workspace import Settings
from tests.ui.conftest import ready, settle
from workbench.app import WorkbenchApp

EVIL = "https://evil.example/steal?who=[/x]"
SHOWN = "https://evil.example/steal?who=%5B/x%5D"
"""The URL as drawn after the link (markdown-it's normalised form of ``EVIL``, the same address)."""


class RecordingApp(WorkbenchApp):
    """The workbench with the browser replaced by a list of the URLs it was asked to open."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.opened: list[str] = []

    def open_url(self, url: str, *, new_tab: bool = True) -> None:
        self.opened.append(url)


async def show_document(pilot: Any, ws: Any, body: str) -> DocumentView:
    doc = await ws.canvas.write("notes/links", preview="When testing links, read this because it has one",
                                body=body, owner="user:ada")
    await pilot.press("1")
    pilot.app.main.pane("canvas").select_key(doc.object.id)
    await settle(pilot)
    return pilot.app.main.query_one("#canvas-body", DocumentView)


def link_paragraph(view: DocumentView, text: str) -> tuple[MarkdownParagraph, int]:
    for paragraph in view.query(MarkdownParagraph):
        plain = paragraph._content.plain
        if text in plain:
            return paragraph, plain.index(text)
    raise AssertionError(f"no paragraph shows {text!r}")


async def test_clicking_a_link_asks_with_the_url_and_opens_only_when_confirmed(tmp_path) -> None:
    app = RecordingApp(settings=Settings(path=tmp_path / "ws", clock=FakeClock()))
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        view = await show_document(pilot, ws, f"Read [the release notes]({EVIL}) first.")
        paragraph, at = link_paragraph(view, "the release notes")
        assert f"the release notes ⟨{SHOWN}⟩ first." in paragraph._content.plain  # the URL is shown in the text
        view.scroll_visible()
        await settle(pilot)
        assert await pilot.click(paragraph, offset=(at + 2, 0))
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert EVIL in str(dialog.query_one(".dialog-title").render())  # what would open, in full
        assert app.opened == []  # nothing opened by the click itself
        await pilot.press("n")
        await settle(pilot)
        assert app.opened == [] and not isinstance(app.screen, ConfirmDialog)
        assert await pilot.click(paragraph, offset=(at + 2, 0))
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog) and app.opened == []
        await pilot.press("y")
        await settle(pilot)
        assert app.opened == [EVIL]
        assert app.is_running


async def test_images_and_bare_links_show_their_urls_and_script_links_are_not_links(tmp_path) -> None:
    app = RecordingApp(settings=Settings(path=tmp_path / "ws", clock=FakeClock()))
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        view = await show_document(pilot, ws, "![logo](https://img.example/p.png)\n\n"
                                              "bare https://plain.example/x here\n\n"
                                              "[run me](javascript:alert(1))")
        shown = "\n".join(p._content.plain for p in view.query(MarkdownParagraph))
        assert "⟨https://img.example/p.png⟩" in shown
        assert "https://plain.example/x here" in shown and "⟨https://plain.example/x⟩" not in shown
        assert "[run me](javascript:alert(1))" in shown  # not a link at all: shown as typed
        assert app.opened == []
