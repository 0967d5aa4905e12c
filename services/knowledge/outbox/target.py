"""Where a workspace's memory goes: the embedded fake, or a Honcho server named by URL.

``memory_target(url, workspace_id)`` gives the keyword arguments ``MemoryOutbox.open`` takes for
it. The API key comes from the environment (``HONCHO_API_KEY``) only, never from a file the
workbench writes; a URL without a key is allowed (a self-hosted server with auth turned off).
A URL that is not ``http(s)://host[/path]`` is refused with ``OutboxError`` in plain words.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from .models import OutboxError, OutboxSettings

__all__ = ["API_KEY_ENV", "memory_target"]

API_KEY_ENV = "HONCHO_API_KEY"
"""The environment variable the Honcho API key is read from."""


def memory_target(url: str | None, workspace_id: str = "workbench", *,
                  environ: dict[str, str] | None = None, served: Any = None,
                  api_key: str | None = None) -> dict[str, Any]:
    """``MemoryOutbox.open`` keyword arguments for memory delivered to ``url``.

    Without a URL memory goes to the memory service the caller runs in this process (the workspace
    gives the embedded fake as ``honcho_service``), or, when ``served`` (a ``CloudServer``) serves
    one under ``/honcho``, to that fake, so apps read it with Honcho's SDKs. ``api_key``
    (a served ``/honcho``'s key from ``serve.json``) wins over the environment's.
    """
    settings = OutboxSettings(workspace_id=workspace_id)
    if url is None or not url.strip():
        honcho = getattr(served, "honcho", None)
        if honcho is not None:
            return {"settings": settings, "honcho_service": honcho, "served_at": served.honcho_url}
        return {"settings": settings}
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OutboxError(f"the Honcho URL must look like https://host or http://host:port, not {url!r}")
    env = os.environ if environ is None else environ
    return {"settings": settings, "base_url": url.strip().rstrip("/"), "api_key": api_key or env.get(API_KEY_ENV) or None}
