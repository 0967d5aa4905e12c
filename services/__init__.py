"""The workbench's services: the fake crouter cloud, the SDK, the canvas and the knowledge stores.

Nothing below this package imports Textual (nor ``workbench`` or ``screens``): every service is
plain asyncio code, testable without a terminal. Screens reach services only through the
``Workspace`` (``services.workspace``) and learn of changes through its ``Change`` feed.
"""

__all__: list[str] = []
