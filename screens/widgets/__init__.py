"""Reusable widgets: the live event stream, the pane base, the header badges and the pane strip."""

from .stream import EventStream

__all__ = ["EventStream"]
