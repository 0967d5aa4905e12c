"""Reusable widgets: the pane base, the live event stream, the header badges, the pane strip, the demo caption,
the canvas neighbourhood graph."""

from .badges import BadgeBar, PaneStrip
from .caption import CaptionBar
from .graph import NeighbourhoodGraph
from .pane import Pane, PaletteAction, is_current
from .stream import EventStream

__all__ = ["BadgeBar", "CaptionBar", "EventStream", "NeighbourhoodGraph", "Pane", "PaletteAction", "PaneStrip", "is_current"]
