"""Reusable widgets: the pane base, the live event stream, the header badges, the pane strip, the demo caption,
the canvas neighbourhood graph, the table whose title column fits the room left and the tree whose labels do.

Nothing is imported here (as in ``screens``): the first frame imports the badges and the footer only,
and each pane module imports the widgets it uses from their own modules (``screens.widgets.graph``...).
"""

__all__: list[str] = []
