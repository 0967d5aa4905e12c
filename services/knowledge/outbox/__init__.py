"""services/knowledge/outbox."""

__all__: list[str] = []
