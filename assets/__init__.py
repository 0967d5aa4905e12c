"""Data files shipped with the workbench: stylesheets, the sample world, the demo script."""

from pathlib import Path

__all__ = ["ASSETS_DIR"]

ASSETS_DIR = Path(__file__).resolve().parent
"""The folder holding the assets, the same in an editable and a regular install."""
