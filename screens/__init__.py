"""Textual screens, panes, widgets and dialogs of the workbench (controllers over the Workspace).

``MainScreen`` holds the five panes (``#canvas``, ``#inbox``, ``#runs``, ``#grants``,
``#judgments``); ``HelpScreen`` lists every key; dialogs live in ``screens.dialogs``, reusable
widgets in ``screens.widgets``.
"""

from .help import HelpScreen
from .main import MainScreen

__all__ = ["MainScreen", "HelpScreen"]
