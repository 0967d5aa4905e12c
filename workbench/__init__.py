"""The workbench application: the Textual App, its factory, the CLI, the palette and the demo driver.

``from workbench.app import WorkbenchApp, make_app``; ``workbench.cli.main`` is the console entry
point; ``workbench.demo`` plays the narrated walkthrough over the real services.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("workbench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = ["__version__"]
