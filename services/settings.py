"""What a workspace is opened with: one typed ``Settings``, built once and passed in."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .clock import Clock

__all__ = ["Settings"]


@dataclass(frozen=True)
class Settings:
    """Everything a workspace is opened with; built once and passed in."""

    path: Path = Path(".workbench")
    client_id: str = "workbench"
    seed: bool = True
    """Start a new workspace with the sample world from ``assets/``."""
    stream_idle_ms: int = 60_000
    world: Path | None = None
    """Another world file instead of the bundled sample."""
    bases_path: Path | None = None
    """Where new accepted knowledge bases go. Default: ``<workspace>/knowledge/bases``, or, when the
    workspace sits inside a Git working tree (OKF refuses directory custody there, even ignored),
    ``$XDG_DATA_HOME/workbench/bases/<workspace hash>``."""
    clock: Clock = field(default_factory=Clock)
    serve_port: int | None = None
    """Serve the cloud on this loopback port (0 picks a free one), keeping its state in ``cloud.db``
    (and the workspace's own connections in ``connections.db``); None keeps it in memory."""
    honcho_url: str | None = None
    """Deliver memory to the Honcho server at this base URL (the API key comes from the
    ``HONCHO_API_KEY`` environment variable only); None delivers to the embedded fake."""
    honcho_workspace_id: str = "workbench"
    """The Honcho workspace memory is delivered into."""
    canvas_url: str | None = None
    """The canvas database: None for ``canvas.db`` in the workspace (SQLite), or a team's server as
    ``postgresql+psycopg://user@host:5432/db`` (the password from ``PGPASSWORD`` or ``~/.pgpass``)."""
