"""The Workspace: one folder of state and the services wired over it; the only thing screens talk to.

``await Workspace.open(path)`` creates the folder if needed, starts the embedded fake cloud with
the sample world, connects the workbench's own app to it through the real SDK, and exposes
``.cloud``, ``.desk`` (operator and app actions on runs and grants), ``.changes()`` (an async
iterator of every ``Change`` any service publishes) and ``close()``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .changes import Change, ChangeFeed
from .clock import Clock

__all__ = ["Settings", "Workspace"]


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
    clock: Clock = field(default_factory=Clock)


class Workspace:
    """A workspace folder and its services."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.path = Path(settings.path)
        self.feed = ChangeFeed()
        self.cloud: Any = None
        self.desk: Any = None
        self.oauth: Any = None
        self.store: Any = None
        self.canvas: Any = None
        self.okf: Any = None
        self.outbox: Any = None
        self.insights: Any = None

    @classmethod
    async def open(cls, path: Path | str | None = None, *, settings: Settings | None = None) -> "Workspace":
        """Open (or create) the workspace at ``path`` and start its services."""
        if settings is None:
            settings = Settings(path=Path(path) if path is not None else Settings().path)
        elif path is not None:
            settings = Settings(**{**settings.__dict__, "path": Path(path)})
        workspace = cls(settings)
        await workspace._start()
        return workspace

    async def _start(self) -> None:
        from assets import ASSETS_DIR

        from .cloud import FakeCloud, generate_private_key_pem
        from .operator import OperatorDesk
        from .sdk import MemoryConnectionStore, OAuth2Client
        from .world import load_world, seed_cloud

        self.path.mkdir(parents=True, exist_ok=True)
        settings = self.settings
        self.cloud = FakeCloud(
            client_id=settings.client_id,
            stream_idle_ms=settings.stream_idle_ms,
            clock=settings.clock,
            changes=self.feed,
        )
        self.store = MemoryConnectionStore()
        desk_holder: dict[str, Any] = {}
        self.oauth = OAuth2Client(
            client_id=settings.client_id,
            issuer=self.cloud.issuer,
            transport=self.cloud.transport,
            private_key=generate_private_key_pem("ec"),
            redirect_uri="https://workbench.local/callback",
            store=self.store,
            on_refusal=lambda refusal: desk_holder["desk"].record_refusal(refusal),
            clock=settings.clock,
        )
        self.desk = desk_holder["desk"] = OperatorDesk(self.cloud, self.oauth, self.feed)
        if settings.seed:
            world = load_world(settings.world or ASSETS_DIR / "sample" / "world.json")
            await seed_cloud(self.cloud, world, self.store)

    def changes(self) -> AsyncIterator[Change]:
        """Every change any service publishes from now on."""
        return self.feed.changes()

    async def close(self) -> None:
        """Stop every service and release the folder."""
        if self.oauth is not None:
            await self.oauth.aclose()
        if self.cloud is not None:
            self.cloud.reset()

    async def __aenter__(self) -> "Workspace":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
