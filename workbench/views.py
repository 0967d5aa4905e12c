"""Saved views: a pane's filter kept by name in the settings file's ``[views]`` table.

``ctrl+s`` in a pane (its filter typed after ``/``) asks for a name and whether the view is the pane's
default, and writes it (``settings.save_view``: atomic, every other line kept); the palette lists the
saved views and applies one; a pane's default view is applied when the window opens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from screens.text import notify_plain, safe

from .settings import SavedView, save_view

if TYPE_CHECKING:
    from screens.main import MainScreen

    from .app import WorkbenchApp

__all__ = ["ask_to_save_view", "saved_views", "apply_view", "default_views", "VIEW_NAME_CAP"]

VIEW_NAME_CAP = 60
"""The longest view name."""


def saved_views(app: WorkbenchApp) -> list[SavedView]:
    """The views in the settings file, by name (none without a settings file)."""
    config = app.config
    return sorted(config.views.values(), key=lambda v: v.name) if config is not None else []


def _name_problem(name: str) -> str | None:
    if not name.strip():
        return "Type a name for the view."
    if len(name) > VIEW_NAME_CAP or any(not ch.isprintable() for ch in name):
        return f"A view's name is one line of at most {VIEW_NAME_CAP} printable characters."
    return None


def ask_to_save_view(app: WorkbenchApp, pane: str, text: str) -> None:
    """Ask for the view's name and whether it is the pane's default, then save it in the settings file;
    a refusal (the file has a problem to fix first) shows in the form, which stays open."""
    from screens.dialogs import Field
    from screens.dialogs.form import FormDialog

    config = app.config
    if config is None:
        notify_plain(app, "This window has no settings file to save views in (start it with --config PATH).",
                     severity="warning")
        return
    existing = next((v for v in config.views.values() if v.pane == pane and v.filter == text), None)

    def save(values: dict[str, str]) -> None:
        name = values["name"].strip()
        view = SavedView(name, pane, text, values["default"] == "yes")
        save_view(config.path, view)  # ConfigWriteError: the form shows it and stays open
        config.views[name] = view
        if view.default:
            for other in list(config.views.values()):
                if other.pane == pane and other.name != name and other.default:
                    config.views[other.name] = SavedView(other.name, other.pane, other.filter, False)

    def done(values: dict[str, str] | None) -> None:
        if values is not None:
            default = " (the pane's default when the window opens)" if values["default"] == "yes" else ""
            notify_plain(app, f"Saved the view “{safe(values['name'].strip(), 60)}” of {pane}: {safe(text, 120)}"
                         f"{default}. The palette (ctrl+p) applies it.", timeout=5)

    app.push_screen(FormDialog(f"Save the {pane} filter “{safe(text, 80)}” as a view",
                               [Field("name", "Name", existing.name if existing else ""),
                                Field("default", "Apply when the window opens", "no", choices=("no", "yes"))],
                               submit="Save", check=lambda v: _name_problem(v["name"]), action=save), done)


def apply_view(main: MainScreen, view: SavedView) -> None:
    """Bring the view's pane forward with the view's filter."""
    if not main.placed:
        return
    main.action_show_pane(view.pane)
    main.pane(view.pane).apply_filter(view.filter)


def default_views(app: WorkbenchApp) -> list[tuple[str, str]]:
    """``(pane, filter)`` of each pane's default view (applied when the window opens)."""
    return [(view.pane, view.filter) for view in saved_views(app) if view.default]

