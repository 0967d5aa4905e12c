"""Reusable widgets: the pane base, the live event stream, the header badges, the pane strip, the demo caption,
the canvas neighbourhood graph, the table whose title column fits the room left and the tree whose labels do."""

from .badges import BadgeBar, PaneStrip
from .caption import CaptionBar
from .fit_table import FitTable, fit_cell
from .fit_tree import FitTree
from .graph import NeighbourhoodGraph
from .pane import Pane, PaletteAction, is_current
from .stream import EventStream

__all__ = ["BadgeBar", "CaptionBar", "EventStream", "FitTable", "FitTree", "NeighbourhoodGraph", "Pane", "PaletteAction", "PaneStrip",
           "fit_cell", "is_current"]
