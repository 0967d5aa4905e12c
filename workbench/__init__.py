"""The workbench application: the Textual App, its factory, the CLI, the palette and the demo driver.

``from workbench.app import WorkbenchApp, make_app``; ``workbench.cli.main`` is the console entry
point; ``workbench.demo`` plays the narrated walkthrough over the real services.
"""

__version__ = "0.1.0"
"""The package version (kept equal to pyproject's by a test; no metadata lookup at start-up)."""

__all__ = ["__version__"]
