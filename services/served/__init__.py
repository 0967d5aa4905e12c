"""Serving a workspace's cloud: the server, its control API, its change log and its state on disk.

``server.py`` runs uvicorn over the cloud's ASGI adapter (``asgi.py``) and announces itself in
``serve.json``; ``control.py`` is the control API (what only a fake can do), with the app actions
it makes as the app (``app_actions.py``) and the numbered change log a window resumes from
(``change_log.py``); ``persist.py`` keeps the cloud's state in ``cloud.db`` (``tables.py``). The
cloud itself (``services.cloud``) knows nothing of being served.
"""

from .server import (
    DEFAULT_PORT,
    SERVE_FILE,
    SERVE_LOCK,
    CloudServer,
    ServeError,
    check_not_served,
    claim_workspace,
    live_serve_info,
    read_serve_info,
    serve_workspace,
)

__all__ = [
    "CloudServer",
    "ServeError",
    "serve_workspace",
    "claim_workspace",
    "check_not_served",
    "read_serve_info",
    "live_serve_info",
    "SERVE_FILE",
    "SERVE_LOCK",
    "DEFAULT_PORT",
]
