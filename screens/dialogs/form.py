"""``FormDialog``: a typed modal that asks for a few fields and returns them (or None when cancelled)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from services.errors import ServiceError

if TYPE_CHECKING:
    from textual.widgets import TextArea

from ..help_keys import keys_line
from ..loader import load
from ..text import DETAIL_CAP, safe

__all__ = ["Field", "FormDialog", "FormSelect", "json_object_check"]


class FormSelect(Select[str]):
    """A form's dropdown: ``enter`` submits the form (as in a text field); ``space`` or the arrows open the list."""

    BINDINGS = [
        Binding("enter", "submit_form", "Submit", show=False, tooltip="Submit the form from its last field"),
        Binding("down,space,up", "show_overlay", "Show menu", show=False, tooltip="Open the list of choices"),
    ]

    def action_submit_form(self) -> None:
        submit = getattr(self.screen, "action_submit", None)
        if submit is not None:
            submit()


@dataclass(frozen=True)
class Field:
    """One field of a form: a line of text, a choice, or a multi-line text."""

    name: str
    label: str
    default: str = ""
    choices: tuple[str, ...] = ()
    multiline: bool = False
    placeholder: str = ""


class FormDialog(ModalScreen[dict[str, str] | None]):
    """Ask for ``fields``; ``enter`` (or ctrl+s in a multi-line field) submits, ``esc`` cancels.

    ``check`` (optional) reads the values and returns what is wrong with them in plain words, or
    None: the dialog then stays open with everything typed and shows the problem inline.
    ``action`` (optional) makes the change itself once the check passes: when the service refuses
    it (a ``ServiceError``: a bad scope, an empty reason, a run already settled...) the dialog stays
    open the same way with the service's own words; it closes with the values once the change is made.
    """

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", tooltip="Close the dialog without doing anything", id="dialog.cancel"),
        Binding("ctrl+s", "submit", "Submit", tooltip="Submit the form", id="dialog.submit"),
    ]

    def __init__(self, title: str, fields: list[Field], *, submit: str = "OK",
                 check: Callable[[dict[str, str]], str | None] | None = None,
                 action: Callable[[dict[str, str]], object] | None = None) -> None:
        super().__init__()
        self.check = check
        """Validates the values before the dialog closes (None: no check)."""
        self.action = action
        """Makes the change with the values before the dialog closes (None: the caller does it)."""
        self._acting = False
        self.form_title = title
        """The dialog's heading (already plain text)."""
        self.fields = fields
        """The fields asked for, in order."""
        self.submit_label = submit
        """The submit button's label."""

    def _editor(self) -> type[TextArea] | None:
        """The multi-line editor (``TextArea``), loaded with the first multi-line form; None when it cannot be."""
        return load(self.app, "textual.widgets", "TextArea", what="The multi-line editor")

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text(safe(self.form_title, 400)), classes="dialog-title")
            for field in self.fields:
                yield Label(Text(safe(field.label, 200)), classes="dialog-label")
                if field.choices:  # shown sanitised; the value chosen is the choice itself
                    value = field.default if field.default in field.choices else field.choices[0]
                    yield FormSelect([(Text(safe(c, 200)), c) for c in field.choices], value=value,
                                     allow_blank=False, id=f"field-{field.name}")
                elif field.multiline and (TextArea := self._editor()) is not None:
                    yield TextArea(safe(field.default, DETAIL_CAP), id=f"field-{field.name}", soft_wrap=True,
                                   classes="dialog-area")
                else:  # a one-line field (a multi-line one too when the editor cannot be loaded)
                    yield Input(safe(field.default, DETAIL_CAP), placeholder=safe(field.placeholder, 200),
                                id=f"field-{field.name}")
            yield Label("", id="form-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.submit_label, variant="primary", id="submit")
                yield Button("Cancel", id="cancel")
            yield Label(Text(keys_line(self) + "   enter submit", style="dim"), classes="dialog-keys")

    def values(self) -> dict[str, str]:
        """The current value of every field."""
        out: dict[str, str] = {}
        for field in self.fields:
            widget = self.query_one(f"#field-{field.name}")
            if isinstance(widget, Select):
                out[field.name] = str(widget.value)
            elif isinstance(widget, Input):
                out[field.name] = widget.value
            else:  # the multi-line TextArea
                out[field.name] = widget.text  # type: ignore[attr-defined]
        return out

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#submit")
    def action_submit(self) -> None:
        if self._acting:  # a second enter while the change is on its way
            return
        values = self.values()
        problem = self.check(values) if self.check is not None else None
        if problem:  # stay open, keep what was typed, say what is wrong
            self.show_problem(problem)
            return
        if self.action is None:
            self.dismiss(values)
            return
        self._acting = True
        self._act(values)

    def show_problem(self, problem: str) -> None:
        """Say inline what is wrong (the fields keep what was typed)."""
        self.query_one("#form-error", Label).update(Text(safe(problem, 400), style="bold"))

    @work(group="form-action", exclusive=True, exit_on_error=False)
    async def _act(self, values: dict[str, str]) -> None:
        try:
            result = self.action(values) if self.action is not None else None
            if isinstance(result, Awaitable):
                await result
        except ServiceError as error:  # refused: stay open with the service's words (and log it)
            self._acting = False
            report = getattr(self.app, "report_inline", None)
            self.show_problem(report(error) if report is not None else str(error))
            return
        except BaseException:  # anything else goes to the App's one handler; the dialog stays usable
            self._acting = False
            raise
        self.dismiss(values)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


def json_object_check(name: str, label: str) -> Callable[[dict[str, str]], str | None]:
    """A ``check`` that the field ``name`` holds a JSON object (empty counts as ``{}``)."""
    import json

    def check(values: dict[str, str]) -> str | None:
        text = values.get(name, "").strip() or "{}"
        try:
            value = json.loads(text)
        except ValueError as error:
            return f"{label}: not JSON ({error})"
        return None if isinstance(value, dict) else f"{label}: a JSON object is needed, like {{\"key\": 1}}"
    return check
