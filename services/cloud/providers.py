"""Providers on the fake runtime: ``cloud.providers.define(name, tools=...)``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FakeProvider", "FakeTool", "Providers"]


@dataclass
class FakeTool:
    """A tool: its scope group and the handler that answers a call."""

    name: str
    group: str
    handler: Callable[[Any], Any]


@dataclass
class FakeProvider:
    """A provider, ``ready`` or ``install_failed`` (with its ``error``)."""

    name: str
    tools: dict[str, FakeTool] = field(default_factory=dict)
    status: str = "ready"
    error: str | None = None

    def to_dto(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "error": self.error,
            "tools": [
                {"name": t.name, "group": t.group, "scope": f"{self.name}:{t.group}"} for t in self.tools.values()
            ],
        }


class Providers:
    """The providers one cloud offers."""

    def __init__(self) -> None:
        self._providers: dict[str, FakeProvider] = {}

    def define(
        self,
        name: str,
        tools: dict[str, dict[str, Any]] | None = None,
        *,
        status: str = "ready",
        error: str | None = None,
    ) -> FakeProvider:
        """Define (or replace) a provider; each tool is ``{group, handler}``."""
        if status not in ("ready", "install_failed"):
            raise ValueError("status must be 'ready' or 'install_failed'")
        built: dict[str, FakeTool] = {}
        for tool_name, spec in (tools or {}).items():
            handler = spec.get("handler") or (lambda call: None)
            built[tool_name] = FakeTool(tool_name, spec.get("group", tool_name), handler)
        provider = FakeProvider(name, built, status, error)
        self._providers[name] = provider
        return provider

    def get(self, name: str) -> FakeProvider | None:
        return self._providers.get(name)

    @property
    def all(self) -> list[FakeProvider]:
        return list(self._providers.values())
