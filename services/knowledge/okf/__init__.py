"""services/knowledge/okf."""

__all__: list[str] = []
