"""Textual screens, panes, widgets and dialogs of the workbench (controllers over the Workspace).

``MainScreen`` holds the five panes (``#canvas``, ``#inbox``, ``#runs``, ``#grants``,
``#judgments``); ``HelpScreen`` lists every key; dialogs live in ``screens.dialogs``, reusable
widgets in ``screens.widgets``.

Nothing is imported here: importing one screen module brings in only what it uses, so the first
frame (``screens.main``) does not wait for the panes' tables, trees and dialogs.
"""

__all__: list[str] = []
