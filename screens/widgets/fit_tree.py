"""``FitTree``: a ``Tree`` whose labels end in ``…`` where the pane is too narrow for them.

A plain ``Tree`` draws each label whole and lets the widget's edge clip it mid-word. Here a label is
cut when it is drawn, from the tree's real width less the guides in front of it, so the cut is
always visible; a resize redraws the labels at the new width (the tree rebuilds its lines then).
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

__all__ = ["FitTree"]


class FitTree(Tree[Any]):  # Any: Tree's node data type, as each tree's own data differs
    """A ``Tree`` that cuts a label too long for its line with an ellipsis."""

    def render_label(self, node: TreeNode[Any], base_style: Style, style: Style) -> Text:
        text = super().render_label(node, base_style, style)
        width = self.scrollable_content_region.width
        if width <= 0:  # not laid out yet: drawn whole, cut on the first real draw
            return text
        depth, parent = 0, node.parent
        while parent is not None:
            depth, parent = depth + 1, parent.parent
        room = width - max(0, depth if self.show_root else depth - 1) * self.guide_depth
        if room > 1 and text.cell_len > room:
            text = text.copy()
            text.truncate(room, overflow="ellipsis")
        return text
