"""services/knowledge/insights."""

__all__: list[str] = []
