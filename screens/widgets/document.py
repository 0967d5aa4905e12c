"""``DocumentView``: a document body as Markdown whose links show their URL and ask before opening.

A document's body is untrusted: ``[release notes](https://evil.example)`` must not open a browser
on one click, nor hide where it goes. Every link and image is drawn followed by its URL
(``release notes ⟨https://evil.example⟩``), and a click opens a ``ConfirmDialog`` naming the
sanitised URL; only "yes" calls ``App.open_url``.
"""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from textual import on
from textual.widgets import Markdown

from ..dialogs import ConfirmDialog
from ..text import safe

__all__ = ["DocumentView", "link_parser", "URL_CAP"]

URL_CAP = 2_000
"""Characters of a URL shown after its link and in the dialog."""


def _shown(href: str) -> str:
    return f" ⟨{safe(href, URL_CAP)}⟩"


def _show_link_urls(state: StateCore) -> None:
    """A core rule: after each link (unless its text is its URL) and image, a text token with the URL."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        href: str | None = None
        label: list[str] = []
        for token in block.children:
            children.append(token)
            if token.type == "link_open":
                href, label = str(token.attrGet("href") or ""), []
            elif token.type == "link_close" and href is not None:
                if href and "".join(label).strip() not in (href, href.removeprefix("mailto:")):
                    children.append(Token("text", "", 0, content=_shown(href)))
                href = None
            elif href is not None:
                label.append(token.content)
            elif token.type == "image" and token.attrGet("src"):
                children.append(Token("text", "", 0, content=_shown(str(token.attrGet("src")))))
        block.children = children


def link_parser() -> MarkdownIt:
    """Textual's usual parser ("gfm-like") plus the rule that shows every link's URL."""
    parser = MarkdownIt("gfm-like")
    parser.core.ruler.push("show_link_urls", _show_link_urls)
    return parser


class DocumentView(Markdown):
    """Markdown that never opens a link by itself: it shows the URL and asks first."""

    def __init__(self, markdown: str | None = None, **kwargs: Any) -> None:  # Any: Markdown's own keywords
        super().__init__(markdown, parser_factory=link_parser, open_links=False, **kwargs)

    @on(Markdown.LinkClicked)
    def _link_clicked(self, event: Markdown.LinkClicked) -> None:
        event.stop()
        self.confirm_link(event.href)

    def confirm_link(self, href: str) -> None:
        """Ask, with the URL in full (sanitised), before the browser opens it."""

        def answered(yes: bool | None) -> None:
            if yes:
                self.app.open_url(href)

        self.app.push_screen(ConfirmDialog(f"Open this link in your browser?\n\n{safe(href, URL_CAP)}"), answered)
